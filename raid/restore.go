package raid

import (
	"errors"
	"fmt"
	"strings"

	"github.com/raidd/raidd/raid/superblock"
)

// RestoreOptions tune RestoreHeader.
type RestoreOptions struct {
	// Role is the role dev held, or -1 to take it from what its damaged
	// header still says (superblock.ReadRemains). When the header says
	// nothing (wiped), Role must be given.
	Role int
	// Force restores the header even when the array starts without dev.
	// Without it RestoreHeader refuses then: leaving dev out and adding it
	// back rebuilds it from the others, which trusts nothing on dev.
	Force bool
}

// RestoreHeader writes a superblock onto dev, a member whose header is
// gone (wiped: no magic) or damaged (both slots fail their checksums) while
// its data region is intact, rebuilt from the superblocks of peers, the
// array's other members. It is the way back for an array that cannot start
// without dev (RAID0, or more members than the level tolerates), where
// leaving dev out and adding it back (a rebuild) is impossible. md's
// equivalent is 'mdadm --create --assume-clean' with the original
// parameters, which rewrites every member; this writes only dev's header
// and takes every parameter from the peers.
//
// The member dev was comes from the array and member UUIDs its damaged
// slots still carry (the entry of that member, whatever holds its role
// now), or, for a wiped header, from o.Role; the two must agree. It
// refuses when:
//   - dev's superblock reads (nothing to restore), or dev is too small for
//     the array's data region;
//   - a peer's superblock does not read, or a peer belongs to another array;
//   - dev's damaged header names another array, or a member the array's
//     table does not hold in a role (unless o.Force with o.Role: an
//     identity garbled with the rest);
//   - dev's damaged header carries an event counter newer than the newest
//     peer's: the peers are behind dev, even with o.Force;
//   - the member is a peer given, or the newest peer's table does not
//     record it as active (in sync): a failed or rebuilding member missed
//     writes, and must be rebuilt ('raidd add'), even with o.Force;
//   - without o.Force, an in-sync member of the newest table is not among
//     the peers, or the peers alone start the array.
//
// The header written is the newest peer's, with dev's role and member UUID
// and the same event counter, so assembly takes dev as in sync at the
// newest event; the newest peer's write-intent bitmap is copied too. Both
// slots are erased first, and dev is synced. Nothing is written to the
// peers or to any data region. The peers are left open; dev too.
func RestoreHeader(dev Device, peers []Device, o RestoreOptions) (*superblock.Meta, error) {
	if len(peers) == 0 {
		return nil, fmt.Errorf("%w: give the array's other members, whose superblocks the header is rebuilt from", ErrConfig)
	}
	if m, err := superblock.Read(dev.Member); err == nil {
		return nil, fmt.Errorf("%w: %s has a readable superblock (array %q, role %d, events %d): there is nothing to restore; 'raidd examine %s' shows it", ErrConfig, dev.Path, m.Name, m.Role, m.Events, dev.Path)
	} else if !errors.Is(err, superblock.ErrNoMagic) && !errors.Is(err, superblock.ErrChecksum) && !errors.Is(err, superblock.ErrCorrupt) && !errors.Is(err, superblock.ErrVersion) {
		return nil, fmt.Errorf("raid: restore %s: %w", dev.Path, err)
	}
	var cands []candidate
	for _, p := range peers {
		if p.Path == dev.Path {
			return nil, fmt.Errorf("%w: %s is given both as the member to restore and as a peer", ErrConfig, p.Path)
		}
		m, err := superblock.Read(p.Member)
		if err != nil {
			return nil, fmt.Errorf("%w: peer %s: %w; give only members whose superblock reads ('raidd examine' shows which)", ErrCorrupt, p.Path, err)
		}
		cands = append(cands, candidate{p, m})
	}
	newest := newestOf(majorityArray(cands))
	nm := newest.meta
	for _, c := range cands {
		if c.meta.ArrayUUID != nm.ArrayUUID {
			return nil, fmt.Errorf("%w: peer %s belongs to array %q (uuid %s), not %q (uuid %s); leave it out", ErrForeign, c.dev.Path, c.meta.Name, superblock.FormatUUID(c.meta.ArrayUUID), nm.Name, superblock.FormatUUID(nm.ArrayUUID))
		}
	}

	entry, err := restoreEntry(dev, nm, o, cands)
	if err != nil {
		return nil, err
	}
	role := int(entry.Role)
	for _, c := range cands {
		if c.meta.MemberUUID == entry.UUID {
			return nil, fmt.Errorf("%w: role %d of %q is %s, given as a peer: %s is not that member", ErrConfig, role, nm.Name, c.dev.Path, dev.Path)
		}
	}
	if entry.State != superblock.MemberActive {
		return nil, fmt.Errorf("%w: %q's newest superblock (%s, events %d) records role %d's member %s as %s: it was not in sync, so its data cannot be trusted as it stands; start the array without %s and add it back with 'raidd add --force', which rebuilds it", ErrCannotStart, nm.Name, newest.dev.Path, nm.Events, role, superblock.FormatUUID(entry.UUID), entry.State, dev.Path)
	}
	if !o.Force {
		// Every other in-sync member must be given, so that the peers are
		// the newest and the trial start below sees the whole array.
		for _, e := range nm.Members {
			if e.State != superblock.MemberActive || e.Role < 0 || e.UUID == entry.UUID {
				continue
			}
			given := false
			for _, c := range cands {
				given = given || c.meta.MemberUUID == e.UUID
			}
			if !given {
				return nil, fmt.Errorf("%w: role %d's member %s, in sync in %q's newest superblock, is not given: give every other member of the array, so that the header is rebuilt from the newest ones and restore-header can tell whether the array starts without %s ('raidd examine' shows each device's member UUID); --force restores it from the members given, if that member is lost", ErrConfig, e.Role, superblock.FormatUUID(e.UUID), nm.Name, dev.Path)
			}
		}
	}
	if need := int64(nm.DataOffset + nm.DataSize); dev.Member.Size() < need {
		return nil, fmt.Errorf("%w: %s is %d bytes and %q's members need %d (data region [%d, %d)): a different device, or one that shrank (a loop device's --sizelimit)", ErrConfig, dev.Path, dev.Member.Size(), nm.Name, need, nm.DataOffset, need)
	}
	if !o.Force {
		if err := startsWithout(peers); err == nil {
			return nil, fmt.Errorf("%w: %q starts without %s (degraded): leave it out and add it back with 'raidd add --force', which rebuilds it from the others and trusts nothing on it; --force restores its header anyway (then run 'raidd check' once the array serves)", ErrConfig, nm.Name, dev.Path)
		}
	}

	m := nm.Clone()
	m.Role = int32(role)
	m.MemberUUID = entry.UUID
	var img []byte
	if nm.BitmapRegion != 0 {
		img = make([]byte, superblock.BitmapBytes)
		if _, err := newest.dev.Member.ReadAt(img, superblock.BitmapOffset); err != nil {
			return nil, fmt.Errorf("raid: restore %s: read the write-intent bitmap of %s: %w", dev.Path, newest.dev.Path, err)
		}
	}
	if err := superblock.Erase(dev.Member); err != nil {
		return nil, fmt.Errorf("raid: restore %s: %w", dev.Path, err)
	}
	if img != nil {
		if _, err := dev.Member.WriteAt(img, superblock.BitmapOffset); err != nil {
			return nil, fmt.Errorf("raid: restore %s: write the write-intent bitmap: %w", dev.Path, err)
		}
	}
	if err := superblock.Write(dev.Member, m); err != nil {
		return nil, fmt.Errorf("raid: restore %s: %w", dev.Path, err)
	}
	if err := dev.Member.Sync(); err != nil {
		return nil, fmt.Errorf("raid: restore %s: sync: %w", dev.Path, err)
	}
	got, err := superblock.Read(dev.Member)
	if err != nil {
		return nil, fmt.Errorf("raid: restore %s: the header written does not read back: %w", dev.Path, err)
	}
	return got, nil
}

