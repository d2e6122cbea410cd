package raid_test

import (
	"bytes"
	"fmt"
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

// deviceOf returns the status of the member at path.
func deviceOf(t *testing.T, st raid.Status, path string) (raid.MemberStatus, bool) {
	t.Helper()
	for _, d := range st.Devices {
		if d.Path == path {
			return d, true
		}
	}
	return raid.MemberStatus{}, false
}

// TestReplaceResumesAtCheckpoint stops an array mid-replace and assembles
// it again: with the member being copied present, the replace resumes from
// its checkpoint (not row 0, and not as a spare) and completes; with that
// member gone, the replacement is rebuilt from where the copy was; with the
// replacement gone, the array runs on its old member, the replacement
// recorded as failed.
func TestReplaceResumesAtCheckpoint(t *testing.T) {
	const chunk = 4 << 10
	const rows = 400
	const rate = 16 // rows per second: a job window of one row at this rate (1/16 s of it)
	const rowTime = time.Second / rate
	opts := func(clk *clock.Fake) raid.Options {
		return raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate * chunk, RebuildMaxRate: rate * chunk, ProgressInterval: 2 * rowTime}, clk)
	}
	// start replaces member 1 of a RAID5 by r.devs[4] and stops the
	// array 40 rows into the copy.
	start := func(t *testing.T) (*rig, []byte, int64) {
		clk := clock.NewFake(time.Unix(1e9, 0))
		r := newRig(5, memberSizeFor(chunk, rows))
		a := createArray(t, r.devs[:4], raid.CreateOptions{Name: "rr", Level: stripe.RAID5, Chunk: chunk}, opts(clk))
		want := fill(t, a, 15)
		require.NoError(t, a.ReplaceMember(r.devs[1].Path, r.devs[4], false))
		st := a.Status()
		d, ok := deviceOf(t, st, r.devs[4].Path)
		require.True(t, ok)
		assert.Equal(t, "replacing", d.State, "the replacement's state while the copy runs")
		assert.Equal(t, 1, d.Role, "the role it replaces")
		stepJob(t, clk, 40, rowTime)
		done := a.Status().Recovery.Done
		require.InDelta(t, 40, done, 2, "the rate limiter lets one row through per row time")
		closeChecked(t, a)
		return r, want, done
	}

	t.Run("resumes", func(t *testing.T) {
		r, want, done := start(t)
		clk := clock.NewFake(time.Unix(2e9, 0)) // does not move: the resumed copy waits
		b := assembleArray(t, r.devs, opts(clk))
		st := b.Status()
		require.NotNil(t, st.Recovery, "the replace must resume (history %+v)", st.History)
		assert.Equal(t, "replace", st.Recovery.Kind)
		assert.Equal(t, 1, st.Recovery.Role)
		assert.Equal(t, r.devs[4].Path, st.Recovery.Path)
		assert.GreaterOrEqual(t, st.Recovery.Done, done-5, "resumed from the checkpoint, not from the start")
		assert.False(t, st.Degraded, "a resumed replace does not degrade the array")
		st = waitIdleClock(t, b, clk)
		assert.True(t, hasEvent(st, raid.EventReplaceFinished), "%+v", st.History)
		d, ok := deviceOf(t, st, r.devs[4].Path)
		require.True(t, ok)
		assert.Equal(t, "active", d.State)
		assert.Equal(t, 1, d.Role)
		_, listed := deviceOf(t, st, r.devs[1].Path)
		assert.False(t, listed, "the replaced member has left")
		requireContent(t, b, want, "after the resumed replace")
		r.toggles[0].On() // lose another original: the replacement carries role 1
		requireContent(t, b, want, "after the resumed replace and losing member 0")
	})

	t.Run("old member gone", func(t *testing.T) {
		r, want, done := start(t)
		clk := clock.NewFake(time.Unix(2e9, 0))
		devs := []raid.Device{r.devs[0], r.devs[2], r.devs[3], r.devs[4]}
		b := assembleArray(t, devs, opts(clk))
		st := b.Status()
		require.NotNil(t, st.Recovery, "the replacement must be rebuilt (history %+v)", st.History)
		assert.Equal(t, "rebuild", st.Recovery.Kind)
		assert.Equal(t, 1, st.Recovery.Role)
		assert.GreaterOrEqual(t, st.Recovery.Done, done-5, "rows the copy made are kept")
		st = waitIdleClock(t, b, clk)
		assert.False(t, st.Degraded, "%+v", st.Devices)
		requireContent(t, b, want, "after rebuilding the replacement")
	})

	t.Run("replacement gone", func(t *testing.T) {
		r, want, _ := start(t)
		clk := clock.NewFake(time.Unix(2e9, 0))
		b := assembleArray(t, r.devs[:4], opts(clk))
		st := waitIdleClock(t, b, clk)
		assert.False(t, st.Degraded, "the old member still serves its role")
		assert.Nil(t, st.LastRecovery, "nothing to resume")
		var failed int
		for _, d := range st.Devices {
			if d.State == "failed" && d.Note == "device not present" {
				failed++
			}
		}
		assert.Equal(t, 1, failed, "the absent replacement is recorded as failed: %+v", st.Devices)
		requireContent(t, b, want, "on the old members")
	})
}

