package raid_test

import (
	"bytes"
	"errors"
	"fmt"
	randv2 "math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// TestRebuildPastLostBlocks: on an array with checksums, a rebuild that
// meets a block no source can provide (the last copy, or a block a
// degraded parity row needs, fails its checksum) does not stop there, as
// md's rebuild records a bad block and goes on. The rebuilt member gets
// that block with a checksum marked bad, so it reads as lost (EIO) as it
// did before the rebuild, never as the garbage it was rebuilt from; the
// rebuild finishes, the array is whole again, every other byte reads back,
// and the event names the lost blocks. A whole-block write heals them.
func TestRebuildPastLostBlocks(t *testing.T) {
	for _, tc := range []struct {
		level   stripe.Level
		members int
		failed  []int // roles failed and rebuilt onto spares
		rotten  int   // the survivor whose block rots
	}{
		{stripe.RAID1, 2, []int{0}, 1},
		{stripe.RAID10, 4, []int{2}, 3},
		{stripe.RAID5, 4, []int{0}, 2},
		{stripe.RAID6, 5, []int{0, 3}, 1},
	} {
		t.Run(tc.level.String(), func(t *testing.T) {
			r, a, want, dataOff := newLostRig(t, tc.level, tc.members, len(tc.failed))

			for _, f := range tc.failed {
				require.NoError(t, a.FailMember(r.devs[f].Path))
			}
			// Rot one block of the survivor in row 5: no source is left for it.
			const mo = lostBlock
			r.mem[tc.rotten].Bytes()[dataOff+mo+100] ^= 0x5a
			for i := range tc.failed {
				require.NoError(t, a.AddMember(r.devs[tc.members+i], false))
			}
			st := waitIdle(t, a)
			require.False(t, st.Degraded, "the rebuild finished: %+v", st.Devices)
			for _, e := range eventsOf(a, raid.EventRebuildStopped) {
				// A second spare restarts the rebuild to do both roles in
				// one pass; nothing else may stop it.
				assert.Contains(t, e.Detail, "in the same pass")
			}
			lost := eventsOf(a, raid.EventRebuildLostBlocks)
			require.NotEmpty(t, lost, "the rebuild reports the blocks it could not rebuild")
			assert.Contains(t, lost[0].Detail, fmt.Sprintf("data offset %d", mo))

			// Every block reads back right or fails as lost; the lost ones
			// are all at the rotten block's place in row 5.
			g := a.Geometry()
			var bad []int64
			buf := make([]byte, 4096)
			for off := int64(0); off < a.Size(); off += 4096 {
				if _, err := a.ReadAt(buf, off); err != nil {
					assert.ErrorIs(t, err, raid.ErrChecksum, "block %d", off)
					bad = append(bad, off)
					e := g.Extents(nil, off, 1)[0]
					assert.Equal(t, int64(mo), e.Off, "lost block at array offset %d is at the rotten block's place", off)
					continue
				}
				if !bytes.Equal(want[off:off+4096], buf) {
					e := g.Extents(nil, off, 1)[0]
					t.Fatalf("block at array offset %d (member %d offset %d) reads wrong data", off, e.Member, e.Off)
				}
			}
			require.NotEmpty(t, bad, "the lost data stays lost: it is never served as garbage")
			assert.LessOrEqual(t, len(bad), tc.members, "only the blocks of one row's column")
			for _, d := range a.Status().Devices {
				if d.Note != "failed by operator" {
					assert.Equal(t, "active", d.State, "%s", d.Path)
				}
			}

			// Lost blocks heal when written whole: on mirrors block by
			// block; on parity levels by a write of their whole stripe (a
			// partial write there must read the other lost blocks of the
			// column for its parity, and fails as those reads do).
			healLost(t, a, want, bad)
			for _, off := range bad {
				_, err := a.ReadAt(buf, off)
				require.NoError(t, err, "block %d after a whole-block write", off)
				assert.Equal(t, want[off:off+4096], buf)
			}
		})
	}
}

// TestResyncKeepsLostBlocks: a crash resync reseals the checksums of the
// dirty regions from their data, since a write in flight may have reached
// the data and not its checksum. It must not reseal a block a rebuild
// marked lost: that block holds the garbage it was rebuilt from, and it
// must go on reading as lost after the crash, never as valid data.
func TestResyncKeepsLostBlocks(t *testing.T) {
	for _, tc := range []struct {
		level   stripe.Level
		members int
		failed  int
		rotten  int
	}{{stripe.RAID1, 2, 0, 1}, {stripe.RAID10, 4, 2, 3}, {stripe.RAID5, 4, 0, 2}} {
		t.Run(tc.level.String(), func(t *testing.T) {
			r, a, want, dataOff := newLostRig(t, tc.level, tc.members, 1)
			require.NoError(t, a.FailMember(r.devs[tc.failed].Path))
			r.mem[tc.rotten].Bytes()[dataOff+lostBlock+100] ^= 0x5a
			require.NoError(t, a.AddMember(r.devs[tc.members], false))
			require.False(t, waitIdle(t, a).Degraded)
			var bad []int64
			buf := make([]byte, 4096)
			for off := int64(0); off < a.Size(); off += 4096 {
				if _, err := a.ReadAt(buf, off); err != nil {
					require.ErrorIs(t, err, raid.ErrChecksum)
					bad = append(bad, off)
				}
			}
			require.NotEmpty(t, bad)
			require.NoError(t, a.Sync())
			// A write in the lost blocks' row (not to them) leaves their
			// region dirty; the crash comes before it is marked clean.
			g := a.Geometry()
			row := bad[0] / g.StripeWidth() * g.StripeWidth()
			if tc.level == stripe.RAID1 {
				row = bad[0] / lostChunk * lostChunk
			}
			other := row
			for slices.Contains(bad, other) {
				other += 4096
			}
			_, err := a.WriteAt(want[other:other+4096], other)
			require.NoError(t, err)
			a.Abandon()

			devs := slices.Delete(slices.Clone(r.devs[:tc.members+1]), tc.failed, tc.failed+1)
			b := assembleArray(t, devs, raid.Options{})
			st := waitIdle(t, b)
			require.True(t, hasEvent(st, raid.EventResyncStarted), "the crash left a dirty region to resync")
			for _, off := range bad {
				_, err := b.ReadAt(buf, off)
				require.ErrorIs(t, err, raid.ErrChecksum, "lost block at %d after the crash resync", off)
			}
			for off := int64(0); off < b.Size(); off += 4096 {
				if slices.Contains(bad, off) {
					continue
				}
				_, err := b.ReadAt(buf, off)
				require.NoError(t, err, "block %d", off)
				require.Equal(t, want[off:off+4096], buf, "block %d", off)
			}
			assert.True(t, hasEvent(st, raid.EventResyncFinished), "the resync finished")
			// They still heal when written whole (see TestRebuildPastLostBlocks).
			healLost(t, b, want, bad)
			for _, off := range bad {
				_, err := b.ReadAt(buf, off)
				require.NoError(t, err)
				assert.Equal(t, want[off:off+4096], buf)
			}
		})
	}
}

// TestStaleQueuedReadDropped: a read of a block that is bad on more members
// than the level can rebuild fails with EIO, and nothing of it happens
// later. RAID5 used to leave the first source read of its last attempted
// reconstruction queued on the (pooled) Op when it found the second bad
// member; the next request run on that Op issued it, into the buffer of
// the failed read: the same buffer, reused by the caller for the next
// block, then held another member's bytes, with no error.
func TestStaleQueuedReadDropped(t *testing.T) {
	for _, lv := range []struct {
		level stripe.Level
		n     int
		rot   []int // members whose block at the same place rots
	}{{stripe.RAID5, 4, []int{0, 2}}, {stripe.RAID6, 5, []int{0, 1, 3}}, {stripe.RAID1, 2, []int{0, 1}}, {stripe.RAID10, 4, []int{0, 1}}} {
		t.Run(lv.level.String(), func(t *testing.T) {
			r, a, want, dataOff := newLostRig(t, lv.level, lv.n, 0)
			const mo = lostBlock
			for _, m := range lv.rot {
				r.mem[m].Bytes()[dataOff+mo+100] ^= 0x5a
			}
			g := a.Geometry()
			buf := make([]byte, 4096)
			lost := 0
			for off := int64(0); off < a.Size(); off += 4096 {
				_, err := a.ReadAt(buf, off)
				e := g.Extents(nil, off, 1)[0]
				if err != nil {
					assert.ErrorIs(t, err, raid.ErrChecksum)
					assert.Equal(t, int64(mo), e.Off, "only the rotten column is lost")
					lost++
					continue
				}
				require.True(t, bytes.Equal(want[off:off+4096], buf), fmt.Sprintf("block at %d (member %d offset %d) reads wrong data", off, e.Member, e.Off))
			}
			assert.Positive(t, lost)
		})
	}
}

// lostBlock is the member data offset of the block these tests rot:
// block 2 of row 5.
const lostChunk, lostRows = 64 << 10, 16
const lostBlock = 5*lostChunk + 2*4096

// healLost writes the lost blocks at the array offsets in bad whole from
// want: on mirrors block by block; on parity levels their whole stripe (a
// partial write there must read the other lost blocks of the column for
// its parity, and fails as those reads do).
func healLost(t *testing.T, a *raid.Array, want []byte, bad []int64) {
	t.Helper()
	g := a.Geometry()
	for _, off := range bad {
		lo, n := off, int64(4096)
		if !g.Mirrored() {
			lo, n = off/g.StripeWidth()*g.StripeWidth(), g.StripeWidth()
		}
		_, err := a.WriteAt(want[lo:lo+n], lo)
		require.NoError(t, err)
	}
}

// newLostRig creates an array of level with checksums on members of n
// (plus spares spare members after them in r), filled with random bytes
// without zero blocks (none is elided) and synced. It returns the rig, the
// array, its contents and the members' data offset.
func newLostRig(t *testing.T, level stripe.Level, n, spares int) (*rig, *raid.Array, []byte, int64) {
	t.Helper()
	r := newRig(n+spares, dataOffsetOf(level, n, lostChunk)+64<<10+lostChunk*lostRows)
	a, err := raid.Create(r.devs[:n], raid.CreateOptions{Name: "lb", Level: level, Chunk: lostChunk, Checksums: true}, raid.Options{})
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := a.Close(); !errors.Is(err, raid.ErrClosed) { // a test may abandon it
			require.NoError(t, err)
		}
	})
	want := make([]byte, a.Size())
	rng := randv2.New(randv2.NewPCG(3, 4))
	for i := range want {
		want[i] = byte(rng.Uint32() | 1)
	}
	_, err = a.WriteAt(want, 0)
	require.NoError(t, err)
	require.NoError(t, a.Sync())
	sb, err := superblock.Read(r.mem[0])
	require.NoError(t, err)
	return r, a, want, int64(sb.DataOffset)
}

