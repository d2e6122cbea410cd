package raid_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// statusMap walks BlockStatus over the whole array at chunk granularity.
func statusMap(t *testing.T, a *raid.Array) []bool {
	t.Helper()
	chunk := a.Geometry().Chunk()
	zero := make([]bool, a.Size()/chunk)
	for off := int64(0); off < a.Size(); {
		l, z, err := a.BlockStatus(off, a.Size()-off)
		require.NoError(t, err)
		require.Positive(t, l)
		for c := off / chunk; c < (off+l)/chunk; c++ {
			zero[c] = z
		}
		off += l
	}
	return zero
}

// TestBlockStatus checks holes and data on sparse file members for every
// level, healthy and (where it can be) degraded: on the test's temporary
// directory, and on tmpfs, whose members are read through a mapping that
// must not turn the holes it reads into data.
func TestBlockStatus(t *testing.T) {
	const chunk = 64 << 10
	for _, fs := range []string{"tempdir", "tmpfs"} {
		for _, s := range []struct {
			level stripe.Level
			n     int
		}{{stripe.RAID0, 3}, {stripe.RAID1, 2}, {stripe.RAID5, 4}, {stripe.RAID10, 3}} {
			t.Run(fmt.Sprintf("%s/%s/members=%d", fs, s.level, s.n), func(t *testing.T) {
				testBlockStatus(t, fs, s.level, s.n, chunk)
			})
		}
	}
}

func testBlockStatus(t *testing.T, fs string, level stripe.Level, n int, chunk int64) {
	dir := t.TempDir()
	if fs == "tmpfs" {
		dir = membertest.TmpfsDir(t)
	}
	var devs []raid.Device
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprint("m", i))
		require.NoError(t, member.CreateSparse(p, dataOffsetOf(level, n, chunk)+12*chunk))
		f, err := member.Open(p, member.Options{})
		require.NoError(t, err)
		devs = append(devs, raid.Device{Path: p, Member: f})
	}
	a := createArray(t, devs, raid.CreateOptions{Name: "bs", Level: level, Chunk: chunk}, raid.Options{CleanDelay: -1})
	chunks := a.Size() / chunk
	for c, z := range statusMap(t, a) {
		require.True(t, z, "a new array is all holes (chunk %d)", c)
	}
	// Data in chunks 1 and 4, zeroes written into chunk 2.
	p := make([]byte, chunk)
	for i := range p {
		p[i] = 0xa5
	}
	for _, c := range []int64{1, 4} {
		_, err := a.WriteAt(p, c*chunk)
		require.NoError(t, err)
	}
	_, err := a.WriteAt(make([]byte, chunk), 2*chunk)
	require.NoError(t, err)
	want := make([]bool, chunks)
	for c := range want {
		want[c] = c != 1 && c != 4
	}
	assert.Equal(t, want, statusMap(t, a))
	// A short query inside a data chunk returns exactly its length.
	l, z, err := a.BlockStatus(chunk+100, 50)
	require.NoError(t, err)
	assert.Equal(t, int64(50), l)
	assert.False(t, z)
	if level != stripe.RAID0 {
		require.NoError(t, a.FailMember(devs[1].Path))
		got := statusMap(t, a)
		width := a.Geometry().StripeWidth() / chunk
		for c := range got {
			if got[c] {
				assert.True(t, want[c], "degraded: chunk %d holds data but is reported zero", c)
			}
			// A chunk on the failed member can only be known zero when
			// nothing in its row holds data; rows 0 and 1 do.
			if level != stripe.RAID5 || int64(c)/width > 1 {
				assert.Equal(t, want[c], got[c], "degraded: chunk %d", c)
			}
		}
	}
	// Out of range.
	_, _, err = a.BlockStatus(a.Size(), 1)
	assert.ErrorIs(t, err, raid.ErrRange)
}
