package raid_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/clock"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// TestCrash cuts the power at random points of a random write workload on
// crashable members (each keeps its synced bytes plus a seeded random part
// of the rest, sector by sector), assembles the array again and checks:
// every byte made durable by a completed Sync or FUA write reads back; the
// resync after the unclean shutdown covers exactly the rows of the regions
// the write-intent bitmap marked; and afterwards mirrors and parity agree.
func TestCrash(t *testing.T) {
	seed := testSeed(t)
	shapes := []struct {
		level stripe.Level
		n     int
		cache bool // with a stripe cache: unflushed cached writes may be lost, flushed ones never
	}{{stripe.RAID0, 2, false}, {stripe.RAID1, 2, false}, {stripe.RAID5, 3, false}, {stripe.RAID5, 4, false}, {stripe.RAID6, 4, false}, {stripe.RAID6, 5, false}, {stripe.RAID10, 3, false},
		{stripe.RAID5, 3, true}, {stripe.RAID5, 4, true}, {stripe.RAID6, 5, true}}
	for _, s := range shapes {
		name := fmt.Sprintf("%s/members=%d", s.level, s.n)
		if s.cache {
			name += "/cache"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for trial := 0; trial < 6; trial++ {
				crashTrial(t, s.level, s.n, s.cache, seed+int64(trial)*7919+int64(s.level)*31+int64(s.n))
			}
		})
	}
}

func crashTrial(t *testing.T, level stripe.Level, n int, cache bool, seed int64) {
	crashTrialOpts(t, level, n, seed, false, cache, false)
}

// crashTrialOpts is crashTrial, with per-block checksums when checksums is
// set (see TestCrashChecksums) and a stripe cache when cache is; degraded
// assembles the array after the cut without its last member.
func crashTrialOpts(t *testing.T, level stripe.Level, n int, seed int64, checksums, cache, degraded bool) {
	const chunk = 16 << 10
	const rows = 32
	const region = 4 * chunk // 8 bitmap regions
	rng := rand.New(rand.NewSource(seed))
	cs := make([]*membertest.Crashable, n)
	devs := make([]raid.Device, n)
	power := membertest.NewToggle(membertest.Always()) // on: the power is cut
	for i := range cs {
		cs[i] = membertest.NewCrashable(memberSizeFor(chunk, rows) + csumRoom(checksums))
		devs[i] = raid.Device{Path: fmt.Sprint("crash", i), Member: keep{membertest.Inject(cs[i], power)}}
	}
	opts := raid.Options{CleanDelay: -1}
	if cache {
		// Room for a few stripes, so that it also fills; the deadline
		// (real time) writes some stripes out during the run, and the cut
		// finds others still cached.
		opts.StripeCache = 4 * chunk * int64(n)
		opts.StripeCacheDelay = time.Millisecond
		// Random partial writes held (the default with the write-hole
		// log on members not in memory) or written at once, by seed.
		if seed&1 == 1 {
			opts.RandomWriteBack = raid.WriteBackOff
		}
	}
	a, err := raid.Create(devs, raid.CreateOptions{Name: "crash", Level: level, Chunk: chunk, BitmapRegion: region, Checksums: checksums}, opts)
	require.NoError(t, err, "seed %d", seed)
	geo := a.Geometry()
	size := a.Size()
	o := newCrashOracle(size)
	// Confine the writes to two random regions' worth of rows, so the
	// bitmap has something to prove.
	rowsPer := int64(region / chunk)
	hot := map[int64]bool{rng.Int63n(rows / rowsPer): true, rng.Int63n(rows / rowsPer): true}
	var hotRanges [][2]int64 // array ranges whose rows lie in hot regions
	for off := int64(0); off < size; off += chunk {
		lo, hi := geo.RowRange(off, chunk)
		if hot[lo/rowsPer] && hot[hi/rowsPer] {
			hotRanges = append(hotRanges, [2]int64{off, off + chunk})
		}
	}
	require.NotEmpty(t, hotRanges)
	writtenRegions := map[int64]bool{}
	ops := 20 + rng.Intn(60)
	for i := 0; i < ops; i++ {
		hr := hotRanges[rng.Intn(len(hotRanges))]
		off := hr[0] + rng.Int63n(chunk)
		l := 1 + rng.Int63n(min(3*chunk, size-off))
		// Keep the range inside hot rows.
		for l > 1 {
			lo, hi := geo.RowRange(off, l)
			if hot[lo/rowsPer] && hot[hi/rowsPer] && hi/rowsPer-lo/rowsPer <= 1 && (hot[lo/rowsPer+1] || lo/rowsPer == hi/rowsPer) {
				break
			}
			l /= 2
		}
		lo, hi := geo.RowRange(off, l)
		for r := lo / rowsPer; r <= hi/rowsPer; r++ {
			writtenRegions[r] = true
		}
		switch k := rng.Intn(10); {
		case k < 6:
			p := make([]byte, l)
			rng.Read(p)
			_, err := a.WriteAt(p, off)
			require.NoError(t, err)
			o.write(off, p)
		case k < 8:
			p := make([]byte, l)
			rng.Read(p)
			_, err := a.WriteAtFUA(p, off)
			require.NoError(t, err)
			o.writeDurable(off, p)
		case k < 9:
			require.NoError(t, a.Discard(off, l))
			o.write(off, make([]byte, l))
		default:
			require.NoError(t, a.Sync())
			o.sync()
		}
	}
	powerCut(a, cs, power, seed)
	if degraded {
		devs = devs[:n-1]
	}
	b := assembleArray(t, devs, opts)
	st := b.Status()
	if degraded {
		require.True(t, st.Degraded, "seed %d", seed)
		waitIdle(t, b) // a mirror resyncs its copies; a parity level reseals its checksums
	} else if level != stripe.RAID0 || checksums {
		require.NotNil(t, st.Bitmap, "bitmap status")
		rs := st.Resync
		if rs == nil {
			rs = st.LastResync // it may already have finished
		}
		require.NotNil(t, rs, "seed %d: an unclean array must resync", seed)
		var wantRows int64
		for r := range writtenRegions {
			wantRows += min(rowsPer, rows-r*rowsPer)
		}
		assert.Equal(t, wantRows, rs.Total, "seed %d: resync must cover exactly the rows of the marked regions %v", seed, writtenRegions)
		assert.Less(t, rs.Total, int64(rows), "seed %d: resync must not cover the whole array", seed)
		waitIdle(t, b)
	}
	if degraded && !geo.Mirrored() {
		o.verifyMissing(t, b, fmt.Sprintf("seed %d: after the crash, degraded", seed), []int{n - 1})
	} else {
		o.verify(t, b, fmt.Sprintf("seed %d: after the crash", seed))
	}
	if level != stripe.RAID0 && !degraded {
		checkConsistent(t, b, "seed %d: consistency after resync", seed)
	}
	if checksums {
		// Blocks torn from their checksums by the crash lie in the marked
		// regions and were resealed, never reported as bad.
		cst := b.Status().Checksums
		assert.Zero(t, cst.Detected, "seed %d: a crash must not leave blocks failing their checksum", seed)
		assert.Zero(t, cst.Lost, "seed %d", seed)
	}
}

