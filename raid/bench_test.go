package raid_test

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// BenchmarkMemcpy is the yardstick for the array benchmarks: how fast this
// machine copies memory, measured in the same run.
// The arrays below span 128 MiB of members, far beyond the caches, so the
// copy walks a buffer of the same size in 1 MiB pieces.
func BenchmarkMemcpy(b *testing.B) {
	const total, piece = 128 << 20, 1 << 20
	src, dst := make([]byte, total), make([]byte, total)
	// Touch every page first: otherwise the timed copies fault the pages
	// in (fresh memory), and a short run measures page faults, not copies
	// (78 MB/s in 4 of 5 runs here, 1953 MB/s in the one long enough to
	// get past them).
	for i := range src {
		src[i], dst[i] = byte(i), byte(i>>8)
	}
	b.SetBytes(piece)
	b.ReportAllocs()
	off := 0
	for b.Loop() {
		copy(dst[off:off+piece], src[off:off+piece])
		off = (off + piece) % total
	}
}

type benchShape struct {
	level stripe.Level
	n     int
}

var benchShapes = []benchShape{{stripe.RAID0, 4}, {stripe.RAID1, 2}, {stripe.RAID5, 4}, {stripe.RAID6, 6}, {stripe.RAID10, 4}}

const benchChunk = 64 << 10

// benchArray builds an array on plain memory members (no fault injection).
func benchArray(b *testing.B, s benchShape) (*raid.Array, []*member.Memory) {
	b.Helper()
	var devs []raid.Device
	var mems []*member.Memory
	for i := 0; i < s.n; i++ {
		m := member.NewMemory(memberSizeFor(benchChunk, 512)) // 32 MiB of data per member
		mems = append(mems, m)
		devs = append(devs, raid.Device{Path: fmt.Sprint("mem", i), Member: m})
	}
	a, err := raid.Create(devs, raid.CreateOptions{Name: "bench", Level: s.level, Chunk: benchChunk}, raid.Options{CleanDelay: -1, KeepZeroes: true})
	require.NoError(b, err)
	b.Cleanup(func() { a.Close() })
	return a, mems
}

// BenchmarkFullStripeWrite writes whole stripes sequentially: RAID5 computes
// parity without reading anything.
func BenchmarkFullStripeWrite(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(fmt.Sprintf("%s/members=%d", s.level, s.n), func(b *testing.B) {
			a, _ := benchArray(b, s)
			w := a.Geometry().StripeWidth()
			p := make([]byte, w)
			rand.New(rand.NewSource(1)).Read(p)
			b.SetBytes(w)
			b.ReportAllocs()
			off := int64(0)
			for b.Loop() {
				if _, err := a.WriteAt(p, off); err != nil {
					b.Fatal(err)
				}
				off += w
				if off+w > a.Size() {
					off = 0
				}
			}
		})
	}
}

// BenchmarkRandomWrite4K writes 4 KiB at random aligned offsets: RAID5 does a
// read-modify-write per request.
func BenchmarkRandomWrite4K(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(fmt.Sprintf("%s/members=%d", s.level, s.n), func(b *testing.B) {
			a, _ := benchArray(b, s)
			p := make([]byte, 4096)
			rng := rand.New(rand.NewSource(2))
			rng.Read(p)
			blocks := a.Size() / 4096
			b.SetBytes(4096)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.WriteAt(p, rng.Int63n(blocks)*4096); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRead reads 1 MiB sequentially; the degraded variant fails member
// 0 first, so RAID5 reconstructs from parity, and degraded2 (RAID6) fails
// members 0 and 1, so RAID6 reconstructs from P and Q.
func BenchmarkRead(b *testing.B) {
	for _, missing := range []int{0, 1, 2} {
		for _, s := range benchShapes {
			if missing > 0 && (s.level == stripe.RAID0 || (missing == 2 && s.level != stripe.RAID6)) {
				continue
			}
			name := fmt.Sprintf("%s/members=%d", s.level, s.n)
			switch missing {
			case 1:
				name += "/degraded"
			case 2:
				name += "/degraded2"
			}
			b.Run(name, func(b *testing.B) {
				a, _ := benchArray(b, s)
				p := make([]byte, 1<<20)
				if _, err := a.WriteAt(make([]byte, a.Size()), 0); err != nil {
					b.Fatal(err)
				}
				for m := range missing {
					failRole(b, a, m)
				}
				b.SetBytes(1 << 20)
				b.ReportAllocs()
				off := int64(0)
				for b.Loop() {
					if _, err := a.ReadAt(p, off); err != nil {
						b.Fatal(err)
					}
					off += 1 << 20
					if off+1<<20 > a.Size() {
						off = 0
					}
				}
			})
		}
	}
}

// BenchmarkUnalignedStream writes 256 KiB requests (nbdcopy's size) one
// after another, 8 in flight, onto a RAID5 of 4 members with 64 KiB chunks
// (stripe width 192 KiB): each request covers a stripe partly at one end or
// both. With the stripe cache the pieces are joined into full stripes;
// without it, concurrent pieces of one stripe are gathered only when they
// wait for its lock together. It reports the write amplification (full
// stripes: 1.333).
func BenchmarkUnalignedStream(b *testing.B) {
	const req, depth = 256 << 10, 8
	for _, cache := range []int64{0, raid.DefaultStripeCache} {
		b.Run(fmt.Sprintf("cache=%dMiB", cache>>20), func(b *testing.B) {
			var devs []raid.Device
			for i := 0; i < 4; i++ {
				devs = append(devs, raid.Device{Path: fmt.Sprint("mem", i), Member: member.NewMemory(memberSizeFor(benchChunk, 512))})
			}
			a, err := raid.Create(devs, raid.CreateOptions{Name: "bench", Level: stripe.RAID5, Chunk: benchChunk},
				raid.Options{CleanDelay: -1, KeepZeroes: true, StripeCache: cache})
			require.NoError(b, err)
			b.Cleanup(func() { a.Close() })
			p := make([]byte, req)
			rand.New(rand.NewSource(3)).Read(p)
			span := a.Size() / req * req
			b.SetBytes(req)
			b.ReportAllocs()
			var next atomic.Int64
			sem := make(chan struct{}, depth)
			var wg sync.WaitGroup
			for b.Loop() {
				off := next.Add(req) - req
				sem <- struct{}{}
				wg.Add(1)
				go func() {
					defer func() { <-sem; wg.Done() }()
					if _, err := a.WriteAt(p, off%span); err != nil {
						b.Error(err)
					}
				}()
			}
			wg.Wait()
			require.NoError(b, a.Sync())
			st := a.Status().Stats
			b.ReportMetric(st.WriteAmplification, "WA")
		})
	}
}
