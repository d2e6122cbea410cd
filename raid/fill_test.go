package raid_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// fillCounted is a memory member (FillAt, InMemory) that records the
// ranges written with WriteAt and discarded.
type fillCounted struct {
	*member.Memory
	mu               sync.Mutex
	writes, discards [][2]int64
}

func (m *fillCounted) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	m.writes = append(m.writes, [2]int64{off, int64(len(p))})
	m.mu.Unlock()
	return m.Memory.WriteAt(p, off)
}

func (m *fillCounted) WritevAt(bufs [][]byte, off int64) (int, error) {
	n := int64(0)
	for _, b := range bufs {
		n += int64(len(b))
	}
	m.mu.Lock()
	m.writes = append(m.writes, [2]int64{off, n})
	m.mu.Unlock()
	return m.Memory.WritevAt(bufs, off)
}

func (m *fillCounted) Discard(off, n int64) error {
	m.mu.Lock()
	m.discards = append(m.discards, [2]int64{off, n})
	m.mu.Unlock()
	return m.Memory.Discard(off, n)
}

// within counts the recorded ranges that overlap [lo, hi).
func within(rs [][2]int64, lo, hi int64) int {
	k := 0
	for _, r := range rs {
		if r[0] < hi && r[0]+r[1] > lo {
			k++
		}
	}
	return k
}

// TestWriteFillParity: a RAID5 full-stripe write computes each row's parity
// straight into a parity member that lets it (FillAt: a member held in
// memory; Op.WriteFill), with no write of a parity buffer, while the data
// chunks are written as before; a parity member that does not let it
// (keep hides FillAt) gets the parity written; and with zero elision, a
// parity with an all-zero block is written the ordinary way, so that the
// block is discarded as Write discards it. Every way, the rows' parity
// matches their data.
func TestWriteFillParity(t *testing.T) {
	const chunk = 64 << 10
	for _, tc := range []struct {
		name      string
		hide      bool // the members do not offer FillAt
		zeroBlock bool // the parity has an all-zero block (and elision is on)
	}{
		{"fill", false, false},
		{"no FillAt", true, false},
		{"parity zero block elided", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mems []*fillCounted
			var devs []raid.Device
			for i := range 4 {
				m := &fillCounted{Memory: member.NewMemory(levelSizeFor(stripe.RAID5, chunk, 8))}
				mems = append(mems, m)
				var dev raid.Member = m
				if tc.hide {
					dev = keep{m}
				}
				devs = append(devs, raid.Device{Path: fmt.Sprintf("mem%d", i), Member: dev})
			}
			a := createArray(t, devs, raid.CreateOptions{Name: "a", Level: stripe.RAID5, Chunk: chunk}, raid.Options{KeepZeroes: !tc.zeroBlock})
			g := a.Geometry()
			w := g.StripeWidth()
			rng := rand.New(rand.NewPCG(7, 8))
			p := make([]byte, 2*w)
			for i := range p {
				p[i] = byte(rng.Uint32())
			}
			if tc.zeroBlock {
				// Row 0: the third chunk is the XOR of the first two, so
				// the parity is zero, but for one byte of its third
				// 4 KiB block.
				for i := range chunk {
					p[2*chunk+i] = p[i] ^ p[chunk+i]
				}
				p[2*chunk+8192] ^= 1 // one block of the parity is not zero
			}
			for _, m := range mems {
				m.mu.Lock()
				m.writes, m.discards = nil, nil
				m.mu.Unlock()
			}
			_, err := a.WriteAt(p, 0)
			require.NoError(t, err)
			dataOff := dataOffsetOf(stripe.RAID5, 4, chunk)
			for row := int64(0); row < 2; row++ {
				lo, hi := dataOff+row*chunk, dataOff+(row+1)*chunk
				pm := g.ParityMember(row)
				for m, mem := range mems {
					mem.mu.Lock()
					writes, discards := within(mem.writes, lo, hi), within(mem.discards, lo, hi)
					mem.mu.Unlock()
					switch {
					case m != pm:
						assert.Positive(t, writes, "row %d: data member %d written", row, m)
					case tc.hide:
						assert.Positive(t, writes, "row %d: the parity is written to a member without FillAt", row)
					case tc.zeroBlock && row == 0:
						assert.Positive(t, discards, "row 0: the parity's zero blocks are discarded")
					default:
						assert.Zero(t, writes+discards, "row %d: the parity is computed in the member", row)
					}
				}
				// The XOR of every member's chunk of the row is zero.
				acc := make([]byte, chunk)
				for _, mem := range mems {
					b := mem.Bytes()[lo:hi]
					for i := range acc {
						acc[i] ^= b[i]
					}
				}
				assert.True(t, bytes.Equal(acc, make([]byte, chunk)), "row %d parity", row)
			}
			got := make([]byte, len(p))
			_, err = a.ReadAt(got, 0)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(p, got))
		})
	}
}
