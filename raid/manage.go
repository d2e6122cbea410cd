package raid

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/raidd/raidd/raid/internal/integrity"
	"github.com/raidd/raidd/raid/superblock"
)

// findLocked resolves a member named by path, UUID or role number to its table
// index; the slot is nil for members whose device is absent. A dead
// (stale) member is found with index -1 and its dead slot. A role number
// names the member that holds the role, or, when none does, the failed
// member that last held it. Callers hold commitMu or cfgMu (it only reads
// the table).
// failedInRoleLocked finds the failed member entry of role r, as
// findLocked does (ok false: there is none).
func (a *Array) failedInRoleLocked(r int) (i int, s *slot, err error, ok bool) {
	var found []int
	for i, mi := range a.meta.Members {
		if int(mi.Role) == r && mi.State == superblock.MemberFailed {
			found = append(found, i)
		}
	}
	switch len(found) {
	case 0:
		return 0, nil, nil, false
	case 1:
		mi := a.meta.Members[found[0]]
		if d := a.deadSlotLocked(mi.UUID); d != nil {
			return -1, d, nil, true
		}
		return found[0], a.slots[mi.UUID], nil, true
	}
	var names []string
	for _, i := range found {
		names = append(names, a.memberNameLocked(a.meta.Members[i].UUID))
	}
	return 0, nil, fmt.Errorf("%w: role %d of %q was held by several failed members (%s); name one by path or uuid", ErrNoMember, r, a.meta.Name, strings.Join(names, ", ")), true
}

func (a *Array) findLocked(id string) (int, *slot, error) {
	for i, mi := range a.meta.Members {
		s := a.slots[mi.UUID]
		if (s != nil && s.path == id) || superblock.FormatUUID(mi.UUID) == id {
			if s == nil {
				if d := a.deadSlotLocked(mi.UUID); d != nil {
					return -1, d, nil
				}
			}
			return i, s, nil
		}
	}
	if r, err := strconv.Atoi(id); err == nil {
		for i, mi := range a.meta.Members {
			if int(mi.Role) == r && (mi.State == superblock.MemberActive || mi.State == superblock.MemberRebuilding) {
				return i, a.slots[mi.UUID], nil
			}
		}
		if i, s, err, ok := a.failedInRoleLocked(r); ok {
			return i, s, err
		}
	}
	for _, s := range a.dead {
		if s.path == id || superblock.FormatUUID(s.uuid) == id {
			return -1, s, nil
		}
	}
	return 0, nil, fmt.Errorf("%w: %q is not a member of %q (name a member by path, uuid or role)", ErrNoMember, id, a.meta.Name)
}

// releaseRetiredLocked closes the device a finished replace retired, if
// id names it (by path or uuid), and reports whether it did. A retired
// device is kept open until Close, since requests that began before the
// replace finished may still use it; an operator's 'raidd remove' (or an
// add of the same device, Release) comes long after them, and frees it
// without a restart. Callers hold cfgMu.
func (a *Array) releaseRetiredLocked(id string) bool {
	for k, s := range a.retired {
		if s.path == id || superblock.FormatUUID(s.uuid) == id {
			a.retired = append(a.retired[:k], a.retired[k+1:]...)
			_ = s.dev.Close()
			return true
		}
	}
	return false
}

// deadSlotLocked returns the stale device of member u, if present. Callers hold cfgMu.
func (a *Array) deadSlotLocked(u [16]byte) *slot {
	for _, d := range a.dead {
		if d.uuid == u {
			return d
		}
	}
	return nil
}

// memberNameLocked names member u for messages: its path if a device is
// present, else its UUID. Callers hold cfgMu.
func (a *Array) memberNameLocked(u [16]byte) string {
	if s := a.slots[u]; s != nil {
		return s.path
	}
	if s := a.deadSlotLocked(u); s != nil {
		return s.path
	}
	return superblock.FormatUUID(u)
}

// FailMember marks a member failed, as if it had returned an I/O error
// (mdadm --fail). The failure is on the survivors' superblocks when it
// returns; a spare, if any, is claimed and rebuilt onto. It does not ask
// for confirmation: see FailMemberChecked.
func (a *Array) FailMember(id string) error { return a.FailMemberChecked(id, true) }

