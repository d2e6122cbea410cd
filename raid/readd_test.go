package raid_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// waitBitmapClean waits until the cleaner has cleared every bitmap bit.
func waitBitmapClean(t *testing.T, a *raid.Array) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for a.Status().Bitmap.Dirty != 0 {
		require.True(t, time.Now().Before(deadline), "bitmap never cleaned")
		time.Sleep(2 * time.Millisecond)
	}
}

// writeEnds writes a few bytes at both ends of the array (member rows 0
// and the last, so bitmap regions 0 and the last) and records them in want.
func writeEnds(t *testing.T, a *raid.Array, want []byte, b byte) {
	t.Helper()
	p := []byte(strings.Repeat(string(rune(b)), 100))
	for _, off := range []int64{0, a.Size() - 100} {
		_, err := a.WriteAt(p, off)
		require.NoError(t, err)
		copy(want[off:], p)
	}
}

// TestReAdd runs the operator's re-add flows: fail then add the same
// device, fail then remove (by role) then add, and a member gone stale
// across a restart then added. Each resyncs only the rows of the bitmap
// regions written while the member was out (2 regions of 4 rows of 64),
// although the bitmap cleaner ran meanwhile; the re-added member then
// holds the right bytes, as losing another member proves.
func TestReAdd(t *testing.T) {
	for _, s := range []struct {
		level      stripe.Level
		n          int
		out, other int
	}{{stripe.RAID1, 2, 1, 0}, {stripe.RAID5, 4, 1, 2}, {stripe.RAID10, 4, 1, 2}} {
		for _, flow := range []string{"fail-add", "fail-remove-add", "stale-add"} {
			t.Run(fmt.Sprintf("%s/%s", s.level, flow), func(t *testing.T) {
				t.Parallel()
				const chunk = 16 << 10
				r := newRig(s.n, levelSizeFor(s.level, chunk, 64))
				opts := raid.Options{CleanDelay: 10 * time.Millisecond}
				a, err := raid.Create(r.devs, raid.CreateOptions{Name: "readd", Level: s.level, Chunk: chunk, BitmapRegion: 4 * chunk}, opts)
				require.NoError(t, err)
				defer func() { checkAndClose(t, a) }()
				want := fill(t, a, 11)
				waitBitmapClean(t, a)

				path := r.devs[s.out].Path
				require.NoError(t, a.FailMember(path))
				writeEnds(t, a, want, 'x')
				time.Sleep(50 * time.Millisecond) // the cleaner runs: it must keep the bits
				switch flow {
				case "fail-add":
					require.NoError(t, a.Release(path))
				case "fail-remove-add":
					require.NoError(t, a.RemoveMember(fmt.Sprint(s.out)), "remove a failed member by its role")
				case "stale-add":
					require.NoError(t, a.Close())
					a, err = raid.Assemble(r.devs, opts)
					require.NoError(t, err)
					st := a.Status()
					require.True(t, st.Degraded)
					stale := false
					for _, d := range st.Devices {
						stale = stale || (d.Path == path && d.State == "stale")
					}
					require.True(t, stale, "%s must be stale: %+v", path, st.Devices)
					writeEnds(t, a, want, 'y')
					require.NoError(t, a.Release(path))
				}
				require.NoError(t, a.AddMember(r.devs[s.out], false))
				st := waitIdle(t, a)
				require.False(t, st.Degraded, "%+v", st.Devices)
				require.NotNil(t, st.LastRecovery)
				assert.Equal(t, "re-add", st.LastRecovery.Kind)
				assert.Equal(t, int64(8), st.LastRecovery.Total, "rows of the 2 dirty regions")
				assert.Equal(t, int64(8), st.LastRecovery.Done)
				assert.Equal(t, int64(64), st.LastRecovery.ArrayRows)
				checkArray(t, a)
				r.toggles[s.other].On()
				requireContent(t, a, want, "re-added member serving for a lost one")
			})
		}
	}
}

