package raid_test

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// BenchmarkTmpfsRandomWrite4K is bench/nbd.sh's random 4 KiB write job
// without the NBD server and fio: an array of 4 members of 512 MiB on
// tmpfs (/dev/shm), as raidd serve opens them (mapped, with the
// write-hole log and the stripe cache it uses), written end to end first
// (steady state), then written at random aligned offsets by one writer per
// CPU at once. Its members are as large as nbd.sh's so that their pages
// and page tables are out of the cache and the TLB as there; with one
// writer per CPU it also shows what writers on different CPUs cost each
// other (shared locks and counters, cache lines moving between CPUs),
// which BenchmarkRandomWrite4K, one writer on small memory members, does
// not. Besides MB/s it reports cpu-ns/op (the process's CPU time per
// write), steadier than wall time on a shared machine: with two CPUs, a
// cpu-ns/op below twice ns/op says the writers slept (bench/README.md,
// "Concurrent partial-row writers"); and faults/op, the page faults per
// write, about zero in this steady state (every page was written before).
func BenchmarkTmpfsRandomWrite4K(b *testing.B) {
	for _, level := range []stripe.Level{stripe.RAID0, stripe.RAID5} {
		b.Run(fmt.Sprintf("%s/members=4", level), func(b *testing.B) {
			dir := membertest.TmpfsDir(b)
			var devs []raid.Device
			for i := range 4 {
				p := filepath.Join(dir, fmt.Sprint("m", i))
				require.NoError(b, member.CreateSparse(p, 512<<20))
				f, err := member.Open(p, member.Options{})
				require.NoError(b, err)
				devs = append(devs, raid.Device{Path: p, Member: f})
			}
			a, err := raid.Create(devs, raid.CreateOptions{Name: "bench", Level: level, Chunk: 64 << 10},
				raid.Options{StripeCache: raid.DefaultStripeCache})
			require.NoError(b, err)
			b.Cleanup(func() { a.Close() })
			fill := make([]byte, 1<<20)
			rand.New(rand.NewSource(3)).Read(fill)
			for off := int64(0); off < a.Size(); off += int64(len(fill)) {
				_, err := a.WriteAt(fill[:min(int64(len(fill)), a.Size()-off)], off)
				require.NoError(b, err)
			}
			b.SetBytes(4096)
			b.ReportAllocs()
			cpu0, flt0 := cpuTime(), minorFaults()
			b.ResetTimer()
			randomWrites4K(b, a)
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(minorFaults()-flt0)/float64(b.N), "faults/op")
		})
	}
}

// minorFaults returns the page faults the process has taken that needed no
// I/O (on tmpfs: a page mapped, or allocated, on first touch).
func minorFaults() int64 { return rusage().Minflt }

// randomWrites4K writes 4 KiB at random aligned offsets of a, from the
// benchmark's parallel goroutines, until b.N writes are done.
func randomWrites4K(b *testing.B, a *raid.Array) {
	blocks := a.Size() / 4096
	var seed atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewSource(seed.Add(1)))
		p := make([]byte, 4096)
		rng.Read(p)
		for pb.Next() {
			if _, err := a.WriteAt(p, rng.Int63n(blocks)*4096); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
