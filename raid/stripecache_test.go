package raid_test

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/clock"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// cacheRig builds a parity array with a stripe cache on a fake clock, so
// that nothing is written out by deadline unless the test moves the clock.
func cacheRig(t *testing.T, level stripe.Level, n int, chunk, rows, cache int64) (*rig, *raid.Array, *clock.Fake, raid.Options) {
	t.Helper()
	r := newRig(n, memberSizeFor(chunk, rows))
	clk := clock.NewFake(time.Unix(1e9, 0))
	o := raid.WithClock(raid.Options{CleanDelay: -1, StripeCache: cache, StripeCacheDelay: 5 * time.Millisecond}, clk)
	a := createArray(t, r.devs, raid.CreateOptions{Name: "cache", Level: level, Chunk: chunk}, o)
	return r, a, clk, o
}

func (r *rig) faulty(i int) *membertest.Faulty {
	return r.devs[i].Member.(keep).Member.(*membertest.Faulty)
}

func (r *rig) memberReads() int64 {
	var n int64
	for i := range r.devs {
		n += r.faulty(i).Stats().Reads
	}
	return n
}

func readAll(t *testing.T, a *raid.Array) []byte {
	t.Helper()
	p := make([]byte, a.Size())
	_, err := a.ReadAt(p, 0)
	require.NoError(t, err)
	return p
}

// TestStripeCacheReads: partial-stripe writes are acknowledged from the
// cache without member writes, and every read, whether it covers cached
// bytes only, cached and member bytes, or several stripes, sees them. A
// Sync writes them out.
func TestStripeCacheReads(t *testing.T) {
	const chunk = 4 << 10
	for _, level := range []stripe.Level{stripe.RAID5, stripe.RAID6} {
		t.Run(level.String(), func(t *testing.T) {
			_, a, _, _ := cacheRig(t, level, 5, chunk, 8, 1<<20)
			width := a.Geometry().StripeWidth()
			want := make([]byte, a.Size())
			randomBytes(want[:2*width], 1)
			_, err := a.WriteAt(want[:2*width], 0) // two full stripes: written at once
			require.NoError(t, err)
			base := a.Status().Stats.MemberBytesWritten
			for _, w := range [][2]int64{{100, 5000}, {width + 7, 3 * chunk}, {2*width + chunk, 1}, {3*width - 10, 20}} {
				p := make([]byte, w[1])
				randomBytes(p, w[0])
				_, err := a.WriteAt(p, w[0])
				require.NoError(t, err)
				copy(want[w[0]:], p)
			}
			st := a.Status()
			assert.Equal(t, base, st.Stats.MemberBytesWritten, "partial-stripe writes stay in the cache")
			assert.Equal(t, int64(4), st.StripeCache.Stripes)
			for _, rd := range [][2]int64{{100, 5000}, {0, 4 * width}, {width, 1}, {width + 6, 3}, {3*width - 11, 12}, {2*width + chunk - 1, 3}} {
				p := make([]byte, rd[1])
				_, err := a.ReadAt(p, rd[0])
				require.NoError(t, err)
				assert.Equal(t, want[rd[0]:rd[0]+rd[1]], p, "read [%d,+%d)", rd[0], rd[1])
			}
			require.NoError(t, a.Sync())
			st = a.Status()
			assert.Zero(t, st.StripeCache.Stripes, "Sync writes out every cached stripe")
			assert.Greater(t, st.Stats.MemberBytesWritten, base)
			assert.Equal(t, want, readAll(t, a))
		})
	}
}