// FailMemberChecked is FailMember that refuses, with ErrWouldFail, to fail
// an active member whose loss would leave the array with more members
// missing than its level tolerates, unless force is set.
func (a *Array) FailMemberChecked(id string, force bool) error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	if a.readOnly {
		return ErrReadOnly
	}
	a.lockConfig()
	defer a.unlockConfig()
	i, s, err := a.findLocked(id)
	if err != nil {
		return err
	}
	if i < 0 {
		return fmt.Errorf("%w: %s is stale, not in use; remove it with 'raidd remove' or re-add it with 'raidd add'", ErrBusy, id)
	}
	mi := &a.meta.Members[i]
	if s == nil {
		return fmt.Errorf("%w: %s is %s and its device is not present; remove it with 'raidd remove'", ErrBusy, id, mi.State)
	}
	switch mi.State {
	case superblock.MemberActive, superblock.MemberRebuilding:
		v := a.view.Load()
		bit := uint64(1) << uint(mi.Role)
		if left := v.readable &^ bit; !force && v.readable&bit != 0 && !a.geo.Survives(^left&fullMask(a.geo.Members())) {
			return fmt.Errorf("%w: failing %s (role %d) would leave %q FAILED: %s survives %d missing member(s) and roles %s would be missing; pass --force to fail it anyway",
				ErrWouldFail, id, mi.Role, a.meta.Name, a.geo.Level(), a.geo.Tolerance(), roleList(^left&fullMask(a.geo.Members())))
		}
		errs := make([]error, a.geo.Members())
		errs[mi.Role] = errors.New("failed by operator")
		a.markFailedLocked(v, bit, errs)
	case superblock.MemberSpare:
		mi.State = superblock.MemberFailed
		s.note = "failed by operator"
		if err := a.commitLocked(); err != nil {
			return err
		}
		a.event(Event{Kind: EventMemberFailed, Role: -1, Path: s.path, Detail: s.note})
	case superblock.MemberReplacing:
		// The replace is abandoned; the member it copied keeps its role.
		role := int(mi.Role)
		if j := a.job; j != nil && j.kind == jobReplace && j.target == s {
			a.job = nil
			j.cancel()
		}
		mi.Role, mi.State = -1, superblock.MemberFailed
		if a.meta.RebuildRole == int32(role) {
			a.meta.RebuildRole, a.meta.RebuildCheckpoint = -1, 0
		}
		s.note = "failed by operator"
		if err := a.commitLocked(); err != nil {
			return err
		}
		a.publishLocked()
		a.event(Event{Kind: EventMemberFailed, Role: -1, Path: s.path, Detail: s.note})
		a.event(Event{Kind: EventReplaceFailed, Role: role, Path: s.path, Detail: s.note})
	default:
		return fmt.Errorf("%w: %s is already %s; remove it with 'raidd remove', or re-add it with 'raidd add'", ErrBusy, id, mi.State)
	}
	return nil
}

