package member_test

import (
	"bytes"
	"os"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
)

// xorFill is a Filler that sets dst to the XOR of its sources and counts
// its calls.
type xorFill struct{ calls atomic.Int64 }

func (x *xorFill) Fill(dst []byte, src [][]byte) {
	x.calls.Add(1)
	copy(dst, src[0])
	for _, s := range src[1:] {
		for i := range dst {
			dst[i] ^= s[i]
		}
	}
}

func xorOf(src [][]byte) []byte {
	out := bytes.Clone(src[0])
	for _, s := range src[1:] {
		for i := range out {
			out[i] ^= s[i]
		}
	}
	return out
}

// TestFillAtMapped: a mapped tmpfs member computes an in-place write
// straight into its mapping (FillAt), marks the pages as data (they are
// then read through the mapping), and refuses, leaving the write to the
// caller, where a write through the mapping would not be served: the last
// page, outside the member, read-only, closed; and after the file shrank
// (the computation faults, and is caught).
func TestFillAtMapped(t *testing.T) {
	const size = 1 << 20
	path := shmMember(t, size)
	f := openFile(t, path, member.Options{})
	require.True(t, member.Mapped(f))
	var mappedWrites, mappedReads atomic.Int64
	defer member.SetMappedHook(func(_ *member.File, write bool) {
		if write {
			mappedWrites.Add(1)
		} else {
			mappedReads.Add(1)
		}
	})()
	src := [][]byte{bytes.Repeat([]byte{0x0f}, 64<<10), bytes.Repeat([]byte{0x3c}, 64<<10), bytes.Repeat([]byte{0x55}, 64<<10)}
	var x xorFill
	require.True(t, f.FillAt(128<<10, 64<<10, &x, src))
	assert.EqualValues(t, 1, x.calls.Load())
	assert.EqualValues(t, 1, mappedWrites.Load(), "computed in the mapping")
	got := make([]byte, 64<<10)
	_, err := f.ReadAt(got, 128<<10)
	require.NoError(t, err)
	assert.Equal(t, xorOf(src), got)
	assert.EqualValues(t, 1, mappedReads.Load(), "the filled pages count as data")
	assert.EqualValues(t, 64<<10, allocated(t, path))

	// Refused: the last page, beyond the member, a negative offset.
	assert.False(t, f.FillAt(size-4096, 4096, &x, src))
	assert.False(t, f.FillAt(size-4096, 8192, &x, src))
	assert.False(t, f.FillAt(-4096, 4096, &x, src))
	assert.EqualValues(t, 1, x.calls.Load(), "refused before computing")

	// A shrunk file: the pages beyond its end fault; FillAt reports
	// false, and the write the caller makes instead reports the shrink.
	require.NoError(t, os.Truncate(path, 256<<10))
	assert.False(t, f.FillAt(512<<10, 64<<10, &x, src))
	assert.EqualValues(t, 2, x.calls.Load(), "the computation ran and faulted")
	_, err = f.WriteAt(got, 512<<10)
	assert.ErrorIs(t, err, member.ErrShrunk)
	assert.False(t, f.FillAt(0, 4096, &x, src), "a shrunk member fills nothing")
	require.NoError(t, f.Close())
	assert.False(t, f.FillAt(0, 4096, &x, src), "closed")

	ro := openFile(t, shmMember(t, size), member.Options{ReadOnly: true})
	assert.False(t, ro.FillAt(0, 4096, &x, src), "read-only")
}

// TestFillAtMemory: a memory member computes an in-place write straight
// into its buffer, and refuses ranges outside it and a closed member.
func TestFillAtMemory(t *testing.T) {
	m := member.NewMemory(1 << 20)
	src := [][]byte{bytes.Repeat([]byte{1}, 8192), bytes.Repeat([]byte{6}, 8192)}
	var x xorFill
	require.True(t, m.FillAt(4096, 8192, &x, src))
	assert.Equal(t, xorOf(src), m.Bytes()[4096:4096+8192])
	assert.False(t, m.FillAt(1<<20-4096, 8192, &x, src))
	assert.False(t, m.FillAt(-1, 8192, &x, src))
	require.NoError(t, m.Close())
	assert.False(t, m.FillAt(0, 8192, &x, src))
	assert.EqualValues(t, 1, x.calls.Load())
}