// csumRoom is the member space a checksum area of a crash test array takes.
func csumRoom(checksums bool) int64 {
	if checksums {
		return 64 << 10
	}
	return 0
}

// TestCrashChecksums is TestCrash on arrays with per-block checksums: the
// data and checksum writes of a block are not atomic, so a power cut can
// tear them apart; the write-intent bitmap (which RAID0 with checksums has
// too) marks where, the assembly resyncs and reseals those rows, and
// nothing that was durable fails its checksum or reads back wrong.
func TestCrashChecksums(t *testing.T) {
	crashChecksumShapes(t, false, levelShape{stripe.RAID0, 2}, levelShape{stripe.RAID1, 2}, levelShape{stripe.RAID5, 3}, levelShape{stripe.RAID6, 4}, levelShape{stripe.RAID10, 3})
}

type levelShape struct {
	level stripe.Level
	n     int
}

// crashChecksumShapes runs 4 crash trials with checksums on each shape,
// in parallel, assembling without the last member when degraded is set.
func crashChecksumShapes(t *testing.T, degraded bool, shapes ...levelShape) {
	seed := testSeed(t)
	for _, s := range shapes {
		t.Run(fmt.Sprintf("%s/members=%d", s.level, s.n), func(t *testing.T) {
			t.Parallel()
			for trial := 0; trial < 4; trial++ {
				crashTrialOpts(t, s.level, s.n, seed+int64(trial)*7919+int64(s.level)*31+int64(s.n), true, false, degraded)
			}
		})
	}
}

// TestCrashChecksumsDegraded is TestCrashChecksums with the array
// assembled after the cut without one member. A parity level cannot
// resync its rows then, but the checksums of the blocks a write in flight
// tore from theirs must still follow the data on the members present:
// they used to fail their checksums, and with them every block of the
// missing member whose reconstruction needs them, data made durable long
// before included (EIO).
func TestCrashChecksumsDegraded(t *testing.T) {
	crashChecksumShapes(t, true, levelShape{stripe.RAID1, 2}, levelShape{stripe.RAID5, 3}, levelShape{stripe.RAID5, 4}, levelShape{stripe.RAID6, 4}, levelShape{stripe.RAID10, 4})
}

// TestCrashDuringRebuild cuts the power while a mirror is being rebuilt
// onto a spare under client writes. After assembly the rebuild resumes
// (from its checkpoint, or earlier where the bitmap says writes were in
// flight), every byte made durable before the crash reads back, and once
// the rebuild is done the mirrors agree and the rebuilt member alone holds
// the data. RAID5 and RAID6 are degraded while they rebuild: their crash
// is the write hole, which the write-hole journal closes
// (RAIDD_WRITE_HOLE_POLICY=bitmap runs them without it).
func TestCrashDuringRebuild(t *testing.T) {
	seed := testSeed(t)
	policy := writeHolePolicy(t)
	for _, s := range []struct {
		level  stripe.Level
		n      int
		trials int64
	}{{stripe.RAID1, 2, 4}, {stripe.RAID10, 3, 4}, {stripe.RAID5, 4, 2}, {stripe.RAID6, 5, 2}} {
		t.Run(fmt.Sprintf("%s/members=%d", s.level, s.n), func(t *testing.T) {
			for trial := int64(0); trial < s.trials; trial++ {
				crashDuringRebuild(t, s.level, s.n, policy, seed+trial*104729)
			}
		})
	}
}

// writeHolePolicy is the consistency policy the crash tests create parity
// arrays with: the journal, or what RAIDD_WRITE_HOLE_POLICY says.
func writeHolePolicy(t *testing.T) raid.ConsistencyPolicy {
	p := os.Getenv("RAIDD_WRITE_HOLE_POLICY")
	if p == "" {
		return raid.PolicyJournal
	}
	policy, err := raid.ParseConsistencyPolicy(p)
	require.NoError(t, err)
	return policy
}