// RemoveMember detaches a failed, spare or stale member: it leaves the
// member table and its device is closed (mdadm --remove). Active members
// must be failed first.
func (a *Array) RemoveMember(id string) error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	if a.readOnly {
		return ErrReadOnly
	}
	a.lockConfig()
	defer a.unlockConfig()
	i, s, err := a.findLocked(id)
	if errors.Is(err, ErrNoMember) && a.releaseRetiredLocked(id) {
		a.event(Event{Kind: EventMemberRemoved, Role: -1, Path: id, Detail: "the device a replace retired, released"})
		return nil
	}
	if err != nil {
		return err
	}
	if r, rerr := strconv.Atoi(id); rerr == nil && i >= 0 {
		// A role names its active member (fail's target), which cannot
		// be removed; the member to remove is the one that failed in it
		// (its role since taken by a spare or a re-add).
		if st := a.meta.Members[i].State; st == superblock.MemberActive || st == superblock.MemberRebuilding {
			if fi, fs, ferr, ok := a.failedInRoleLocked(r); ok {
				if ferr != nil {
					return ferr
				}
				i, s = fi, fs
			}
		}
	}
	if i < 0 { // a stale device: close it and forget its failed entry
		for _, mi := range a.meta.Members {
			if mi.UUID == s.uuid {
				// A member that failed in a role (left out at start): a
				// forced assembly may need it. A retired or removed device
				// has no entry, and nothing needs it.
				if err := a.failedRemoveErrLocked(s.path, mi); err != nil {
					return err
				}
			}
		}
		for k, d := range a.dead {
			if d == s {
				a.dead = append(a.dead[:k], a.dead[k+1:]...)
			}
		}
		_ = s.dev.Close()
		for k, mi := range a.meta.Members {
			if mi.UUID == s.uuid {
				a.meta.Members = append(a.meta.Members[:k], a.meta.Members[k+1:]...)
				break
			}
		}
		if err := a.commitLocked(); err != nil {
			return err
		}
		a.event(Event{Kind: EventMemberRemoved, Role: -1, Path: s.path})
		return nil
	}
	mi := a.meta.Members[i]
	if mi.State == superblock.MemberActive || mi.State == superblock.MemberRebuilding {
		return fmt.Errorf("%w: %s is %s in role %d; fail it first ('raidd fail')", ErrBusy, id, mi.State, mi.Role)
	}
	name := id
	if s != nil {
		name = s.path
	}
	if err := a.failedRemoveErrLocked(name, mi); err != nil {
		return err
	}
	if j := a.job; j != nil && s != nil && j.hasTarget(s) {
		return fmt.Errorf("%w: %s is the target of a running %s", ErrBusy, id, j.kind)
	}
	if mi.State == superblock.MemberReplacing && a.meta.RebuildRole == mi.Role {
		a.meta.RebuildRole, a.meta.RebuildCheckpoint = -1, 0 // a replace recorded but not running
	}
	a.meta.Members = append(a.meta.Members[:i], a.meta.Members[i+1:]...)
	path := ""
	if s != nil {
		delete(a.slots, s.uuid)
		path = s.path
		_ = s.dev.Close()
	}
	if err := a.commitLocked(); err != nil {
		return err
	}
	a.publishLocked()
	a.event(Event{Kind: EventMemberRemoved, Role: int(mi.Role), Path: path})
	return nil
}

// Release closes the device at path if it belongs to a failed or stale
// member of the array, keeping the member's entry in the member table, so
// that the device can be opened again and handed to AddMember (a re-add).
// It returns an error wrapping ErrNoMember when the array holds no device
// at path, and ErrBusy when the device is in use (active, rebuilding, replacing,
// spare or being copied onto).
func (a *Array) Release(path string) error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	a.lockConfig()
	defer a.unlockConfig()
	for k, d := range a.dead {
		if d.path == path {
			if err := a.failedReAddErrLocked(path); err != nil {
				return err // the re-add would be refused: keep the device
			}
			a.dead = append(a.dead[:k], a.dead[k+1:]...)
			_ = d.dev.Close()
			a.keepReleasedLocked(path, releasedSlot{s: d, dead: true})
			return nil
		}
	}
	if a.releaseRetiredLocked(path) {
		return nil
	}
	for _, mi := range a.meta.Members {
		s := a.slots[mi.UUID]
		if s == nil || s.path != path {
			continue
		}
		switch mi.State {
		case superblock.MemberFailed, superblock.MemberRemoved:
		case superblock.MemberRebuilding, superblock.MemberReplacing:
			return fmt.Errorf("%w: %s is already being rebuilt in %q (role %d, %s): there is nothing to add; wait for it to finish ('raidd status --watch %s')", ErrBusy, path, a.meta.Name, mi.Role, mi.State, a.meta.Name)
		case superblock.MemberSpare:
			return fmt.Errorf("%w: %s is already a spare of %q: there is nothing to add", ErrBusy, path, a.meta.Name)
		default:
			return fmt.Errorf("%w: %s is already %s in %q (role %d); to re-add or rebuild it, fail it first ('raidd fail %s %s')", ErrBusy, path, mi.State, a.meta.Name, mi.Role, a.meta.Name, path)
		}
		if j := a.job; j != nil && j.hasTarget(s) {
			return fmt.Errorf("%w: %s is the target of a running %s", ErrBusy, path, j.kind)
		}
		if err := a.failedReAddErrLocked(path); err != nil {
			// The re-add would be refused: keep the device, so that
			// status still shows the failed member's path.
			return err
		}
		delete(a.slots, s.uuid)
		_ = s.dev.Close()
		a.keepReleasedLocked(path, releasedSlot{s: s})
		a.publishLocked()
		return nil
	}
	return fmt.Errorf("%w: %q holds no device %s", ErrNoMember, a.meta.Name, path)
}

