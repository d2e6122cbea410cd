package raid_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	randv2 "math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	_ "github.com/raidd/raidd/raid/raid0"
	_ "github.com/raidd/raidd/raid/raid1"
	_ "github.com/raidd/raidd/raid/raid10"
	_ "github.com/raidd/raidd/raid/raid5"
	_ "github.com/raidd/raidd/raid/raid6"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// keep wraps a member so that closing the array does not destroy it, and a
// test can assemble the same members again.
type keep struct{ raid.Member }

func (keep) Close() error { return nil }

// ReadvAt and WritevAt make every test member look vectored, so that the
// engine's merging of back-to-back requests runs in every test; each
// buffer still goes through the wrapped member (and its fault injection).
func (k keep) ReadvAt(bufs [][]byte, off int64) (int, error) {
	done := 0
	for _, b := range bufs {
		n, err := k.ReadAt(b, off)
		done += n
		if err != nil {
			return done, err
		}
		off += int64(n)
	}
	return done, nil
}

func (k keep) WritevAt(bufs [][]byte, off int64) (int, error) {
	done := 0
	for _, b := range bufs {
		n, err := k.WriteAt(b, off)
		done += n
		if err != nil {
			return done, err
		}
		off += int64(n)
	}
	return done, nil
}

// rig is a set of fault-injectable memory members.
type rig struct {
	mem     []*member.Memory
	toggles []*membertest.Toggle
	devs    []raid.Device
}

func newRig(n int, size int64) *rig {
	r := &rig{}
	for i := 0; i < n; i++ {
		m := member.NewMemory(size)
		tg := membertest.NewToggle(membertest.Always())
		r.mem = append(r.mem, m)
		r.toggles = append(r.toggles, tg)
		r.devs = append(r.devs, raid.Device{Path: fmt.Sprintf("mem%d", i), Member: keep{membertest.Inject(m, tg)}})
	}
	return r
}

// fillKeep is a rig member that also lets a write's bytes be computed in
// place (FillAt), as a member held in memory does (raid.Op.WriteFill): on
// the member's memory while its Toggle injects no write fault; with one,
// it refuses, and the write the engine makes instead meets the fault.
type fillKeep struct {
	keep
	mem *member.Memory
	tg  *membertest.Toggle
}

func (k fillKeep) FillAt(off, n int64, f member.Filler, src [][]byte) bool {
	if k.tg.MaybeError(membertest.OpWrite, off, n) != nil {
		return false
	}
	return k.mem.FillAt(off, n, f, src)
}

// offerFill makes every member of the rig offer FillAt (fillKeep).
func (r *rig) offerFill() {
	for i := range r.devs {
		r.devs[i].Member = fillKeep{r.devs[i].Member.(keep), r.mem[i], r.toggles[i]}
	}
}

// memberSizeFor returns a member size giving rows rows of data to a RAID5
// or RAID6 array of up to 6 members with the default write-hole log area;
// levels without a log get the log area's bytes as extra rows.
func memberSizeFor(chunk, rows int64) int64 {
	return superblock.HeaderSize + raid.JournalLength(6, chunk) + chunk*rows
}

// levelSizeFor returns a member size giving exactly rows rows of data to
// an array of level with up to 6 members (and the default consistency
// policy).
func levelSizeFor(level stripe.Level, chunk, rows int64) int64 {
	return dataOffsetOf(level, 6, chunk) + chunk*rows
}

// dataOffsetOf returns where the data region starts on the members of a
// new array of level with n members and the default consistency policy:
// after the header, and after the write-hole log area on RAID5 and RAID6.
func dataOffsetOf(level stripe.Level, n int, chunk int64) int64 {
	if level == stripe.RAID5 || level == stripe.RAID6 {
		return superblock.HeaderSize + raid.JournalLength(n, chunk)
	}
	return superblock.HeaderSize
}

// createArray creates an array from devs and registers a cleanup that
// checks it (see checkArray) and closes it, as bbolt checks every test
// database.
func createArray(tb testing.TB, devs []raid.Device, co raid.CreateOptions, o raid.Options) *raid.Array {
	tb.Helper()
	a, err := raid.Create(devs, co, o)
	require.NoError(tb, err, "create")
	tb.Cleanup(func() { checkAndClose(tb, a) })
	return a
}

// assembleArray assembles devs and registers the same cleanup as createArray.
func assembleArray(tb testing.TB, devs []raid.Device, o raid.Options) *raid.Array {
	tb.Helper()
	a, err := raid.Assemble(devs, o)
	require.NoError(tb, err, "assemble")
	tb.Cleanup(func() { checkAndClose(tb, a) })
	return a
}

// checkAndClose checks a and closes it. An array the test closed or
// abandoned itself is left alone: a test that closes an array in an
// orderly way calls checkArray first (see closeChecked).
func checkAndClose(tb testing.TB, a *raid.Array) {
	tb.Helper()
	if _, closed := checkUntilSettled(tb, a); closed {
		return
	}
	_ = a.Close()
}

// closeChecked checks a, then closes it and requires the close to succeed.
func closeChecked(tb testing.TB, a *raid.Array) {
	tb.Helper()
	checkArray(tb, a)
	require.NoError(tb, a.Close(), "close")
}

