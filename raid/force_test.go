package raid_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// TestRAID0MemberErrorIsPerRequest: on RAID0 a member I/O error fails only
// the request that hit it, with EIO. Nothing is recorded as failed, so
// ranges on the other members stay readable, the member serves again once
// the fault passes, and the array assembles again.
func TestRAID0MemberErrorIsPerRequest(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(3, memberSizeFor(chunk, 8))
	a, err := raid.Create(r.devs, raid.CreateOptions{Name: "r0", Level: stripe.RAID0, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	want := fill(t, a, 21)

	r.toggles[1].On() // chunk 1 lives on member 1
	p := make([]byte, chunk)
	_, err = a.ReadAt(p, chunk)
	require.ErrorIs(t, err, raid.ErrIO)
	require.ErrorIs(t, err, syscall.EIO)
	assert.NotErrorIs(t, err, raid.ErrFailed)
	_, err = a.WriteAt(p, chunk)
	require.ErrorIs(t, err, raid.ErrIO)
	require.ErrorIs(t, a.Sync(), raid.ErrIO)
	_, err = a.ReadAt(p, 0) // chunk 0, on member 0
	require.NoError(t, err, "a range on a healthy member stays readable")
	assert.Equal(t, want[:chunk], p)
	_, err = a.WriteAt(want[2*chunk:3*chunk], 2*chunk)
	require.NoError(t, err)
	st := a.Status()
	assert.False(t, st.Failed)
	for k := range r.mem {
		sb, err := superblock.Read(r.mem[k])
		require.NoError(t, err)
		for _, mi := range sb.Members {
			assert.Equal(t, superblock.MemberActive, mi.State, "member %d's superblock", k)
		}
	}

	r.toggles[1].Off() // the fault was transient
	requireContent(t, a, want, "after the fault passed")
	require.NoError(t, a.Close())
	a, err = raid.Assemble(r.devs, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	requireContent(t, a, want, "assembled again")
	require.NoError(t, a.Close())
}

// raid5MissedWrites creates a RAID5 of 4 rig members (16 KiB chunks,
// bitmap regions of 4 chunks), fills it (seed), waits for the bitmap to be
// clean, fails member 1 and writes both ends of the array with byte b,
// which member 1 then misses. want holds the array's bytes.
func raid5MissedWrites(t *testing.T, name string, seed int64, b byte) (r *rig, a *raid.Array, want []byte, opts raid.Options) {
	t.Helper()
	r = newRig(4, memberSizeFor(raid5Chunk, 32))
	opts = raid.Options{CleanDelay: 10 * time.Millisecond}
	a, err := raid.Create(r.devs, raid.CreateOptions{Name: name, Level: stripe.RAID5, Chunk: raid5Chunk, BitmapRegion: 4 * raid5Chunk}, opts)
	require.NoError(t, err)
	want = fill(t, a, seed)
	waitBitmapClean(t, a)
	require.NoError(t, a.FailMemberChecked(r.devs[1].Path, false))
	writeEnds(t, a, want, b)
	return r, a, want, opts
}

// raid5Chunk is raid5MissedWrites' chunk size.
const raid5Chunk = 16 << 10

// TestForceAssembleAfterTwoFails: an operator fails two members of a
// RAID5 (the second only with force); the array is failed and refuses to
// start, naming the forced assembly that would work. Forced, it trusts
// the member failed last, whose data is intact, and serves everything
// written, including what was written between the two fails. The member
// failed first is stale and is re-added over the bitmap.
func TestForceAssembleAfterTwoFails(t *testing.T) {
	r, a, want, opts := raid5MissedWrites(t, "force", 22, 'm') // only members 0, 2 and 3 have this
	err := a.FailMemberChecked(r.devs[2].Path, false)
	require.ErrorIs(t, err, raid.ErrWouldFail, "failing a second RAID5 member needs force")
	require.False(t, a.Status().Failed)
	require.NoError(t, a.FailMemberChecked(r.devs[2].Path, true))
	require.True(t, a.Status().Failed)
	require.NoError(t, a.Close())

	_, err = raid.Assemble(r.devs, opts)
	require.ErrorIs(t, err, raid.ErrCannotStart)
	assert.Contains(t, err.Error(), "--force-assemble")
	assert.Contains(t, err.Error(), "'raidd assemble --force'")
	assert.Contains(t, err.Error(), r.devs[2].Path)
	// Each member's re-add is advice for a running array; this one cannot
	// run, so the refusal says to re-add them once it does, not now.
	assert.NotContains(t, err.Error(), "re-add it with")
	assert.Contains(t, err.Error(), "re-add the others with 'raidd add' once it runs")

	opts.ForceAssemble = true
	a, err = raid.Assemble(r.devs, opts)
	require.NoError(t, err)
	defer func() { checkAndClose(t, a) }()
	st := a.Status()
	require.False(t, st.Failed)
	require.True(t, st.Degraded)
	for _, d := range st.Devices {
		switch d.Path {
		case r.devs[2].Path:
			assert.Equal(t, "active", d.State, "the member failed last is trusted")
		case r.devs[1].Path:
			assert.Equal(t, "stale", d.State, "the member failed first missed writes")
		}
	}
	// The member-stale event names the role the member held (it said -1).
	staleRole := -2
	for _, ev := range st.History {
		if ev.Kind == raid.EventMemberStale && ev.Path == r.devs[1].Path {
			staleRole = ev.Role
		}
	}
	assert.Equal(t, 1, staleRole)
	requireContent(t, a, want, "forced")

	require.NoError(t, a.Release(r.devs[1].Path))
	require.NoError(t, a.AddMember(r.devs[1], false))
	st = waitIdle(t, a)
	require.False(t, st.Degraded)
	require.NotNil(t, st.LastRecovery)
	assert.Equal(t, "re-add", st.LastRecovery.Kind)
	assert.Equal(t, int64(8), st.LastRecovery.Total, "the rows of the 2 regions written after the first fail")
	checkArray(t, a)
	r.toggles[0].On()
	requireContent(t, a, want, "re-added member serving for a lost one")
}

// TestForceAssembleRefusesForAbsentInSyncMember: a RAID5 member fails,
// the array runs on and takes writes, and is stopped. Started with the
// failed member but without one that stayed in sync (an operator mistake),
// it is missing two roles; a forced start must not trust the failed
// member, which missed those writes, since the absent member holds them.
// It refuses, naming the absent role and how to go on: with every member,
// the array starts degraded with all its data. --accept-loss (a member
// lost for good) forces it, and then serves the stale bytes it says it
// would lose.
func TestForceAssembleRefusesForAbsentInSyncMember(t *testing.T) {
	r, a, want, opts := raid5MissedWrites(t, "absent", 25, 'w') // members 0, 2 and 3 have this; member 1 does not
	const chunk = raid5Chunk
	p := []byte(strings.Repeat("z", 100))
	_, err := a.WriteAt(p, chunk) // row 0's chunk on member 1, which missed it
	require.NoError(t, err)
	old := append([]byte(nil), want[chunk:chunk+100]...)
	copy(want[chunk:], p)
	require.NoError(t, a.Close())

	without0 := r.devs[1:]
	_, err = raid.Assemble(without0, opts)
	require.ErrorIs(t, err, raid.ErrCannotStart)
	assert.Contains(t, err.Error(), "role 0's member")
	assert.Contains(t, err.Error(), "is not among the members given: supply it")
	assert.NotContains(t, err.Error(), "would start it trusting", "the refusal must not recommend trusting the member that missed writes")

	opts.ForceAssemble = true
	_, err = raid.Assemble(without0, opts)
	require.ErrorIs(t, err, raid.ErrCannotStart, "forced, it still refuses")
	assert.Contains(t, err.Error(), "--accept-loss")

	opts.ForceAssemble = false
	a, err = raid.Assemble(r.devs, opts) // with every member: degraded, whole
	require.NoError(t, err)
	requireContent(t, a, want, "started with the member that was in sync")
	require.NoError(t, a.Close())

	opts.ForceAssemble, opts.AcceptLoss = true, true
	a, err = raid.Assemble(without0, opts)
	require.NoError(t, err, "a member lost for good: forced with --accept-loss")
	defer func() { checkAndClose(t, a) }()
	got := make([]byte, 100)
	_, err = a.ReadAt(got, chunk)
	require.NoError(t, err)
	assert.Equal(t, old, got, "the write the forced member missed is lost, as the refusal said")
}

// TestAssembleNamesTheReusedMemberForeign: one member of a RAID5 is reused
// for another array, whose event counter is then the highest of all.
// Assembled with the RAID5's members, the reused one is the device called
// foreign, not the others: the array most members belong to is the one
// being assembled (it used to be the array of the highest counter, and
// the advice to leave the others out left one member).
func TestAssembleNamesTheReusedMemberForeign(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(4, memberSizeFor(chunk, 8))
	opts := raid.Options{CleanDelay: -1}
	a, err := raid.Create(r.devs[:3], raid.CreateOptions{Name: "mine", Level: stripe.RAID5, Chunk: chunk}, opts)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	b, err := raid.Create([]raid.Device{r.devs[0], r.devs[3]}, raid.CreateOptions{Name: "other", Level: stripe.RAID1, Chunk: chunk, Force: true}, opts)
	require.NoError(t, err)
	for range 5 { // the other array's counter passes ours
		_, err = b.WriteAt([]byte("x"), 0)
		require.NoError(t, err)
		require.NoError(t, b.Sync())
		require.NoError(t, b.FailMember(r.devs[3].Path))
		require.NoError(t, b.Release(r.devs[3].Path))
		require.NoError(t, b.AddMember(r.devs[3], false))
		waitIdle(t, b)
	}
	require.NoError(t, b.Close())

	for _, order := range [][]raid.Device{r.devs[:3], {r.devs[2], r.devs[1], r.devs[0]}} {
		_, err = raid.Assemble(order, opts)
		require.ErrorIs(t, err, raid.ErrForeign)
		msg := err.Error()
		assert.Contains(t, msg, r.devs[0].Path+` belongs to array "other"`)
		assert.Contains(t, msg, `not "mine"`)
		assert.NotContains(t, msg, r.devs[1].Path, "a member of the array being assembled called foreign")
	}
}

// TestAssembleNamesAnEmptyDevice: a member path that is empty (a loop
// device not set up, after a reboot) is named as such, not as a member
// whose header was wiped.
func TestAssembleNamesAnEmptyDevice(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(2, memberSizeFor(chunk, 8))
	a, err := raid.Create(r.devs, raid.CreateOptions{Name: "empty", Level: stripe.RAID0, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	require.NoError(t, a.Close())
	_, err = raid.Assemble([]raid.Device{r.devs[0], {Path: "/dev/loop7", Member: member.NewMemory(0)}}, raid.Options{CleanDelay: -1})
	require.ErrorIs(t, err, raid.ErrNotMember)
	assert.Contains(t, err.Error(), "/dev/loop7 is empty (0 bytes): a loop device that is not set up")
	assert.NotContains(t, err.Error(), "header was wiped")
}

// TestStartWithReadOnlyMemberParityLog: a RAID5 or RAID6 with the
// write-hole log whose member refuses writes at start (a block device
// made read-only) starts degraded with that member failed, as an array
// without the log does when the member refuses its superblock: writing the
// log's headers at start used to refuse the whole array. It then takes
// writes and serves every byte. RAID1 (no log) is the comparison: its
// member's superblock write fails, and the start's log must say degraded,
// which it did not (it counted the members missing before the write).
func TestStartWithReadOnlyMemberParityLog(t *testing.T) {
	for _, tc := range []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID5, 4}, {stripe.RAID6, 5}, {stripe.RAID1, 2}} {
		t.Run(tc.level.String(), func(t *testing.T) {
			const chunk = 16 << 10
			r := newRig(tc.n, memberSizeFor(chunk, 16))
			for i := range r.devs {
				tg := membertest.NewToggle(membertest.OpFilter(membertest.Always(), membertest.OpWrite))
				r.toggles[i] = tg
				r.devs[i].Member = keep{membertest.Inject(r.mem[i], tg)}
			}
			opts := raid.Options{CleanDelay: -1}
			a, err := raid.Create(r.devs, raid.CreateOptions{Name: "ro", Level: tc.level, Chunk: chunk}, opts)
			require.NoError(t, err)
			want := fill(t, a, 26)
			require.NoError(t, a.Close())

			r.toggles[1].On() // member 1 now refuses every write
			h := &logRecorder{}
			a, err = raid.Assemble(r.devs, raid.Options{CleanDelay: -1, Logger: slog.New(h)})
			require.NoError(t, err, "one member that refuses writes: start degraded")
			assert.Equal(t, 1, h.count(0, "degraded=true"), "the start's log says degraded: %q", h.msgs)
			defer func() { checkAndClose(t, a) }()
			st := a.Status()
			require.True(t, st.Degraded)
			require.False(t, st.Failed)
			for _, d := range st.Devices {
				if d.Path == r.devs[1].Path {
					assert.Equal(t, "failed", d.State)
				}
			}
			requireContent(t, a, want, "degraded start")
			writeEnds(t, a, want, 'r')
			requireContent(t, a, want, "after writes")
		})
	}
}

// shortDev is a member that reports itself smaller than it is (a loop
// device attached with a size limit).
type shortDev struct {
	raid.Member
	size int64
}

func (d shortDev) Size() int64 { return d.size }

// TestForceAssembleRefusesForShortInSyncMember: as for an absent member,
// when the member that stayed in sync is given but too small now (a loop
// device attached with the wrong size limit), a forced start must not
// trust the member that failed before it and missed writes: it refuses,
// says to give it its size back, and with it whole the array starts with
// every byte.
func TestForceAssembleRefusesForShortInSyncMember(t *testing.T) {
	r, a, want, opts := raid5MissedWrites(t, "short", 27, 's')
	require.NoError(t, a.Close())

	devs := append([]raid.Device(nil), r.devs...)
	devs[0].Member = shortDev{r.devs[0].Member, r.mem[0].Size() / 2}
	opts.ForceAssemble = true
	_, err := raid.Assemble(devs, opts)
	require.ErrorIs(t, err, raid.ErrCannotStart)
	assert.Contains(t, err.Error(), "role 0's member")
	assert.Contains(t, err.Error(), "was left out (mem0: device is")
	assert.Contains(t, err.Error(), "give it its whole size again")

	opts.ForceAssemble = false
	a, err = raid.Assemble(r.devs, opts) // whole again: degraded, every byte
	require.NoError(t, err)
	requireContent(t, a, want, "with the member whole again")
	require.NoError(t, a.Close())
}

// TestForceAssembleTrustsMembersThatFailedTogether: RAID5 member 1 fails,
// the array takes writes, then member 2 is failed (the array is FAILED
// from then on: no write is acknowledged) and member 3 after it. Members
// 2 and 3 both hold every acknowledged write, so a forced start trusts
// both (it used to refuse: member 2 left before member 3).
func TestForceAssembleTrustsMembersThatFailedTogether(t *testing.T) {
	r, a, want, opts := raid5MissedWrites(t, "together", 28, 't') // member 1 misses these
	require.NoError(t, a.FailMemberChecked(r.devs[2].Path, true))
	require.True(t, a.Status().Failed)
	require.NoError(t, a.FailMemberChecked(r.devs[3].Path, true))
	require.NoError(t, a.Close())

	opts.ForceAssemble = true
	a, err := raid.Assemble(r.devs, opts)
	require.NoError(t, err)
	defer func() { checkAndClose(t, a) }()
	for _, d := range a.Status().Devices {
		switch d.Path {
		case r.devs[2].Path, r.devs[3].Path:
			assert.Equal(t, "active", d.State, "%s is trusted", d.Path)
		case r.devs[1].Path:
			assert.Equal(t, "stale", d.State, "the member that missed writes is not")
		}
	}
	requireContent(t, a, want, "forced, trusting the two that failed together")
}

// TestForceAssembleRAID0: a RAID0 whose member was recorded as failed
// (by an operator here; by an older raidd after one I/O error) starts
// again when forced, with all its data.
func TestForceAssembleRAID0(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(3, memberSizeFor(chunk, 8))
	opts := raid.Options{CleanDelay: -1}
	a, err := raid.Create(r.devs, raid.CreateOptions{Name: "r0f", Level: stripe.RAID0, Chunk: chunk}, opts)
	require.NoError(t, err)
	want := fill(t, a, 23)
	require.ErrorIs(t, a.FailMemberChecked("1", false), raid.ErrWouldFail)
	require.NoError(t, a.FailMember("1"))
	require.True(t, a.Status().Failed)
	require.NoError(t, a.Close())
	_, err = raid.Assemble(r.devs, opts)
	require.ErrorIs(t, err, raid.ErrCannotStart)
	assert.NotContains(t, err.Error(), "raidd add", "RAID0 cannot rebuild: the advice must be one that works")
	opts.ForceAssemble = true
	a, err = raid.Assemble(r.devs, opts)
	require.NoError(t, err)
	require.False(t, a.Status().Degraded)
	requireContent(t, a, want, "forced RAID0")
	require.NoError(t, a.Close())
}

func cloneMem(m *member.Memory) *member.Memory {
	c := member.NewMemory(m.Size())
	buf := make([]byte, m.Size())
	if _, err := m.ReadAt(buf, 0); err != nil {
		panic(err)
	}
	if _, err := c.WriteAt(buf, 0); err != nil {
		panic(err)
	}
	return c
}

// TestForceAssembleRefusesSplitBrain: two halves of a RAID5 each ran
// degraded without the other's member and recorded it as failed. A forced
// assembly of one member of each half refuses to guess.
func TestForceAssembleRefusesSplitBrain(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(3, memberSizeFor(chunk, 8))
	opts := raid.Options{CleanDelay: -1}
	a, err := raid.Create(r.devs, raid.CreateOptions{Name: "split", Level: stripe.RAID5, Chunk: chunk}, opts)
	require.NoError(t, err)
	fill(t, a, 24)
	require.NoError(t, a.Close())
	b1, c1 := cloneMem(r.mem[1]), cloneMem(r.mem[2])
	half := []raid.Device{{Path: "b'", Member: keep{b1}}, {Path: "c'", Member: keep{c1}}}

	a, err = raid.Assemble(r.devs[:2], opts) // A and B; C missing
	require.NoError(t, err)
	_, err = a.WriteAt([]byte("one"), 0)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	a, err = raid.Assemble(half, opts) // B' and C'; A missing
	require.NoError(t, err)
	_, err = a.WriteAt([]byte("two"), 0)
	require.NoError(t, err)
	require.NoError(t, a.Close())

	mixed := []raid.Device{r.devs[0], half[1]} // A and C': each records the other as failed
	_, err = raid.Assemble(mixed, opts)
	require.ErrorIs(t, err, raid.ErrCannotStart)
	opts.ForceAssemble = true
	_, err = raid.Assemble(mixed, opts)
	require.ErrorIs(t, err, raid.ErrDiverged)
	assert.True(t, strings.Contains(err.Error(), "split brain"), "%v", err)
}

// TestRAID0SuperblockErrorKeepsMember: a RAID0 member that cannot take a
// superblock update (here the one marking the array dirty before a write)
// is not recorded as failed: the write, which lives on a healthy member,
// succeeds, and the array is not failed.
func TestRAID0SuperblockErrorKeepsMember(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(3, memberSizeFor(chunk, 8))
	opts := raid.Options{CleanDelay: -1}
	a, err := raid.Create(r.devs, raid.CreateOptions{Name: "r0sb", Level: stripe.RAID0, Chunk: chunk}, opts)
	require.NoError(t, err)
	require.False(t, a.Status().Dirty)
	r.toggles[1].On()
	p := []byte("on member 0")
	_, err = a.WriteAt(p, 0)
	require.NoError(t, err, "a write to a healthy member's range")
	st := a.Status()
	assert.False(t, st.Failed)
	sb, err := superblock.Read(r.mem[0])
	require.NoError(t, err)
	for _, mi := range sb.Members {
		assert.Equal(t, superblock.MemberActive, mi.State)
	}
	r.toggles[1].Off()
	require.NoError(t, a.Close())
	a, err = raid.Assemble(r.devs, opts)
	require.NoError(t, err)
	got := make([]byte, len(p))
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	assert.Equal(t, p, got)
	require.NoError(t, a.Close())
}

// TestRAID10MissingMessage: a RAID10 missing two members that hold the
// same chunks is refused with what is lost (no copy left), not "tolerates
// only 1", which a RAID10 missing one member of each pair contradicts by
// starting.
func TestRAID10MissingMessage(t *testing.T) {
	r, want, _ := filledRig(t, stripe.RAID10, 4)
	_, err := raid.Assemble([]raid.Device{r.devs[2], r.devs[3]}, raid.Options{CleanDelay: -1, ReadOnly: true})
	require.ErrorIs(t, err, raid.ErrCannotStart)
	assert.Contains(t, err.Error(), "missing roles 0, 1 and raid10 has no copy left of some of the chunks these roles hold")
	assert.NotContains(t, err.Error(), "tolerates only")

	a, err := raid.Assemble([]raid.Device{r.devs[1], r.devs[3]}, raid.Options{CleanDelay: -1, ReadOnly: true})
	require.NoError(t, err, "one member of each pair is enough")
	requireContent(t, a, want, "one member of each pair")
	require.NoError(t, a.Close())
}

// raid5FailedTwice is raid5MissedWrites, then member 2 failed by force
// (the array is FAILED: member 2 holds every write, member 1 misses the
// last ones) and the array closed.
func raid5FailedTwice(t *testing.T, name string, seed int64, b byte) (*rig, []byte, raid.Options) {
	t.Helper()
	r, a, want, opts := raid5MissedWrites(t, name, seed, b)
	require.NoError(t, a.FailMemberChecked(r.devs[2].Path, true))
	require.NoError(t, a.Close())
	return r, want, opts
}

// TestForceAssembleRefusesWhenTheLastToFailIsMissing: member 1 fails,
// writes follow that only members 0, 2 and 3 hold, then member 2 is failed
// by force (the array is FAILED). Member 2 holds every write; member 1
// does not. With member 2 absent, or its superblock damaged, a forced
// start used to trust member 1 (the freshest member given) and serve its
// stale chunks. It now refuses: member 1's own superblock shows the array
// still ran after it left. --accept-loss starts it anyway, as asked; with
// member 2 given, member 2 is trusted and every byte is served.
func TestForceAssembleRefusesWhenTheLastToFailIsMissing(t *testing.T) {
	r, want, opts := raid5FailedTwice(t, "early", 23, 'e')
	m2, err := superblock.Read(r.mem[2])
	require.NoError(t, err)

	forced := opts
	forced.ForceAssemble = true
	given := []raid.Device{r.devs[0], r.devs[1], r.devs[3]}
	_, err = raid.Assemble(given, forced)
	require.ErrorIs(t, err, raid.ErrCannotStart)
	assert.Contains(t, err.Error(), "mem1 (event")
	assert.Contains(t, err.Error(), "left while \"early\" still ran without it")
	assert.Contains(t, err.Error(), "role 2's "+superblock.FormatUUID(m2.MemberUUID)+" (not given)")
	assert.Contains(t, err.Error(), "--accept-loss")

	// Member 2 given with both superblock slots damaged: the same.
	saved := make([]byte, 3*superblock.SlotSize)
	_, err = r.mem[2].ReadAt(saved, superblock.SlotOffset(0))
	require.NoError(t, err)
	require.NoError(t, superblock.Erase(r.mem[2]))
	_, err = raid.Assemble(r.devs, forced)
	require.ErrorIs(t, err, raid.ErrCannotStart)
	assert.Contains(t, err.Error(), "left while")
	_, err = r.mem[2].WriteAt(saved, superblock.SlotOffset(0))
	require.NoError(t, err)

	a := assembleArray(t, r.devs, forced)
	requireContent(t, a, want, "forced with the member that failed last")
	require.NoError(t, a.Close())
}

// TestForceAssembleAcceptLossTrustsTheEarlyMember: --accept-loss is the
// operator's word that the member that failed last is gone for good: the
// array starts from the one that left before it, and serves what it has.
func TestForceAssembleAcceptLossTrustsTheEarlyMember(t *testing.T) {
	r, _, opts := raid5FailedTwice(t, "loss", 24, 'l')
	opts.ForceAssemble, opts.AcceptLoss = true, true
	a := assembleArray(t, []raid.Device{r.devs[0], r.devs[1], r.devs[3]}, opts)
	st := a.Status()
	assert.False(t, st.Failed)
	assert.True(t, st.Degraded)
	require.NoError(t, a.Close())
}

// TestFailedArrayKeepsItsFailedMembers: on a FAILED array, removing a
// member that failed in a role is refused (the forced assembly that brings
// the array back may need it: the one that failed last holds every
// acknowledged write, and on RAID0 nothing else could start the array),
// and so is adding one back when nothing tells what it missed (no
// bitmap): as a spare it would be erased. Following the refusal, a forced
// assembly with every member serves every byte.
func TestFailedArrayKeepsItsFailedMembers(t *testing.T) {
	for _, tc := range []struct {
		level  stripe.Level
		n      int
		bitmap int64
	}{{stripe.RAID5, 3, -1}, {stripe.RAID5, 3, 4 * raid5Chunk}, {stripe.RAID0, 2, 0}} {
		t.Run(fmt.Sprintf("%s-bitmap%d", tc.level, tc.bitmap), func(t *testing.T) {
			r := newRig(tc.n, memberSizeFor(raid5Chunk, 32))
			opts := raid.Options{CleanDelay: -1}
			a, err := raid.Create(r.devs, raid.CreateOptions{Name: "kept", Level: tc.level, Chunk: raid5Chunk, BitmapRegion: tc.bitmap}, opts)
			require.NoError(t, err)
			want := fill(t, a, 25)
			last := tc.n - 1
			if tc.level != stripe.RAID0 {
				require.NoError(t, a.FailMemberChecked(r.devs[1].Path, false))
				writeEnds(t, a, want, 'k') // member 1 misses these
			}
			require.NoError(t, a.FailMemberChecked(r.devs[last].Path, true))
			require.True(t, a.Status().Failed)

			err = a.RemoveMember(r.devs[last].Path)
			require.ErrorIs(t, err, raid.ErrBusy)
			assert.Contains(t, err.Error(), "is FAILED")
			assert.Contains(t, err.Error(), "forced assembly")
			err = a.RemoveMember(fmt.Sprint(last))
			require.ErrorIs(t, err, raid.ErrBusy, "by role too")
			if tc.level != stripe.RAID0 {
				// A re-add: the daemon releases the device first, which
				// refuses, keeping it; the add itself refuses too.
				err = a.Release(r.devs[last].Path)
				require.ErrorIs(t, err, raid.ErrBusy)
				assert.Contains(t, err.Error(), "cannot be re-added online")
				err = a.AddMember(raid.Device{Path: "again", Member: r.devs[last].Member}, false)
				require.ErrorIs(t, err, raid.ErrBusy)
			}
			require.NoError(t, a.Close())

			if tc.level != stripe.RAID0 {
				m, err := superblock.Read(r.mem[last])
				require.NoError(t, err)
				assert.EqualValues(t, last, m.Role, "the member that failed last is still a member, not a spare")
			}
			opts.ForceAssemble = true
			a = assembleArray(t, r.devs, opts)
			requireContent(t, a, want, "forced, after the refusals")
			require.NoError(t, a.Close())
		})
	}
}

// TestForceAssembleTrustsMembersThatDroppedTogether: two RAID5 members
// stop taking writes at once (a cable, a controller). Both last wrote
// their superblocks at the same event, so neither left while the array
// ran on without it: a forced start trusts one, also with the other lost
// for good (it used to be refused then, as if that one had stayed), and
// every write the array acknowledged is served (the write that met the
// failure was not acknowledged; its range is left out of the comparison).
func TestForceAssembleTrustsMembersThatDroppedTogether(t *testing.T) {
	for _, lost := range []bool{false, true} {
		t.Run(fmt.Sprint("oneLost=", lost), func(t *testing.T) {
			r := newRig(4, memberSizeFor(raid5Chunk, 32))
			opts := raid.Options{CleanDelay: -1}
			a, err := raid.Create(r.devs, raid.CreateOptions{Name: "drop", Level: stripe.RAID5, Chunk: raid5Chunk}, opts)
			require.NoError(t, err)
			want := fill(t, a, 26)
			r.toggles[1].On()
			r.toggles[2].On()
			p := make([]byte, 3*raid5Chunk)
			_, err = a.WriteAt(p, 0)
			require.Error(t, err, "the write that met both failures")
			require.True(t, a.Status().Failed)
			require.NoError(t, a.Close())
			r.toggles[1].Off()
			r.toggles[2].Off()

			_, err = raid.Assemble(r.devs, opts)
			require.ErrorIs(t, err, raid.ErrCannotStart)
			opts.ForceAssemble = true
			given := r.devs
			if lost {
				// The newest superblock records both failed in the update
				// right after their last, so neither stayed after the
				// other: the one left is trusted.
				given = []raid.Device{r.devs[0], r.devs[2], r.devs[3]}
			}
			a = assembleArray(t, given, opts)
			got := make([]byte, len(want))
			_, err = a.ReadAt(got, 0)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want[len(p):], got[len(p):]), "every acknowledged write")
			require.NoError(t, a.Close())
		})
	}
}

// TestFailedArrayReleasesDevicesNoOneNeeds: on a FAILED array, a device
// that holds no role (a spare removed earlier, then given at start, left
// out as not in the member table) can still be removed: no forced
// assembly can use it. It used to be refused like a failed member.
func TestFailedArrayReleasesDevicesNoOneNeeds(t *testing.T) {
	r := newRig(4, memberSizeFor(raid5Chunk, 16))
	opts := raid.Options{CleanDelay: -1}
	a, err := raid.Create(r.devs[:3], raid.CreateOptions{Name: "free", Level: stripe.RAID5, Chunk: raid5Chunk}, opts)
	require.NoError(t, err)
	fill(t, a, 29)
	require.NoError(t, a.AddMember(r.devs[3], false))
	require.NoError(t, a.RemoveMember(r.devs[3].Path))
	require.NoError(t, a.Close())

	a = assembleArray(t, r.devs, opts)
	require.NoError(t, a.FailMemberChecked(r.devs[1].Path, false))
	require.NoError(t, a.FailMemberChecked(r.devs[2].Path, true))
	require.True(t, a.Status().Failed)
	err = a.RemoveMember(r.devs[2].Path)
	require.ErrorIs(t, err, raid.ErrBusy, "a failed member: a forced assembly may need it")
	assert.Contains(t, err.Error(), "leave the array out of its configuration")
	require.NoError(t, a.RemoveMember(r.devs[3].Path), "a device with no role")
	require.NoError(t, a.Close())
}