// TestFailReplacement: the operator fails the replacement while the copy
// runs: the replace stops, the old member keeps its role, and a restart
// resumes nothing.
func TestFailReplacement(t *testing.T) {
	const chunk = 4 << 10
	r := newRig(3, memberSizeFor(chunk, 64))
	clk := clock.NewFake(time.Unix(1e9, 0))
	o := raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: chunk, RebuildMaxRate: chunk}, clk)
	a := createArray(t, r.devs[:2], raid.CreateOptions{Name: "fr", Level: stripe.RAID1, Chunk: chunk}, o)
	want := fill(t, a, 16)
	require.NoError(t, a.ReplaceMember(r.devs[0].Path, r.devs[2], false))
	require.NotNil(t, a.Status().Recovery)
	require.NoError(t, a.FailMember(r.devs[2].Path))
	st := a.Status()
	assert.Nil(t, st.Recovery, "the replace stopped")
	assert.True(t, hasEvent(st, raid.EventReplaceFailed), "%+v", st.History)
	d, ok := deviceOf(t, st, r.devs[2].Path)
	require.True(t, ok)
	assert.Equal(t, "failed", d.State)
	assert.Equal(t, -1, d.Role, "a failed replacement held no role")
	assert.False(t, st.Degraded)
	requireContent(t, a, want, "after failing the replacement")
	closeChecked(t, a)

	b := assembleArray(t, r.devs[:2], o)
	st = b.Status()
	assert.Nil(t, st.Recovery, "nothing resumes")
	assert.False(t, st.Degraded)
	requireContent(t, b, want, "after a restart")
}

// TestReplaceOldFailsSuperblockWrite: the member being copied fails while
// a superblock is written (here, at the replace's checkpoint), not in a
// request. Like a failure in a request, that turns the replace into a
// rebuild of the replacement. Before the fix the member was only marked
// failed: the copy went on with no member to copy from and crashed on a
// nil device.
func TestReplaceOldFailsSuperblockWrite(t *testing.T) {
	const chunk = 4 << 10
	const rows = 64
	const rate = 100
	const rowTime = time.Second / rate
	header := membertest.NewToggle(membertest.InRange(0, superblock.HeaderSize, membertest.OpFilter(membertest.Always(), membertest.OpWrite)))
	var devs []raid.Device
	for i := range 3 {
		var m raid.Member = member.NewMemory(memberSizeFor(chunk, rows))
		if i == 0 {
			m = membertest.Inject(m, header)
		}
		devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: keep{m}})
	}
	clk := clock.NewFake(time.Unix(1e9, 0))
	o := raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate * chunk, RebuildMaxRate: rate * chunk, ProgressInterval: 4 * rowTime}, clk)
	a := createArray(t, devs[:2], raid.CreateOptions{Name: "sbf", Level: stripe.RAID1, Chunk: chunk}, o)
	want := fill(t, a, 17)
	require.NoError(t, a.ReplaceMember(devs[0].Path, devs[2], false))
	stepJob(t, clk, 3, rowTime)
	header.On() // the next checkpoint's superblock write fails on the old member
	st := waitIdleClock(t, a, clk)
	header.Off()
	assert.False(t, st.Degraded, "the replacement was rebuilt: %+v", st.Devices)
	d, ok := deviceOf(t, st, devs[2].Path)
	require.True(t, ok)
	assert.Equal(t, "active", d.State)
	assert.Equal(t, 0, d.Role)
	assert.True(t, hasEvent(st, raid.EventRebuildFinished), "%+v", st.History)
	requireContent(t, a, want, "after the old member failed its superblock write")
}

// TestReplaceStoppedByCloseGetsCachedWrites: stripes still in the stripe
// cache when Close stops a replace are written out after the replace's
// checkpoint is recorded. They must reach the replacement too: its
// checkpoint says it holds every row below it, so once the old member is
// gone the replacement serves those rows as they are. Before the fix the
// stopped replace left the view first, the write-out went to the old
// member only, and the replacement kept the row's old bytes.
func TestReplaceStoppedByCloseGetsCachedWrites(t *testing.T) {
	const chunk = 4 << 10
	const rows = 400
	const rate = 16 // rows per second: a job window of one row at this rate (1/16 s of it)
	const rowTime = time.Second / rate
	opts := func(clk *clock.Fake) raid.Options {
		return raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate * chunk, RebuildMaxRate: rate * chunk,
			ProgressInterval: 2 * rowTime, StripeCache: 1 << 20, StripeCacheDelay: time.Hour}, clk)
	}
	clk := clock.NewFake(time.Unix(1e9, 0))
	r := newRig(5, memberSizeFor(chunk, rows))
	a := createArray(t, r.devs[:4], raid.CreateOptions{Name: "rc", Level: stripe.RAID5, Chunk: chunk}, opts(clk))
	want := fill(t, a, 15)
	require.NoError(t, a.ReplaceMember(r.devs[1].Path, r.devs[4], false))
	stepJob(t, clk, 40, rowTime)
	require.Greater(t, a.Status().Recovery.Done, int64(20))
	// Two of the three data chunks of rows 4 to 11, each from its
	// stripe's start: partial stripes the cache holds until Close.
	width := int64(3 * chunk)
	for row := int64(4); row < 12; row++ {
		p := bytes.Repeat([]byte{byte(0xa0 + row)}, 2*chunk)
		_, err := a.WriteAt(p, row*width)
		require.NoError(t, err)
		copy(want[row*width:], p)
	}
	closeChecked(t, a)

	// The old member is gone: role 1 is the replacement, trusted below
	// its checkpoint. Lose member 0 as well, so every row's role 1 chunk
	// (data or parity) is needed to read it.
	clk = clock.NewFake(time.Unix(2e9, 0))
	b := assembleArray(t, []raid.Device{r.devs[0], r.devs[2], r.devs[3], r.devs[4]}, opts(clk))
	waitIdleClock(t, b, clk)
	requireContent(t, b, want, "after rebuilding the replacement")
	r.toggles[0].On()
	requireContent(t, b, want, "with the replacement and without member 0")
}
