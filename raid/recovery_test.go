package raid_test

import (
	"bytes"
	"fmt"
	"math/rand"
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

func waitIdle(t *testing.T, a *raid.Array) raid.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := a.Status()
		if st.Recovery == nil && st.Resync == nil {
			return st
		}
		require.True(t, time.Now().Before(deadline), "recovery did not finish: %+v", st.Recovery)
		time.Sleep(time.Millisecond)
	}
}

// waitIdleClock is waitIdle for an array on a fake clock: it moves the
// clock to the next sleeper's deadline whenever the array's background work
// sleeps on it, so a rate-limited job runs as fast as the machine allows
// while its rate limiter still sees its configured rate.
func waitIdleClock(t *testing.T, a *raid.Array, clk *clock.Fake) raid.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := a.Status()
		if st.Recovery == nil && st.Resync == nil {
			return st
		}
		require.True(t, time.Now().Before(deadline), "recovery did not finish: %+v", st.Recovery)
		if clk.WaitSleepers(1, time.Millisecond) {
			clk.AdvanceToNext()
		}
	}
}

// stepJob lets a rate-limited recovery job on clk do about rows more rows:
// each step waits until the job's workers and checkpointer sleep on the
// clock, then moves it by one row's time.
func stepJob(t *testing.T, clk *clock.Fake, rows int, rowTime time.Duration) {
	t.Helper()
	for i := 0; i < rows; i++ {
		require.True(t, clk.WaitSleepers(jobSleepers, 10*time.Second), "the job does not wait for the clock")
		clk.Advance(rowTime)
	}
}

// nudgeJob moves clk by one row's time, once a rate-limited job's workers
// and checkpointer all sleep on it or, near the end of the job (a worker
// that has no rows left does not come back), after a short wait.
func nudgeJob(clk *clock.Fake, rowTime time.Duration) {
	clk.WaitSleepers(jobSleepers, 10*time.Millisecond)
	clk.Advance(rowTime)
}

func fill(t *testing.T, a *raid.Array, seed int64) []byte {
	t.Helper()
	want := make([]byte, a.Size())
	randomBytes(want, seed)
	_, err := a.WriteAt(want, 0)
	require.NoError(t, err)
	return want
}

func requireContent(t *testing.T, a *raid.Array, want []byte, msg string) {
	t.Helper()
	got := make([]byte, len(want))
	_, err := a.ReadAt(got, 0)
	require.NoError(t, err, msg)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %s", msg, firstDiff(got, want, 0))
	}
}

