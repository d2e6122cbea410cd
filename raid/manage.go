package raid

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/raidd/raidd/raid/superblock"
)

// ErrNoMember is returned by the member management calls when the named
// member is not part of the array.
var ErrNoMember = errors.New("raid: no such member")

// ErrBusy is returned when a member change conflicts with the array's state
// (an active member cannot be removed; a replace needs no other rebuild running).
var ErrBusy = errors.New("raid: member change not possible now")

// findLocked resolves a member named by path, UUID or role number to its table
// index; the slot is nil for members whose device is absent. A dead
// (stale) member is found by path with index -1 and its dead slot.
// Callers hold cfgMu.
func (a *Array) findLocked(id string) (int, *slot, error) {
	for i, mi := range a.meta.Members {
		s := a.slots[mi.UUID]
		if (s != nil && s.path == id) || superblock.FormatUUID(mi.UUID) == id {
			return i, s, nil
		}
	}
	if r, err := strconv.Atoi(id); err == nil {
		for i, mi := range a.meta.Members {
			if int(mi.Role) == r && (mi.State == superblock.MemberActive || mi.State == superblock.MemberRebuilding) {
				return i, a.slots[mi.UUID], nil
			}
		}
	}
	for _, s := range a.dead {
		if s.path == id || superblock.FormatUUID(s.uuid) == id {
			return -1, s, nil
		}
	}
	return 0, nil, fmt.Errorf("%w: %q is not a member of %q (name a member by path, uuid or role)", ErrNoMember, id, a.meta.Name)
}

// FailMember marks a member failed, as if it had returned an I/O error
// (mdadm --fail). The failure is on the survivors' superblocks when it
// returns; a spare, if any, is claimed and rebuilt onto.
func (a *Array) FailMember(id string) error {
	if a.readOnly {
		return ErrReadOnly
	}
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	i, s, err := a.findLocked(id)
	if err != nil {
		return err
	}
	if i < 0 || s == nil {
		return fmt.Errorf("%w: %s is not in use", ErrBusy, id)
	}
	mi := &a.meta.Members[i]
	switch mi.State {
	case superblock.MemberActive, superblock.MemberRebuilding:
		v := a.view.Load()
		errs := make([]error, a.geo.Members())
		errs[mi.Role] = errors.New("failed by operator")
		a.markFailedLocked(v, 1<<uint(mi.Role), errs)
	case superblock.MemberSpare:
		mi.State = superblock.MemberFailed
		s.note = "failed by operator"
		if err := a.commitLocked(); err != nil {
			return err
		}
		a.event(Event{Kind: EventMemberFailed, Role: -1, Path: s.path, Detail: s.note})
	default:
		return fmt.Errorf("%w: %s is already %s", ErrBusy, id, mi.State)
	}
	return nil
}

