package member_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/raidd/raidd/internal/member"
)

// TestSpliceSource: a file in the page cache names its descriptor, whose
// bytes at a member offset are the member's (ReadAt's); a direct member
// does not, and neither does a closed one.
func TestSpliceSource(t *testing.T) {
	path := tempMember(t, 1<<20)
	f := openFile(t, path, member.Options{})
	data := make([]byte, 64<<10)
	for i := range data {
		data[i] = byte(i * 13)
	}
	_, err := f.WriteAt(data, 192<<10)
	require.NoError(t, err)
	rc, ok := f.SpliceSource()
	require.True(t, ok)
	got := make([]byte, len(data))
	require.NoError(t, rc.Control(func(fd uintptr) {
		n, err := unix.Pread(int(fd), got, 192<<10)
		require.NoError(t, err)
		require.Equal(t, len(got), n)
	}))
	assert.Equal(t, data, got)

	require.NoError(t, f.Close())
	_, ok = f.SpliceSource()
	assert.False(t, ok, "closed")

	if directSupported(t, path) {
		_, ok = openFile(t, path, member.Options{Direct: true}).SpliceSource()
		assert.False(t, ok, "O_DIRECT: not in the page cache")
	}
	_ = os.Remove(path)
}