func hasEvent(st raid.Status, kind raid.EventKind) bool {
	for _, e := range st.History {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

// TestRebuildOntoSpare fails a member, lets the spare take its place, then
// fails a different original member: the data must still be intact, which
// proves the rebuilt member holds the right bytes.
func TestRebuildOntoSpare(t *testing.T) {
	for _, s := range []struct {
		level        stripe.Level
		n            int
		first, other int
	}{{stripe.RAID1, 2, 0, 1}, {stripe.RAID5, 4, 1, 2}, {stripe.RAID5, 3, 2, 0}, {stripe.RAID10, 4, 0, 1}, {stripe.RAID10, 3, 1, 2}} {
		t.Run(fmt.Sprintf("%s/members=%d", s.level, s.n), func(t *testing.T) {
			const chunk = 16 << 10
			r := newRig(s.n+1, memberSizeFor(chunk, 24))
			a := createArray(t, r.devs[:s.n], raid.CreateOptions{Name: "rb", Level: s.level, Chunk: chunk, Spares: r.devs[s.n:]}, raid.Options{CleanDelay: -1})
			want := fill(t, a, 5)
			require.NoError(t, a.FailMember(r.devs[s.first].Path))
			st := waitIdle(t, a)
			require.False(t, st.Degraded, "the spare must have been rebuilt: %+v", st.Devices)
			assert.True(t, hasEvent(st, raid.EventSpareClaimed))
			assert.True(t, hasEvent(st, raid.EventRebuildFinished))
			checkConsistent(t, a)
			r.toggles[s.other].On() // a different original member dies
			requireContent(t, a, want, "after losing another original member")
			assert.True(t, a.Status().Degraded)
		})
	}
}

// TestRebuildUnderLoad rebuilds while writers and readers run, with the
// rebuild slowed down so that they really overlap.
func TestRebuildUnderLoad(t *testing.T) {
	for _, level := range []stripe.Level{stripe.RAID1, stripe.RAID5, stripe.RAID10} {
		t.Run(level.String(), func(t *testing.T) {
			const chunk = 8 << 10
			n := 4
			const rate = 256 // rows per second while clients are busy
			clk := clock.NewFake(time.Unix(1e9, 0))
			r := newRig(n+1, memberSizeFor(chunk, 64))
			a := createArray(t, r.devs[:n], raid.CreateOptions{Name: "load", Level: level, Chunk: chunk},
				raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate * chunk, RebuildMaxRate: 2 * rate * chunk}, clk))
			want := fill(t, a, 9)
			r.toggles[2].On()
			requireContent(t, a, want, "degraded")
			require.NoError(t, a.AddMember(r.devs[n], false))
			rng := rand.New(rand.NewSource(3))
			for i := 0; a.Status().Recovery != nil; i++ {
				if i%3 == 2 {
					nudgeJob(clk, time.Second/rate) // three writes per rebuilt row
				}
				off := rng.Int63n(a.Size() - 3*chunk)
				p := make([]byte, 1+rng.Intn(3*chunk))
				rng.Read(p)
				_, err := a.WriteAt(p, off)
				require.NoError(t, err)
				copy(want[off:], p)
				q := make([]byte, len(p))
				_, err = a.ReadAt(q, off)
				require.NoError(t, err)
				require.Equal(t, p, q)
			}
			st := waitIdle(t, a)
			require.False(t, st.Degraded)
			requireContent(t, a, want, "after rebuild under load")
			r.toggles[(2+1)%n].On()
			if level == stripe.RAID10 {
				r.toggles[(2+1)%n].Off()
				r.toggles[(2+2)%n].On() // not the rebuilt member's partner... both work for n=4 near-2
			}
			requireContent(t, a, want, "after losing another member")
		})
	}
}

// TestReplace copies a member onto a new device while I/O goes on: the
// array is never degraded, and the old member leaves at the end.
func TestReplace(t *testing.T) {
	const chunk = 8 << 10
	const rate = 192 // rows per second while clients are busy
	clk := clock.NewFake(time.Unix(1e9, 0))
	r := newRig(5, memberSizeFor(chunk, 48))
	a := createArray(t, r.devs[:4], raid.CreateOptions{Name: "rep", Level: stripe.RAID5, Chunk: chunk},
		raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate * chunk}, clk))
	want := fill(t, a, 11)
	require.NoError(t, a.ReplaceMember(r.devs[1].Path, r.devs[4], false))
	rng := rand.New(rand.NewSource(4))
	for i := 0; a.Status().Recovery != nil; i++ {
		if i%3 == 2 {
			nudgeJob(clk, time.Second/rate) // three writes per copied row
		}
		assert.False(t, a.Status().Degraded, "a planned replacement never degrades the array")
		off := rng.Int63n(a.Size() - chunk)
		p := make([]byte, 1+rng.Intn(chunk))
		rng.Read(p)
		_, err := a.WriteAt(p, off)
		require.NoError(t, err)
		copy(want[off:], p)
	}
	st := waitIdle(t, a)
	assert.True(t, hasEvent(st, raid.EventReplaceFinished), "%+v", st.History)
	for _, d := range st.Devices {
		assert.NotEqual(t, r.devs[1].Path, d.Path, "the replaced member must have left")
		if d.Path == r.devs[4].Path {
			assert.Equal(t, "active", d.State)
			assert.Equal(t, 1, d.Role)
		}
	}
	r.toggles[0].On() // lose another original: the replacement must carry role 1
	requireContent(t, a, want, "after replace and losing member 0")
}

