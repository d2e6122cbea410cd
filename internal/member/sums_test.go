package member_test

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// blockSums returns the CRC32C of each 4 KiB block of p.
func blockSums(p []byte) []uint32 {
	var s []uint32
	for i := 0; i < len(p); i += 4096 {
		s = append(s, crc32.Checksum(p[i:min(len(p), i+4096)], castagnoli))
	}
	return s
}

// TestMappedSums: a member on tmpfs serves WriteAtSums, WritevAtSums,
// ReadAtSums and ReadvAtSums with copies through its mapping that sum each
// 4 KiB block (summed, and the sums are hash/crc32's); a write ending at
// Size, or one on a member that shrank behind its back (the copy faults in
// the middle of the summing kernel), takes the system call, reports not
// summed, and fails as the plain write does. A Memory sums every copy.
func TestMappedSums(t *testing.T) {
	const size = 1 << 20
	path := shmMember(t, size)
	f := openFile(t, path, member.Options{})
	require.True(t, member.Mapped(f))
	var copies atomic.Int64
	defer member.SetMappedHook(func(*member.File, bool) { copies.Add(1) })()
	rng := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, 96<<10)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	sums := make([]uint32, len(data)/4096)

	n, summed, err := f.WriteAtSums(data, 64<<10, sums)
	require.NoError(t, err)
	assert.True(t, summed)
	assert.Equal(t, len(data), n)
	assert.Equal(t, blockSums(data), sums)

	clear(sums)
	n, summed, err = f.WritevAtSums([][]byte{data[:32<<10], data[32<<10:]}, 512<<10, sums)
	require.NoError(t, err)
	assert.True(t, summed)
	assert.Equal(t, len(data), n)
	assert.Equal(t, blockSums(data), sums)

	got := make([]byte, len(data))
	clear(sums)
	_, summed, err = f.ReadAtSums(got, 64<<10, sums)
	require.NoError(t, err)
	assert.True(t, summed)
	assert.True(t, bytes.Equal(data, got))
	assert.Equal(t, blockSums(data), sums)

	clear(got)
	clear(sums)
	_, summed, err = f.ReadvAtSums([][]byte{got[:4096], got[4096:]}, 512<<10, sums)
	require.NoError(t, err)
	assert.True(t, summed)
	assert.True(t, bytes.Equal(data, got))
	assert.Equal(t, blockSums(data), sums)
	assert.EqualValues(t, 4, copies.Load(), "each call was one copy through the mapping")

	// A hole is read with pread, not summed.
	_, summed, err = f.ReadAtSums(got[:8192], 256<<10, sums)
	require.NoError(t, err)
	assert.False(t, summed)

	// Ending at Size: checked first, by the plain path.
	_, summed, err = f.WriteAtSums(data[:8192], size-8192, sums)
	require.NoError(t, err)
	assert.False(t, summed)

	// Shrunk behind the member's back: the summing copy faults and the
	// system call reports the shrink.
	require.NoError(t, os.Truncate(path, 128<<10))
	before := copies.Load()
	_, summed, err = f.WritevAtSums([][]byte{data[:8192], data[8192:16384]}, 256<<10, sums)
	assert.False(t, summed)
	assert.ErrorIs(t, err, member.ErrShrunk)
	assert.Greater(t, copies.Load(), before, "the summing copy was tried (and faulted)")

	m := member.NewMemory(size)
	clear(sums)
	_, summed, err = m.WritevAtSums([][]byte{data[:4096], data[4096:]}, 4096, sums)
	require.NoError(t, err)
	assert.True(t, summed)
	assert.Equal(t, blockSums(data), sums)
	clear(got)
	clear(sums)
	_, summed, err = m.ReadvAtSums([][]byte{got[:8192], got[8192:]}, 4096, sums)
	require.NoError(t, err)
	assert.True(t, summed)
	assert.True(t, bytes.Equal(data, got))
	assert.Equal(t, blockSums(data), sums)
}
