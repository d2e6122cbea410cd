package raid_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/clock"
	"github.com/raidd/raidd/stripe"
)

// rebuildStarts returns the rebuild-started events in the history.
func rebuildStarts(st raid.Status) []raid.Event {
	var out []raid.Event
	for _, e := range st.History {
		if e.Kind == raid.EventRebuildStarted {
			out = append(out, e)
		}
	}
	return out
}

// TestRebuildTwoRolesInOnePass: a RAID6 that starts with two members
// missing and two spares rebuilds both roles in one job, one pass over the
// array, and comes back whole with the data intact. So does a 3-way
// mirror missing two copies.
func TestRebuildTwoRolesInOnePass(t *testing.T) {
	const chunk = 16 << 10
	const rows = 16
	for _, c := range []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID6, 5}, {stripe.RAID6, 4}, {stripe.RAID1, 3}} {
		t.Run(fmt.Sprintf("%s/members=%d", c.level, c.n), func(t *testing.T) {
			r := newRig(c.n+2, memberSizeFor(chunk, rows))
			a := createArray(t, r.devs[:c.n], raid.CreateOptions{Name: "two", Level: c.level, Chunk: chunk, Spares: r.devs[c.n:]}, raid.Options{CleanDelay: -1})
			want := fill(t, a, 12)
			require.NoError(t, a.Close())

			// Roles 1 and c.n-1 are gone; the spares are there.
			var devs []raid.Device
			for i, d := range r.devs {
				if i != 1 && i != c.n-1 {
					devs = append(devs, d)
				}
			}
			b := assembleArray(t, devs, raid.Options{CleanDelay: -1})
			st := waitIdle(t, b)
			require.False(t, st.Degraded, "%+v", st.Devices)
			starts := rebuildStarts(st)
			require.Len(t, starts, 1, "one job for both roles: %+v", starts)
			assert.Contains(t, starts[0].Detail, "in one pass")
			require.NotNil(t, st.LastRecovery)
			assert.Len(t, st.LastRecovery.ExtraRoles, 1)
			assert.ElementsMatch(t, []int{1, c.n - 1}, []int{st.LastRecovery.Role, st.LastRecovery.ExtraRoles[0]})
			requireContent(t, b, want, "after the two-role rebuild")
			checkConsistent(t, b, "after the two-role rebuild")
			closeChecked(t, b)
		})
	}
}

// TestRebuildWidensForSecondSpare: while a RAID6 rebuilds one role, a
// second role fails and a spare for it arrives: the rebuild restarts from
// the first row with both roles, instead of a second pass afterwards. A
// restart in the middle resumes the first role at its checkpoint; the
// second target, whose progress is not recorded, is a spare again, is
// claimed anew and widens the rebuild again; the array ends whole.
func TestRebuildWidensForSecondSpare(t *testing.T) {
	const chunk = 16 << 10
	const rows = 40
	clk := clock.NewFake(time.Unix(1e9, 0))
	r := newRig(7, memberSizeFor(chunk, rows))
	opts := raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: chunk, RebuildMaxRate: chunk, ProgressInterval: time.Second}, clk)
	a := createArray(t, r.devs[:5], raid.CreateOptions{Name: "wide", Level: stripe.RAID6, Chunk: chunk}, opts)
	want := fill(t, a, 13)
	require.NoError(t, a.Sync())
	failRole(t, a, 1)
	require.NoError(t, a.AddMember(r.devs[5], false))
	advanceUntil(t, a, clk, func(st raid.Status) bool { return st.Recovery != nil && st.Recovery.Done >= 8 })
	st := a.Status()
	require.Empty(t, st.Recovery.ExtraRoles)

	failRole(t, a, 3)
	require.NoError(t, a.AddMember(r.devs[6], false))
	st = a.Status()
	require.NotNil(t, st.Recovery)
	assert.Equal(t, 1, st.Recovery.Role)
	assert.Equal(t, []int{3}, st.Recovery.ExtraRoles)
	assert.Less(t, st.Recovery.Done, int64(8), "the widened rebuild starts over")
	found := false
	for _, e := range st.History {
		found = found || (e.Kind == raid.EventRebuildStopped && strings.Contains(e.Detail, "to rebuild role 3 too"))
	}
	assert.True(t, found, "the restart is reported: %+v", st.History)

	advanceUntil(t, a, clk, func(st raid.Status) bool { return st.Recovery != nil && st.Recovery.Done >= 10 })
	require.NoError(t, a.Close())

	b := assembleArray(t, r.devs, opts)
	st = b.Status()
	require.NotNil(t, st.Recovery, "the rebuild resumes: %+v", st.Devices)
	assert.Equal(t, 1, st.Recovery.Role)
	assert.Equal(t, []int{3}, st.Recovery.ExtraRoles, "the second target was claimed again")
	st = waitIdleClock(t, b, clk)
	require.False(t, st.Degraded, "%+v", st.Devices)
	requireContent(t, b, want, "after the widened rebuild")
	checkConsistent(t, b, "after the widened rebuild")
	closeChecked(t, b)
}

