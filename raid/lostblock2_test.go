package raid_test

import (
	"bytes"
	"fmt"
	randv2 "math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// TestStaleQueuedReadDropped: a read of a block that is bad on more members
// than the level can rebuild fails with EIO, and nothing of it happens
// later. RAID5 used to leave the first source read of its last attempted
// reconstruction queued on the (pooled) Op when it found the second bad
// member; the next request run on that Op issued it, into the buffer of
// the failed read: the same buffer, reused by the caller for the next
// block, then held another member's bytes, with no error.
func TestStaleQueuedReadDropped(t *testing.T) {
	const chunk, rows = 64 << 10, 16
	for _, lv := range []struct {
		level stripe.Level
		n     int
		rot   []int // members whose block at the same place rots
	}{{stripe.RAID5, 4, []int{0, 2}}, {stripe.RAID6, 5, []int{0, 1, 3}}, {stripe.RAID1, 2, []int{0, 1}}, {stripe.RAID10, 4, []int{0, 1}}} {
		t.Run(lv.level.String(), func(t *testing.T) {
			r := newRig(lv.n, dataOffsetOf(lv.level, lv.n, chunk)+64<<10+chunk*rows)
			a, err := raid.Create(r.devs, raid.CreateOptions{Name: "st", Level: lv.level, Chunk: chunk, Checksums: true}, raid.Options{})
			require.NoError(t, err)
			defer func() { require.NoError(t, a.Close()) }()
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
			const mo = 5*chunk + 2*4096
			for _, m := range lv.rot {
				r.mem[m].Bytes()[int64(sb.DataOffset)+mo+100] ^= 0x5a
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