// releasedSlot is a slot Release closed for a re-add: a failed member's
// (in slots) or a stale device's (in dead).
type releasedSlot struct {
	s    *slot
	dead bool
}

func (a *Array) keepReleasedLocked(path string, r releasedSlot) {
	if a.released == nil {
		a.released = map[string]releasedSlot{}
	}
	a.released[path] = r
}

// giveBackLocked puts dev, refused by AddMember, back where Release took
// the device at its path from, so that status still shows the failed or
// stale member's path and a later remove or re-add by path finds it. It
// reports whether it kept dev; if not, the caller closes it.
func (a *Array) giveBackLocked(dev Device) bool {
	r, ok := a.released[dev.Path]
	if !ok {
		return false
	}
	delete(a.released, dev.Path)
	if r.dead {
		a.dead = append(a.dead, r.s)
	} else {
		if a.slots[r.s.uuid] != nil {
			return false
		}
		kept := false
		for _, mi := range a.meta.Members {
			kept = kept || (mi.UUID == r.s.uuid && (mi.State == superblock.MemberFailed || mi.State == superblock.MemberRemoved))
		}
		if !kept {
			return false
		}
		a.slots[r.s.uuid] = r.s
	}
	r.s.dev = dev.Member
	a.publishLocked()
	return true
}

// AddMember adds a device to the array (mdadm --add). A former member of
// this array that left its role while the write-intent bitmap has kept
// every region written since (it failed, went stale or was removed, and
// its superblock is current up to then) is re-added in its role: only the
// rows of those regions are resynced onto it, as md's re-add does.
// Otherwise the device becomes a spare, and if the array is degraded the
// spare is claimed at once and rebuilt onto from scratch; the member-added
// event says which of the two happened and why. A device that carries
// another array's superblock is refused unless force is set. The device is
// owned by the array from then on, also when AddMember fails: a refused
// device that Release took from a failed or stale member goes back to that
// member (status keeps its path), and any other is closed.
func (a *Array) AddMember(dev Device, force bool) error {
	if err := a.enter(); err != nil {
		_ = dev.Member.Close()
		return err
	}
	defer a.leave()
	a.commitMu.Lock()
	defer a.unlockCommit()
	refused := func(err error) error {
		a.cfgMu.Lock()
		kept := a.giveBackLocked(dev)
		a.cfgMu.Unlock()
		if !kept {
			_ = dev.Member.Close()
		}
		return err
	}
	a.cfgMu.Lock()
	ok, why, err := a.reAddLocked(dev)
	if ok {
		delete(a.released, dev.Path)
	}
	a.cfgMu.Unlock()
	if err != nil {
		return refused(err)
	}
	if ok {
		return nil
	}
	s, err := a.addSpare(dev, force)
	if err != nil {
		return refused(err)
	}
	a.cfgMu.Lock()
	delete(a.released, dev.Path)
	a.cfgMu.Unlock()
	detail := ""
	if why != "" {
		detail = "full rebuild: " + why
	}
	a.event(Event{Kind: EventMemberAdded, Role: -1, Path: s.path, Detail: detail})
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	a.claimSparesLocked()
	return nil
}

// failedRemoveErrLocked refuses to remove a member that held a role
// while the array is FAILED: the array comes back only by a forced
// assembly, which trusts members that failed in a role (the one that
// failed last holds every write the array acknowledged). Removed, such a
// member leaves the member table, and no forced assembly can use it: on
// RAID0 no command could start the array again. Callers hold cfgMu.
func (a *Array) failedRemoveErrLocked(id string, mi superblock.MemberInfo) error {
	v := a.view.Load()
	if !v.failed || mi.Role < 0 || mi.State != superblock.MemberFailed {
		return nil
	}
	return fmt.Errorf("%w: %q is FAILED (roles %s missing), and it comes back only by a forced assembly, which may need %s: the member that failed last holds every write the array acknowledged. Its entry is unchanged. Stop raidd, run 'raidd assemble MEMBER...' with every member (it lists what a forced start would trust), then 'raidd assemble --force MEMBER...' or 'raidd serve --force-assemble'; remove members once the array runs. To give the array up instead (to recreate it, or to use its devices elsewhere), stop raidd and leave the array out of its configuration: its devices are then free",
		ErrBusy, a.meta.Name, roleList(^v.readable&fullMask(a.geo.Members())), id)
}

