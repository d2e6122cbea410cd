package stripe_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/stripe"
)

var benchGeos = []geo{
	{stripe.RAID0, 4, 64 * kib},
	{stripe.RAID1, 2, 64 * kib},
	{stripe.RAID5, 4, 64 * kib},
	{stripe.RAID10, 3, 64 * kib},
}

// TestExtentsNoAlloc pins what BenchmarkExtents reports: appending into a
// slice with room allocates nothing.
func TestExtentsNoAlloc(t *testing.T) {
	for _, c := range benchGeos {
		t.Run(c.String(), func(t *testing.T) {
			g := c.build(t, 64)
			buf := make([]stripe.Extent, 0, 64)
			allocs := testing.AllocsPerRun(100, func() {
				buf = g.Extents(buf[:0], 4*kib+17, mib)
			})
			assert.Zero(t, allocs)
			require.Len(t, buf, 17)
		})
	}
}

func BenchmarkExtents(b *testing.B) {
	for _, c := range benchGeos {
		for _, n := range []int64{4 * kib, mib} {
			b.Run(fmt.Sprintf("%v/n=%s", c, sizeName(n)), func(b *testing.B) {
				g := c.build(b, 1024)
				buf := make([]stripe.Extent, 0, 64)
				span := g.Size() - n
				b.ReportAllocs()
				var off int64
				for b.Loop() {
					buf = g.Extents(buf[:0], off, n)
					off = (off + 3*n + 4*kib) % span
				}
			})
		}
	}
}

func BenchmarkLocks(b *testing.B) {
	b.Run("uncontended", func(b *testing.B) {
		var l stripe.Locks
		b.ReportAllocs()
		for b.Loop() {
			l.Lock(10, 12)
			l.Unlock(10, 12)
		}
	})
	b.Run("parallel/distinct", func(b *testing.B) {
		var l stripe.Locks
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			s := next.Add(1) * 8 // each goroutine on its own stripes
			for pb.Next() {
				l.Lock(s, s+1)
				l.Unlock(s, s+1)
			}
		})
	})
	b.Run("parallel/shared-read", func(b *testing.B) {
		var l stripe.Locks
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.RLock(0, 3)
				l.RUnlock(0, 3)
			}
		})
	})
	b.Run("parallel/contended", func(b *testing.B) {
		var l stripe.Locks
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := next.Add(1)
			for pb.Next() {
				s := i % 16
				l.Lock(s, s+2)
				l.Unlock(s, s+2)
				i += 7
			}
		})
	})
}