// TestReplaceOldFails: when the member being replaced dies during the copy,
// the replacement is rebuilt from redundancy from where the copy was.
func TestReplaceOldFails(t *testing.T) {
	const chunk = 8 << 10
	const rate = 96 // rows per second
	clk := clock.NewFake(time.Unix(1e9, 0))
	r := newRig(5, memberSizeFor(chunk, 48))
	a := createArray(t, r.devs[:4], raid.CreateOptions{Name: "rep2", Level: stripe.RAID5, Chunk: chunk},
		raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate * chunk, RebuildMaxRate: rate * chunk}, clk))
	want := fill(t, a, 12)
	require.NoError(t, a.ReplaceMember(r.devs[3].Path, r.devs[4], false))
	stepJob(t, clk, 5, time.Second/rate) // the copy is a few rows in
	st := a.Status()
	require.NotNil(t, st.Recovery)
	require.Less(t, st.Recovery.Done, int64(48), "the rate limiter holds the copy back")
	r.toggles[3].On()
	st = waitIdleClock(t, a, clk)
	require.False(t, st.Degraded, "%+v", st.Devices)
	requireContent(t, a, want, "after the old member failed mid-replace")
	checkConsistent(t, a)
}

// TestReplaceGetsWritesAfterOldFails: a write over several rows that meets
// the failure of the member being replaced in its first row must still
// write the later rows' chunks of that role to the replacement, which the
// failure turns into the role's member, trusted for every row the copy had
// done. The write went on without the role, and a row it wrote whole was
// left stale on the replacement (the model test found it under load).
func TestReplaceGetsWritesAfterOldFails(t *testing.T) {
	const chunk = 4 << 10
	const rows = 48
	const rate = 96 // rows per second
	for _, level := range []stripe.Level{stripe.RAID5, stripe.RAID6, stripe.RAID1} {
		t.Run(level.String(), func(t *testing.T) {
			n := 4
			if level == stripe.RAID1 {
				n = 2
			}
			clk := clock.NewFake(time.Unix(1e9, 0))
			r := newRig(n+1, memberSizeFor(chunk, rows))
			a := createArray(t, r.devs[:n], raid.CreateOptions{Name: "rw", Level: level, Chunk: chunk},
				raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate * chunk, RebuildMaxRate: rate * chunk}, clk))
			want := fill(t, a, 21)
			last := n - 1
			require.NoError(t, a.ReplaceMember(r.devs[last].Path, r.devs[n], false))
			advanceUntil(t, a, clk, func(st raid.Status) bool { return st.Recovery != nil && st.Recovery.Done >= 8 })
			require.Equal(t, "replace", a.Status().Recovery.Kind)
			r.toggles[last].On()
			// Rows 1-4, all copied: the first row's write to the old
			// member fails, and the write goes on to the next rows.
			width := a.Geometry().StripeWidth()
			p := make([]byte, 4*width)
			randomBytes(p, 22)
			_, err := a.WriteAt(p, width)
			require.NoError(t, err)
			copy(want[width:], p)
			st := waitIdleClock(t, a, clk)
			require.False(t, st.Degraded, "%+v", st.Devices)
			checkConsistent(t, a, "after the replacement was rebuilt")
			requireContent(t, a, want, "after the replacement was rebuilt")
		})
	}
}

// TestReadErrorRepair: a read error on a member with redundancy returns the
// right bytes and rewrites the bad range; only if the rewrite fails is the
// member failed.
func TestReadErrorRepair(t *testing.T) {
	for _, level := range []stripe.Level{stripe.RAID1, stripe.RAID5, stripe.RAID10} {
		t.Run(level.String(), func(t *testing.T) {
			const chunk = 16 << 10
			n := 4
			if level == stripe.RAID1 {
				n = 2
			}
			mems := make([]*member.Memory, n)
			readTg := make([]*membertest.Toggle, n)
			writeTg := make([]*membertest.Toggle, n)
			var devs []raid.Device
			for i := range mems {
				mems[i] = member.NewMemory(memberSizeFor(chunk, 8))
				readTg[i] = membertest.NewToggle(membertest.OpFilter(membertest.Always(), membertest.OpRead))
				writeTg[i] = membertest.NewToggle(membertest.OpFilter(membertest.Always(), membertest.OpWrite))
				devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: keep{membertest.Inject(mems[i], membertest.Any(readTg[i], writeTg[i]))}})
			}
			a := createArray(t, devs, raid.CreateOptions{Name: "rr", Level: level, Chunk: chunk}, raid.Options{CleanDelay: -1})
			want := fill(t, a, 13)
			// Member 0's reads fail once: the read is served and repaired.
			readTg[0].On()
			got := make([]byte, a.Size())
			_, err := a.ReadAt(got, 0)
			readTg[0].Off()
			require.NoError(t, err)
			require.Equal(t, want, got)
			st := a.Status()
			assert.False(t, st.Degraded, "a repaired member stays in the array")
			assert.True(t, hasEvent(st, raid.EventReadRepaired))
			// Now the rewrite fails too: the member is failed.
			readTg[0].On()
			writeTg[0].On()
			_, err = a.ReadAt(got, 0)
			require.NoError(t, err)
			require.Equal(t, want, got)
			assert.True(t, a.Status().Degraded, "a member whose repair fails is failed")
		})
	}
}