// TestStripeCacheFullStripes: a stream of writes that do not line up with
// the stripe width (each request crosses a stripe boundary) reaches the
// members as full stripes: no member reads at all, and the write
// amplification of parity alone. Without the cache the same stream costs
// reads and more parity writes.
func TestStripeCacheFullStripes(t *testing.T) {
	const chunk = 4 << 10
	const rows = 24
	run := func(t *testing.T, cache int64) (raid.Stats, int64) {
		r, a, _, _ := cacheRig(t, stripe.RAID5, 4, chunk, rows, cache)
		width := a.Geometry().StripeWidth() // 12 KiB
		req := int64(16 << 10)              // does not divide the width
		data := make([]byte, rows*width)
		randomBytes(data, 7)
		before := r.memberReads()
		for off := int64(0); off < int64(len(data)); off += req {
			end := min(off+req, int64(len(data)))
			_, err := a.WriteAt(data[off:end], off)
			require.NoError(t, err)
		}
		require.NoError(t, a.Sync())
		reads := r.memberReads() - before
		assert.Equal(t, data, readAll(t, a))
		return a.Status().Stats, reads
	}
	on, onReads := run(t, 1<<20)
	off, offReads := run(t, 0)
	t.Logf("with cache: amplification %.3f, %d member reads; without: %.3f, %d member reads", on.WriteAmplification, onReads, off.WriteAmplification, offReads)
	assert.Zero(t, onReads, "every stripe is written whole: no reads")
	assert.InDelta(t, 4.0/3.0, on.WriteAmplification, 1e-9)
	assert.Positive(t, offReads)
	assert.Greater(t, off.WriteAmplification, on.WriteAmplification)
}

// TestStripeCacheFUA: a FUA write to a stripe with cached pieces writes the
// stripe out with them and makes it durable; pieces of other stripes stay
// cached, and a power cut may lose them but never what FUA or Sync made
// durable.
func TestStripeCacheFUA(t *testing.T) {
	const chunk = 4 << 10
	const n = 4
	cs := make([]*membertest.Crashable, n)
	devs := make([]raid.Device, n)
	power := membertest.NewToggle(membertest.Always())
	for i := range cs {
		cs[i] = membertest.NewCrashable(memberSizeFor(chunk, 8))
		devs[i] = raid.Device{Path: fmt.Sprint("fua", i), Member: keep{membertest.Inject(cs[i], power)}}
	}
	clk := clock.NewFake(time.Unix(1e9, 0))
	o := raid.WithClock(raid.Options{CleanDelay: -1, StripeCache: 1 << 20}, clk)
	a, err := raid.Create(devs, raid.CreateOptions{Name: "fua", Level: stripe.RAID5, Chunk: chunk}, o)
	require.NoError(t, err)
	width := a.Geometry().StripeWidth()
	synced := bytes.Repeat([]byte{1}, 100)
	_, err = a.WriteAt(synced, 3*width+5) // stripe 3, cached, then synced
	require.NoError(t, err)
	require.NoError(t, a.Sync())
	early := bytes.Repeat([]byte{2}, 100)
	_, err = a.WriteAt(early, 10) // stripe 0, cached
	require.NoError(t, err)
	lost := bytes.Repeat([]byte{3}, 100)
	_, err = a.WriteAt(lost, width+10) // stripe 1, cached, never flushed
	require.NoError(t, err)
	fua := bytes.Repeat([]byte{4}, 100)
	_, err = a.WriteAtFUA(fua, 2000) // stripe 0 again, with FUA
	require.NoError(t, err)
	st := a.Status()
	assert.Equal(t, int64(1), st.StripeCache.Stripes, "the FUA wrote its stripe out; stripe 1 stays cached")

	powerCut(a, cs, power, 99)
	b := assembleArray(t, devs, raid.Options{CleanDelay: -1})
	waitIdle(t, b)
	got := readAll(t, b)
	assert.Equal(t, synced, got[3*width+5:3*width+105], "synced before the cut")
	assert.Equal(t, fua, got[2000:2100], "FUA")
	assert.Equal(t, early, got[10:110], "written out durably with the FUA write of its stripe")
	assert.Equal(t, make([]byte, 100), got[width+10:width+110], "cached only: lost in the cut")
}