func crashDuringRebuild(t *testing.T, level stripe.Level, n int, policy raid.ConsistencyPolicy, seed int64) {
	const chunk = 8 << 10
	const rows = 128
	const rate = 64 // rows per second
	const rowTime = time.Second / rate
	rng := rand.New(rand.NewSource(seed))
	cs := make([]*membertest.Crashable, n+1)
	devs := make([]raid.Device, n+1)
	power := membertest.NewToggle(membertest.Always())
	for i := range cs {
		cs[i] = membertest.NewCrashable(memberSizeFor(chunk, rows))
		devs[i] = raid.Device{Path: fmt.Sprint("c", i), Member: keep{membertest.Inject(cs[i], power)}}
	}
	clk := clock.NewFake(time.Unix(1e9, 0))
	opts := raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate * chunk, RebuildMaxRate: rate * chunk, ProgressInterval: 150 * time.Millisecond}, clk)
	co := raid.CreateOptions{Name: "cr", Level: level, Chunk: chunk, BitmapRegion: 8 * chunk}
	if level == stripe.RAID5 || level == stripe.RAID6 {
		co.ConsistencyPolicy = policy
	}
	a, err := raid.Create(devs[:n], co, opts)
	require.NoError(t, err)
	size := a.Size()
	o := filledDurable(t, a, rng)
	require.NoError(t, a.FailMember(devs[0].Path))
	require.NoError(t, a.AddMember(devs[n], false)) // the rebuild starts, one row per rowTime
	// Write behind the rebuild (the first eighth of the array, which it
	// passes after about 16 rows) and cut the power later: torn writes then
	// hit rows below the checkpoint, which only the bitmap and resync cover.
	// The fake clock moves one row's time every 6 writes, once both rebuild
	// workers and the checkpointer sleep on it, so the rebuild does 40 rows
	// of 128 before the crash, whatever the machine's speed.
	for i := 0; i < 240; i++ {
		off := rng.Int63n(size/8 - 2*chunk)
		p := make([]byte, 1+rng.Intn(2*chunk))
		rng.Read(p)
		switch rng.Intn(30) { // syncs are rare, so torn writes pile up
		case 0:
			_, err = a.WriteAtFUA(p, off)
			require.NoError(t, err)
			o.writeDurable(off, p)
		case 1:
			require.NoError(t, a.Sync())
			o.sync()
			fallthrough
		default:
			_, err = a.WriteAt(p, off)
			require.NoError(t, err)
			o.write(off, p)
		}
		if i%6 == 5 {
			require.True(t, clk.WaitSleepers(jobSleepers, 10*time.Second), "seed %d: the rebuild does not wait for the clock", seed)
			clk.Advance(rowTime)
		}
	}
	st := a.Status()
	require.NotNil(t, st.Recovery, "seed %d: the crash must hit a running rebuild", seed)
	require.Greater(t, st.Recovery.Done, int64(rows/8), "seed %d: the rebuild must have passed the written rows", seed)
	powerCut(a, cs, power, seed)
	// Assemble without the failed member (it is gone), with the half-built spare.
	b := assembleArray(t, devs[1:], raid.Options{CleanDelay: -1})
	require.True(t, hasEvent(b.Status(), raid.EventRebuildStarted), "seed %d: the rebuild must resume", seed)
	st = waitIdle(t, b)
	require.False(t, st.Degraded, "seed %d: rebuild must complete: %+v", seed, st.Devices)
	got := o.verify(t, b, fmt.Sprintf("seed %d: after the resumed rebuild", seed))
	checkConsistent(t, b, "seed %d: mirrors after the resumed rebuild", seed)
	// Lose an original member: the rebuilt one must carry the same bytes.
	require.NoError(t, b.FailMember(devs[1].Path))
	requireContent(t, b, got, fmt.Sprintf("seed %d: without an original member", seed))
}

// jobSleepers is how many goroutines of a rate-limited recovery job sleep
// on the clock when it waits for the rate limiter: its two row workers and
// its checkpointer.
const jobSleepers = 3

// crashOracle knows, byte by byte, what an array may read after a crash:
// a byte made durable (by Sync, or by a FUA write) reads exactly its
// durable value; a byte written since reads its durable value or any of
// the values written to it since then (a discard writes zeroes). Nothing
// else is allowed: no byte from another offset, no stale parity garbage.
type crashOracle struct {
	// lost, when set, says whether byte b lies on a member missing after
	// the crash: written since it was durable, such a byte may read
	// anything (see verifyMissing).
	lost func(b int64) bool

	current []byte
	durable []byte
	// since[b] is 1 + the index in log of the first write to byte b after
	// it was last made durable; b is unsynced if since[b] > synced.
	since  []int32
	log    []oracleWrite // every write, in order
	synced int32         // len(log) at the last Sync
}

type oracleWrite struct {
	off  int64
	data []byte
}

// filledDurable writes random bytes over the whole of a, syncs them and
// returns an oracle that knows them as durable.
func filledDurable(t *testing.T, a *raid.Array, rng *rand.Rand) *crashOracle {
	t.Helper()
	o := newCrashOracle(a.Size())
	p := make([]byte, a.Size())
	rng.Read(p)
	_, err := a.WriteAt(p, 0)
	require.NoError(t, err)
	o.write(0, p)
	require.NoError(t, a.Sync())
	o.sync()
	return o
}

func newCrashOracle(size int64) *crashOracle {
	return &crashOracle{current: make([]byte, size), durable: make([]byte, size), since: make([]int32, size)}
}

func (o *crashOracle) unsynced(b int64) bool { return o.since[b] > o.synced }

// write records a write that returned but may not be durable.
func (o *crashOracle) write(off int64, p []byte) {
	o.log = append(o.log, oracleWrite{off: off, data: append([]byte(nil), p...)})
	idx := int32(len(o.log)) // 1 + its index
	copy(o.current[off:], p)
	for b := off; b < off+int64(len(p)); b++ {
		if !o.unsynced(b) {
			o.since[b] = idx
		}
	}
}

// writeDurable records a FUA write: its bytes are durable when it returns.
func (o *crashOracle) writeDurable(off int64, p []byte) {
	copy(o.current[off:], p)
	copy(o.durable[off:], p)
	clear(o.since[off : off+int64(len(p))])
}

// sync records a Sync that returned: everything written is durable.
func (o *crashOracle) sync() {
	copy(o.durable, o.current)
	o.synced = int32(len(o.log))
}

// verify reads the whole array and fails the test at the first byte that
// reads neither its durable value nor a value written to it since. It
// returns what it read.
func (o *crashOracle) verify(t *testing.T, a *raid.Array, what string) []byte {
	t.Helper()
	got := make([]byte, len(o.durable))
	_, err := a.ReadAt(got, 0)
	require.NoError(t, err, what)
	v, changed := o.check(got)
	if v != "" {
		t.Fatalf("%s: %s", what, v)
	}
	t.Logf("%s: %d unsynced bytes read a value written since they were durable, the rest their durable value", what, changed)
	return got
}

// verifyMissing is verify for an array assembled without the members
// missing: an unsynced byte whose chunk lies on one of them may read any
// value. The partial parity log, like md's PPL, rebuilds a missing
// member's bytes that a write not yet durable touched as neither old nor
// new (README, "The RAID5 write hole"); every other byte must hold.
func (o *crashOracle) verifyMissing(t *testing.T, a *raid.Array, what string, missing []int) []byte {
	t.Helper()
	geo := a.Geometry()
	o.lost = func(b int64) bool {
		e := geo.Extents(nil, b, 1)
		return slices.Contains(missing, e[0].Member)
	}
	defer func() { o.lost = nil }()
	return o.verify(t, a, what)
}

// violation describes the first byte of got the oracle does not allow, or
// returns "".
func (o *crashOracle) violation(got []byte) string {
	v, _ := o.check(got)
	return v
}

