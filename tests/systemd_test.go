package tests

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unitSuffixes are the systemd unit file types contrib/systemd may hold.
var unitSuffixes = []string{".service", ".socket", ".timer", ".path", ".mount", ".automount", ".target"}

// TestSystemdUnitsVerify runs `systemd-analyze verify` on every unit in
// contrib/systemd. It needs no running systemd (it works in a container):
// the units are copied to a scratch directory, where they find each other,
// with /usr/local/bin/raidd pointing at the binary under test, since verify
// checks that ExecStart= is executable. verify exits 0 on mere warnings
// (an unknown key is "ignored"), so any output fails the test too.
func TestSystemdUnitsVerify(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "systemd-analyze")
	src := filepath.Join(repoRoot, "contrib", "systemd")
	entries, err := os.ReadDir(src)
	require.NoError(t, err)
	dir := t.TempDir()
	var units []string
	for _, e := range entries {
		name := e.Name()
		isUnit := false
		for _, s := range unitSuffixes {
			isUnit = isUnit || strings.HasSuffix(name, s)
		}
		if !isUnit || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		require.NoError(t, err)
		b = []byte(strings.ReplaceAll(string(b), "/usr/local/bin/raidd", raiddBin))
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		units = append(units, p)
	}
	require.Contains(t, units, filepath.Join(dir, "raidd.service"))
	require.Contains(t, units, filepath.Join(dir, "raidd.socket"))
	cmd := exec.Command("systemd-analyze", append([]string{"verify"}, units...)...)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_COLOR=0")
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "systemd-analyze verify %s:\n%s", strings.Join(units, " "), out)
	assert.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify warns")
}
