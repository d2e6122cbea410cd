package tests

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestVersion: --version prints the module version and the VCS revision
// that go build recorded in the binary (debug.ReadBuildInfo), compared
// with what `go version -m` reads from the same binary.
func TestVersion(t *testing.T) {
	out := mustRaidd(t, "--version")
	assert.Regexp(t, `^raidd version \S+ \(.*; go1\.\d+`, out)

	meta, err := exec.Command("go", "version", "-m", raiddBin).Output()
	require.NoError(t, err, "go version -m %s", raiddBin)
	settings := map[string]string{}
	var module string
	for _, line := range strings.Split(string(meta), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "mod":
			module = f[2]
		case len(f) >= 2 && f[0] == "build":
			if k, v, ok := strings.Cut(strings.Join(f[1:], " "), "="); ok {
				settings[k] = v
			}
		}
	}
	require.NotEmpty(t, module, "go version -m:\n%s", meta)
	assert.Contains(t, out, "raidd version "+module+" (", "the module version")
	if rev := settings["vcs.revision"]; rev != "" {
		assert.Contains(t, out, "revision "+rev)
		assert.Contains(t, out, settings["vcs.time"])
	} else {
		// Built without VCS stamping (-buildvcs=false, or a git worktree,
		// which go build does not recognise): say so.
		assert.Contains(t, out, "no VCS revision recorded")
	}
}