// TestStripeCacheMemberFailure: members that fail while stripes are cached
// lose nothing. The cached pieces are read over degraded reads, written
// around the failed member, and survive reassembly without it; a member
// whose device fails during the write-out is failed and the write-out
// completes on the others.
func TestStripeCacheMemberFailure(t *testing.T) {
	const chunk = 4 << 10
	for _, level := range []stripe.Level{stripe.RAID5, stripe.RAID6} {
		t.Run(level.String(), func(t *testing.T) {
			r, a, _, o := cacheRig(t, level, 5, chunk, 8, 1<<20)
			width := a.Geometry().StripeWidth()
			want := make([]byte, a.Size())
			write := func(off, n int64, seed int64) {
				p := make([]byte, n)
				randomBytes(p, seed)
				_, err := a.WriteAt(p, off)
				require.NoError(t, err)
				copy(want[off:], p)
			}
			write(0, 4*width, 1)
			write(chunk+3, chunk, 2)       // stripe 0
			write(2*width+1, width-1, 3)   // stripe 2, up to its end
			write(5*width-chunk, chunk, 4) // stripe 4
			require.Equal(t, int64(3), a.Status().StripeCache.Stripes)

			require.NoError(t, a.FailMember(r.devs[1].Path), "the operator fails a member")
			assert.Equal(t, want, readAll(t, a), "degraded reads see the cached pieces")
			if level == stripe.RAID6 {
				r.toggles[3].On() // a second member's device dies: noticed at the write-out
			}
			require.NoError(t, a.Sync())
			st := a.Status()
			assert.Zero(t, st.StripeCache.Stripes)
			assert.False(t, st.Failed)
			assert.Equal(t, want, readAll(t, a))
			closeChecked(t, a)

			var devs []raid.Device
			for i, d := range r.devs {
				if i != 1 && !(level == stripe.RAID6 && i == 3) {
					devs = append(devs, d)
				}
			}
			b := assembleArray(t, devs, o)
			assert.True(t, b.Status().Degraded)
			assert.Equal(t, want, readAll(t, b), "written around the failed members")
		})
	}
}

// TestStripeCacheDeadline: a partial stripe is written out by itself once
// it has been cached for StripeCacheDelay.
func TestStripeCacheDeadline(t *testing.T) {
	const chunk = 4 << 10
	_, a, clk, _ := cacheRig(t, stripe.RAID5, 3, chunk, 8, 1<<20)
	_, err := a.WriteAt([]byte("cached for a while"), 100)
	require.NoError(t, err)
	require.Equal(t, int64(1), a.Status().StripeCache.Stripes)
	deadline := time.Now().Add(10 * time.Second)
	for a.Status().StripeCache.Stripes != 0 {
		require.True(t, time.Now().Before(deadline), "the flusher writes the stripe out after its deadline")
		if clk.WaitSleepers(1, time.Millisecond) {
			clk.Advance(time.Millisecond)
		}
	}
	st := a.Status()
	assert.Equal(t, int64(1), st.StripeCache.PartialWriteouts)
	assert.Positive(t, st.Stats.MemberBytesWritten)
}

// TestStripeCacheBounded: the cache never holds more stripes than its
// memory allows; when it is full, partial writes of other stripes go to the
// members at once, and everything still reads back.
func TestStripeCacheBounded(t *testing.T) {
	const chunk = 4 << 10
	_, a, _, _ := cacheRig(t, stripe.RAID5, 3, chunk, 16, 2*2*chunk) // two stripes
	width := a.Geometry().StripeWidth()
	want := make([]byte, a.Size())
	for s := int64(0); s < 6; s++ {
		p := make([]byte, 100)
		randomBytes(p, s)
		_, err := a.WriteAt(p, s*width+50)
		require.NoError(t, err)
		copy(want[s*width+50:], p)
	}
	st := a.Status().StripeCache
	assert.Equal(t, int64(2), st.Stripes)
	assert.Equal(t, 2*width, st.Limit)
	assert.Equal(t, int64(4), st.Bypassed)
	assert.Equal(t, want, readAll(t, a))
}

// TestStripeCacheDiscard: TRIM and WRITE_ZEROES over cached pieces win
// over them, whichever part of the stripe they cover.
func TestStripeCacheDiscard(t *testing.T) {
	const chunk = 4 << 10
	_, a, _, _ := cacheRig(t, stripe.RAID5, 4, chunk, 8, 1<<20)
	width := a.Geometry().StripeWidth()
	want := make([]byte, a.Size())
	p := make([]byte, width-200)
	randomBytes(p, 5)
	for _, off := range []int64{100, width + 100, 2*width + 100} {
		_, err := a.WriteAt(p, off)
		require.NoError(t, err)
		copy(want[off:], p)
	}
	require.NoError(t, a.Discard(0, width+300))
	clear(want[:width+300])
	require.NoError(t, a.WriteZeroes(2*width+1000, 10, true))
	clear(want[2*width+1000 : 2*width+1010])
	assert.Equal(t, want, readAll(t, a))
	require.NoError(t, a.Sync())
	assert.Equal(t, want, readAll(t, a))
}

