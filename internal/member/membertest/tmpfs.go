package membertest

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TmpfsDir returns a fresh directory on tmpfs (/dev/shm), removed in a
// cleanup, or skips the test where there is none. Member files there are
// held in memory, and member.File reads and writes them through a mapping.
func TmpfsDir(tb testing.TB) string {
	tb.Helper()
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) != nil || st.Type != unix.TMPFS_MAGIC {
		tb.Skip("/dev/shm is not a tmpfs: skipping the test of members held in memory")
	}
	dir, err := os.MkdirTemp("/dev/shm", "raidd-test")
	if err != nil {
		tb.Fatalf("tmpfs directory: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
