package raid_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// TestShrunkMember truncates a member file of a running array, as the fault
// attack of issue 7 did (64 KiB chunks, 9 MiB members, truncate to 1 MiB),
// and reads everything back in 64 KiB pieces from several goroutines. No
// read may return zeroes where data was written: the short member is failed
// and its chunks come from redundancy, never "repaired" by a rewrite past
// the end of the file. The failure is on the survivors' superblocks, so the
// members assemble again, degraded, even when the truncation took the
// member's superblock with it.
func TestShrunkMember(t *testing.T) {
	shapes := []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID1, 2}, {stripe.RAID10, 4}, {stripe.RAID5, 3}}
	for _, sh := range shapes {
		for _, cut := range []int64{superblock.HeaderSize, 0} {
			t.Run(fmt.Sprintf("%s/members=%d/cut=%d", sh.level, sh.n, cut), func(t *testing.T) {
				t.Parallel()
				testShrunkMember(t, sh.level, sh.n, cut)
			})
		}
	}
}

func testShrunkMember(t *testing.T, level stripe.Level, n int, cut int64) {
	const chunk, written = 64 << 10, 8 << 20
	fa := newFileArray(t, n, raid.CreateOptions{Name: "shrink", Level: level, Chunk: chunk}, raid.Options{CleanDelay: -1}, written, 7)
	a, paths, open, want := fa.a, fa.paths, fa.open, fa.want

	const victim = 1
	require.NoError(t, os.Truncate(paths[victim], cut))

	got := make([]byte, written)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for off := int64(c * chunk); off < written; off += 4 * chunk {
				if _, err := a.ReadAt(got[off:off+chunk], off); err != nil {
					errs[c] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	bad := 0
	for off := 0; off < written; off += chunk {
		if !bytes.Equal(want[off:off+chunk], got[off:off+chunk]) {
			bad++
		}
	}
	assert.Zero(t, bad, "chunks read back wrong out of %d", written/chunk)
	// Read again: a repair must not have made things worse.
	_, err := a.ReadAt(got, 0)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "second read differs")

	st := a.Status()
	assert.True(t, st.Degraded, "the array is degraded")
	for _, d := range st.Devices {
		if d.Role == victim {
			assert.Equal(t, "failed", d.State, "the short member is failed: %+v", d)
		}
	}
	fi, err := os.Stat(paths[victim])
	require.NoError(t, err)
	assert.Equal(t, cut, fi.Size(), "nothing was written past the end of the short member")
	require.NoError(t, a.Close())

	// The next start assembles degraded around it.
	a, err = raid.Assemble(open(), raid.Options{CleanDelay: -1})
	require.NoError(t, err, "assembly after the shrink")
	defer a.Close()
	assert.True(t, a.Status().Degraded)
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want, got), "data after reassembly")
}

// TestShrunkMemberComesBackInFull: a member that failed because its file
// shrank has lost the bytes past the new end, so when the operator
// restores its size and adds it back, after a restart, it is rebuilt in
// full. A re-add would resync only the regions written while it was out
// (none here: the bitmap was clean) and trust the lost tail, which the
// next lost member would then return as the array's data.
func TestShrunkMemberComesBackInFull(t *testing.T) {
	const chunk, size, written = 64 << 10, 9 << 20, 8 << 20
	opts := raid.Options{CleanDelay: 10 * time.Millisecond}
	fa := newFileArray(t, 3, raid.CreateOptions{Name: "shrink", Level: stripe.RAID5, Chunk: chunk, BitmapRegion: 4 * chunk}, opts, written, 8)
	a, paths, want := fa.a, fa.paths, fa.want
	waitBitmapClean(t, a)

	const victim = 2
	require.NoError(t, os.Truncate(paths[victim], 4<<20)) // its header stays
	got := make([]byte, written)
	_, err := a.ReadAt(got, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
	require.True(t, a.Status().Degraded, "the short member failed")
	require.NoError(t, a.Close())

	restoreAndAdd(t, fa, victim, size, opts)
}

// restoreAndAdd restores the size of fa's member victim, which the array
// lost for being short, starts the array and adds the member back: it
// must be rebuilt in full (not re-added), and then serve for a lost member
// with every byte written.
func restoreAndAdd(t *testing.T, fa *fileArray, victim int, size int64, opts raid.Options) {
	t.Helper()
	require.NoError(t, os.Truncate(fa.paths[victim], size)) // the operator restores its size
	a, err := raid.Assemble(fa.open(), opts)
	require.NoError(t, err)
	defer func() { checkAndClose(t, a) }()
	require.NoError(t, a.Release(fa.paths[victim]))
	require.NoError(t, a.AddMember(fa.openOne(fa.paths[victim]), false))
	st := waitIdle(t, a)
	require.False(t, st.Degraded)
	require.NotNil(t, st.LastRecovery)
	assert.Equal(t, "rebuild", st.LastRecovery.Kind, "a full rebuild, not a re-add: %+v", st.History)
	require.NoError(t, a.FailMember(fa.paths[0]))
	got := make([]byte, len(fa.want))
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(fa.want, got), "the rebuilt member serves for a lost one")
}

