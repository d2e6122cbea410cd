package raid_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// TestWritesInline: an array says its writes may run on the receiving
// goroutine only when every member is held in memory (checksummed or not)
// and the level has no parity (see Array.WritesInline).
func TestWritesInline(t *testing.T) {
	const chunk = 64 << 10
	devs := func(n int, wrap func(i int, m raid.Member) raid.Member) []raid.Device {
		var d []raid.Device
		for i := range n {
			d = append(d, raid.Device{Path: fmt.Sprintf("mem%d", i), Member: wrap(i, member.NewMemory(levelSizeFor(stripe.RAID5, chunk, 8)))})
		}
		return d
	}
	plain := func(_ int, m raid.Member) raid.Member { return m }
	for _, tc := range []struct {
		name   string
		level  stripe.Level
		wrap   func(int, raid.Member) raid.Member
		csum   bool
		opts   raid.Options
		inline bool
	}{
		{"raid0 memory", stripe.RAID0, plain, false, raid.Options{}, true},
		{"raid1 memory checksums", stripe.RAID1, plain, true, raid.Options{}, true},
		{"raid5 memory stripe cache", stripe.RAID5, plain, false, raid.Options{StripeCache: 1 << 20}, false},
		{"raid5 memory gathered", stripe.RAID5, plain, false, raid.Options{}, false},
		{"raid5 memory not gathered", stripe.RAID5, plain, false, raid.Options{NoCoalesce: true}, false},
		{"raid10 memory", stripe.RAID10, plain, false, raid.Options{}, true},
		// keep hides whether the member it wraps is in memory, as any
		// member that does not say so.
		{"raid0 one member unknown", stripe.RAID0, func(i int, m raid.Member) raid.Member {
			if i == 2 {
				return keep{m}
			}
			return m
		}, false, raid.Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := createArray(t, devs(4, tc.wrap), raid.CreateOptions{Name: "a", Level: tc.level, Chunk: chunk, Checksums: tc.csum}, tc.opts)
			assert.Equal(t, tc.inline, a.WritesInline())
			// Small member reads of memory members run on the request's
			// goroutine (Op.Run): read-modify-writes must still see
			// the old data and parity.
			rng := rand.New(rand.NewPCG(1, 2))
			want := make([]byte, a.Size())
			for range 200 {
				n := 1 + rng.Int64N(3*chunk)
				off := rng.Int64N(a.Size() - n)
				p := make([]byte, n)
				for i := range p {
					p[i] = byte(rng.Uint32())
				}
				_, err := a.WriteAt(p, off)
				require.NoError(t, err)
				copy(want[off:], p)
			}
			got := make([]byte, a.Size())
			_, err := a.ReadAt(got, 0)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want, got), "array contents")
		})
	}
}

// TestReadsInline: an array says a read may run on the receiving goroutine
// when it is at most 64 KiB (what Op.Run reads on the request's goroutine)
// and every member is held in memory, at every level, parity included.
func TestReadsInline(t *testing.T) {
	const chunk = 64 << 10
	for _, tc := range []struct {
		name    string
		level   stripe.Level
		unknown bool // one member does not say it is in memory
	}{
		{"raid0 memory", stripe.RAID0, false},
		{"raid5 memory", stripe.RAID5, false},
		{"raid10 memory", stripe.RAID10, false},
		{"raid5 one member unknown", stripe.RAID5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs := memoryDevs(4, levelSizeFor(stripe.RAID5, chunk, 8), tc.unknown)
			a := createArray(t, devs, raid.CreateOptions{Name: "a", Level: tc.level, Chunk: chunk}, raid.Options{})
			assert.Equal(t, !tc.unknown, a.ReadsInline(4096))
			assert.Equal(t, !tc.unknown, a.ReadsInline(64<<10))
			assert.False(t, a.ReadsInline(64<<10+1), "a larger read fans out to the workers")
		})
	}
}

// TestWritesInlineAt: an array says a write may run on the receiving
// goroutine (nbd.InlineWriterAt) on RAID0, RAID1 and RAID10 when every
// member is held in memory, as WritesInline, and on a parity level only
// for a write that holds two whole stripes, with a stripe cache, on
// members held in memory.
func TestWritesInlineAt(t *testing.T) {
	const chunk = 64 << 10
	const width = 3 * chunk // RAID5 on 4 members
	for _, tc := range []struct {
		name    string
		level   stripe.Level
		unknown bool // one member does not say it is in memory
		opts    raid.Options
		off, n  int64
		inline  bool
	}{
		{"raid0 small", stripe.RAID0, false, raid.Options{}, 4096, 4096, true},
		{"raid10 small", stripe.RAID10, false, raid.Options{}, 4096, 4096, true},
		{"raid0 one member unknown", stripe.RAID0, true, raid.Options{}, 0, 1 << 20, false},
		{"raid5 two stripes", stripe.RAID5, false, raid.Options{StripeCache: 1 << 20}, width, 2 * width, true},
		{"raid5 1MiB unaligned", stripe.RAID5, false, raid.Options{StripeCache: 1 << 20}, 1 << 20, 1 << 20, true},
		{"raid5 holds two stripes between pieces", stripe.RAID5, false, raid.Options{StripeCache: 1 << 20}, width - 4096, 2*width + 8192, true},
		{"raid5 two stripe widths across a boundary", stripe.RAID5, false, raid.Options{StripeCache: 1 << 20}, 4096, 2 * width, false},
		{"raid5 one stripe", stripe.RAID5, false, raid.Options{StripeCache: 1 << 20}, 0, width, false},
		{"raid5 256K holding a stripe (nbdcopy)", stripe.RAID5, false, raid.Options{StripeCache: 1 << 20}, 0, 256 << 10, false},
		{"raid5 4K", stripe.RAID5, false, raid.Options{StripeCache: 1 << 20}, 8192, 4096, false},
		{"raid5 one member unknown", stripe.RAID5, true, raid.Options{StripeCache: 1 << 20}, 0, 2 * width, false},
		{"raid5 no stripe cache", stripe.RAID5, false, raid.Options{}, 0, 2 * width, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs := memoryDevs(4, levelSizeFor(stripe.RAID5, chunk, 64), tc.unknown)
			a := createArray(t, devs, raid.CreateOptions{Name: "a", Level: tc.level, Chunk: chunk}, tc.opts)
			require.LessOrEqual(t, tc.off+tc.n, a.Size())
			assert.Equal(t, tc.inline, a.WritesInlineAt(tc.off, int(tc.n)))
		})
	}
}

// memoryDevs returns n memory members of size bytes; with unknown, the
// third is wrapped in keep, which hides that it is held in memory.
func memoryDevs(n int, size int64, unknown bool) []raid.Device {
	var devs []raid.Device
	for i := range n {
		var m raid.Member = member.NewMemory(size)
		if unknown && i == 2 {
			m = keep{m}
		}
		devs = append(devs, raid.Device{Path: fmt.Sprintf("mem%d", i), Member: m})
	}
	return devs
}