// check returns the first violation (or "") and how many bytes read a
// value other than their durable one. It compares block by block first,
// so that only the blocks that differ from the durable bytes are looked
// at byte by byte.
func (o *crashOracle) check(got []byte) (string, int) {
	const blk = 4096
	differs := make([]bool, (len(got)+blk-1)/blk)
	var ok []bool // for the bytes of differing blocks: allowed
	any := false
	for k := range differs {
		lo, hi := k*blk, min((k+1)*blk, len(got))
		differs[k] = !bytes.Equal(got[lo:hi], o.durable[lo:hi])
		any = any || differs[k]
	}
	if !any {
		return "", 0
	}
	ok = make([]bool, len(got))
	changed := 0
	for k, d := range differs {
		if !d {
			continue
		}
		for b := k * blk; b < min((k+1)*blk, len(got)); b++ {
			ok[b] = got[b] == o.durable[b]
			if !ok[b] {
				changed++
			}
		}
	}
	for j := int(o.synced); j < len(o.log); j++ {
		w := o.log[j]
		for k, v := range w.data {
			b := w.off + int64(k)
			if differs[b/blk] && !ok[b] && got[b] == v && o.unsynced(b) && int(o.since[b]) <= j+1 {
				ok[b] = true
			}
		}
	}
	for k, d := range differs {
		if !d {
			continue
		}
		for b := k * blk; b < min((k+1)*blk, len(got)); b++ {
			switch {
			case ok[b]:
			case o.unsynced(int64(b)) && o.lost != nil && o.lost(int64(b)):
			case !o.unsynced(int64(b)):
				return fmt.Sprintf("durable byte %d reads %#x, want %#x", b, got[b], o.durable[b]), changed
			default:
				return fmt.Sprintf("unsynced byte %d reads %#x: neither its durable value %#x nor a value of the %d writes since", b, got[b], o.durable[b], len(o.log)+1-int(o.since[b])), changed
			}
		}
	}
	return "", changed
}

// TestCrashOracle: the oracle accepts, byte by byte, the durable value or
// any value written since, and nothing else.
func TestCrashOracle(t *testing.T) {
	o := newCrashOracle(8)
	o.write(0, []byte{1, 1, 1, 1, 1, 1, 1, 1})
	o.sync()                       // durable: 1 everywhere
	o.write(0, []byte{2, 2, 2, 2}) // bytes 0-3 may read 1 or 2
	o.write(2, []byte{3, 3})       // bytes 2-3 may read 1, 2 or 3
	o.writeDurable(3, []byte{4})   // byte 3 is 4
	o.write(3, []byte{5, 5})       // bytes 3-4 may read 4/1 or 5
	o.write(6, make([]byte, 1))    // a discard: byte 6 may read 1 or 0
	for _, ok := range [][]byte{
		{1, 1, 1, 4, 1, 1, 1, 1}, // nothing kept
		{2, 2, 3, 5, 5, 1, 0, 1}, // everything kept
		{1, 2, 2, 4, 5, 1, 1, 1}, // a mix, per byte
	} {
		assert.Empty(t, o.violation(ok), "%v", ok)
	}
	for _, bad := range []struct {
		got  []byte
		want string
	}{
		{[]byte{1, 1, 1, 4, 1, 9, 1, 1}, "durable byte 5 reads 0x9"},  // a synced byte changed
		{[]byte{1, 1, 1, 4, 1, 1, 1, 0}, "durable byte 7 reads 0x0"},  // lost synced data
		{[]byte{3, 1, 1, 4, 1, 1, 1, 1}, "unsynced byte 0 reads 0x3"}, // a value written elsewhere
		{[]byte{1, 1, 1, 2, 1, 1, 1, 1}, "unsynced byte 3 reads 0x2"}, // written before a FUA write
		{[]byte{1, 1, 1, 4, 1, 1, 7, 1}, "unsynced byte 6 reads 0x7"}, // garbage
		{[]byte{1, 1, 1, 4, 4, 1, 1, 1}, "unsynced byte 4 reads 0x4"}, // another byte's value
	} {
		assert.Contains(t, o.violation(bad.got), bad.want, "%v", bad.got)
	}
	// A FUA write ends what earlier unsynced writes may leave behind.
	o.writeDurable(0, []byte{6})
	assert.Contains(t, o.violation([]byte{2, 1, 1, 4, 1, 1, 1, 1}), "durable byte 0 reads 0x2")
	o.sync()
	assert.Contains(t, o.violation([]byte{6, 1, 1, 4, 1, 1, 1, 1}), "durable byte 1 reads 0x1", "after a sync only the last values are allowed")
	assert.Empty(t, o.violation([]byte{6, 2, 3, 5, 5, 1, 0, 1}))
}

// powerCut stops the array as a power failure would: from the cut on, no
// member accepts anything (so nothing the array does while it winds down
// reaches them), then each member keeps its synced bytes and a seeded
// random part of the rest, and the power comes back.
func powerCut(a *raid.Array, cs []*membertest.Crashable, power *membertest.Toggle, seed int64) {
	power.On()
	a.Abandon()
	for i, c := range cs {
		c.Crash(seed + int64(i))
	}
	power.Off()
}

// TestCrashWriteHole is the write hole of parity RAID: concurrent
// partial-stripe writes, a power cut, and an assembly with a member
// missing: one that was already missing while the writes ran (degraded),
// one that comes back missing after the crash, or both on RAID6. Without
// the write-hole journal a torn row's parity no longer matches its data,
// and the missing member's chunk, rebuilt from them, is garbage even where
// no write touched it. With it (the default) the oracle holds: every byte
// made durable by FLUSH or FUA reads back, every byte the crashed writes
// did not touch reads its old value, including the chunks reconstructed
// for the missing members, and every byte they touched reads its old value
// or one written since.
//
// RAIDD_WRITE_HOLE_POLICY=bitmap runs the same test without the journal,
// to show that it fails then.
func TestCrashWriteHole(t *testing.T) {
	policy := writeHolePolicy(t)
	runHoleShapes(t, []holeShape{
		{stripe.RAID5, 3, 1, 0},
		{stripe.RAID5, 4, 1, 0},
		{stripe.RAID5, 4, 0, 1},
		{stripe.RAID6, 4, 1, 1},
		{stripe.RAID6, 5, 2, 0},
		{stripe.RAID6, 5, 0, 2},
	}, 4, func(t *testing.T, s holeShape, seed int64) {
		writeHoleTrial(t, s.level, s.n, s.failed, s.lost, policy, seed)
	})
}