// TestShortAtStartComesBackInFull: the same, for a member truncated while
// the array was stopped. The start leaves it out as too small, and its own
// header must then say it failed: else, once the operator restores its
// size, 'raidd add' re-adds it with a resync of the regions written since
// (none) and trusts its zeroed tail. Before its size is restored, the add
// is refused with the sizes.
func TestShortAtStartComesBackInFull(t *testing.T) {
	for _, level := range []stripe.Level{stripe.RAID1, stripe.RAID5} {
		t.Run(level.String(), func(t *testing.T) {
			t.Parallel()
			const chunk, size, written = 64 << 10, 9 << 20, 8 << 20
			opts := raid.Options{CleanDelay: 10 * time.Millisecond}
			n := 3
			if level == stripe.RAID1 {
				n = 2
			}
			fa := newFileArray(t, n, raid.CreateOptions{Name: "short", Level: level, Chunk: chunk, BitmapRegion: 4 * chunk}, opts, written, 9)
			a, paths, open, openOne := fa.a, fa.paths, fa.open, fa.openOne
			waitBitmapClean(t, a)
			require.NoError(t, a.Close())

			victim := n - 1
			require.NoError(t, os.Truncate(paths[victim], 4<<20)) // while stopped; its header stays
			a, err := raid.Assemble(open(), opts)
			require.NoError(t, err)
			require.True(t, a.Status().Degraded, "the short member is left out")
			require.NoError(t, a.Release(paths[victim]))
			err = a.AddMember(openOne(paths[victim]), false)
			require.ErrorIs(t, err, raid.ErrBusy, "a member too small for the array is refused")
			assert.Contains(t, err.Error(), "bytes; the array needs")
			require.NoError(t, a.Close())

			restoreAndAdd(t, fa, victim, size, opts)
		})
	}
}

// fileArray is an array on n sparse member files of 9 MiB (member.Open,
// as serve opens them), created with co and opts, with written bytes of
// random data (from seed) written from offset 0 and synced.
type fileArray struct {
	a       *raid.Array
	paths   []string
	open    func() []raid.Device     // every member, opened anew
	openOne func(string) raid.Device // one member, opened anew
	want    []byte                   // the bytes written
}

func newFileArray(t *testing.T, n int, co raid.CreateOptions, opts raid.Options, written int, seed int64) *fileArray {
	t.Helper()
	fa := &fileArray{}
	dir := t.TempDir()
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("m%d", i))
		require.NoError(t, member.CreateSparse(p, 9<<20))
		fa.paths = append(fa.paths, p)
	}
	fa.openOne = func(p string) raid.Device {
		f, err := member.Open(p, member.Options{})
		require.NoError(t, err)
		return raid.Device{Path: p, Member: f}
	}
	fa.open = func() (devs []raid.Device) {
		for _, p := range fa.paths {
			devs = append(devs, fa.openOne(p))
		}
		return devs
	}
	var err error
	fa.a, err = raid.Create(fa.open(), co, opts)
	require.NoError(t, err)
	fa.want = make([]byte, written)
	rand.New(rand.NewSource(seed)).Read(fa.want)
	_, err = fa.a.WriteAt(fa.want, 0)
	require.NoError(t, err)
	require.NoError(t, fa.a.Sync())
	return fa
}