// TestBlockSizes: the preferred NBD block size is the stripe width (chunk
// × data members), not a power of two below it (the nbd package rounds it
// up for the protocol).
func TestBlockSizes(t *testing.T) {
	for _, tc := range []struct {
		level stripe.Level
		n     int
		chunk int64
	}{{stripe.RAID5, 4, 64 << 10}, {stripe.RAID6, 6, 64 << 10}, {stripe.RAID0, 3, 4 << 10}, {stripe.RAID10, 4, 4 << 10}, {stripe.RAID1, 2, 4 << 10}} {
		t.Run(fmt.Sprintf("%s/members=%d", tc.level, tc.n), func(t *testing.T) {
			r := newRig(tc.n, memberSizeFor(tc.chunk, 4))
			a := createArray(t, r.devs, raid.CreateOptions{Name: "bs", Level: tc.level, Chunk: tc.chunk}, raid.Options{})
			minB, pref, maxB := a.BlockSizes()
			assert.Equal(t, uint32(1), minB)
			assert.Equal(t, uint32(a.Geometry().StripeWidth()), pref)
			assert.Equal(t, uint32(32<<20), maxB)
		})
	}
}

// TestFastZeroAt: FAST_ZERO is fast on every range of a level without
// parity, and on a parity level only for ranges that cover a whole stripe
// (a piece of one is a read-modify-write, the work of a WRITE).
func TestFastZeroAt(t *testing.T) {
	for _, tc := range []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID5, 4}, {stripe.RAID6, 5}, {stripe.RAID0, 3}, {stripe.RAID10, 4}, {stripe.RAID1, 2}} {
		t.Run(tc.level.String(), func(t *testing.T) {
			const chunk = 4 << 10
			r := newRig(tc.n, memberSizeFor(chunk, 8))
			a := createArray(t, r.devs, raid.CreateOptions{Name: "fz", Level: tc.level, Chunk: chunk}, raid.Options{})
			w := a.Geometry().StripeWidth()
			parity := tc.level == stripe.RAID5 || tc.level == stripe.RAID6
			for _, c := range []struct {
				off, n int64
				whole  bool // covers a whole stripe
			}{
				{0, w, true}, {w, w, true}, {0, w - 1, false}, {1, w, false}, {512, 4096, false},
				{w - 1, w + 1, true}, {w - 1, w, false}, {w / 2, 2 * w, true}, {3 * w, 2 * w, true},
			} {
				assert.Equal(t, !parity || c.whole, a.FastZeroAt(c.off, c.n), "FastZeroAt(%d, %d), stripe %d", c.off, c.n, w)
			}
		})
	}
}

// TestStripeCacheBlockStatus: bytes held in the stripe cache are data in
// BlockStatus, though the members still hold holes there; a copy tool that
// skips holes (nbdcopy) would otherwise drop acknowledged writes.
func TestStripeCacheBlockStatus(t *testing.T) {
	const chunk = 64 << 10
	dir := t.TempDir()
	var devs []raid.Device
	for i := 0; i < 4; i++ {
		p := filepath.Join(dir, fmt.Sprint("m", i))
		require.NoError(t, member.CreateSparse(p, memberSizeFor(chunk, 8)))
		f, err := member.Open(p, member.Options{})
		require.NoError(t, err)
		devs = append(devs, raid.Device{Path: p, Member: f})
	}
	clk := clock.NewFake(time.Unix(1e9, 0))
	a := createArray(t, devs, raid.CreateOptions{Name: "bs", Level: stripe.RAID5, Chunk: chunk},
		raid.WithClock(raid.Options{CleanDelay: -1, StripeCache: 1 << 20}, clk))
	width := a.Geometry().StripeWidth()
	_, err := a.WriteAt(make([]byte, width-chunk-100), width+chunk+100) // stripe 1 from its second chunk to its end: cached
	require.NoError(t, err)
	require.Equal(t, int64(1), a.Status().StripeCache.Stripes)
	l, zero, err := a.BlockStatus(width+chunk, chunk)
	require.NoError(t, err)
	assert.False(t, zero, "the cached chunk is data (even zeroes: a cached stripe is data)")
	assert.Equal(t, int64(chunk), l)
	l, zero, err = a.BlockStatus(width, chunk)
	require.NoError(t, err)
	assert.True(t, zero, "the chunk before it is still a hole")
	assert.Equal(t, int64(chunk), l)
	require.NoError(t, a.Sync())
	_, zero, err = a.BlockStatus(width+chunk, chunk)
	require.NoError(t, err)
	assert.False(t, zero, "written out: data on the members")
}