// restoreEntry is the member table entry of nm that dev was: the one its
// damaged header names (superblock.ReadRemains), which must agree with
// o.Role when that is given, or the in-sync member of o.Role when the
// header names none. UUIDs that differ from nm's in a byte or two are
// nm's, garbled (superblock.NearUUID). A damaged header that names another
// array or a member nm does not hold in a role is taken as no evidence
// only with o.Force and o.Role; one whose event counter is newer than
// nm's, whatever it names, says the peers are behind dev, and is refused.
func restoreEntry(dev Device, nm *superblock.Meta, o RestoreOptions, cands []candidate) (*superblock.MemberInfo, error) {
	want := o.Role
	if want >= int(nm.RaidDisks) {
		return nil, fmt.Errorf("%w: role %d: %q has roles 0 to %d", ErrConfig, want, nm.Name, nm.RaidDisks-1)
	}
	remains, err := superblock.ReadRemains(dev.Member)
	if err != nil {
		return nil, fmt.Errorf("raid: restore %s: %w", dev.Path, err)
	}
	var (
		named   *superblock.MemberInfo // the entry the damaged header names
		strange []string               // identities that name no entry of nm
	)
	for _, r := range remains {
		// Whatever its identity says (garbled, or another array's, which
		// only --force takes as this array's), a slot newer than the
		// peers says they are behind the device.
		if r.Events > nm.Events {
			return nil, fmt.Errorf("%w: %s's damaged header carries event %d, newer than the newest member given (%d): those members are behind it, and a header rebuilt from them would let their older data win. Give the array's newest members; and do not start the array from these members without %s", ErrConfig, dev.Path, r.Events, nm.Events, dev.Path)
		}
		var e *superblock.MemberInfo
		for i := range nm.Members {
			if superblock.NearUUID(r.ArrayUUID, nm.ArrayUUID) && superblock.NearUUID(nm.Members[i].UUID, r.MemberUUID) && nm.Members[i].Role >= 0 {
				e = &nm.Members[i]
			}
		}
		switch {
		case e == nil && !superblock.NearUUID(r.ArrayUUID, nm.ArrayUUID):
			strange = append(strange, fmt.Sprintf("array uuid %s, not %q's %s", superblock.FormatUUID(r.ArrayUUID), nm.Name, superblock.FormatUUID(nm.ArrayUUID)))
		case e == nil:
			strange = append(strange, fmt.Sprintf("member %s, which %q holds in no role", superblock.FormatUUID(r.MemberUUID), nm.Name))
		case named != nil && named.UUID != e.UUID:
			return nil, fmt.Errorf("%w: %s's two damaged slots name different members of %q (roles %d and %d)", ErrCorrupt, dev.Path, nm.Name, named.Role, e.Role)
		default:
			named = e
		}
	}
	if named != nil {
		if want >= 0 && int(named.Role) != want {
			return nil, fmt.Errorf("%w: %s's damaged header says it was role %d of %q, not role %d", ErrConfig, dev.Path, named.Role, nm.Name, want)
		}
		return named, nil
	}
	if len(strange) > 0 && !(o.Force && want >= 0) {
		return nil, fmt.Errorf("%w: %s's damaged header names %s: it is not this array's member, or the identity in its header is damaged too. Only if you know it is %q's member of role N: --role N --force", ErrForeign, dev.Path, strings.Join(strange, "; "), nm.Name)
	}
	if want < 0 {
		var open uint64 // roles no peer holds
		for r := range int(nm.RaidDisks) {
			open |= 1 << uint(r)
		}
		for _, c := range cands {
			if c.meta.Role >= 0 {
				open &^= 1 << uint(c.meta.Role)
			}
		}
		return nil, fmt.Errorf("%w: nothing left in %s's header says which of %q's members it was (roles no member given holds: %s); if you know its role, give it (--role N)", ErrConfig, dev.Path, nm.Name, roleList(open))
	}
	var entry *superblock.MemberInfo
	for i, e := range nm.Members {
		if int(e.Role) == want && (entry == nil || e.State == superblock.MemberActive) {
			entry = &nm.Members[i]
		}
	}
	if entry == nil {
		return nil, fmt.Errorf("%w: %q's newest superblock lists no member in role %d", ErrConfig, nm.Name, want)
	}
	return entry, nil
}

// startsWithout reports whether the array assembles read-only from peers
// alone (nil), without writing anything or closing them.
func startsWithout(peers []Device) error {
	devs := make([]Device, len(peers))
	for i, p := range peers {
		devs[i] = Device{Path: p.Path, Member: keepOpen{p.Member}}
	}
	a, err := Assemble(devs, Options{ReadOnly: true, NoResync: true, CleanDelay: -1})
	if err != nil {
		return err
	}
	return a.Close()
}

// keepOpen is a Member whose Close does nothing: a trial assembly's Close
// must not close the caller's devices.
type keepOpen struct{ Member }

func (keepOpen) Close() error { return nil }
