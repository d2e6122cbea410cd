package raid_test

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// benchDir is where file-backed benchmarks put their members: /dev/shm when
// present (memory speed, as bench scripts compare), else a temp dir.
func benchDir(b *testing.B) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "raidd-bench")
		require.NoError(b, err)
		b.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return b.TempDir()
}

const benchMemberData = 256 << 20

func openFiles(b *testing.B, dir string, names []string, size int64) []raid.Device {
	var devs []raid.Device
	for _, n := range names {
		p := filepath.Join(dir, n)
		require.NoError(b, member.CreateSparse(p, size))
		f, err := member.Open(p, member.Options{})
		require.NoError(b, err)
		devs = append(devs, raid.Device{Path: p, Member: f})
	}
	return devs
}

// BenchmarkSeqWriteFile is the yardstick for rebuild: writing one member
// file sequentially in 1 MiB pieces, then syncing it.
func BenchmarkSeqWriteFile(b *testing.B) {
	dir := benchDir(b)
	p := make([]byte, 1<<20)
	rand.New(rand.NewSource(1)).Read(p)
	b.SetBytes(benchMemberData)
	for b.Loop() {
		devs := openFiles(b, dir, []string{"seq.img"}, benchMemberData)
		f := devs[0].Member
		for off := int64(0); off < benchMemberData; off += int64(len(p)) {
			if _, err := f.WriteAt(p, off); err != nil {
				b.Fatal(err)
			}
		}
		require.NoError(b, f.Sync())
		f.Close()
		os.Remove(devs[0].Path)
	}
}

// BenchmarkRebuild measures how fast a failed member is rebuilt onto a
// spare, in member bytes per second (compare with BenchmarkSeqWriteFile from
// the same run). The "written=10%" variants fill only a tenth of the array:
// rows that are holes on every source are rebuilt as holes without being
// read, so rebuild time follows the data written, not the array size.
func BenchmarkRebuild(b *testing.B) {
	cases := []struct {
		level   stripe.Level
		n       int
		chunk   int64
		written int // percent of the array written before the failure
	}{
		{stripe.RAID1, 2, 512 << 10, 100},
		{stripe.RAID5, 4, 64 << 10, 100},
		{stripe.RAID5, 4, 512 << 10, 100},
		{stripe.RAID5, 4, 512 << 10, 10},
	}
	for _, c := range cases {
		b.Run(fmt.Sprintf("%s/members=%d/chunk=%dK/written=%d%%", c.level, c.n, c.chunk>>10, c.written), func(b *testing.B) {
			dir := benchDir(b)
			b.SetBytes(benchMemberData)
			names := []string{"spare"}
			for i := 0; i < c.n; i++ {
				names = append(names, fmt.Sprint("m", i))
			}
			for b.Loop() {
				b.StopTimer()
				size := int64(superblock.HeaderSize + benchMemberData)
				devs := openFiles(b, dir, names, size)
				a, err := raid.Create(devs[1:], raid.CreateOptions{Name: "rb", Level: c.level, Chunk: c.chunk, Force: true}, raid.Options{CleanDelay: -1})
				require.NoError(b, err)
				p := make([]byte, 4<<20)
				rand.New(rand.NewSource(2)).Read(p)
				limit := a.Size() * int64(c.written) / 100
				for off := int64(0); off < limit; off += int64(len(p)) {
					_, err := a.WriteAt(p[:min(int64(len(p)), limit-off)], off)
					require.NoError(b, err)
				}
				require.NoError(b, a.FailMember(devs[2].Path))
				b.StartTimer()
				require.NoError(b, a.AddMember(devs[0], false))
				for a.Status().Recovery != nil {
					time.Sleep(200 * time.Microsecond)
				}
				b.StopTimer()
				require.False(b, a.Status().Degraded)
				a.Close()
				for _, d := range devs {
					os.Remove(d.Path)
				}
				b.StartTimer()
			}
		})
	}
}

// BenchmarkRebuildRateLimit rebuilds while a client writes continuously:
// the rebuild must run at its minimum rate. It reports the achieved rate
// as a fraction of the limit (target: within 0.8 to 1.2).
func BenchmarkRebuildRateLimit(b *testing.B) {
	const limit = 32 << 20
	const chunk = 64 << 10
	for b.Loop() {
		var devs []raid.Device
		for i := 0; i < 5; i++ {
			devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: member.NewMemory(superblock.HeaderSize + 64<<20)})
		}
		a, err := raid.Create(devs[:4], raid.CreateOptions{Name: "rl", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1, RebuildMinRate: limit})
		require.NoError(b, err)
		require.NoError(b, a.FailMember(devs[0].Path))
		var stop atomic.Bool
		done := make(chan struct{})
		go func() {
			defer close(done)
			rng := rand.New(rand.NewSource(3))
			p := make([]byte, 64<<10)
			for !stop.Load() {
				if _, err := a.WriteAt(p, rng.Int63n(a.Size()/int64(len(p)))*int64(len(p))); err != nil {
					b.Error(err)
					return
				}
			}
		}()
		start := time.Now()
		require.NoError(b, a.AddMember(devs[4], false))
		for a.Status().Recovery != nil {
			time.Sleep(time.Millisecond)
		}
		el := time.Since(start)
		stop.Store(true)
		<-done
		rate := float64(64<<20) / el.Seconds()
		b.ReportMetric(rate/limit, "rate/limit")
		b.ReportMetric(rate/(1<<20), "MiB/s")
		a.Close()
	}
}