// advanceUntil moves the fake clock until cond holds.
func advanceUntil(t *testing.T, a *raid.Array, clk *clock.Fake, cond func(raid.Status) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond(a.Status()) {
		require.True(t, time.Now().Before(deadline), "condition not reached: %+v", a.Status().Recovery)
		// Once the job's workers and checkpointer all sleep (or, near the
		// job's end, when a worker with no rows left does not come back,
		// after a short wait): moving the clock while a worker is still
		// running lets the other run ahead, and the job's position is the
		// slower one's.
		if clk.WaitSleepers(jobSleepers, 10*time.Millisecond) || clk.WaitSleepers(1, time.Millisecond) {
			clk.AdvanceToNext()
		}
	}
}

// TestReplaceOldMemberFailsSuperblockWrite: while a replace copies a
// member, that member's device fails, and the first I/O to notice it is a
// superblock update (here, the commit of an added spare), not the replace's
// own read. The replace turns into a rebuild of the replacement, as when a
// read notices the failure. (It used to go on as a replace with no device
// in the old member's role, and its next step dereferenced it: a panic
// that the model test's frequent scrub checkpoints exposed, seed 104.)
func TestReplaceOldMemberFailsSuperblockWrite(t *testing.T) {
	const chunk = 16 << 10
	const rows = 24
	clk := clock.NewFake(time.Unix(1e9, 0))
	r := newRig(5, memberSizeFor(chunk, rows))
	opts := raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: chunk, RebuildMaxRate: chunk, ProgressInterval: time.Second}, clk)
	a := createArray(t, r.devs[:3], raid.CreateOptions{Name: "rp", Level: stripe.RAID5, Chunk: chunk}, opts)
	want := fill(t, a, 14)
	require.NoError(t, a.Sync())
	require.NoError(t, a.ReplaceMember("1", r.devs[3], false))
	advanceUntil(t, a, clk, func(st raid.Status) bool { return st.Recovery != nil && st.Recovery.Done >= 4 })
	require.Equal(t, "replace", a.Status().Recovery.Kind)

	r.toggles[1].On()
	require.NoError(t, a.AddMember(r.devs[4], false)) // its commit finds role 1's device failing
	st := a.Status()
	require.NotNil(t, st.Recovery)
	assert.Equal(t, "rebuild", st.Recovery.Kind, "the replace became a rebuild of the replacement")
	assert.Equal(t, "mem3", st.Recovery.Path)

	st = waitIdleClock(t, a, clk)
	require.False(t, st.Degraded, "%+v", st.Devices)
	requireContent(t, a, want, "after the replacement was rebuilt")
	checkConsistent(t, a, "after the replacement was rebuilt")
}