// TestStripeCacheSupersedeOrder: a full-stripe write drops the cached
// pieces it supersedes only after its member writes: a read issued while
// it runs, after an earlier partial write to the stripe was acknowledged,
// returns the earlier write's bytes or the new ones, never the older
// member contents.
func TestStripeCacheSupersedeOrder(t *testing.T) {
	const chunk = 4 << 10
	var armed atomic.Bool
	blocked, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	gate := membertest.InjectorFunc(func(op membertest.Op, off, n int64) error {
		if op == membertest.OpWrite && off >= superblock.HeaderSize && armed.Load() {
			once.Do(func() { close(blocked) })
			<-release
		}
		return nil
	})
	var devs []raid.Device
	for i := 0; i < 3; i++ {
		devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: membertest.Inject(member.NewMemory(memberSizeFor(chunk, 8)), gate)})
	}
	clk := clock.NewFake(time.Unix(1e9, 0))
	a := createArray(t, devs, raid.CreateOptions{Name: "order", Level: stripe.RAID5, Chunk: chunk, BitmapRegion: -1},
		raid.WithClock(raid.Options{CleanDelay: -1, StripeCache: 1 << 20}, clk))
	width := a.Geometry().StripeWidth()
	early := bytes.Repeat([]byte{0xaa}, 100)
	_, err := a.WriteAt(early, 0) // cached
	require.NoError(t, err)
	full := bytes.Repeat([]byte{0xbb}, int(width))
	armed.Store(true)
	wrote := make(chan error, 1)
	go func() { _, err := a.WriteAt(full, 0); wrote <- err }()
	<-blocked // the full-stripe write is at the members
	read := make(chan []byte, 1)
	go func() {
		p := make([]byte, 100)
		_, err := a.ReadAt(p, 0)
		assert.NoError(t, err)
		read <- p
	}()
	var got []byte
	select {
	case got = <-read: // returned while the write was held: must be the earlier write
	case <-time.After(100 * time.Millisecond): // waits for the write: fine
	}
	armed.Store(false)
	close(release)
	require.NoError(t, <-wrote)
	if got == nil {
		got = <-read
	}
	if !bytes.Equal(got, early) && !bytes.Equal(got, full[:100]) {
		t.Fatalf("read during the full-stripe write returned %#x..., neither the acknowledged earlier write nor the new one", got[:4])
	}
}

// TestStripeCacheRandomWrite: a write inside one stripe that neither
// touches a stripe boundary nor continues a recent write nor meets a cached
// stripe goes to the members at once; one that continues it is cached.
// (RandomWriteBack off: the rig's members are not held in memory, so the
// default would hold the random write; see TestStripeCacheRandomWriteBack.)
func TestStripeCacheRandomWrite(t *testing.T) {
	const chunk = 4 << 10
	r := newRig(4, memberSizeFor(chunk, 32))
	clk := clock.NewFake(time.Unix(1e9, 0))
	o := raid.WithClock(raid.Options{CleanDelay: -1, StripeCache: 1 << 20, StripeCacheDelay: 5 * time.Millisecond, RandomWriteBack: raid.WriteBackOff}, clk)
	a := createArray(t, r.devs, raid.CreateOptions{Name: "cache", Level: stripe.RAID5, Chunk: chunk}, o)
	width := a.Geometry().StripeWidth()
	// Far from any write (a fresh array counts writes near its start as
	// continuing one at 0).
	_, err := a.WriteAt(make([]byte, 100), 20*width+100)
	require.NoError(t, err)
	st := a.Status()
	assert.Zero(t, st.StripeCache.Stripes, "a random write is not held")
	assert.Positive(t, st.Stats.MemberBytesWritten)
	assert.Zero(t, st.StripeCache.Bypassed, "not a bypass: the cache was not full")
	_, err = a.WriteAt(make([]byte, 100), 20*width+200)
	require.NoError(t, err)
	assert.Equal(t, int64(1), a.Status().StripeCache.Stripes, "the write that continues it is cached")
}

