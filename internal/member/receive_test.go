package member_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
)

// TestReceiveInto: a member held in memory hands out its mapped pages for a
// receive: bytes placed there read back through ReadAt, and the pages count
// as data afterwards (a read is served by the mapping). It refuses, holding
// nothing, when read-only, closed or not held in memory, and the mapping
// does not serve the file's last page.
func TestReceiveInto(t *testing.T) {
	const size = 1 << 20
	path := shmMember(t, size)
	f := openFile(t, path, member.Options{})
	require.True(t, f.HoldForReceive())
	dst, ok := f.ReceiveSlice(64<<10, 8192)
	require.True(t, ok)
	require.Len(t, dst, 8192)
	want := bytes.Repeat([]byte{0xa7}, 8192)
	copy(dst, want) // what the kernel's receive does
	f.Received(64<<10, 8192)
	_, ok = f.ReceiveSlice(size-4096, 4096)
	assert.False(t, ok, "the last page is never served by the mapping")
	f.ReleaseReceive()

	var reads int
	defer member.SetMappedHook(func(_ *member.File, write bool) {
		if !write {
			reads++
		}
	})()
	got := make([]byte, 8192)
	_, err := f.ReadAt(got, 64<<10)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, 1, reads, "the received pages hold data: read through the mapping")

	ro := openFile(t, path, member.Options{ReadOnly: true})
	assert.False(t, ro.HoldForReceive(), "a read-only member receives nothing")

	closed := openFile(t, path, member.Options{})
	require.NoError(t, closed.Close())
	assert.False(t, closed.HoldForReceive(), "a closed member receives nothing")

	disk := filepath.Join(t.TempDir(), "disk.img")
	require.NoError(t, member.CreateSparse(disk, size))
	if onDisk := openFile(t, disk, member.Options{}); !member.Mapped(onDisk) {
		assert.False(t, onDisk.HoldForReceive(), "a member not held in memory receives nothing")
	}
}