// RemoveMember detaches a failed, spare or stale member: it leaves the
// member table and its device is closed (mdadm --remove). Active members
// must be failed first.
func (a *Array) RemoveMember(id string) error {
	if a.readOnly {
		return ErrReadOnly
	}
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	i, s, err := a.findLocked(id)
	if err != nil {
		return err
	}
	if i < 0 { // a stale device: close it and forget its failed entry
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
	if j := a.job; j != nil && s != nil && j.target == s {
		return fmt.Errorf("%w: %s is the target of a running %s", ErrBusy, id, j.kind)
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

// AddMember adds a device as a spare; if the array is degraded the spare is
// claimed at once and rebuilt onto (mdadm --add). A device that carries
// another array's superblock is refused unless force is set; a stale
// member of this array is accepted and rebuilt from scratch. The device is
// owned by the array from then on, also when AddMember fails.
func (a *Array) AddMember(dev Device, force bool) error {
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	s, err := a.addSpareLocked(dev, force)
	if err != nil {
		_ = dev.Member.Close()
		return err
	}
	a.event(Event{Kind: EventMemberAdded, Role: -1, Path: s.path})
	a.claimSparesLocked()
	return nil
}

// addSpareLocked validates dev and records it as a spare. Callers hold cfgMu.
func (a *Array) addSpareLocked(dev Device, force bool) (*slot, error) {
	if a.readOnly {
		return nil, ErrReadOnly
	}
	if a.geo.Tolerance() == 0 {
		return nil, fmt.Errorf("%w: %s has no redundancy, so a spare could never be used", ErrBusy, a.geo.Level())
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
	old, err := superblock.Read(dev.Member)
	switch {
	case err == nil && old.ArrayUUID == a.meta.ArrayUUID:
		// A former member of this array: its contents are not trusted.
		for k, d := range a.dead {
			if d.uuid == old.MemberUUID {
				_ = d.dev.Close()
				a.dead = append(a.dead[:k], a.dead[k+1:]...)
				break
			}
		}
		for k, mi := range a.meta.Members {
			if mi.UUID == old.MemberUUID && (mi.State == superblock.MemberFailed || mi.State == superblock.MemberRemoved) {
				a.meta.Members = append(a.meta.Members[:k], a.meta.Members[k+1:]...)
				break
			}
			if mi.UUID == old.MemberUUID && a.slots[mi.UUID] != nil {
				return nil, fmt.Errorf("%w: %s is already member %s", ErrBusy, dev.Path, superblock.FormatUUID(mi.UUID))
			}
		}
	case err == nil && !force:
		return nil, fmt.Errorf("%w: %s is member %d of array %q (uuid %s); pass --force to take it", ErrInUse, dev.Path, old.Role, old.Name, superblock.FormatUUID(old.ArrayUUID))
	case err != nil && !errors.Is(err, superblock.ErrNoMagic) && !force:
		return nil, fmt.Errorf("%w: %s carries a damaged raidd superblock (%v); pass --force to take it", ErrInUse, dev.Path, err)
	}
	if len(a.meta.Members) >= superblock.MaxMembers {
		// Forget failed members whose devices are gone to make room.
		kept := a.meta.Members[:0]
		for _, mi := range a.meta.Members {
			if mi.State == superblock.MemberFailed && a.slots[mi.UUID] == nil {
				continue
			}
			kept = append(kept, mi)
		}
		a.meta.Members = kept
		if len(a.meta.Members) >= superblock.MaxMembers {
			return nil, fmt.Errorf("%w: the member table is full (%d entries); remove failed members first", ErrBusy, superblock.MaxMembers)
		}
	}
	if err := superblock.Erase(dev.Member); err != nil {
		return nil, fmt.Errorf("raid: add %s: %w", dev.Path, err)
	}
	u := superblock.NewUUID()
	s := &slot{dev: dev.Member, path: dev.Path, uuid: u, writeMostly: dev.WriteMostly}
	a.slots[u] = s
	a.meta.Members = append(a.meta.Members, superblock.MemberInfo{UUID: u, Role: -1, State: superblock.MemberSpare})
	if err := a.commitLocked(); err != nil {
		return nil, err
	}
	if s.events != a.meta.Events { // its superblock write failed: commit marked it failed
		return nil, fmt.Errorf("raid: add %s: cannot write its superblock", dev.Path)
	}
	return s, nil
}

// ReplaceMember copies the member named by id onto dev while the old
// member keeps serving, then retires the old one (mdadm --replace): the
// array is never degraded during a planned replacement. Writes go to both
// while the copy runs. If the old member fails during the copy, the
// replacement is rebuilt from redundancy from where the copy was.
func (a *Array) ReplaceMember(id string, dev Device, force bool) error {
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
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
	s, err := a.addSpareLocked(dev, force)
	if err != nil {
		_ = dev.Member.Close()
		return err
	}
	a.event(Event{Kind: EventMemberAdded, Role: -1, Path: s.path, Detail: "replacement for " + old.path})
	a.startJobLocked(jobReplace, role, s, 0)
	return nil
}