// holeShape is an array shape of the write-hole tests: failed members
// missing while writing, lost more missing after the crash.
type holeShape struct {
	level        stripe.Level
	n            int
	failed, lost int
}

// runHoleShapes runs trial trials times on each shape, the shapes side by
// side, each trial with a seed of its own derived from the test's.
func runHoleShapes(t *testing.T, shapes []holeShape, trials int, trial func(t *testing.T, s holeShape, seed int64)) {
	seed := testSeed(t)
	for _, s := range shapes {
		t.Run(fmt.Sprintf("%s/members=%d/failed=%d/lost=%d", s.level, s.n, s.failed, s.lost), func(t *testing.T) {
			t.Parallel()
			for k := 0; k < trials; k++ {
				trial(t, s, seed+int64(k)*7919+int64(s.level)*31+int64(s.n)+int64(s.failed)*101)
			}
		})
	}
}

func writeHoleTrial(t *testing.T, level stripe.Level, n, failed, lost int, policy raid.ConsistencyPolicy, seed int64) {
	const writers = 4
	rng := rand.New(rand.NewSource(seed))
	w := newHoleArray(t, level, n, failed, 16, policy, false, rng, seed)
	a, o := w.a, w.o
	// Rounds of concurrent writes, each inside one chunk and shorter than
	// it (so every row write is partial), writer w owning the chunks c with
	// c%writers == w so that no two writes overlap; between rounds a Sync,
	// sometimes.
	var mu sync.Mutex
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		for k := 0; k < writers; k++ {
			wrng := rand.New(rand.NewSource(rng.Int63()))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					off, buf := w.partialWrite(wrng, k, writers)
					fua := wrng.Intn(10) == 0
					var err error
					if fua {
						_, err = a.WriteAtFUA(buf, off)
					} else {
						_, err = a.WriteAt(buf, off)
					}
					if !assert.NoError(t, err, "seed %d", seed) {
						return
					}
					mu.Lock()
					if fua {
						o.writeDurable(off, buf)
					} else {
						o.write(off, buf)
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if round < 2 && rng.Intn(2) == 0 {
			require.NoError(t, a.Sync())
			o.sync()
		}
	}
	require.False(t, t.Failed())
	powerCut(a, w.cs, w.power, seed)
	missing := w.roles[:failed+lost]
	b := w.assembleWithout(t, missing)
	st := b.Status()
	require.True(t, st.Degraded, "seed %d", seed)
	if policy != raid.PolicyBitmap {
		require.NotNil(t, st.Journal, "seed %d", seed)
		assert.Equal(t, "ppl", st.ConsistencyPolicy)
	}
	what := fmt.Sprintf("seed %d: %s missing roles %v after the crash (%v while writing)", seed, level, missing, w.roles[:failed])
	if policy == raid.PolicyBitmap {
		o.verify(t, b, what) // no protection claimed: shown to fail
	} else {
		o.verifyMissing(t, b, what, missing)
	}
}

// holeArray is a parity array of 16 KiB chunks on crashable members,
// filled with durable old values, with some members failed: the write-hole
// tests' starting point.
type holeArray struct {
	a     *raid.Array
	cs    []*membertest.Crashable
	devs  []raid.Device
	power *membertest.Toggle // on: the power is cut
	o     *crashOracle
	roles []int // the roles in a random order: the first failed ones are failed
	opts  raid.Options
}

const holeChunk = 16 << 10

// newHoleArray creates a holeArray of n members of rows rows with the
// given policy, its members saying they are held in memory when held, and
// fails failed of them.
func newHoleArray(t *testing.T, level stripe.Level, n, failed int, rows int64, policy raid.ConsistencyPolicy, held bool, rng *rand.Rand, seed int64) *holeArray {
	w := &holeArray{cs: make([]*membertest.Crashable, n), devs: make([]raid.Device, n),
		power: membertest.NewToggle(membertest.Always()), opts: raid.Options{CleanDelay: -1}}
	for i := range w.cs {
		w.cs[i] = membertest.NewCrashable(memberSizeFor(holeChunk, rows))
		k := keep{membertest.Inject(w.cs[i], w.power)}
		var m raid.Member = k
		if held {
			m = heldCrashable{k}
		}
		w.devs[i] = raid.Device{Path: fmt.Sprint("wh", i), Member: m}
	}
	var err error
	w.a, err = raid.Create(w.devs, raid.CreateOptions{Name: "wh", Level: level, Chunk: holeChunk, BitmapRegion: 4 * holeChunk, ConsistencyPolicy: policy}, w.opts)
	require.NoError(t, err, "seed %d", seed)
	w.o = filledDurable(t, w.a, rng) // old values everywhere, durable
	w.roles = rng.Perm(n)
	for _, r := range w.roles[:failed] {
		require.NoError(t, w.a.FailMember(w.devs[r].Path), "seed %d", seed)
	}
	return w
}

// partialWrite picks a write inside one chunk and shorter than it, so
// that every row write is partial, in a chunk c of writer k's (c%writers
// == k, so that no two writers' writes overlap, though they share rows).
func (w *holeArray) partialWrite(rng *rand.Rand, k, writers int) (off int64, buf []byte) {
	c := rng.Int63n(w.a.Size()/holeChunk/int64(writers))*int64(writers) + int64(k)
	in := rng.Int63n(holeChunk - 1)
	buf = make([]byte, 1+rng.Int63n(min(holeChunk-1, holeChunk-in))) // never the whole chunk
	rng.Read(buf)
	return c*holeChunk + in, buf
}

// assembleWithout assembles the array again without the members of the
// roles missing.
func (w *holeArray) assembleWithout(t *testing.T, missing []int) *raid.Array {
	var keepDevs []raid.Device
	for r := range w.devs {
		if !slices.Contains(missing, r) {
			keepDevs = append(keepDevs, w.devs[r])
		}
	}
	return assembleArray(t, keepDevs, w.opts)
}

// TestCrashPartialParityReplays: a partial-stripe row write whose record
// was synced, torn by a power cut that lost its parity writes but kept its
// data, and an assembly without the row's untouched data members (on RAID6
// two of them, or one and P): they are rebuilt from a parity only the
// replay of the partial parity record made right, so they read their old
// bytes; the written bytes read new. The write also covers a full row
// before it, which records nothing; its writes, queued first, must not
// keep the partial row from being recorded. With the bitmap policy (no
// log) the same crash leaves the untouched chunks reading garbage: the
// test can tell.
func TestCrashPartialParityReplays(t *testing.T) {
	for _, s := range []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID5, 3}, {stripe.RAID5, 4}, {stripe.RAID6, 4}, {stripe.RAID6, 5}} {
		for _, policy := range []raid.ConsistencyPolicy{raid.PolicyJournal, raid.PolicyBitmap} {
			t.Run(fmt.Sprintf("%s/members=%d/%s", s.level, s.n, policy), func(t *testing.T) {
				const chunk = 16 << 10
				cs := make([]*membertest.Crashable, s.n)
				devs := make([]raid.Device, s.n)
				power := membertest.NewToggle(membertest.Always())
				for i := range cs {
					cs[i] = membertest.NewCrashable(memberSizeFor(chunk, 8))
					devs[i] = raid.Device{Path: fmt.Sprint("j", i), Member: keep{membertest.Inject(cs[i], power)}}
				}
				opts := raid.Options{CleanDelay: -1}
				a, err := raid.Create(devs, raid.CreateOptions{Name: "j", Level: s.level, Chunk: chunk, ConsistencyPolicy: policy}, opts)
				require.NoError(t, err)
				geo := a.Geometry()
				w := geo.StripeWidth()
				dk := geo.DataMembers()
				old := make([]byte, 3*w)
				rand.New(rand.NewSource(1)).Read(old)
				_, err = a.WriteAt(old, 0)
				require.NoError(t, err)
				require.NoError(t, a.Sync())
				// Row 1 whole, then the first 5000 bytes of row 2 (data index 0).
				p := make([]byte, w+5000)
				rand.New(rand.NewSource(2)).Read(p)
				_, err = a.WriteAt(p, w)
				require.NoError(t, err)
				power.On()
				a.Abandon()
				parities := []int{geo.ParityMember(2)}
				if s.level == stripe.RAID6 {
					parities = append(parities, geo.QMember(2))
				}
				for m, c := range cs {
					if slices.Contains(parities, m) {
						c.CrashKeep(0, 0) // row 2's parity writes are lost
					} else {
						c.CrashKeep(0, 1) // the data writes are kept
					}
				}
				power.Off()
				// Missing: row 2's last data member, and on RAID6 the one
				// before it (or P when there is none untouched).
				missing := []int{geo.DataMember(2, dk-1)}
				if s.level == stripe.RAID6 {
					if dk > 2 {
						missing = append(missing, geo.DataMember(2, dk-2))
					} else {
						missing = append(missing, geo.ParityMember(2))
					}
				}
				var keepDevs []raid.Device
				for m := range devs {
					if !slices.Contains(missing, m) {
						keepDevs = append(keepDevs, devs[m])
					}
				}
				b := assembleArray(t, keepDevs, opts)
				got := make([]byte, 3*w)
				_, err = b.ReadAt(got, 0)
				require.NoError(t, err)
				want := bytes.Clone(old)
				copy(want[2*w:], p[w:]) // row 2's written bytes were kept
				bad := -1
				for i := range want {
					if i >= int(w) && i < int(2*w) {
						continue // row 1 (full stripe, no record) is torn: not checked
					}
					if got[i] != want[i] {
						bad = i
						break
					}
				}
				if policy == raid.PolicyBitmap {
					require.NotEqual(t, -1, bad, "without the log the untouched chunks of row 2 read garbage")
					return
				}
				require.Equal(t, -1, bad, "byte %d (row %d) reads %#x, want %#x", bad, int64(bad)/w, got[max(bad, 0)], want[max(bad, 0)])
				require.EqualValues(t, 1, b.Status().Journal.Replayed, "one partial row was recorded")
			})
		}
	}
}