// failedReAddErrLocked returns why a former member at path cannot be
// re-added while the array is FAILED with regions written since a member
// left (nil when it is not): the resync of those regions would have to
// read the members that are missing, so it could only stop at its first
// row and leave the member rebuilding, untrusted, although it may be the
// one that failed last and holds every acknowledged write, which a forced
// assembly would then no longer trust. With nothing dirty there is
// nothing to resync, and the re-add completes at once. Callers hold
// cfgMu.
func (a *Array) failedReAddErrLocked(path string) error {
	v := a.view.Load()
	if !v.failed {
		return nil
	}
	why := "the array keeps no write-intent bitmap, so it would be rebuilt in full as a spare, which needs the missing members, and its data would be lost"
	if a.bitmap != nil {
		n := len(a.bitmap.dirtyRegions())
		if n == 0 {
			return nil
		}
		why = fmt.Sprintf("resyncing the %d regions written since a member left needs the missing members", n)
	}
	return fmt.Errorf("%w: %q is FAILED (roles %s missing; %s survives %d), so %s cannot be re-added online: %s; its member entry is unchanged. If %s failed last, it holds every write the array acknowledged: stop raidd and start the array trusting it ('raidd assemble MEMBER...' lists what a forced start would trust; 'raidd assemble --force MEMBER...' then records it, before 'raidd serve'; or 'raidd serve --force-assemble')",
		ErrBusy, a.meta.Name, roleList(^v.readable&fullMask(a.geo.Members())), a.geo.Level(), a.geo.Tolerance(), path, why, path)
}

// reAddLocked re-adds dev in its former role if its superblock and the bitmap
// allow it. It reports whether it did; when it did not and dev is a former
// member of the array, why says what prevented it. Callers hold commitMu
// and cfgMu.
func (a *Array) reAddLocked(dev Device) (ok bool, why string, err error) {
	if a.readOnly || a.geo.Tolerance() == 0 {
		return false, "", nil // addSpare says why
	}
	old, rerr := superblock.Read(dev.Member)
	if rerr != nil || old.ArrayUUID != a.meta.ArrayUUID || old.Role < 0 {
		return false, "", nil
	}
	if s := a.slots[old.MemberUUID]; s != nil {
		return false, "", fmt.Errorf("%w: %s is already member %s (at %s)", ErrBusy, dev.Path, superblock.FormatUUID(old.MemberUUID), s.path)
	}
	// On a FAILED array a former member is refused whatever else would
	// happen to it: as a spare it would be erased, and it may be the
	// member a forced assembly needs.
	if err := a.failedReAddErrLocked(dev.Path); err != nil {
		return false, "", err
	}
	why = a.reAddBlockerLocked(dev, old)
	if why != "" {
		return false, why, nil
	}
	if a.job != nil {
		return false, "", fmt.Errorf("%w: a %s of role %d is running; add %s again when it has finished ('raidd status --watch'): the write-intent bitmap keeps what it missed", ErrBusy, a.job.kind, a.job.role, dev.Path)
	}
	role := old.Role
	found := false
	for i := range a.meta.Members {
		if mi := &a.meta.Members[i]; mi.UUID == old.MemberUUID {
			mi.Role, mi.State, found = role, superblock.MemberRebuilding, true
		}
	}
	if !found {
		if len(a.meta.Members) >= superblock.MaxMembers {
			return false, "the member table is full", nil
		}
		a.meta.Members = append(a.meta.Members, superblock.MemberInfo{UUID: old.MemberUUID, Role: role, State: superblock.MemberRebuilding})
	}
	s := &slot{dev: dev.Member, path: dev.Path, uuid: old.MemberUUID, writeMostly: dev.WriteMostly, events: old.Events}
	if s.dev, err = a.wrapDev(s.dev); err != nil {
		return false, "", fmt.Errorf("raid: re-add %s: %w", dev.Path, err)
	}
	a.slots[s.uuid] = s
	a.meta.RebuildRole, a.meta.RebuildCheckpoint = role, 0
	if err := a.commitLocked(); err != nil {
		return false, "", err
	}
	if s.events != a.meta.Events { // its superblock write failed: commit marked it failed
		a.meta.RebuildRole, a.meta.RebuildCheckpoint = -1, 0
		a.publishLocked()
		return false, "", fmt.Errorf("raid: re-add %s: cannot write its superblock", dev.Path)
	}
	a.publishLocked()
	a.reserveTail(s)
	// Every write from here on reaches the member (its View is published);
	// the regions marked now cover every write it missed, because their
	// bits are set before a write starts and kept while a role is missing.
	regions := a.bitmap.dirtyRegions()
	a.event(Event{Kind: EventMemberAdded, Role: int(role), Path: dev.Path, Detail: fmt.Sprintf("re-added: it left at event %d and the write-intent bitmap has kept every region written since event %d; resyncing %d dirty regions", old.Events, a.meta.DegradedEvents, len(regions))})
	a.startReAddLocked(int(role), s, regions)
	return true, "", nil
}