// checkArray verifies what is verifiable, degraded or not: no row may be
// inconsistent; rows are unverifiable only where the array is degraded (or
// busy rebuilding a member, or the level keeps no redundancy); and the
// counts add up.
func checkArray(tb testing.TB, a *raid.Array) raid.CheckResult {
	tb.Helper()
	res, _ := checkUntilSettled(tb, a)
	return res
}

// checkUntilSettled runs Check and judges it. A check can itself change the
// array: a member whose device fails is noticed by the check's reads, is
// failed, and a spare may be claimed and even rebuilt before the check
// ends. Rows left unverified across such a change are no fault of the
// engine, so the check is run again (a few times at most) until one runs
// with the array's membership unchanged, and that one is judged. closed
// reports that the array was already closed.
func checkUntilSettled(tb testing.TB, a *raid.Array) (res raid.CheckResult, closed bool) {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		before := a.Status()
		res, err := a.Check()
		if errors.Is(err, raid.ErrClosed) && res.Rows == 0 {
			return res, true
		}
		after := a.Status()
		if attempt < 4 && errors.Is(err, raid.ErrUnverifiable) && !errors.Is(err, raid.ErrFailed) && membershipChanged(before, after) {
			tb.Logf("check %d: the array changed during the check (%s), checking again", attempt, res)
			continue
		}
		judgeCheck(tb, a, before, after, res, err)
		return res, false
	}
}

// changedDuring reports whether background work ran at either snapshot or
// the membership changed between them (see membershipChanged).
func changedDuring(before, after raid.Status) bool {
	busy := before.Recovery != nil || after.Recovery != nil || before.Resync != nil || after.Resync != nil
	return busy || membershipChanged(before, after)
}

// membershipChanged reports whether a member failed, was claimed or was
// removed, or a rebuild, replace or resync finished, between two snapshots.
func membershipChanged(before, after raid.Status) bool {
	if !reflect.DeepEqual(before.LastRecovery, after.LastRecovery) || !reflect.DeepEqual(before.LastResync, after.LastResync) {
		return true
	}
	if len(before.Devices) != len(after.Devices) {
		return true
	}
	for i, b := range before.Devices {
		d := after.Devices[i]
		if b.Path != d.Path || b.Role != d.Role || b.State != d.State {
			return true
		}
	}
	return false
}

// wholeIdleUnverified reports whether a check that left rows unverified ran
// on an array that could have verified every row: redundant, not degraded
// before or after, and unchanged (see changedDuring) throughout.
func wholeIdleUnverified(redundant bool, before, after raid.Status) bool {
	return redundant && !before.Degraded && !after.Degraded && !changedDuring(before, after)
}

func judgeCheck(tb testing.TB, a *raid.Array, before, after raid.Status, res raid.CheckResult, err error) {
	tb.Helper()
	assert.Equal(tb, res.Rows, res.Verified+res.Inconsistent+res.Unverifiable, "check counts: %+v", res)
	assert.Zero(tb, res.Inconsistent, "check: inconsistent rows: %v", err)
	if err == nil {
		assert.True(tb, res.Consistent(), "check returned no error but %s", res)
		return
	}
	switch {
	case errors.Is(err, raid.ErrInconsistent):
		// Reported above.
	case errors.Is(err, raid.ErrFailed):
		require.True(tb, after.Failed, "check says failed, status does not: %v", err)
	case errors.Is(err, raid.ErrUnverifiable):
		assert.Positive(tb, res.Unverifiable, "ErrUnverifiable without unverifiable rows: %s", res)
		if wholeIdleUnverified(a.Geometry().Tolerance() > 0, before, after) {
			tb.Errorf("check of a whole, idle array left rows unverified: %s (%v); before %+v after %+v", res, err, before, after)
		}
	default:
		tb.Errorf("check: %v", err)
	}
}

// validShapes lists member counts per level for the model test.
func validShapes() map[stripe.Level][]int {
	return map[stripe.Level][]int{
		stripe.RAID0:  {2, 3, 5},
		stripe.RAID1:  {2, 3},
		stripe.RAID5:  {3, 4, 5},
		stripe.RAID6:  {4, 5, 6},
		stripe.RAID10: {2, 3, 4},
	}
}

func failRole(tb testing.TB, a *raid.Array, m int) {
	tb.Helper()
	a.FailRole(m, fmt.Errorf("failed by test"))
	require.True(tb, a.Status().Degraded)
}

// checkConsistent requires every row of a to be verified consistent.
func checkConsistent(tb testing.TB, a *raid.Array, msgAndArgs ...any) {
	tb.Helper()
	res, err := a.Check()
	require.NoError(tb, err, msgAndArgs...)
	require.True(tb, res.Consistent(), "%s", res)
}

// randomBytes fills p with bytes determined by seed, much faster than
// math/rand's Read (which dominated the model test's CPU time): 64 KiB of
// ChaCha8 output, repeated, with every 512-byte sector after the first
// 64 KiB stamped with its offset, so that no two sectors of p are alike and
// data written to the wrong place never reads as right.
func randomBytes(p []byte, seed int64) {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], uint64(seed))
	n := min(len(p), 64<<10)
	_, _ = randv2.NewChaCha8(key).Read(p[:n])
	for off := n; off < len(p); off += n {
		copy(p[off:], p[:n])
	}
	for s := n; s+8 <= len(p); s += 512 {
		binary.LittleEndian.PutUint64(p[s:], uint64(seed)^uint64(s)*0x9e3779b97f4a7c15)
	}
}