// BenchmarkRebuildLimited rebuilds a RAID5 of file members under a rate
// limit, with the array 100% and 10% written. The limiter charges the bytes
// a row actually moves, and rows that were never written move none, so the
// 10% array should take about a tenth of the time. It reports the rebuild
// time as a fraction of what the limit allows for a full member
// (x-full-at-limit: about 1 for the full array, 0.1 for the 10% one).
func BenchmarkRebuildLimited(b *testing.B) {
	const limit = 256 << 20
	const chunk = 512 << 10
	for _, written := range []int{100, 10} {
		b.Run(fmt.Sprintf("written=%d%%", written), func(b *testing.B) {
			dir := benchDir(b)
			names := []string{"spare", "m0", "m1", "m2", "m3"}
			var total time.Duration
			for b.Loop() {
				b.StopTimer()
				devs := openFiles(b, dir, names, superblock.HeaderSize+benchMemberData)
				a, err := raid.Create(devs[1:], raid.CreateOptions{Name: "rl", Level: stripe.RAID5, Chunk: chunk, Force: true},
					raid.Options{CleanDelay: -1, RebuildMinRate: limit, RebuildMaxRate: limit})
				require.NoError(b, err)
				p := make([]byte, 4<<20)
				rand.New(rand.NewSource(2)).Read(p)
				end := a.Size() * int64(written) / 100
				for off := int64(0); off < end; off += int64(len(p)) {
					_, err := a.WriteAt(p[:min(int64(len(p)), end-off)], off)
					require.NoError(b, err)
				}
				require.NoError(b, a.FailMember(devs[2].Path))
				b.StartTimer()
				start := time.Now()
				require.NoError(b, a.AddMember(devs[0], false))
				for a.Status().Recovery != nil {
					time.Sleep(200 * time.Microsecond)
				}
				total += time.Since(start)
				b.StopTimer()
				require.False(b, a.Status().Degraded)
				a.Close()
				for _, d := range devs {
					os.Remove(d.Path)
				}
				b.StartTimer()
			}
			atLimit := float64(benchMemberData) / limit
			b.ReportMetric(total.Seconds()/float64(b.N)/atLimit, "x-full-at-limit")
		})
	}
}

// BenchmarkResyncAfterCrash dirties two bitmap regions, cuts the power and
// times the resync at assembly, for two array sizes: with the bitmap the
// time follows the dirty regions, not the array size.
func BenchmarkResyncAfterCrash(b *testing.B) {
	for _, memberData := range []int64{256 << 20, 1 << 30} {
		b.Run(fmt.Sprintf("raid5/member=%dMiB", memberData>>20), func(b *testing.B) {
			dir := benchDir(b)
			for b.Loop() {
				b.StopTimer()
				devs := openFiles(b, dir, []string{"m0", "m1", "m2", "m3"}, superblock.HeaderSize+memberData)
				a, err := raid.Create(devs, raid.CreateOptions{Name: "rs", Level: stripe.RAID5, Chunk: 512 << 10, Force: true}, raid.Options{CleanDelay: -1})
				require.NoError(b, err)
				p := make([]byte, 1<<20)
				rand.New(rand.NewSource(4)).Read(p)
				for _, off := range []int64{0, a.Size() / 2} { // two regions
					_, err := a.WriteAt(p, off)
					require.NoError(b, err)
				}
				a.Abandon()
				for _, d := range devs {
					d.Member.Close()
				}
				devs = openFiles(b, dir, []string{"m0", "m1", "m2", "m3"}, superblock.HeaderSize+memberData)
				b.StartTimer()
				c, err := raid.Assemble(devs, raid.Options{CleanDelay: -1})
				require.NoError(b, err)
				st := c.Status()
				for c.Status().Resync != nil {
					time.Sleep(100 * time.Microsecond)
				}
				b.StopTimer()
				rs := st.Resync
				if rs == nil {
					rs = st.LastResync
				}
				require.NotNil(b, rs)
				b.ReportMetric(float64(rs.Total), "rows-resynced")
				b.ReportMetric(float64(c.Geometry().Rows()), "rows-total")
				c.Close()
				for _, d := range devs {
					os.Remove(d.Path)
				}
				b.StartTimer()
			}
		})
	}
}