// TestReAddFallsBackToFullRebuild: a member whose role was rebuilt onto
// another device in the meantime left before the bitmap's record starts,
// so adding it again rebuilds it from scratch, and says so.
func TestReAddFallsBackToFullRebuild(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(3, memberSizeFor(chunk, 32))
	a, err := raid.Create(r.devs[:2], raid.CreateOptions{Name: "full", Level: stripe.RAID1, Chunk: chunk, BitmapRegion: 4 * chunk}, raid.Options{CleanDelay: 10 * time.Millisecond})
	require.NoError(t, err)
	defer func() { checkAndClose(t, a) }()
	want := fill(t, a, 12)
	require.NoError(t, a.FailMember(r.devs[1].Path))
	require.NoError(t, a.AddMember(r.devs[2], false)) // rebuilds role 1
	waitIdle(t, a)
	writeEnds(t, a, want, 'a')
	waitBitmapClean(t, a) // whole again: the bitmap forgets what the old member missed
	require.NoError(t, a.FailMember(r.devs[2].Path))
	writeEnds(t, a, want, 'b')
	require.NoError(t, a.Release(r.devs[1].Path))
	require.NoError(t, a.AddMember(r.devs[1], false))
	st := waitIdle(t, a)
	require.False(t, st.Degraded)
	require.NotNil(t, st.LastRecovery)
	assert.Equal(t, "rebuild", st.LastRecovery.Kind)
	full := false
	for _, e := range st.History {
		full = full || (e.Kind == raid.EventMemberAdded && strings.Contains(e.Detail, "full rebuild"))
	}
	assert.True(t, full, "the member-added event says why it is a full rebuild: %+v", st.History)
	r.toggles[0].On()
	requireContent(t, a, want, "rebuilt member serving alone")
}

// noteAfterRestart closes a, assembles devs again (closed at the test's
// end) and returns the status note of the device at path.
func noteAfterRestart(t *testing.T, a *raid.Array, devs []raid.Device, opts raid.Options, path string) string {
	t.Helper()
	require.NoError(t, a.Close())
	a, err := raid.Assemble(devs, opts)
	require.NoError(t, err)
	t.Cleanup(func() { checkAndClose(t, a) })
	for _, d := range a.Status().Devices {
		if d.Path == path {
			return d.Note
		}
	}
	return ""
}

// TestStaleNoteWhenRoleIsTaken: a member whose role a spare took over is
// stale at the next start, and its note says so: adding it makes it a
// spare, rebuilt in full, not the re-add of only the regions written since
// it left that a stale member's note promises otherwise.
func TestStaleNoteWhenRoleIsTaken(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(3, memberSizeFor(chunk, 16))
	opts := raid.Options{CleanDelay: 10 * time.Millisecond}
	a, err := raid.Create(r.devs[:2], raid.CreateOptions{Name: "taken", Level: stripe.RAID1, Chunk: chunk, BitmapRegion: 4 * chunk, Spares: r.devs[2:]}, opts)
	require.NoError(t, err)
	fill(t, a, 13)
	require.NoError(t, a.FailMember(r.devs[1].Path)) // the spare takes role 1
	waitIdle(t, a)
	note := noteAfterRestart(t, a, r.devs, opts, r.devs[1].Path)
	assert.Contains(t, note, "its role 1 is held by "+r.devs[2].Path+" now")
	assert.NotContains(t, note, "only regions written since it left are resynced")
}

// TestStaleNoteWithoutBitmap: on an array that keeps no write-intent
// bitmap, a stale member's note says 'raidd add' rebuilds it in full; it
// used to promise a resync of only the regions written since it left.
func TestStaleNoteWithoutBitmap(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(2, memberSizeFor(chunk, 16))
	opts := raid.Options{CleanDelay: -1}
	a, err := raid.Create(r.devs, raid.CreateOptions{Name: "nobitmap", Level: stripe.RAID1, Chunk: chunk, BitmapRegion: -1}, opts)
	require.NoError(t, err)
	fill(t, a, 15)
	require.NoError(t, a.FailMember(r.devs[1].Path))
	note := noteAfterRestart(t, a, r.devs, opts, r.devs[1].Path)
	assert.Contains(t, note, "rebuilds it in full (the array keeps no write-intent bitmap")
	assert.NotContains(t, note, "only regions written since it left are resynced")
}

