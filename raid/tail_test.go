package raid_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// TestReserveTail: a file member on tmpfs whose last page lies past the
// array's data region (its size is not a whole number of chunks past the
// header) gets that page written when the array is created, assembled or
// takes it as a spare, so that its writes check the file's size without
// an fstat (member.File.ReserveTail; on other file systems the hole is
// mapped as it is); a read-only assembly writes nothing.
func TestReserveTail(t *testing.T) {
	const chunk = 64 << 10
	page := int64(os.Getpagesize())
	dir := membertest.TmpfsDir(t) // skips without a tmpfs
	size := memberSizeFor(chunk, 16) + 3*page + 512
	last := (size - 1) &^ (page - 1)
	var paths []string
	for i := range 4 {
		p := filepath.Join(dir, fmt.Sprint("m", i))
		require.NoError(t, member.CreateSparse(p, size))
		paths = append(paths, p)
	}
	open := func(ro bool, ps ...string) []raid.Device {
		var devs []raid.Device
		for _, p := range ps {
			f, err := member.Open(p, member.Options{ReadOnly: ro})
			require.NoError(t, err)
			devs = append(devs, raid.Device{Path: p, Member: f})
		}
		return devs
	}
	hasTail := func(p string) bool {
		f, err := member.Open(p, member.Options{ReadOnly: true})
		require.NoError(t, err)
		defer f.Close()
		return f.HasData(last, size-last)
	}
	opts := raid.Options{CleanDelay: -1}
	a, err := raid.Create(open(false, paths[:3]...), raid.CreateOptions{Name: "tail", Level: stripe.RAID5, Chunk: chunk}, opts)
	require.NoError(t, err)
	for _, p := range paths[:3] {
		assert.True(t, hasTail(p), "create: %s", p)
	}
	require.NoError(t, a.Close())

	// Punch the pages again: a read-only assembly leaves them, a
	// read-write one writes them.
	for _, p := range paths[:3] {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(last))
		require.NoError(t, f.Truncate(size))
		require.NoError(t, f.Close())
	}
	ro, err := raid.Assemble(open(true, paths[:3]...), raid.Options{CleanDelay: -1, ReadOnly: true})
	require.NoError(t, err)
	require.NoError(t, ro.Close())
	for _, p := range paths[:3] {
		assert.False(t, hasTail(p), "read-only assembly wrote %s", p)
	}
	a, err = raid.Assemble(open(false, paths[:3]...), opts)
	require.NoError(t, err)
	for _, p := range paths[:3] {
		assert.True(t, hasTail(p), "assembly: %s", p)
	}
	err = a.AddMember(open(false, paths[3])[0], false)
	require.NoError(t, err)
	assert.True(t, hasTail(paths[3]), "spare")
	require.NoError(t, a.Close())
}