// TestStripeCacheRandomWriteBack: on an array with the write-hole log whose
// members are not held in memory (RandomWriteBack's default), random
// partial writes are held in the stripe cache and acknowledged without
// member I/O; at their deadline the flusher writes them out side by side,
// so that their log records share log writes. Everything reads back,
// before and after the write-out, and after a restart.
//
// How many records a log write carries under free-running timing depends
// on how the machine schedules the write-outs (4 log writes on a quiet
// machine, 31 in a CI run under -race with the other packages' tests
// competing for the two CPUs); that figure is measured by bench/, not
// asserted here. What is asserted does not depend on scheduling: the
// first record write on each member's log is held until all 64 write-outs
// have queued their records (journal.append); every record queued while a
// log write is in flight then goes out in the next one, so the 64 records
// (16 per parity member) cost at most 8 log writes, 2 per member. With
// each write-out writing its own record (no group commit) they cost 64.
func TestStripeCacheRandomWriteBack(t *testing.T) {
	const chunk, n, writes = 16 << 10, 4, 64
	recStart := int64(superblock.HeaderSize + 4096)
	recEnd := int64(superblock.HeaderSize) + raid.JournalLength(n, chunk)
	var gate atomic.Bool
	release := make(chan struct{})
	var devs []raid.Device
	for i := range n {
		m := membertest.Inject(member.NewMemory(memberSizeFor(chunk, 4*writes)), membertest.InjectorFunc(func(op membertest.Op, off, _ int64) error {
			switch {
			case op == membertest.OpWrite && off >= recStart && off < recEnd && gate.Load():
				select {
				case <-release:
				case <-time.After(20 * time.Second):
					// The assertions below fail; never hang.
				}
			case op == membertest.OpSync:
				time.Sleep(time.Millisecond)
			}
			return nil
		}))
		devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: keep{m}})
	}
	clk := clock.NewFake(time.Unix(1e9, 0))
	width := int64(n-1) * chunk
	// Room for 3/2 of the writes: more than half the cache is in use, as
	// when the members do not keep up (stripeCache.saturated).
	o := raid.WithClock(raid.Options{CleanDelay: -1, StripeCache: writes * width * 3 / 2, StripeCacheDelay: 5 * time.Millisecond}, clk)
	a := createArray(t, devs, raid.CreateOptions{Name: "wb", Level: stripe.RAID5, Chunk: chunk}, o)
	want := readAll(t, a)
	st0 := a.Status()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for k := w; k < writes; k += 8 {
				// Row 3k (every parity member in turn), inside its second
				// chunk: no stripe boundary, no stream.
				off := int64(3*k)*width + chunk + 1000
				p := make([]byte, 512)
				randomBytes(p, int64(k))
				_, err := a.WriteAt(p, off)
				require.NoError(t, err)
				copy(want[off:], p)
			}
		})
	}
	wg.Wait()
	st := a.Status()
	require.Equal(t, int64(writes), st.StripeCache.Stripes, "every random write is held")
	assert.True(t, st.StripeCache.RandomWrites)
	assert.Equal(t, st0.Stats.MemberBytesWritten, st.Stats.MemberBytesWritten, "no member write before the deadline")
	assert.Equal(t, st0.Journal.Records, st.Journal.Records)
	assert.Equal(t, want, readAll(t, a), "reads see the held writes")

	gate.Store(true)
	deadline := time.Now().Add(20 * time.Second)
	for a.LogRecordsPending() < writes {
		require.True(t, time.Now().Before(deadline), "the flusher starts every write-out after the deadline (%d records queued)", a.LogRecordsPending())
		if clk.WaitSleepers(1, time.Millisecond) {
			clk.Advance(5 * time.Millisecond)
		}
	}
	gate.Store(false)
	close(release)
	for a.Status().StripeCache.Stripes != 0 {
		require.True(t, time.Now().Before(deadline), "the flusher writes the stripes out")
		if clk.WaitSleepers(1, time.Millisecond) {
			clk.Advance(5 * time.Millisecond)
		}
	}
	st = a.Status()
	records, logWrites := st.Journal.Records-st0.Journal.Records, st.Journal.LogWrites-st0.Journal.LogWrites
	assert.Equal(t, int64(writes), records, "every held write is recorded when it is written out")
	assert.LessOrEqual(t, logWrites, int64(2*n), "%d records queued together share log writes", records)
	t.Logf("%d records, %d log writes", records, logWrites)
	assert.Equal(t, want, readAll(t, a))
	require.NoError(t, a.Close())
	assert.Equal(t, want, readAll(t, assembleArray(t, devs, o)))
}

