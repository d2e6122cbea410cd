package raid_test

import (
	"bytes"
	"fmt"
	randv2 "math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// summingMem is a memory member as raidd serves one on tmpfs: its copies
// checksum as they go (member.Memory's WriteAtSums and the others, which
// the checksum wrapper uses for requests of 32 KiB or more), and Close
// keeps it for the next assembly. The rig's members hide those methods
// behind fault injection, so TestModelChecksums takes the other path.
type summingMem struct{ *member.Memory }

func (summingMem) Close() error { return nil }

// TestChecksumSummingCopies: every level with checksums, on members whose
// copies compute the CRCs, under a seeded mix of reads and writes of 4 KiB
// to 1 MiB compared with a flat model; then a flipped byte on a redundant
// level is repaired by the read that meets it; then the members, assembled
// again behind wrappers that do not sum (so every CRC is computed apart
// from the copies), read back whole without a mismatch: the entries the
// summing copies stored are the blocks' CRC32C. Replay with RAIDD_SEED.
func TestChecksumSummingCopies(t *testing.T) {
	seed := testSeed(t)
	const chunk, rows = 64 << 10, 24
	for _, lv := range csumLevels {
		t.Run(lv.level.String(), func(t *testing.T) {
			t.Parallel()
			rng := randv2.New(randv2.NewPCG(uint64(seed), uint64(lv.level)))
			size := dataOffsetOf(lv.level, lv.members, chunk) + 64<<10 + chunk*rows
			var mems []*member.Memory
			var devs []raid.Device
			for i := range lv.members {
				m := member.NewMemory(size)
				mems = append(mems, m)
				devs = append(devs, raid.Device{Path: fmt.Sprint("mem", i), Member: summingMem{m}})
			}
			a, err := raid.Create(devs, raid.CreateOptions{Name: "s", Level: lv.level, Chunk: chunk, Checksums: true}, raid.Options{CleanDelay: -1})
			require.NoError(t, err)
			want := make([]byte, a.Size())
			_, err = a.WriteAt(want, 0) // no holes: every block has a CRC
			require.NoError(t, err)
			for op := range 300 {
				n := min(a.Size(), []int64{4 << 10, 32 << 10, 64 << 10, 100 << 10, 256 << 10, 1 << 20}[rng.IntN(6)])
				off := rng.Int64N((a.Size()-n)/4096+1) * 4096
				if op%4 == 3 {
					got := make([]byte, n)
					_, err := a.ReadAt(got, off)
					require.NoError(t, err, "op %d: read [%d, +%d)", op, off, n)
					require.True(t, bytes.Equal(want[off:off+n], got), "op %d: read [%d, +%d)", op, off, n)
					continue
				}
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
				_, err := a.WriteAt(p, off)
				require.NoError(t, err, "op %d: write [%d, +%d)", op, off, n)
				copy(want[off:], p)
			}
			sb, err := superblock.Read(mems[0])
			require.NoError(t, err)
			dataOff := int64(sb.DataOffset)
			if lv.level != stripe.RAID0 {
				off := int64(5*chunk + 3*4096)
				m, mo := readLoc(a.Geometry(), off)
				mems[m].Bytes()[dataOff+mo+7] ^= 0x20
				blk := make([]byte, 4096) // readLoc's read: the one that meets it
				_, err := a.ReadAt(blk, off)
				require.NoError(t, err)
				require.True(t, bytes.Equal(want[off:off+4096], blk))
			}
			got := make([]byte, a.Size())
			_, err = a.ReadAt(got, 0)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got))
			if lv.level != stripe.RAID0 {
				require.NotEmpty(t, eventsOf(a, raid.EventChecksumRepaired), "the flipped byte was found")
			}
			require.NoError(t, a.Close())

			var plain []raid.Device
			for i, m := range mems {
				plain = append(plain, raid.Device{Path: fmt.Sprint("mem", i), Member: keep{m}})
			}
			b, err := raid.Assemble(plain, raid.Options{CleanDelay: -1})
			require.NoError(t, err)
			clear(got)
			_, err = b.ReadAt(got, 0)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got))
			require.Empty(t, eventsOf(b, raid.EventChecksumRepaired), "no block disagrees with its entry")
			require.NoError(t, b.Close())
		})
	}
}