// TestRemoveByRoleTakesTheFailedEntry: once a spare holds role 1, the
// member that failed in it is removed by naming the role: the active
// holder cannot be removed, so the role means the failed entry (it used to
// answer "fail it first" about the healthy holder).
func TestRemoveByRoleTakesTheFailedEntry(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(3, memberSizeFor(chunk, 16))
	a, err := raid.Create(r.devs[:2], raid.CreateOptions{Name: "role", Level: stripe.RAID1, Chunk: chunk, Spares: r.devs[2:]}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	defer func() { checkAndClose(t, a) }()
	want := fill(t, a, 14)
	require.NoError(t, a.FailMember(r.devs[1].Path))
	waitIdle(t, a)
	require.NoError(t, a.RemoveMember("1"))
	st := a.Status()
	for _, d := range st.Devices {
		assert.NotEqual(t, r.devs[1].Path, d.Path, "the failed member is gone")
		if d.Path == r.devs[2].Path {
			assert.Equal(t, "active", d.State, "the role's holder stays")
		}
	}
	assert.False(t, st.Degraded)
	require.ErrorIs(t, a.RemoveMember("1"), raid.ErrBusy, "with no failed entry left, the role names its active holder")
	requireContent(t, a, want, "after the remove")
}

// TestReAddNeedsNoRunningJob: while another role is being rebuilt, a
// re-add is refused with what to do, not silently turned into a spare.
func TestAddHeldMemberIsBusy(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(2, memberSizeFor(chunk, 8))
	a, err := raid.Create(r.devs, raid.CreateOptions{Name: "busy", Level: stripe.RAID1, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	defer checkAndClose(t, a)
	assert.ErrorIs(t, a.Release(r.devs[0].Path), raid.ErrBusy, "an active member is not released")
	assert.ErrorIs(t, a.Release("nowhere"), raid.ErrNoMember)
}

// TestReAddOnFailedArrayIsRefused: on a RAID5 that lost a member, took a
// write, then lost a second, re-adding the second (which missed nothing)
// online is refused, since resyncing the written regions needs the first:
// the re-add used to stop at its first row and leave the member
// rebuilding, and a forced assembly then trusted the first member, which
// had missed the write, and rebuilt the second from it. Refused, the
// second stays failed, and the forced assembly trusts it and returns every
// acknowledged byte.
func TestReAddOnFailedArrayIsRefused(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(4, levelSizeFor(stripe.RAID5, chunk, 64))
	opts := raid.Options{CleanDelay: 10 * time.Millisecond}
	a, err := raid.Create(r.devs, raid.CreateOptions{Name: "failed", Level: stripe.RAID5, Chunk: chunk, BitmapRegion: 4 * chunk}, opts)
	require.NoError(t, err)
	want := fill(t, a, 13)
	first, last := r.devs[0].Path, r.devs[1].Path
	require.NoError(t, a.FailMember(first))
	writeEnds(t, a, want, 'z')
	require.NoError(t, a.Sync())
	require.NoError(t, a.FailMemberChecked(last, true))
	require.True(t, a.Status().Failed)

	// raidd add releases the device before it adds it: the release is
	// refused, and the device stays held (status shows it).
	err = a.Release(last)
	require.ErrorIs(t, err, raid.ErrBusy)
	assert.Contains(t, err.Error(), "is FAILED")
	assert.Contains(t, err.Error(), "assemble --force")
	require.ErrorIs(t, a.AddMember(r.devs[1], false), raid.ErrBusy)
	for _, d := range a.Status().Devices {
		assert.NotEqual(t, "rebuilding", d.State, "no member was left rebuilding: %+v", d)
	}
	require.NoError(t, a.Close())

	a, err = raid.Assemble(r.devs, raid.Options{CleanDelay: 10 * time.Millisecond, ForceAssemble: true})
	require.NoError(t, err)
	defer func() { checkAndClose(t, a) }()
	requireContent(t, a, want, "forced assembly trusting the member that failed last")
}

// TestFailStoppedRebuildTarget: a rebuild that stopped because the array
// failed under it keeps its checkpoint with no job running; failing its
// target then clears the checkpoint with it. The superblock encoder
// refused a table whose rebuild role no member rebuilds, and the members
// that could not take it, the healthy ones, were marked failed for it.
func TestFailStoppedRebuildTarget(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(5, levelSizeFor(stripe.RAID5, chunk, 64))
	a, err := raid.Create(r.devs[:4], raid.CreateOptions{Name: "stopped", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1, RebuildMaxRate: chunk})
	require.NoError(t, err)
	defer func() { _ = a.Close() }()
	fill(t, a, 14)
	require.NoError(t, a.FailMember(r.devs[0].Path))
	require.NoError(t, a.AddMember(r.devs[4], false)) // a spare, rebuilt onto slowly
	require.NoError(t, a.FailMemberChecked(r.devs[1].Path, true))
	st := waitIdle(t, a) // the rebuild stops: the array failed
	require.True(t, st.Failed)
	require.NoError(t, a.FailMemberChecked(r.devs[4].Path, true))
	for _, d := range a.Status().Devices {
		if d.Path == r.devs[2].Path || d.Path == r.devs[3].Path {
			assert.Equal(t, "active", d.State, "a healthy member is not blamed: %+v", d)
		}
		if d.Path == r.devs[4].Path {
			assert.Equal(t, "failed", d.State, "%+v", d)
		}
	}
}

// TestRefusedAddKeepsTheFailedMembersDevice: a re-add that is refused
// (another member's rebuild is running) used to leave the failed member
// without its device: Release had closed it for the add, and the refused
// add closed the new handle, so status showed no path and 'remove PATH'
// said it was no member. The refused device now goes back to the member.
// The message for a member already being rebuilt says to wait, not to
// fail it.
func TestRefusedAddKeepsTheFailedMembersDevice(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(4, memberSizeFor(chunk, 64))
	a := createArray(t, r.devs, raid.CreateOptions{Name: "give", Level: stripe.RAID6, Chunk: chunk},
		raid.Options{CleanDelay: -1, RebuildMinRate: chunk, RebuildMaxRate: chunk})
	fill(t, a, 27)
	failRole(t, a, 1)
	failRole(t, a, 2)
	require.NoError(t, a.Release(r.devs[1].Path))
	require.NoError(t, a.AddMember(r.devs[1], false)) // a slow rebuild of role 1 starts

	require.NoError(t, a.Release(r.devs[2].Path))
	err := a.AddMember(r.devs[2], false)
	require.ErrorIs(t, err, raid.ErrBusy)
	assert.Contains(t, err.Error(), "is running")
	found := false
	for _, d := range a.Status().Devices {
		found = found || (d.Path == r.devs[2].Path && d.State == "failed")
	}
	assert.True(t, found, "status still shows the failed member's path: %+v", a.Status().Devices)
	err = a.Release(r.devs[1].Path)
	require.ErrorIs(t, err, raid.ErrBusy)
	assert.Contains(t, err.Error(), "wait")
	assert.NotContains(t, err.Error(), "fail it first")
	require.NoError(t, a.RemoveMember(r.devs[2].Path), "found by its path again")
}

// TestReAddOrderMessage: members 1 and 2 of a RAID6 fail one after the
// other. Re-added in the order they failed, the second is rebuilt in full
// (its superblock records the first as failed, and nothing tells that
// from a split brain), and the event says both possibilities and the
// order that re-adds both by the bitmap, instead of asserting a split
// brain. Re-added last to fail first, both come back by the bitmap.
func TestReAddOrderMessage(t *testing.T) {
	const chunk = 16 << 10
	for _, lastFirst := range []bool{false, true} {
		t.Run(fmt.Sprint("lastFirst=", lastFirst), func(t *testing.T) {
			r := newRig(5, memberSizeFor(chunk, 32))
			a := createArray(t, r.devs, raid.CreateOptions{Name: "order", Level: stripe.RAID6, Chunk: chunk, BitmapRegion: 4 * chunk},
				raid.Options{CleanDelay: 10 * time.Millisecond})
			want := fill(t, a, 28)
			waitBitmapClean(t, a)
			failRole(t, a, 1)
			writeEnds(t, a, want, 'o')
			failRole(t, a, 2)
			writeEnds(t, a, want, 'p')
			order := []int{1, 2}
			if lastFirst {
				order = []int{2, 1}
			}
			for _, m := range order {
				require.NoError(t, a.Release(r.devs[m].Path))
				require.NoError(t, a.AddMember(r.devs[m], false))
				waitIdle(t, a)
			}
			full := ""
			for _, e := range a.Status().History {
				if e.Kind == raid.EventMemberAdded && strings.HasPrefix(e.Detail, "full rebuild") {
					full = e.Detail
				}
			}
			if lastFirst {
				assert.Empty(t, full, "both re-added by the bitmap")
			} else {
				assert.Contains(t, full, "either it ran without this array, or")
				assert.Contains(t, full, "the last to fail first")
			}
			requireContent(t, a, want, "after the re-adds")
		})
	}
}