// TestJournalLegacyLog: a dirty array whose log the previous raidd wrote
// (format version 1, a redo log of data and parity) is replayed its way:
// the record's bytes reach the members, and the rebuilt chunk of a member
// missing after the crash reads them. A log of a format this build does
// not know is refused, never read as another.
func TestJournalLegacyLog(t *testing.T) {
	const chunk = 16 << 10
	setup := func(t *testing.T) ([]*membertest.Crashable, []raid.Device, raid.Options, []byte, *superblock.Meta, stripe.Geometry) {
		cs := make([]*membertest.Crashable, 4)
		devs := make([]raid.Device, 4)
		for i := range cs {
			cs[i] = membertest.NewCrashable(memberSizeFor(chunk, 8))
			devs[i] = raid.Device{Path: fmt.Sprint("l", i), Member: keep{cs[i]}}
		}
		opts := raid.Options{CleanDelay: -1}
		a, err := raid.Create(devs, raid.CreateOptions{Name: "l", Level: stripe.RAID5, Chunk: chunk}, opts)
		require.NoError(t, err)
		old := make([]byte, 3*a.Geometry().StripeWidth())
		rand.New(rand.NewSource(1)).Read(old)
		_, err = a.WriteAt(old, 0)
		require.NoError(t, err)
		require.NoError(t, a.Sync())
		geo := a.Geometry()
		a.Abandon() // dirty, everything durable
		m, err := superblock.Read(cs[0])
		require.NoError(t, err)
		return cs, devs, opts, old, m, geo
	}
	t.Run("version1", func(t *testing.T) {
		cs, devs, opts, old, m, geo := setup(t)
		// Row 1, data index 0: 5000 new bytes, and the parity they make.
		const row = 1
		w := geo.StripeWidth()
		data := make([]byte, 5000)
		rand.New(rand.NewSource(2)).Read(data)
		par := make([]byte, 5000)
		for i := range geo.DataMembers() {
			src := old[row*w+int64(i)*chunk:]
			if i == 0 {
				src = data
			}
			for k := range par {
				par[k] ^= src[k]
			}
		}
		pm := geo.ParityMember(row)
		log := raid.LegacyLog(m.ArrayUUID, 1<<40, 7, row, []raid.LegacyPiece{
			{Role: geo.DataMember(row, 0), Off: row * chunk, Data: data},
			{Role: pm, Off: row * chunk, Data: par},
		})
		_, err := cs[pm].WriteAt(log, int64(m.LogOffset))
		require.NoError(t, err)
		// The member holding row 1's data index 1 is lost.
		lost := geo.DataMember(row, 1)
		var keepDevs []raid.Device
		for r := range devs {
			if r != lost {
				keepDevs = append(keepDevs, devs[r])
			}
		}
		b := assembleArray(t, keepDevs, opts)
		got := make([]byte, len(old))
		_, err = b.ReadAt(got, 0)
		require.NoError(t, err)
		want := bytes.Clone(old)
		copy(want[row*w:], data)
		require.Equal(t, want, got, "the version 1 record was replayed: its data reads back, and the rebuilt chunk reads its old bytes")
		require.EqualValues(t, 1, b.Status().Journal.Replayed)
	})
	t.Run("unknown-version", func(t *testing.T) {
		cs, devs, opts, _, m, _ := setup(t)
		_, err := cs[1].WriteAt(raid.FutureLogHeader(m.ArrayUUID, 1<<40), int64(m.LogOffset))
		require.NoError(t, err)
		_, err = raid.Assemble(devs, opts)
		require.ErrorIs(t, err, raid.ErrJournal)
		assert.Contains(t, err.Error(), "a newer raidd wrote this log")
	})
}