// TestRebuildResumesAtCheckpoint stops an array mid-rebuild and assembles it
// again: the rebuild continues from its checkpoint instead of row 0.
func TestRebuildResumesAtCheckpoint(t *testing.T) {
	const chunk = 4 << 10
	const rows = 400
	const rate = 16 // rows per second: a job window of one row at this rate (1/16 s of it)
	const rowTime = time.Second / rate
	clk := clock.NewFake(time.Unix(1e9, 0))
	r := newRig(4, memberSizeFor(chunk, rows))
	a := createArray(t, r.devs[:3], raid.CreateOptions{Name: "ck", Level: stripe.RAID5, Chunk: chunk, Spares: r.devs[3:]},
		raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate * chunk, RebuildMaxRate: rate * chunk, ProgressInterval: 2 * rowTime}, clk))
	want := fill(t, a, 14)
	require.NoError(t, a.FailMember(r.devs[0].Path))
	stepJob(t, clk, 40, rowTime) // 40 rows' time: the rebuild does 40 rows
	done := a.Status().Recovery.Done
	require.InDelta(t, 40, done, 2, "the rate limiter lets one row through per row time")
	closeChecked(t, a)
	// On a clock of its own that does not move, the resumed rebuild is
	// still running when we look.
	clk = clock.NewFake(time.Unix(2e9, 0))
	b := assembleArray(t, r.devs[1:], raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate * chunk, RebuildMaxRate: rate * chunk}, clk))
	st := b.Status()
	require.NotNil(t, st.Recovery, "the rebuild must resume")
	assert.GreaterOrEqual(t, st.Recovery.Done, done-5, "resumed from the checkpoint, not from the start")
	st = waitIdleClock(t, b, clk)
	require.False(t, st.Degraded)
	requireContent(t, b, want, "after resumed rebuild")
}

// TestBitmapWriteFailure: a member that cannot take a write-intent bitmap
// update is failed before the write that needed the update goes ahead, and
// the write still succeeds on the survivors.
func TestBitmapWriteFailure(t *testing.T) {
	const chunk = 16 << 10
	var devs []raid.Device
	var tgs []*membertest.Toggle
	for i := 0; i < 3; i++ {
		tg := membertest.NewToggle(membertest.InRange(superblock.BitmapOffset, superblock.BitmapBytes, membertest.OpFilter(membertest.Always(), membertest.OpWrite)))
		tgs = append(tgs, tg)
		devs = append(devs, raid.Device{Path: fmt.Sprint("b", i), Member: keep{membertest.Inject(member.NewMemory(memberSizeFor(chunk, 64)), tg)}})
	}
	a := createArray(t, devs, raid.CreateOptions{Name: "bm", Level: stripe.RAID5, Chunk: chunk, BitmapRegion: 8 * chunk}, raid.Options{CleanDelay: -1})
	p := make([]byte, 3*chunk)
	rand.New(rand.NewSource(5)).Read(p)
	tgs[1].On()
	_, err := a.WriteAt(p, 0) // dirties region 0: the bitmap update fails on member 1
	require.NoError(t, err)
	st := a.Status()
	assert.True(t, st.Degraded, "the member that lost its bitmap update must be failed")
	got := make([]byte, len(p))
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	assert.Equal(t, p, got)
}

