package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzConfig feeds arbitrary bytes to the configuration loader as a YAML
// file: it must never panic, and whatever it accepts must either validate
// or fail validation with an error (never both nil config and nil error).
func FuzzConfig(f *testing.F) {
	for _, seed := range []string{
		"listen: [\"127.0.0.1:10809\"]\narrays:\n  - name: a\n    members: [/x, /y]\n",
		"arrays:\n  - name: a\n    members:\n      - path: /x\n        write_mostly: true\n    rebuild_min_rate: 16MiB\n",
		"nbd:\n  max_in_flight: 64MiB\n  workers: 16\n",
		"log: {level: debug, format: json}\n",
		"arrays: [{name: b, chunk_sise: 4}]\n",
		"listen: unix:/run/x.sock\nallow_remote: true\n",
		"::: not yaml",
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, doc string) {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, k := range os.Environ() {
			if strings.HasPrefix(k, "RAIDD_") {
				t.Skip("RAIDD_ environment set")
			}
		}
		c, err := loadConfig(newViper(), p)
		if err != nil {
			if c != nil {
				t.Fatalf("config returned with error %v", err)
			}
			return
		}
		if c == nil {
			t.Fatal("nil config without error")
		}
		_ = c.Validate() // must not panic
	})
}