// TestStripeCacheRandomWriteInMemory: on members held in memory a log
// write is a copy, so RandomWriteBack's default sends random partial
// writes to the members at once; WriteBackOn holds them there too.
func TestStripeCacheRandomWriteInMemory(t *testing.T) {
	const chunk = 4 << 10
	for _, c := range []struct {
		wb   raid.WriteBack
		held int64
	}{{raid.WriteBackAuto, 0}, {raid.WriteBackOn, 1}} {
		var devs []raid.Device
		for i := range 4 {
			devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: member.NewMemory(memberSizeFor(chunk, 32))})
		}
		o := raid.WithClock(raid.Options{CleanDelay: -1, StripeCache: 1 << 20, RandomWriteBack: c.wb}, clock.NewFake(time.Unix(1e9, 0)))
		a := createArray(t, devs, raid.CreateOptions{Name: "mem", Level: stripe.RAID5, Chunk: chunk}, o)
		width := a.Geometry().StripeWidth()
		_, err := a.WriteAt(make([]byte, 100), 20*width+100)
		require.NoError(t, err)
		st := a.Status().StripeCache
		assert.Equal(t, c.held, st.Stripes, "RandomWriteBack %s", c.wb)
		assert.Equal(t, c.held == 1, st.RandomWrites, "status says whether random writes are held")
	}
}

// TestStripeCacheStreamOutOfOrder: the requests in flight of a stream reach
// the cache out of order, and a stripe's middle piece can come before its
// first piece and before the previous stripe's last: the nearest write
// that ended before it then ended more than a stripe width earlier. It is
// still part of the stream and is cached, so that the stripe is written
// whole when its other pieces come. Before, it went to the members at once
// as a partial write (reads, and on a degraded array a write-hole log
// record).
func TestStripeCacheStreamOutOfOrder(t *testing.T) {
	const chunk = 4 << 10
	r, a, _, _ := cacheRig(t, stripe.RAID5, 4, chunk, 16, 1<<20)
	width := a.Geometry().StripeWidth() // 3 chunks
	data := make([]byte, 4*width)
	randomBytes(data, 11)
	piece := func(row, i int64) {
		off := row*width + i*chunk
		_, err := a.WriteAt(data[off:off+chunk], off)
		require.NoError(t, err)
	}
	before := r.memberReads()
	piece(0, 0)
	piece(0, 1)
	piece(0, 2) // row 0 whole; the last end is width
	piece(2, 1) // row 2's middle piece, 1 chunk more than a width past it
	assert.Equal(t, int64(1), a.Status().StripeCache.Stripes, "the middle piece of row 2 is cached")
	for _, p := range [][2]int64{{1, 0}, {1, 1}, {1, 2}, {2, 0}, {2, 2}, {3, 1}, {3, 0}, {3, 2}} {
		piece(p[0], p[1])
	}
	st := a.Status()
	assert.Zero(t, st.StripeCache.Stripes, "every stripe was completed and written")
	assert.Zero(t, st.StripeCache.PartialWriteouts)
	assert.Zero(t, r.memberReads()-before, "every stripe is written whole: no reads")
	assert.Equal(t, data, readAll(t, a)[:len(data)])
}

// TestWriteAcrossRebuildEnd: a write whose op was taken while a
// rebuild's target was still unreadable, and that waited (here on a slow
// member read) until the rebuild had finished and a further member
// failed, must not fail, nor give cached pieces up. In the write's View
// the RAID6 array then missed three roles (two failed, one rebuilding)
// and the Layout gave up with ErrTooManyFailures before writing
// anything. Through the stripe cache the entry was dropped anyway, and
// reads, on an array that had lost two members and survived, returned
// the stale bytes the members still held (TestModel
// raid6/chunk=64K/members=4/cache, RAIDD_SEED=1796533714286923808); an
// uncached write, direct or gathered, failed with EIO.
func TestWriteAcrossRebuildEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    raid.Options
	}{
		{"cache-writeout", raid.Options{StripeCache: 1 << 20, StripeCacheDelay: time.Hour}},
		{"direct", raid.Options{NoCoalesce: true}},
		{"gathered", raid.Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) { testWriteAcrossRebuildEnd(t, tc.o) })
	}
}