// reAddBlockerLocked returns why dev, a former member of the array whose
// superblock is old, cannot be re-added with a bitmap-limited resync, or
// "" if it can. Callers hold commitMu or cfgMu.
func (a *Array) reAddBlockerLocked(dev Device, old *superblock.Meta) string {
	switch {
	case a.bitmap == nil:
		return "the array has no write-intent bitmap"
	case old.Level != a.meta.Level || old.RaidDisks != a.meta.RaidDisks || old.ChunkSize != a.meta.ChunkSize ||
		old.DataOffset != a.meta.DataOffset || old.DataSize != a.meta.DataSize || old.BitmapRegion != a.meta.BitmapRegion:
		return "its geometry differs from the array's"
	case dev.Member.Size() < int64(a.meta.DataOffset+a.meta.DataSize):
		// Not re-added (addSpare then refuses it with the sizes): the
		// data past its end is gone.
		return fmt.Sprintf("it is %d bytes, smaller than the array needs (%d)", dev.Member.Size(), a.meta.DataOffset+a.meta.DataSize)
	}
	for _, mi := range old.Members {
		if mi.UUID == old.MemberUUID && mi.State != superblock.MemberActive {
			return fmt.Sprintf("its own superblock says it was %s, not in sync", mi.State)
		}
	}
	for _, mi := range a.meta.Members {
		if mi.Role == old.Role && (mi.State == superblock.MemberActive || mi.State == superblock.MemberRebuilding) {
			return fmt.Sprintf("role %d is held by %s now", old.Role, a.memberNameLocked(mi.UUID))
		}
	}
	if old.Events >= a.meta.Events {
		return fmt.Sprintf("its event counter %d is not behind the array's %d: it was written without this array", old.Events, a.meta.Events)
	}
	for _, theirs := range old.Members {
		if theirs.State != superblock.MemberFailed && theirs.State != superblock.MemberRemoved {
			continue
		}
		for _, mi := range a.meta.Members {
			if mi.UUID == theirs.UUID && mi.State == superblock.MemberActive && a.slots[mi.UUID] != nil {
				// Either it ran without this array (split brain), or the
				// member it records as failed left before it and was
				// re-added since: the superblocks cannot tell which, and
				// the bitmap cannot undo writes made without the array.
				n := a.memberNameLocked(mi.UUID)
				return fmt.Sprintf("its superblock records %s as %s, and %s is in sync now: either it ran without this array, or %s failed before it and was re-added since; the two cannot be told apart, so it is not trusted (members that failed one after the other are each re-added by the bitmap when added back in the reverse order: the last to fail first)", n, theirs.State, n, n)
			}
		}
	}
	if d := a.meta.DegradedEvents; d == 0 || old.Events+1 < d {
		return fmt.Sprintf("it left at event %d, before the write-intent bitmap started keeping changes for a missing member (event %d)", old.Events, d)
	}
	return ""
}

