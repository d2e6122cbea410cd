package tests

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNBDUnitCommands pins what the attach-at-boot unit runs, expanded the
// way TestKernel expands it for the guest: the defaults of Environment=,
// the instance, and the EnvironmentFile= overrides.
func TestNBDUnitCommands(t *testing.T) {
	unit, err := os.ReadFile(filepath.Join(repoRoot, nbdUnit))
	require.NoError(t, err)
	uc, err := expandUnit(unit, "nbd3", "# comment\nNBD_EXPORT=data\nNBD_CONNECTIONS=2\n")
	require.NoError(t, err)
	assert.Equal(t, []string{"/usr/sbin/nbd-client", "-N", "data", "127.0.0.1", "10809", "/dev/nbd3",
		"-C", "2", "-t", "60", "-b", "4096"}, uc.start)
	assert.Equal(t, []string{"/usr/sbin/nbd-client", "-d", "/dev/nbd3"}, uc.stop)

	_, err = expandUnit(unit, "nbd0", "")
	assert.ErrorContains(t, err, "NBD_EXPORT is not set", "the export has no default")
}

// TestExpandUnitRefusesWhatItCannotRun: a unit using systemd syntax that
// the expansion does not implement fails the test rather than running
// something else than systemd would.
func TestExpandUnitRefusesWhatItCannotRun(t *testing.T) {
	for name, unit := range map[string]string{
		"specifier":    "[Service]\nExecStart=/bin/x %n\nExecStop=/bin/y\n",
		"prefix":       "[Service]\nExecStart=-/bin/x\nExecStop=/bin/y\n",
		"pre":          "[Service]\nExecStartPre=/bin/p\nExecStart=/bin/x\nExecStop=/bin/y\n",
		"two starts":   "[Service]\nExecStart=/bin/x\nExecStart=/bin/z\nExecStop=/bin/y\n",
		"no stop":      "[Service]\nExecStart=/bin/x\n",
		"quote":        "[Service]\nExecStart=/bin/x \"a\nExecStop=/bin/y\n",
		"no env file":  "[Service]\nExecStart=/bin/x\nExecStop=/bin/y\n",
		"unterminated": "[Service]\nEnvironmentFile=/e\nExecStart=/bin/x ${A\nExecStop=/bin/y\n",
	} {
		_, err := expandUnit([]byte(unit), "nbd0", "A=1")
		assert.Error(t, err, name)
	}
	uc, err := expandUnit([]byte("[Service]\nEnvironment=\"W=a b\" 'Q=c'\nEnvironmentFile=/e\nExecStart=/bin/x $W ${W} %i%% ${Q}\nExecStop=/bin/y\n"), "nbd1", "A=1")
	require.NoError(t, err)
	assert.Equal(t, []string{"/bin/x", "a", "b", "a b", "nbd1%", "c"}, uc.start)
}