// TestRebuildRebuildsRottenSourceBlock: a RAID6 missing one member, with
// a block of a survivor failing its checksum, still has two erasures at
// that block, which P and Q solve: the rebuild onto a spare rebuilds it
// (and rewrites the survivor's block) instead of giving it up as lost;
// the array is then whole, and losing another member loses nothing.
// Before, the rebuild marked the block lost on the new member although a
// read of it before the rebuild returned the right bytes.
func TestRebuildRebuildsRottenSourceBlock(t *testing.T) {
	for _, rotten := range []int{1, 2, 3, 4} { // data and parity, as the row has them
		t.Run(fmt.Sprint("rotten=", rotten), func(t *testing.T) {
			r, a, want, dataOff := newLostRig(t, stripe.RAID6, 5, 1)
			require.NoError(t, a.FailMember(r.devs[0].Path))
			r.mem[rotten].Bytes()[dataOff+lostBlock+100] ^= 0x5a
			require.NoError(t, a.AddMember(r.devs[5], false))
			st := waitIdle(t, a)
			require.False(t, st.Degraded, "the rebuild finished: %+v", st.Devices)
			assert.Empty(t, eventsOf(a, raid.EventRebuildLostBlocks), "no block is lost")
			assert.Zero(t, st.Checksums.Lost)
			requireContent(t, a, want, "after the rebuild")
			r.toggles[(rotten+1)%5].On()
			requireContent(t, a, want, "after the rebuild, another member failing")
		})
	}
}