// addSpare validates dev and records it as a spare. Callers hold commitMu
// but not cfgMu: the device's superblock is read and erased holding
// commitMu only, and cfgMu is taken for the change and its commit.
func (a *Array) addSpare(dev Device, force bool) (*slot, error) {
	if a.readOnly {
		return nil, ErrReadOnly
	}
	if a.geo.Tolerance() == 0 {
		return nil, fmt.Errorf("%w: %s has no redundancy, so a spare could never be used, and a member cannot be rebuilt; a member recorded as failed whose data is intact comes back only by a forced start: stop raidd, then 'raidd serve --force-assemble' (or 'raidd assemble --force MEMBER...' before 'raidd serve')", ErrBusy, a.geo.Level())
	}
	for _, s := range a.slots {
		if s.path == dev.Path {
			return nil, fmt.Errorf("%w: %s is already a member", ErrBusy, dev.Path)
		}
	}
	need := int64(a.meta.DataOffset + a.meta.DataSize)
	if dev.Member.Size() < need {
		return nil, fmt.Errorf("%w: %s is %d bytes; the array needs %d per member", ErrBusy, dev.Path, dev.Member.Size(), need)
	}
	var (
		staleDev  *slot    // the device, still open, if it was left out at assembly
		dropEntry [16]byte // its failed or removed table entry, if any
		drop      bool
	)
	old, err := superblock.Read(dev.Member)
	switch {
	case err == nil && old.ArrayUUID == a.meta.ArrayUUID:
		// A former member of this array: its contents are not trusted.
		for _, d := range a.dead {
			if d.uuid == old.MemberUUID {
				staleDev = d
				break
			}
		}
		for _, mi := range a.meta.Members {
			if mi.UUID != old.MemberUUID {
				continue
			}
			if mi.State == superblock.MemberFailed || mi.State == superblock.MemberRemoved {
				dropEntry, drop = mi.UUID, true
				break
			}
			if a.slots[mi.UUID] != nil {
				return nil, fmt.Errorf("%w: %s is already member %s", ErrBusy, dev.Path, superblock.FormatUUID(mi.UUID))
			}
		}
	case err == nil && !force:
		return nil, fmt.Errorf("%w: %s is member %d of array %q (uuid %s); pass --force to take it", ErrInUse, dev.Path, old.Role, old.Name, superblock.FormatUUID(old.ArrayUUID))
	case err != nil && !errors.Is(err, superblock.ErrNoMagic) && !force:
		return nil, fmt.Errorf("%w: %s carries a damaged raidd superblock (%w); pass --force to take it", ErrInUse, dev.Path, err)
	}
	// When the table is full, failed members whose devices are gone are
	// forgotten to make room.
	entries, compact := 0, false
	for _, mi := range a.meta.Members {
		if !drop || mi.UUID != dropEntry {
			entries++
		}
	}
	if entries >= superblock.MaxMembers {
		compact, entries = true, 0
		for _, mi := range a.meta.Members {
			if (drop && mi.UUID == dropEntry) || (mi.State == superblock.MemberFailed && a.slots[mi.UUID] == nil) {
				continue
			}
			entries++
		}
		if entries >= superblock.MaxMembers {
			return nil, fmt.Errorf("%w: the member table is full (%d entries); remove failed members first", ErrBusy, superblock.MaxMembers)
		}
	}
	if err := superblock.Erase(dev.Member); err != nil {
		return nil, fmt.Errorf("raid: add %s: %w", dev.Path, err)
	}
	wrapped := dev.Member
	if a.csum != nil {
		// Checksums of a former life would not match what a rebuild writes
		// around its holes: start from an area of holes.
		if err := integrity.Clear(dev.Member, int64(a.meta.ChecksumOffset), int64(a.meta.ChecksumLength)); err != nil {
			return nil, fmt.Errorf("raid: add %s: clear its checksum area: %w", dev.Path, err)
		}
		var err error
		if wrapped, err = a.wrapDev(dev.Member); err != nil {
			return nil, fmt.Errorf("raid: add %s: %w", dev.Path, err)
		}
	}
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	if staleDev != nil {
		_ = staleDev.dev.Close()
		a.dead = slices.DeleteFunc(a.dead, func(d *slot) bool { return d == staleDev })
	}
	a.meta.Members = slices.DeleteFunc(a.meta.Members, func(mi superblock.MemberInfo) bool {
		return (drop && mi.UUID == dropEntry) || (compact && mi.State == superblock.MemberFailed && a.slots[mi.UUID] == nil)
	})
	u := superblock.NewUUID()
	s := &slot{dev: wrapped, path: dev.Path, uuid: u, writeMostly: dev.WriteMostly}
	a.slots[u] = s
	a.meta.Members = append(a.meta.Members, superblock.MemberInfo{UUID: u, Role: -1, State: superblock.MemberSpare})
	if err := a.commitLocked(); err != nil {
		return nil, err
	}
	if s.events != a.meta.Events { // its superblock write failed: commit marked it failed
		return nil, fmt.Errorf("raid: add %s: cannot write its superblock", dev.Path)
	}
	a.reserveTail(s)
	return s, nil
}

