package raid_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// filledRig creates an array of level on n memory members (16 KiB
// chunks, 8 rows), fills it, and closes it; it returns the rig, the bytes
// written and each member's superblock as it was.
func filledRig(t *testing.T, level stripe.Level, n int) (*rig, []byte, []*superblock.Meta) {
	t.Helper()
	const chunk = 16 << 10
	r := newRig(n, memberSizeFor(chunk, 8))
	a, err := raid.Create(r.devs, raid.CreateOptions{Name: "rh", Level: level, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	want := fill(t, a, 41)
	require.NoError(t, a.Close())
	metas := make([]*superblock.Meta, n)
	for i := range n {
		metas[i], err = superblock.Read(r.mem[i])
		require.NoError(t, err)
	}
	return r, want, metas
}

// damageSlots flips a byte of both superblock slots of member i, so that
// neither passes its checksum while the identity fields stay.
func damageSlots(t *testing.T, r *rig, i int) {
	t.Helper()
	for s := range superblock.Slots {
		off := superblock.SlotOffset(s) + 1000
		b := make([]byte, 1)
		_, err := r.mem[i].ReadAt(b, off)
		require.NoError(t, err)
		b[0] ^= 0x40
		_, err = r.mem[i].WriteAt(b, off)
		require.NoError(t, err)
	}
	_, err := superblock.Read(r.mem[i])
	require.ErrorIs(t, err, superblock.ErrChecksum)
}

func without(devs []raid.Device, i int) []raid.Device {
	var out []raid.Device
	for j, d := range devs {
		if j != i {
			out = append(out, d)
		}
	}
	return out
}

// TestRestoreHeaderWiped: a RAID0 member whose header was wiped (no magic
// left) keeps the array from starting; restore-header, told its role,
// writes it back from the other members and the array serves every byte.
// Without the role, or with a role a given member holds, it refuses and
// names the roles that are open.
func TestRestoreHeaderWiped(t *testing.T) {
	r, want, metas := filledRig(t, stripe.RAID0, 3)
	require.NoError(t, superblock.Erase(r.mem[1]))
	_, err := raid.Assemble(r.devs, raid.Options{CleanDelay: -1})
	require.ErrorIs(t, err, raid.ErrNotMember)
	assert.Contains(t, err.Error(), "raidd restore-header", "the refusal names the way back")

	peers := without(r.devs, 1)
	_, err = raid.RestoreHeader(r.devs[1], peers, raid.RestoreOptions{Role: -1})
	require.ErrorIs(t, err, raid.ErrConfig)
	assert.Contains(t, err.Error(), "roles no member given holds: 1")
	assert.Contains(t, err.Error(), "--role N")
	_, err = raid.RestoreHeader(r.devs[1], peers, raid.RestoreOptions{Role: 2})
	require.ErrorIs(t, err, raid.ErrConfig)
	assert.Contains(t, err.Error(), "role 2 of \"rh\" is mem2")
	_, err = raid.RestoreHeader(r.devs[1], peers, raid.RestoreOptions{Role: 3})
	require.ErrorIs(t, err, raid.ErrConfig)
	_, err = raid.Assemble(r.devs, raid.Options{CleanDelay: -1})
	require.ErrorIs(t, err, raid.ErrNotMember, "refusals write nothing")

	m, err := raid.RestoreHeader(r.devs[1], peers, raid.RestoreOptions{Role: 1})
	require.NoError(t, err)
	assert.Equal(t, metas[1].MemberUUID, m.MemberUUID)
	assert.EqualValues(t, 1, m.Role)
	assert.Equal(t, metas[1].Events, m.Events)

	a := assembleArray(t, r.devs, raid.Options{CleanDelay: -1})
	requireContent(t, a, want, "after the restore")
	assert.Equal(t, "clean", a.Status().State)

	_, err = raid.RestoreHeader(r.devs[1], peers, raid.RestoreOptions{Role: 1})
	require.Error(t, err, "a member whose header reads has nothing to restore")
}

// TestRestoreHeaderDamaged: both slots of a member fail their checksums
// but still carry its identity, so restore-header needs no role, refuses a
// role that disagrees, and refuses a device whose damaged header names
// another array.
func TestRestoreHeaderDamaged(t *testing.T) {
	r, want, metas := filledRig(t, stripe.RAID0, 3)
	damageSlots(t, r, 2)
	_, err := raid.Assemble(r.devs, raid.Options{CleanDelay: -1})
	require.ErrorIs(t, err, raid.ErrCorrupt)
	assert.Contains(t, err.Error(), "raidd restore-header")

	// The damaged member of another array is not this array's member.
	o, _, _ := filledRig(t, stripe.RAID0, 3)
	damageSlots(t, o, 2)
	_, err = raid.RestoreHeader(o.devs[2], without(r.devs, 2), raid.RestoreOptions{Role: 2})
	require.ErrorIs(t, err, raid.ErrForeign)

	_, err = raid.RestoreHeader(r.devs[2], without(r.devs, 2), raid.RestoreOptions{Role: 0})
	require.ErrorIs(t, err, raid.ErrConfig)
	assert.Contains(t, err.Error(), "says it was role 2")

	m, err := raid.RestoreHeader(r.devs[2], without(r.devs, 2), raid.RestoreOptions{Role: -1})
	require.NoError(t, err)
	assert.Equal(t, metas[2].MemberUUID, m.MemberUUID)
	a := assembleArray(t, r.devs, raid.Options{CleanDelay: -1})
	requireContent(t, a, want, "after the restore")
}

// TestRestoreHeaderRedundant: on RAID5 restore-header refuses a member the
// array starts without (adding it back rebuilds it and trusts nothing on
// it) unless forced; a member the array recorded as failed is refused even
// when the array cannot start without it, since it missed writes; a member
// that was in sync is restored, and the array serves every byte with
// parity consistent.
func TestRestoreHeaderRedundant(t *testing.T) {
	r, _, _ := filledRig(t, stripe.RAID5, 4)
	require.NoError(t, superblock.Erase(r.mem[3]))
	_, err := raid.RestoreHeader(r.devs[3], without(r.devs, 3), raid.RestoreOptions{Role: 3})
	require.ErrorIs(t, err, raid.ErrConfig)
	assert.Contains(t, err.Error(), "starts without")
	assert.Contains(t, err.Error(), "raidd add --force")
	_, err = raid.RestoreHeader(r.devs[3], without(r.devs, 3), raid.RestoreOptions{Role: 3, Force: true})
	require.NoError(t, err)
	a := assembleArray(t, r.devs, raid.Options{CleanDelay: -1})
	assert.False(t, a.Status().Degraded)
	checkConsistent(t, a)
	failRole(t, a, 1) // role 1 misses the writes that follow
	want := fill(t, a, 43)
	require.NoError(t, a.Close())

	require.NoError(t, superblock.Erase(r.mem[1]))
	require.NoError(t, superblock.Erase(r.mem[2]))
	peers := []raid.Device{r.devs[0], r.devs[3]}
	_, err = raid.RestoreHeader(r.devs[1], peers, raid.RestoreOptions{Role: 1})
	require.ErrorIs(t, err, raid.ErrCannotStart)
	assert.Contains(t, err.Error(), "records role 1's member")
	assert.Contains(t, err.Error(), "as failed")
	_, err = raid.RestoreHeader(r.devs[2], peers, raid.RestoreOptions{Role: 2})
	require.NoError(t, err)

	a = assembleArray(t, []raid.Device{r.devs[0], r.devs[2], r.devs[3]}, raid.Options{CleanDelay: -1})
	requireContent(t, a, want, "restored, degraded")
	assert.True(t, a.Status().Degraded)
}

// TestRestoreHeaderTooSmall: a device smaller than the array's members
// (another device, or one that shrank) is refused with both sizes.
func TestRestoreHeaderTooSmall(t *testing.T) {
	r, _, _ := filledRig(t, stripe.RAID0, 2)
	small := newRig(1, superblock.HeaderSize+16<<10)
	small.devs[0].Path = "small"
	_, err := raid.RestoreHeader(small.devs[0], without(r.devs, 1), raid.RestoreOptions{Role: 1})
	require.ErrorIs(t, err, raid.ErrConfig)
	assert.Contains(t, err.Error(), "members need")
}

// TestRestoreHeaderNamesItsOwnEntry: member 1 failed and a spare was
// rebuilt into its role. Member 1's damaged header still names member 1,
// which the table records as failed: it is refused, where it used to be
// given the spare's identity (and served its stale chunks as role 1's).
func TestRestoreHeaderNamesItsOwnEntry(t *testing.T) {
	const chunk = 16 << 10
	r := newRig(5, memberSizeFor(chunk, 8))
	a, err := raid.Create(r.devs[:4], raid.CreateOptions{Name: "sp", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	fill(t, a, 44)
	require.NoError(t, a.AddMember(r.devs[4], false))
	failRole(t, a, 1) // the spare is rebuilt into role 1
	waitIdle(t, a)
	fill(t, a, 45) // member 1 misses these
	require.NoError(t, a.Close())
	damageSlots(t, r, 1)

	peers := []raid.Device{r.devs[0], r.devs[2]} // member 3 and the spare lost
	_, err = raid.RestoreHeader(r.devs[1], peers, raid.RestoreOptions{Role: -1, Force: true})
	require.ErrorIs(t, err, raid.ErrCannotStart)
	assert.Contains(t, err.Error(), "as failed")
	_, err = raid.RestoreHeader(r.devs[1], peers, raid.RestoreOptions{Role: 1, Force: true})
	require.ErrorIs(t, err, raid.ErrCannotStart, "the role given does not change whose header it is")
}

// TestRestoreHeaderPeersBehind: a RAID1 member took writes after the
// other was failed, then its header was damaged. Its slots' event counter
// is newer than the stale peer's, so a header rebuilt from that peer
// (whose copy a resync would then spread) is refused, forced or not, and
// also when the damage took the slots' identity (a byte of the array UUID
// flipped, the member UUID zeroed, a byte of the magic flipped).
func TestRestoreHeaderPeersBehind(t *testing.T) {
	for name, at := range map[string]struct {
		off int64
		p   []byte
	}{"checksum": {1000, []byte{0x40}}, "array-uuid": {19, []byte{0x5a}}, "member-uuid": {120, make([]byte, 16)}, "magic": {1, []byte{'x'}}} {
		t.Run(name, func(t *testing.T) {
			r := mirrorFailedInTurn(t, "behind", 2, 46)
			for s := range superblock.Slots {
				_, err := r.mem[1].WriteAt(at.p, superblock.SlotOffset(s)+at.off)
				require.NoError(t, err)
			}
			_, err := superblock.Read(r.mem[1])
			require.Error(t, err)
			for _, force := range []bool{false, true} {
				_, err = raid.RestoreHeader(r.devs[1], r.devs[:1], raid.RestoreOptions{Role: 1, Force: force})
				require.Error(t, err)
				assert.Contains(t, err.Error(), "newer than the newest member given")
			}
			_, err = raid.Assemble(r.devs, raid.Options{CleanDelay: -1})
			require.ErrorIs(t, err, raid.ErrCannotStart)
			assert.Contains(t, err.Error(), "newer than every readable member's")
		})
	}
}

// TestRestoreHeaderGarbledIdentity: a byte flipped in the member UUID of
// both slots still names member 1 (a UUID off by a byte or two is that
// UUID, garbled), and is restored without a role. A member UUID zeroed
// names no member: that is refused as foreign unless the operator gives
// the role and --force. A slot whose identity is intact wins over one
// whose identity is garbled.
func TestRestoreHeaderGarbledIdentity(t *testing.T) {
	r, want, metas := filledRig(t, stripe.RAID0, 3)
	const uuidAt = 120 // the member UUID's offset in a slot
	garble := func(slot int, p []byte) {
		_, err := r.mem[1].WriteAt(p, superblock.SlotOffset(slot)+uuidAt+5)
		require.NoError(t, err)
	}
	rewrite := func() { // both slots as they were, before the damage
		for s := range superblock.Slots {
			b := make([]byte, superblock.SlotSize)
			require.NoError(t, metas[1].Encode(b))
			_, err := r.mem[1].WriteAt(b, superblock.SlotOffset(s))
			require.NoError(t, err)
		}
	}
	peers := without(r.devs, 1)
	garble(0, make([]byte, 11))
	damageSlots(t, r, 1)
	m, err := raid.RestoreHeader(r.devs[1], peers, raid.RestoreOptions{Role: -1})
	require.NoError(t, err, "slot 1 still names member 1")
	assert.Equal(t, metas[1].MemberUUID, m.MemberUUID)

	rewrite()
	for s := range superblock.Slots {
		garble(s, []byte{0x5a}) // one byte: the UUID, garbled
	}
	m, err = raid.RestoreHeader(r.devs[1], peers, raid.RestoreOptions{Role: -1})
	require.NoError(t, err, "a member UUID off by a byte")
	assert.Equal(t, metas[1].MemberUUID, m.MemberUUID)

	rewrite()
	for s := range superblock.Slots {
		garble(s, make([]byte, 11)) // the member UUID gone
	}
	_, err = raid.RestoreHeader(r.devs[1], peers, raid.RestoreOptions{Role: 1})
	require.ErrorIs(t, err, raid.ErrForeign)
	assert.Contains(t, err.Error(), "--role N --force")
	_, err = raid.RestoreHeader(r.devs[1], peers, raid.RestoreOptions{Role: 1, Force: true})
	require.NoError(t, err)
	a := assembleArray(t, r.devs, raid.Options{CleanDelay: -1})
	requireContent(t, a, want, "restored over a garbled identity")
}

// TestRestoreHeaderWantsEveryMember: without --force every other in-sync
// member must be given: with one left out, the trial start cannot tell
// whether the array runs without the device, and the header might come
// from members that are behind.
func TestRestoreHeaderWantsEveryMember(t *testing.T) {
	r, _, _ := filledRig(t, stripe.RAID5, 4)
	require.NoError(t, superblock.Erase(r.mem[3]))
	_, err := raid.RestoreHeader(r.devs[3], r.devs[:2], raid.RestoreOptions{Role: 3})
	require.ErrorIs(t, err, raid.ErrConfig)
	assert.Contains(t, err.Error(), "role 2's member")
	assert.Contains(t, err.Error(), "is not given")
}

// TestAssembleRefusesBehindADamagedNewerMember: a RAID1 member took
// writes after the other was failed, then its superblock was damaged.
// Started from the readable member alone the array would serve data older
// than what it acknowledged; given both, assembly refuses, naming the
// event counters, where it used to advise leaving the damaged one out.
func TestAssembleRefusesBehindADamagedNewerMember(t *testing.T) {
	r := mirrorFailedInTurn(t, "newer", 2, 48)
	damageSlots(t, r, 1)

	_, err := raid.Assemble(r.devs, raid.Options{CleanDelay: -1})
	require.ErrorIs(t, err, raid.ErrCannotStart)
	assert.Contains(t, err.Error(), "newer than every readable member's")
	assert.NotContains(t, err.Error(), "leave it out (the array starts degraded", "the advice that would serve the older copy")
	a := assembleArray(t, r.devs[:1], raid.Options{CleanDelay: -1})
	require.NoError(t, a.Close(), "left out, as the refusal says, if the loss is accepted")
}

// TestAssembleRefusesWithoutTheNewestOfThree: a 3-way RAID1 loses members
// one after the other; the last one standing (the only one with every
// write) then has its magic garbled. Given with the one that failed second
// (the first is gone), the array used to start from the stale one, taking
// the unreadable device for a failed member not given. It is refused.
func TestAssembleRefusesWithoutTheNewestOfThree(t *testing.T) {
	r := mirrorFailedInTurn(t, "three", 3, 50)
	for s := range superblock.Slots {
		_, err := r.mem[2].WriteAt([]byte{'x'}, superblock.SlotOffset(s)+1)
		require.NoError(t, err)
	}
	_, err := raid.Assemble(r.devs[1:], raid.Options{CleanDelay: -1})
	require.ErrorIs(t, err, raid.ErrCannotStart)
	assert.Contains(t, err.Error(), "newer than every readable member's")
}

// mirrorFailedInTurn creates a RAID1 of n memory members, fills it, then
// fails members 0 to n-2 one after the other, filling it again after each
// (seeds from seed on), and closes it: the last member alone holds every
// write.
func mirrorFailedInTurn(t *testing.T, name string, n int, seed int64) *rig {
	t.Helper()
	const chunk = 16 << 10
	r := newRig(n, memberSizeFor(chunk, 8))
	a, err := raid.Create(r.devs, raid.CreateOptions{Name: name, Level: stripe.RAID1, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	fill(t, a, seed)
	for i := range n - 1 {
		require.NoError(t, a.FailMemberChecked(r.devs[i].Path, true))
		fill(t, a, seed+1+int64(i))
	}
	require.NoError(t, a.Close())
	return r
}