// TestCrashWriteHoleInMemory is the write hole on members held in memory
// (tmpfs files, whose sync is a no-op): raidd is killed while concurrent
// partial-stripe writes run, and comes back with a member missing (failed
// before the writes, or lost after). There a write that returned is
// durable, before any FLUSH: the killed process leaves every byte it
// copied in the members' pages. So the journal keeps no spans of earlier
// writes in a record's W (journal.keep), and the test holds it to more
// than TestCrashWriteHole does: every write that returned reads back
// exactly, on the missing member too, and only the writes the kill cut
// may read old or new bytes (any bytes on the missing member).
//
// The members are crashable ones that say they are held in memory; the
// kill is a power cut after which every operation a member accepted is
// kept, and nothing later reaches it. RAIDD_WRITE_HOLE_POLICY=bitmap
// runs it without the journal, to show that it fails then.
func TestCrashWriteHoleInMemory(t *testing.T) {
	policy := writeHolePolicy(t)
	runHoleShapes(t, []holeShape{
		{stripe.RAID5, 3, 1, 0},
		{stripe.RAID5, 4, 0, 1},
		{stripe.RAID6, 5, 1, 1},
		{stripe.RAID6, 5, 0, 2},
	}, 6, func(t *testing.T, s holeShape, seed int64) {
		killedWritesTrial(t, s.level, s.n, s.failed, s.lost, policy, seed)
	})
}

// heldCrashable is a crashable member that says it is held in memory.
type heldCrashable struct{ keep }

func (heldCrashable) InMemory() bool { return true }

func killedWritesTrial(t *testing.T, level stripe.Level, n, failed, lost int, policy raid.ConsistencyPolicy, seed int64) {
	const writers = 4
	rng := rand.New(rand.NewSource(seed))
	// Few rows: each takes several writes before the kill.
	w := newHoleArray(t, level, n, failed, 8, policy, true, rng, seed)
	a, o := w.a, w.o
	var slotted int64
	if j := a.Status().Journal; j != nil {
		slotted = j.SlotBytes
	}
	// The kill comes once kill writes have returned, while the others run.
	kill := int64(8 + rng.Intn(40))
	var done atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k := 0; k < writers; k++ {
		wrng := rand.New(rand.NewSource(rng.Int63()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				off, buf := w.partialWrite(wrng, k, writers)
				_, err := a.WriteAt(buf, off)
				mu.Lock()
				if err == nil {
					o.writeDurable(off, buf) // held in memory: durable once it returns
				} else {
					o.write(off, buf) // cut by the kill: old or new bytes
				}
				mu.Unlock()
				if err != nil {
					return
				}
				if done.Add(1) == kill {
					w.power.On()
				}
			}
		}()
	}
	wg.Wait()
	a.Abandon()
	for _, c := range w.cs {
		c.CrashKeep(0, 1) // the pages keep everything they were given
	}
	w.power.Off()
	missing := w.roles[:failed+lost]
	b := w.assembleWithout(t, missing)
	st := b.Status()
	require.True(t, st.Degraded, "seed %d", seed)
	if st.Journal != nil {
		t.Logf("seed %d: %d records replayed", seed, st.Journal.Replayed)
		require.Positive(t, slotted, "seed %d: members held in memory: a slotted log", seed)
	}
	o.verifyMissing(t, b, fmt.Sprintf("seed %d: %s killed, missing roles %v after (%v while writing)", seed, level, missing, w.roles[:failed]), missing)
}

// TestSlottedLogClearsRecords: in a slotted log (members held in memory) a
// record's slot is cleared once its row write is done, so no record of a
// finished write is left for a replay: a partial write of a row, then a
// full-stripe write of the same row (which needs no record), then a kill,
// and an assembly without one of the row's data members that the partial
// write left alone. Were the partial write's record still valid, its
// replay would rebuild the row's parity from that member's bytes before
// the full-stripe write, and the missing member would read them. The
// array must read the full-stripe write everywhere, and replay nothing.
func TestSlottedLogClearsRecords(t *testing.T) {
	for _, level := range []stripe.Level{stripe.RAID5, stripe.RAID6} {
		t.Run(level.String(), func(t *testing.T) {
			seed := testSeed(t)
			rng := rand.New(rand.NewSource(seed))
			w := newHoleArray(t, level, 5, 0, 8, raid.PolicyJournal, true, rng, seed)
			a, o := w.a, w.o
			require.Positive(t, a.Status().Journal.SlotBytes, "a slotted log")
			geo := a.Geometry()
			row := rng.Int63n(geo.Rows())
			width := geo.StripeWidth()
			part := make([]byte, 4096)
			rng.Read(part)
			_, err := a.WriteAt(part, row*width+1024) // data index 0 of the row
			require.NoError(t, err)
			o.writeDurable(row*width+1024, part)
			full := make([]byte, width)
			rng.Read(full)
			_, err = a.WriteAt(full, row*width)
			require.NoError(t, err)
			o.writeDurable(row*width, full)
			a.Abandon()
			for _, c := range w.cs {
				c.CrashKeep(0, 1)
			}
			missing := []int{geo.DataMember(row, 1)}
			b := w.assembleWithout(t, missing)
			assert.Zero(t, b.Status().Journal.Replayed, "seed %d: no record of a finished write is left", seed)
			o.verifyMissing(t, b, fmt.Sprintf("seed %d: %s row %d, missing member %v", seed, level, row, missing), missing)
		})
	}
}