// TestClaimedSpareGetsBitmap: the bits of the write-intent bitmap set while
// a role was missing are written to the spare claimed for it when its
// rebuild starts, not only at the next bit change: the spare's on-disk
// bitmap equals the survivors'.
func TestClaimedSpareGetsBitmap(t *testing.T) {
	const chunk = 8 << 10
	const rate = 16 // rows per second: the rebuild waits on the fake clock
	clk := clock.NewFake(time.Unix(1e9, 0))
	r := newRig(3, memberSizeFor(chunk, 64))
	a := createArray(t, r.devs[:2], raid.CreateOptions{Name: "bm", Level: stripe.RAID1, Chunk: chunk, BitmapRegion: 4 * chunk},
		raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate * chunk, RebuildMaxRate: rate * chunk}, clk))
	failRole(t, a, 1)
	p := make([]byte, chunk)
	randomBytes(p, 3)
	for _, off := range []int64{0, 20 * chunk, 50 * chunk} {
		_, err := a.WriteAt(p, off)
		require.NoError(t, err)
	}
	image := func(k int) []byte {
		b := make([]byte, 4096)
		_, err := r.mem[k].ReadAt(b, superblock.BitmapOffset)
		require.NoError(t, err)
		return b
	}
	want := image(0)
	require.NotEqual(t, make([]byte, len(want)), want, "the survivor's bitmap has bits set")
	require.NoError(t, a.AddMember(r.devs[2], false))
	require.True(t, clk.WaitSleepers(jobSleepers, 10*time.Second), "the rebuild does not wait for the clock")
	require.NotNil(t, a.Status().Recovery, "the rebuild onto the spare runs")
	assert.Equal(t, want, image(2), "the claimed spare's bitmap")
	waitIdleClock(t, a, clk)
}

// TestReplacedMemberRecordsItLeft: when a replace finishes, the retired
// device's own superblock gets the table that retired it, with the
// device added as removed, so that examining it does not show the role it held (before,
// it kept "role 1, active" at an older event count). An assembly that
// lists it, even first and at the members' event count, leaves it out as
// removed and starts whole from the members, its replacement included.
func TestReplacedMemberRecordsItLeft(t *testing.T) {
	const chunk = 8 << 10
	r := newRig(5, memberSizeFor(chunk, 16))
	o := raid.Options{CleanDelay: -1}
	a := createArray(t, r.devs[:4], raid.CreateOptions{Name: "rep", Level: stripe.RAID5, Chunk: chunk}, o)
	want := fill(t, a, 5)
	require.NoError(t, a.ReplaceMember(r.devs[1].Path, r.devs[4], false))
	st := waitIdle(t, a)
	require.True(t, hasEvent(st, raid.EventReplaceFinished), "%+v", st.History)

	old, err := superblock.Read(r.mem[1])
	require.NoError(t, err)
	cur, err := superblock.Read(r.mem[4])
	require.NoError(t, err)
	assert.Equal(t, cur.Events, old.Events, "the retired device has the table that retired it")
	assert.Equal(t, int32(-1), old.Role)
	assert.Len(t, old.Members, len(cur.Members)+1)
	for _, mi := range old.Members {
		if mi.UUID == old.MemberUUID {
			assert.Equal(t, superblock.MemberRemoved, mi.State, "the retired device is removed in its own table")
		}
	}
	// 'raidd remove' releases the retired device (kept open until then,
	// or until Close); before, it said the device was no member.
	require.NoError(t, a.RemoveMember(r.devs[1].Path))
	assert.ErrorIs(t, a.RemoveMember(r.devs[1].Path), raid.ErrNoMember)
	require.NoError(t, a.Close())

	devs := []raid.Device{r.devs[1], r.devs[0], r.devs[4], r.devs[2], r.devs[3]}
	b := assembleArray(t, devs, o)
	st = b.Status()
	assert.False(t, st.Degraded)
	var left []string
	for _, d := range st.Devices {
		if d.Path == r.devs[1].Path {
			left = append(left, d.State+": "+d.Note)
		}
	}
	require.Len(t, left, 1)
	assert.Contains(t, left[0], "not in the newest member table (it was removed)")
	requireContent(t, b, want, "assembled with the retired device listed first")
	r.toggles[0].On() // lose an original: the replacement carries role 1
	requireContent(t, b, want, "after losing member 0")
}