func testWriteAcrossRebuildEnd(t *testing.T, o raid.Options) {
	const chunk, rows = 4 << 10, 8
	r := newRig(5, memberSizeFor(chunk, rows))
	// mem1 (role 1): once armed, its first read waits until released, and
	// once dead, every request fails.
	var armed, dead atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	gate := membertest.InjectorFunc(func(op membertest.Op, off, n int64) error {
		if armed.Load() && op == membertest.OpRead {
			once.Do(func() { close(entered); <-release })
		}
		if dead.Load() {
			return membertest.Always().MaybeError(op, off, n)
		}
		return nil
	})
	r.devs[1].Member = keep{membertest.Inject(r.mem[1], gate)}
	clk := clock.NewFake(time.Unix(1e9, 0))
	// The rebuild moves 1 MiB/s of fake time: it does its one window (every
	// row) at once, then waits on the clock before it finishes. The
	// flusher's deadline never comes.
	o.CleanDelay, o.RebuildMinRate, o.RebuildMaxRate = -1, 1<<20, 1<<20
	a := createArray(t, r.devs[:4], raid.CreateOptions{Name: "cache", Level: stripe.RAID6, Chunk: chunk}, raid.WithClock(o, clk))
	g := a.Geometry()
	width := g.StripeWidth()
	require.Equal(t, []int{2, 3, 0, 1}, []int{g.ParityMember(1), g.QMember(1), g.DataMember(1, 0), g.DataMember(1, 1)})
	want := make([]byte, a.Size())
	randomBytes(want, 1)
	_, err := a.WriteAt(want, 0) // whole stripes: not cached
	require.NoError(t, err)
	require.NoError(t, a.FailMember(r.devs[0].Path))
	require.NoError(t, a.FailMember(r.devs[2].Path))
	// Two pieces of stripe 1 (member row 1): the start of D0 (role 0) and
	// the end of D1 (role 1). The cache keeps them; without one they are
	// written at once, and the write that waits is the third.
	pieces := []int64{width, 2*width - 512, width + 1024}
	write := func(i int) error {
		p := make([]byte, 512)
		randomBytes(p, int64(10+i))
		copy(want[pieces[i]:], p)
		_, err := a.WriteAt(p, pieces[i])
		return err
	}
	for i := range 2 {
		require.NoError(t, write(i))
	}
	cached := o.StripeCache > 0
	if cached {
		require.Equal(t, int64(1), a.Status().StripeCache.Stripes)
	}

	require.NoError(t, a.AddMember(r.devs[4], false)) // rebuilds role 0 onto mem4
	waitUntil(t, "the rebuild has done every row", func() bool {
		rec := a.Status().Recovery // its position waits for the other worker's last sleep
		return rec != nil && rec.BytesMoved >= rows*chunk
	})
	armed.Store(true)
	done := make(chan error, 1)
	go func() {
		if cached {
			done <- a.Sync()
		} else {
			done <- write(2)
		}
	}()
	<-entered // the write has its op (mem4 unreadable in its View) and waits for mem1
	clk.Advance(time.Second)
	waitUntil(t, "the rebuild has finished", func() bool { return a.Status().Recovery == nil })
	dead.Store(true) // mem1 dies: roles 0 and 3 are left, which RAID6 survives
	close(release)

	assert.NoError(t, <-done, "the array survives: the write must not fail")
	st := a.Status()
	assert.False(t, st.Failed)
	if cached {
		assert.Zero(t, st.StripeCache.Stripes)
	}
	got := make([]byte, a.Size())
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	if !bytes.Equal(got, want) {
		t.Fatalf("read after the write: %s", firstDiff(got, want, 0))
	}
}

// waitUntil polls cond (in real time) until it holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting until %s", what)
		time.Sleep(time.Millisecond)
	}
}