// TestCrashMirrorReadsOneCopyUntilResynced: a chunk a write in flight at a
// crash tore between its copies (one holds the new bytes, the other the
// old) reads the same bytes every time until the resync reaches it, and
// those are the bytes the resync keeps (the first readable copy's). Reads
// used to pick the copy by the request's shape, so the chunk read alone
// and the chunk read with its neighbours returned old and new by turns.
func TestCrashMirrorReadsOneCopyUntilResynced(t *testing.T) {
	for _, s := range []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID1, 2}, {stripe.RAID10, 4}} {
		t.Run(s.level.String(), func(t *testing.T) {
			const chunk, rows = 16 << 10, 32
			r := newRig(s.n, memberSizeFor(chunk, rows))
			opts := raid.Options{CleanDelay: -1}
			a, err := raid.Create(r.devs, raid.CreateOptions{Name: "torn", Level: s.level, Chunk: chunk, BitmapRegion: 4 * chunk}, opts)
			require.NoError(t, err)
			fill(t, a, 15) // every region dirty: the bitmap is never cleaned
			require.NoError(t, a.Sync())
			a.Abandon() // a power cut: the array is dirty
			sb, err := superblock.Read(r.mem[0])
			require.NoError(t, err)
			// Tear a chunk of the last row: its copy on every member but
			// the first (the resync's source) holds other bytes.
			geo := a.Geometry()
			c := geo.Size()/chunk - 1
			locs := geo.Copies(nil, c, 0)
			require.GreaterOrEqual(t, len(locs), 2)
			for _, loc := range locs[1:] {
				p := r.mem[loc.Member].Bytes()[int64(sb.DataOffset)+loc.Off:][:chunk]
				for i := range p {
					p[i] ^= 0xa5
				}
			}
			// A slow resync, which reaches the last row long after the reads.
			opts.RebuildMinRate, opts.RebuildMaxRate = chunk, chunk
			b, err := raid.Assemble(r.devs, opts)
			require.NoError(t, err)
			defer b.Abandon()
			require.NotNil(t, b.Status().Resync, "an unclean array resyncs")
			first := make([]byte, chunk)
			_, err = b.ReadAt(first, c*chunk)
			require.NoError(t, err)
			want := append([]byte(nil), r.mem[locs[0].Member].Bytes()[int64(sb.DataOffset)+locs[0].Off:][:chunk]...)
			require.Equal(t, want, first, "the chunk reads the resync source's bytes")
			wide := make([]byte, 3*chunk)
			for i := 0; i < 8; i++ {
				got := make([]byte, chunk)
				_, err = b.ReadAt(got, c*chunk)
				require.NoError(t, err)
				require.Equal(t, first, got, "read %d of the chunk alone", i)
				_, err = b.ReadAt(wide, (c-2)*chunk)
				require.NoError(t, err)
				require.Equal(t, first, wide[2*chunk:], "read %d of the chunk with its neighbours", i)
			}
			require.NotNil(t, b.Status().Resync, "the resync had not reached the chunk yet")
		})
	}
}

// TestCrashTornFullStripeDegradedRAID6: a full-stripe write needs no
// write-hole log record (it writes every data byte its parity carries), so
// a power cut can tear it with nothing to replay: here P reached its member
// and Q did not. Assembled without a data member, RAID6 still has a parity
// to spare, and P and Q must agree: the missing chunk is served from P,
// and once another member fails, from Q. The rows were left as the crash
// tore them, so the chunk read one value, then another, and a check found
// the row inconsistent (seed 1796535974672301886 of
// TestCrashChecksumsDegraded).
func TestCrashTornFullStripeDegradedRAID6(t *testing.T) {
	for _, checksums := range []bool{false, true} {
		t.Run(fmt.Sprintf("checksums=%v", checksums), func(t *testing.T) {
			const chunk = 16 << 10
			const n = 4
			cs := make([]*membertest.Crashable, n)
			devs := make([]raid.Device, n)
			power := membertest.NewToggle(membertest.Always())
			for i := range cs {
				cs[i] = membertest.NewCrashable(memberSizeFor(chunk, 8) + csumRoom(checksums))
				devs[i] = raid.Device{Path: fmt.Sprint("torn", i), Member: keep{membertest.Inject(cs[i], power)}}
			}
			opts := raid.Options{CleanDelay: -1}
			a, err := raid.Create(devs, raid.CreateOptions{Name: "torn", Level: stripe.RAID6, Chunk: chunk, Checksums: checksums}, opts)
			require.NoError(t, err)
			geo := a.Geometry()
			const row = 0
			pm, qm := geo.ParityMember(row), geo.QMember(row)
			gone := geo.DataMember(row, 0) // assembled without it
			old := make([]byte, geo.StripeWidth())
			randomBytes(old, 1)
			_, err = a.WriteAt(old, row*geo.StripeWidth())
			require.NoError(t, err)
			require.NoError(t, a.Sync())
			p := make([]byte, geo.StripeWidth())
			randomBytes(p, 2)
			_, err = a.WriteAt(p, row*geo.StripeWidth()) // full stripe: no record
			require.NoError(t, err)
			// The cut: the data and P reach their members, Q does not.
			power.On()
			a.Abandon()
			for m, c := range cs {
				keep := 1.0
				if m == qm {
					keep = 0
				}
				c.CrashKeep(int64(m), keep)
			}
			power.Off()
			var present []raid.Device
			for m, d := range devs {
				if m != gone {
					present = append(present, d)
				}
			}
			b := assembleArray(t, present, opts)
			waitIdle(t, b)
			res, err := b.Check()
			require.Zero(t, res.Inconsistent, "check after the degraded assembly: %v", err)
			first := make([]byte, geo.StripeWidth())
			_, err = b.ReadAt(first, row*geo.StripeWidth())
			require.NoError(t, err)
			require.Equal(t, p[chunk:], first[chunk:], "the data present reads its new value")
			b.FailRole(pm, fmt.Errorf("failed by test"))
			again := make([]byte, geo.StripeWidth())
			_, err = b.ReadAt(again, row*geo.StripeWidth())
			require.NoError(t, err)
			require.True(t, bytes.Equal(first, again), "the missing chunk reads another value once P's member failed too")
		})
	}
}