// ReplaceMember copies the member named by id onto dev while the old
// member keeps serving, then retires the old one (mdadm --replace): the
// array is never degraded during a planned replacement. Writes go to both
// while the copy runs. If the old member fails during the copy, the
// replacement is rebuilt from redundancy from where the copy was. The
// superblocks record the replacement as replacing the role
// (superblock.MemberReplacing) with the copy's checkpoint, so the next
// assembly resumes an interrupted replace (see Assemble).
func (a *Array) ReplaceMember(id string, dev Device, force bool) error {
	if err := a.enter(); err != nil {
		_ = dev.Member.Close()
		return err
	}
	defer a.leave()
	a.commitMu.Lock()
	defer a.unlockCommit()
	i, old, err := a.findLocked(id)
	if err == nil && (i < 0 || old == nil || a.meta.Members[i].State != superblock.MemberActive) {
		err = fmt.Errorf("%w: %s is not an active member", ErrBusy, id)
	}
	if err == nil && a.job != nil {
		err = fmt.Errorf("%w: a %s of role %d is running; wait for it", ErrBusy, a.job.kind, a.job.role)
	}
	if err != nil {
		_ = dev.Member.Close()
		return err
	}
	role := int(a.meta.Members[i].Role)
	s, err := a.addSpare(dev, force)
	if err != nil {
		_ = dev.Member.Close()
		return err
	}
	a.event(Event{Kind: EventMemberAdded, Role: -1, Path: s.path, Detail: "replacement for " + old.path})
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	if a.closed.Load() {
		return fmt.Errorf("%w: %s stays a spare; the replace did not start", ErrClosed, dev.Path)
	}
	// The superblocks record the replace (the new member replacing the
	// role, its progress in RebuildRole and RebuildCheckpoint), so that a
	// restart resumes it.
	for i := range a.meta.Members {
		if a.meta.Members[i].UUID == s.uuid {
			a.meta.Members[i].Role, a.meta.Members[i].State = int32(role), superblock.MemberReplacing
		}
	}
	a.meta.RebuildRole, a.meta.RebuildCheckpoint = int32(role), 0
	if err := a.commitLocked(); err != nil {
		a.log.Warn("cannot record the replace in the superblocks; a restart will not resume it", "err", err)
	}
	if s.events != a.meta.Events { // its superblock write failed: commit marked it failed
		a.meta.RebuildRole, a.meta.RebuildCheckpoint = -1, 0
		if err := a.commitLocked(); err != nil {
			a.log.Warn("cannot record the failed replacement", "err", err)
		}
		a.publishLocked()
		return fmt.Errorf("raid: replace onto %s: cannot write its superblock", dev.Path)
	}
	if !a.startJobLocked(jobReplace, role, s, 0) {
		return fmt.Errorf("%w: %s is recorded as replacing role %d; the copy resumes at the next start", ErrClosed, dev.Path, role)
	}
	return nil
}

// redundant reports whether the array's level survives losing a member.
func (a *Array) redundant() bool { return a.geo.Tolerance() > 0 }

// keepMembers handles member I/O errors on an array without redundancy.
// Marking the member failed would make every range unreachable, the
// healthy ones too, and persist that across restarts: instead, like md's
// RAID0, the request fails with ErrIO and the member stays in the array.
func (a *Array) keepMembers(err error) {
	a.log.Warn("member I/O error: the request fails with EIO; without redundancy the member stays in the array", "err", err)
}

// noteDegradedLocked keeps meta.DegradedEvents for the update being committed:
// 0 while every role holds an active member whose device is present, and
// otherwise the event of the update that first found a role out of sync.
// Callers hold commitMu and cfgMu.
func (a *Array) noteDegradedLocked() {
	var inSync uint64
	for _, mi := range a.meta.Members {
		if mi.State == superblock.MemberActive && mi.Role >= 0 && a.slots[mi.UUID] != nil {
			inSync |= 1 << uint(mi.Role)
		}
	}
	switch {
	case inSync == fullMask(a.geo.Members()):
		a.meta.DegradedEvents = 0
	case a.meta.DegradedEvents == 0:
		a.meta.DegradedEvents = a.meta.Events
	}
}
