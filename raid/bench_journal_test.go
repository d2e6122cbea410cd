package raid_test

import (
	"fmt"
	"math/rand"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// BenchmarkWriteHole measures what the write-hole log (a partial parity
// log) costs: the same workload on the same shape with consistency policy
// bitmap (no log) and ppl, one after the other in the same run.
// bench/writehole.sh prints the ratios.
//
//   - seq-1M: sequential 1 MiB writes on a healthy array (mostly full
//     rows, which write no record; the rows at each end are partial);
//   - seq-64K: sequential 64 KiB writes on a healthy array, each a
//     partial row, with no stripe cache (Options.StripeCache 0);
//   - seq-64K-cache: the same with the stripe cache raidd serve uses
//     (DefaultStripeCache), which gathers them into full stripes;
//   - rand-4K: 4 KiB writes at random aligned offsets on a healthy array;
//   - degraded-rand-4K and degraded-seq-64K: the same with member 0
//     failed (RAID6: members 0 and 1), the case the log exists for
//     (degraded-seq-64K without the stripe cache: each write a partial
//     row; degraded-seq-64K-cache with it, as raidd serve runs).
//
// Members are memory (their Sync costs nothing): the numbers are the CPU
// and memory traffic of recording; on disks the sync that orders a record
// before its row's writes adds a flush per batch of concurrent records.
// Besides MB/s, each run reports cpu-ns/op: the process's user and system
// CPU time per write (workers included), which a machine shared with
// other work disturbs much less than wall time; and with the log, the
// records (recs/op) and checkpoints (ckpts/op) per write.
func BenchmarkWriteHole(b *testing.B) {
	type workload struct {
		name    string
		size    int64
		random  bool
		missing int
		cache   bool
	}
	for _, s := range []benchShape{{stripe.RAID5, 4}, {stripe.RAID6, 6}} {
		for _, w := range []workload{
			{"seq-1M", 1 << 20, false, 0, false},
			{"seq-64K", 64 << 10, false, 0, false},
			{"seq-64K-cache", 64 << 10, false, 0, true},
			{"rand-4K", 4 << 10, true, 0, false},
			{"degraded-rand-4K", 4 << 10, true, 1, false},
			{"degraded-seq-64K", 64 << 10, false, 1, false},
			{"degraded-seq-64K-cache", 64 << 10, false, 1, true},
		} {
			missing := w.missing
			if missing > 0 && s.level == stripe.RAID6 {
				missing = 2
			}
			for _, policy := range []raid.ConsistencyPolicy{raid.PolicyBitmap, raid.PolicyJournal} {
				b.Run(fmt.Sprintf("%s/members=%d/%s/policy=%s", s.level, s.n, w.name, policy), func(b *testing.B) {
					var devs []raid.Device
					for i := 0; i < s.n; i++ {
						devs = append(devs, raid.Device{Path: fmt.Sprint("mem", i), Member: member.NewMemory(memberSizeFor(benchChunk, 512))})
					}
					opts := raid.Options{CleanDelay: -1, KeepZeroes: true}
					if w.cache {
						opts.StripeCache = raid.DefaultStripeCache
					}
					a, err := raid.Create(devs, raid.CreateOptions{Name: "bench", Level: s.level, Chunk: benchChunk, ConsistencyPolicy: policy}, opts)
					require.NoError(b, err)
					b.Cleanup(func() { a.Close() })
					// Fill the array, so that degraded reads reconstruct real data.
					fill := make([]byte, a.Size())
					rand.New(rand.NewSource(3)).Read(fill)
					_, err = a.WriteAt(fill, 0)
					require.NoError(b, err)
					for m := range missing {
						failRole(b, a, m)
					}
					p := make([]byte, w.size)
					rng := rand.New(rand.NewSource(2))
					rng.Read(p)
					blocks := a.Size() / w.size
					b.SetBytes(w.size)
					b.ReportAllocs()
					off := int64(0)
					var j0 raid.JournalStatus
					if st := a.Status().Journal; st != nil {
						j0 = *st
					}
					cpu0 := cpuTime()
					for b.Loop() {
						if w.random {
							off = rng.Int63n(blocks) * w.size
						}
						if _, err := a.WriteAt(p, off); err != nil {
							b.Fatal(err)
						}
						if !w.random {
							off += w.size
							if off+w.size > a.Size() {
								off = 0
							}
						}
					}
					b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
					if st := a.Status().Journal; st != nil {
						b.ReportMetric(float64(st.Records-j0.Records)/float64(b.N), "recs/op")
						b.ReportMetric(float64(st.Checkpoints-j0.Checkpoints)/float64(b.N), "ckpts/op")
					}
				})
			}
		}
	}
}

// BenchmarkWriteHoleConcurrent measures the write-hole log under concurrent
// writers: 16 writers of 4 KiB at random offsets on a degraded RAID5
// (RAID6: two members failed), with policy bitmap and ppl one after the
// other, on two kinds of members:
//
//   - latency=0: memory members as they are (held in memory, so each
//     record is written at once by its own writer: journal.writeNow);
//   - latency=100µs: memory members that take 100 µs for every write and
//     every sync, as a disk with a write cache takes for a small write and
//     a flush. A record is then a log write and a sync of its parity
//     members before the row's writes, and the records of concurrent
//     writers share them (group commit).
//   - latency=100µs/cache: the same members with raidd serve's stripe
//     cache, which then holds the random writes (Options.RandomWriteBack:
//     the members are not held in memory) and writes them out up to 128 at
//     once; the run ends with a Sync, so that what the cache still holds
//     is counted.
//
// Besides MB/s each run reports records per log write (recs/logwrite; 0
// without the log), and the process's CPU time and context switches per
// write (cpu-ns/op, ctxsw/op), which a hand-off between goroutines shows
// in.
func BenchmarkWriteHoleConcurrent(b *testing.B) {
	for _, s := range []benchShape{{stripe.RAID5, 4}, {stripe.RAID6, 6}} {
		for _, c := range []struct {
			latency time.Duration
			cache   bool
		}{{0, false}, {100 * time.Microsecond, false}, {100 * time.Microsecond, true}} {
			for _, policy := range []raid.ConsistencyPolicy{raid.PolicyBitmap, raid.PolicyJournal} {
				benchWriteHoleConcurrent(b, s, c.latency, c.cache, policy)
			}
		}
	}
}

func benchWriteHoleConcurrent(b *testing.B, s benchShape, latency time.Duration, cache bool, policy raid.ConsistencyPolicy) {
	name := fmt.Sprintf("%s/members=%d/degraded-rand-4K/latency=%s", s.level, s.n, latency)
	if cache {
		name += "/cache"
	}
	b.Run(name+"/policy="+policy.String(), func(b *testing.B) {
		slow := membertest.InjectorFunc(func(op membertest.Op, off, n int64) error {
			if op == membertest.OpWrite || op == membertest.OpSync {
				time.Sleep(latency)
			}
			return nil
		})
		var devs []raid.Device
		for i := 0; i < s.n; i++ {
			var m raid.Member = member.NewMemory(memberSizeFor(benchChunk, 512))
			if latency > 0 {
				m = membertest.Inject(m, slow)
			}
			devs = append(devs, raid.Device{Path: fmt.Sprint("mem", i), Member: m})
		}
		opts := raid.Options{CleanDelay: -1, KeepZeroes: true}
		if cache {
			opts.StripeCache = raid.DefaultStripeCache
		}
		a, err := raid.Create(devs, raid.CreateOptions{Name: "bench", Level: s.level, Chunk: benchChunk, ConsistencyPolicy: policy}, opts)
		require.NoError(b, err)
		b.Cleanup(func() { a.Close() })
		missing := 1
		if s.level == stripe.RAID6 {
			missing = 2
		}
		for m := range missing {
			failRole(b, a, m)
		}
		var j0 raid.JournalStatus
		if st := a.Status().Journal; st != nil {
			j0 = *st
		}
		cpu0, sw0 := cpuTime(), ctxSwitches()
		b.SetBytes(4096)
		b.SetParallelism(8)
		b.ResetTimer()
		randomWrites4K(b, a)
		if cache {
			// The writes the cache still holds are part of the work.
			require.NoError(b, a.Sync())
		}
		b.StopTimer()
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(ctxSwitches()-sw0)/float64(b.N), "ctxsw/op")
		perWrite := 0.0
		if st := a.Status().Journal; st != nil && st.LogWrites > j0.LogWrites {
			perWrite = float64(st.Records-j0.Records) / float64(st.LogWrites-j0.LogWrites)
		}
		b.ReportMetric(perWrite, "recs/logwrite")
	})
}

// rusage returns the process's resource usage so far (zero if the call
// fails).
func rusage() syscall.Rusage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru
}

// ctxSwitches returns the context switches (voluntary and not) of the
// process's threads so far.
func ctxSwitches() int64 {
	ru := rusage()
	return ru.Nvcsw + ru.Nivcsw
}

// cpuTime returns the user and system CPU time the process has used.
func cpuTime() time.Duration {
	ru := rusage()
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
