package raid

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/raidd/raidd/raid/internal/integrity"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// Create writes fresh superblocks on devs, in role order, and returns the
// running array. A device that already carries a raidd superblock is
// refused with ErrInUse unless co.Force is set. The data regions are
// discarded so that they read as zeroes, which makes mirrors and parity
// consistent from the start; members that cannot discard are resynced
// instead. The usable size follows from the smallest member.
func Create(devs []Device, co CreateOptions, o Options) (*Array, error) {
	if err := co.Validate(); err != nil {
		return nil, err
	}
	if o.ReadOnly {
		return nil, fmt.Errorf("%w: cannot create a read-only array", ErrConfig)
	}
	if co.Chunk == 0 {
		co.Chunk = stripe.DefaultChunk
	}
	var errs []error
	seen := map[string]bool{}
	minSize := int64(-1)
	all := append(append([]Device(nil), devs...), co.Spares...)
	for i, d := range all {
		if seen[d.Path] {
			errs = append(errs, fmt.Errorf("%w: %s is listed twice", ErrConfig, d.Path))
		}
		seen[d.Path] = true
		old, err := superblock.Read(d.Member)
		switch {
		case err == nil && !co.Force:
			errs = append(errs, fmt.Errorf("%w: %s is member %d of array %q (uuid %s); pass --force to overwrite it", ErrInUse, d.Path, old.Role, old.Name, superblock.FormatUUID(old.ArrayUUID)))
		case err != nil && !errors.Is(err, superblock.ErrNoMagic) && !co.Force:
			errs = append(errs, fmt.Errorf("%w: %s carries a damaged raidd superblock (%w); pass --force to overwrite it", ErrInUse, d.Path, err))
		}
		if sz := d.Member.Size(); i < len(devs) && (minSize < 0 || sz < minSize) {
			minSize = sz
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// The write-hole log area follows the header, the checksum area the
	// log area, and the data region the last of them.
	dataOff, logLen, csumOff, csumLen, err := createAreas(co, len(devs), minSize)
	if err != nil {
		return nil, err
	}
	geo, err := stripe.New(co.Level, len(devs), co.Chunk, minSize-dataOff)
	if err != nil {
		return nil, fmt.Errorf("raid: create %q: %w", co.Name, err)
	}
	if len(co.Spares) > 0 && geo.Tolerance() == 0 {
		return nil, fmt.Errorf("%w: %s has no redundancy, so a spare could never be used", ErrConfig, geo.Level())
	}
	for _, d := range co.Spares {
		if d.Member.Size() < dataOff+geo.MemberSize() {
			return nil, fmt.Errorf("%w: spare %s is %d bytes, smaller than a member (%d)", ErrConfig, d.Path, d.Member.Size(), dataOff+geo.MemberSize())
		}
	}
	region := co.BitmapRegion
	if region == 0 {
		region = 64 << 20
	}
	if region < 0 || (geo.Tolerance() == 0 && !co.Checksums) {
		region = 0 // without redundancy nor checksums there is nothing to resync
	}
	for region > 0 && (geo.MemberSize()-1)/region+1 > superblock.BitmapBytes*8 {
		region *= 2
	}
	now := time.Now().UnixNano()
	meta := &superblock.Meta{
		ArrayUUID: superblock.NewUUID(), Name: co.Name, Level: uint32(co.Level),
		ChunkSize: uint64(geo.Chunk()), RaidDisks: uint32(len(devs)),
		DataOffset: uint64(dataOff), DataSize: uint64(geo.MemberSize()),
		Checksums: co.Checksums, ChecksumOffset: uint64(csumOff), ChecksumLength: uint64(csumLen),
		State: superblock.StateClean, RebuildRole: -1, CreateTime: now,
		BitmapRegion: uint64(region),
	}
	if logLen > 0 {
		meta.LogOffset, meta.LogLength = superblock.HeaderSize, uint64(logLen)
	}
	slots := map[[16]byte]*slot{}
	for i, d := range devs {
		u := superblock.NewUUID()
		meta.Members = append(meta.Members, superblock.MemberInfo{UUID: u, Role: int32(i), State: superblock.MemberActive})
		slots[u] = &slot{dev: d.Member, path: d.Path, uuid: u, writeMostly: d.WriteMostly}
	}
	for _, d := range co.Spares {
		u := superblock.NewUUID()
		meta.Members = append(meta.Members, superblock.MemberInfo{UUID: u, Role: -1, State: superblock.MemberSpare})
		slots[u] = &slot{dev: d.Member, path: d.Path, uuid: u, writeMostly: d.WriteMostly}
	}
	for _, d := range all {
		if err := superblock.Erase(d.Member); err != nil {
			return nil, fmt.Errorf("raid: create: erase %s: %w", d.Path, err)
		}
		err := d.Member.Discard(superblock.BitmapOffset, superblock.BitmapBytes)
		if errors.Is(err, errors.ErrUnsupported) {
			_, err = d.Member.WriteAt(make([]byte, superblock.BitmapBytes), superblock.BitmapOffset)
		}
		if err != nil {
			return nil, fmt.Errorf("raid: create: clear bitmap on %s: %w", d.Path, err)
		}
		if co.Checksums {
			if err := integrity.Clear(d.Member, csumOff, csumLen); err != nil {
				return nil, fmt.Errorf("raid: create: clear the checksum area on %s: %w", d.Path, err)
			}
		}
	}
	// Zero the data regions so redundancy is consistent without a resync.
	needResync := false
	var wg sync.WaitGroup
	derrs := make([]error, len(devs))
	for i, d := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			derrs[i] = d.Member.Discard(dataOff, geo.MemberSize())
		}()
	}
	wg.Wait()
	for i, err := range derrs {
		if errors.Is(err, errors.ErrUnsupported) {
			needResync = geo.Tolerance() > 0 || co.Checksums
		} else if err != nil {
			return nil, fmt.Errorf("raid: create: clear %s: %w", devs[i].Path, err)
		}
	}
	if needResync {
		meta.State = superblock.StateDirty
	}
	a, err := newArray(meta, slots, nil, o)
	if err != nil {
		return nil, err
	}
	if needResync && a.bitmap != nil {
		// The data regions were not zeroed: every region needs the resync
		// (its plan comes from the bitmap).
		for r := int64(0); r < a.bitmap.n; r++ {
			a.bitmap.set(r)
		}
	}
	a.lockConfig()
	err = a.commitLocked()
	a.dirty.Store(needResync)
	a.unlockConfig()
	if err == nil && needResync && a.bitmap != nil {
		a.bitmap.mu.Lock()
		err = a.persistBitmap()
		a.bitmap.mu.Unlock()
	}
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("raid: create: write superblocks: %w", err)
	}
	if a.journal != nil {
		if err := a.journal.open(false); err != nil {
			a.Close()
			return nil, fmt.Errorf("raid: create %q: %w", co.Name, err)
		}
	}
	a.log.Info("array created", "level", geo.Level(), "members", len(devs), "chunk", geo.Chunk(), "size", geo.Size(), "uuid", superblock.FormatUUID(meta.ArrayUUID))
	if needResync {
		a.log.Info("members cannot discard: initial resync")
	}
	a.start(needResync, false, nil, jobRebuild, 0)
	return a, nil
}

// CreateDataOffset returns where Create would start the data region on
// n members of size bytes with options co: after the header, the
// write-hole log area when co's consistency policy (or the level's
// default) keeps one, and the checksum area with co.Checksums. It fails,
// wrapping ErrConfig or a stripe error, when Create would refuse co for
// any member size.
func CreateDataOffset(co CreateOptions, n int, size int64) (int64, error) {
	if co.Chunk == 0 {
		co.Chunk = stripe.DefaultChunk
	}
	off, _, _, _, err := createAreas(co, n, size)
	return off, err
}

// createAreas places the areas of a new array of n members the smallest
// of which is minSize bytes: the write-hole log area (when the policy, or
// the level's default, asks for one) at the end of the header, the
// checksum area (co.Checksums) after it, and the data region after the
// last of them, aligned.
func createAreas(co CreateOptions, n int, minSize int64) (dataOff, logLen, csumOff, csumLen int64, err error) {
	dataOff = superblock.HeaderSize
	// The level's traits do not depend on the member size: ask a layout
	// of the smallest geometry.
	probe, err := stripe.New(co.Level, n, co.Chunk, co.Chunk)
	if err != nil {
		return 0, 0, 0, 0, fmt.Errorf("raid: create %q: %w", co.Name, err)
	}
	l, err := newLayout(probe)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	journal := l.Traits().Journal
	switch co.ConsistencyPolicy {
	case PolicyBitmap:
		journal = false
	case PolicyJournal:
		if !journal {
			return 0, 0, 0, 0, fmt.Errorf("%w: consistency policy ppl: %s has no write hole (only RAID5 and RAID6 do); use bitmap", ErrConfig, co.Level)
		}
	}
	if journal {
		logLen = journalLengthFor(n, co.Chunk, minSize)
		dataOff += logLen
	}
	if co.Checksums {
		csumOff = dataOff
		csumLen = integrity.AreaSize(max(0, minSize-csumOff))
		dataOff = (csumOff + csumLen + superblock.Align - 1) / superblock.Align * superblock.Align
	}
	return dataOff, logLen, csumOff, csumLen, nil
}

type candidate struct {
	dev  Device
	meta *superblock.Meta
}

// Assemble reads the superblocks on devs and starts the array they
// describe, following mdadm's rules:
//   - a device without a superblock (ErrNotMember), with a corrupt one
//     (ErrCorrupt) or belonging to another array (ErrForeign) is refused,
//     except that devices without a readable superblock are left out (and
//     closed) when the newest superblock records at least as many failed
//     members that are not present: a member truncated or wiped while it
//     served was failed on the survivors, and must not keep the array from
//     starting degraded;
//   - the member with the highest event counter holds the authoritative
//     member table;
//   - a member that table records as failed or removed, or whose own
//     counter is more than one behind, is stale and left out;
//   - a member that records the newest member as failed is rejected (its
//     history diverged: split brain);
//   - the array starts degraded when the missing roles are within the
//     level's tolerance, and refuses to start (ErrCannotStart) otherwise;
//   - with o.ForceAssemble, an array that cannot start otherwise trusts
//     left-out members again (mdadm --assemble --force): members whose own
//     superblock says they were in sync in a missing role, freshest event
//     counter first, and only as many as the start needs. Members with an
//     older counter than the first one taken, and members whose table
//     records a trusted member as failed (split brain), are never forced:
//     then it refuses with ErrDiverged. Older members are forced with the
//     first only when they left together with it (leftAsItFailed). The
//     first is forced only when the array could not run without it when
//     it left: members its own table had in sync, less the members given
//     that left no later, must not survive (stayedAfter); a member not
//     given counts as having stayed, since it may hold writes the first
//     lacks (ErrCannotStart, unless o.AcceptLoss). Each forced member is
//     logged with its event counter, and parity and mirrors are resynced
//     over the write-intent bitmap's dirty regions afterwards.
//
// Every refusal names the member and says what to do. Members left out are
// recorded as failed in the survivors' superblocks. After an unclean
// shutdown, a background resync makes redundancy consistent. A rebuild
// resumes at its checkpoint; so does a replace (a member recorded as
// replacing a role), as a replace while the member it copies is present,
// as a rebuild of the replacement when that member is gone; a replacement
// that is not present is recorded as failed.
func Assemble(devs []Device, o Options) (*Array, error) {
	if len(devs) == 0 {
		return nil, fmt.Errorf("%w: no members given", ErrCannotStart)
	}
	var (
		cands    []candidate
		errs     []error
		unread   []Device // no superblock, or a corrupt one
		unreadBy []error
	)
	for _, d := range devs {
		m, err := superblock.Read(d.Member)
		switch {
		case d.Member.Size() == 0:
			unread = append(unread, d)
			unreadBy = append(unreadBy, fmt.Errorf("%w: %s is empty (0 bytes): a loop device that is not set up ('losetup -a' lists those that are), or an empty file; check the path, or attach the member's backing file again ('losetup --find --show FILE')", ErrNotMember, d.Path))
		case errors.Is(err, superblock.ErrNoMagic):
			unread = append(unread, d)
			unreadBy = append(unreadBy, fmt.Errorf("%w: %s has no raidd superblock; check the path, or, if it was a member whose header was wiped, leave it out (the array starts degraded if its level allows) and add it back with 'raidd add', which rebuilds it; if the array cannot start without it (RAID0, or more members lost than the level tolerates), 'raidd restore-header --role N %s OTHER-MEMBERS...' writes its header back from the others", ErrNotMember, d.Path, d.Path))
		case err != nil:
			unread = append(unread, d)
			unreadBy = append(unreadBy, fmt.Errorf("%w: %s: %w; if the other members are intact, leave it out (the array starts degraded if its level allows) and add it back with 'raidd add --force', which rebuilds it. If the array cannot start without it, 'raidd restore-header %s OTHER-MEMBERS...' writes its header back from the others; never run 'raidd create --force' over them, which would erase the array's data (it clears the data regions)", ErrCorrupt, d.Path, err, d.Path))
		default:
			cands = append(cands, candidate{d, m})
		}
	}
	// A damaged header that still carries this array's identity and an
	// event counter newer than every readable member's says they are
	// behind it: starting without it would serve their older data.
	if len(cands) > 0 && !o.AcceptLoss {
		newest := newestOf(majorityArray(cands))
		nm := newest.meta
		for _, d := range unread {
			rs, _ := superblock.ReadRemains(d.Member)
			for _, r := range rs {
				if superblock.NearUUID(r.ArrayUUID, nm.ArrayUUID) && r.Events > nm.Events {
					return nil, fmt.Errorf("%w: %s's superblock is damaged, and what is left of it carries event %d, newer than every readable member's (the newest, %s, is at %d): they are behind it, and %q started without it would serve their older data. Keep every device as it is; only if you accept losing the writes it alone holds, leave %s out of the members given", ErrCannotStart, d.Path, r.Events, newest.dev.Path, nm.Events, nm.Name, d.Path)
				}
			}
		}
	}
	if len(cands) == 0 || len(unread) > lostFailed(cands) {
		return nil, errors.Join(unreadBy...)
	}
	newest := newestOf(majorityArray(cands))
	nm := newest.meta
	// Devices whose superblock is gone stand for members the newest
	// superblock already records as failed (a member truncated or wiped
	// while it served is failed on the survivors at once); they are left
	// out, so the array starts degraded, as it would without them.
	for i, d := range unread {
		_ = d.Member.Close()
		if o.Logger != nil {
			o.Logger.Warn("member left out", "array", nm.Name, "path", d.Path, "reason", unreadBy[i])
		}
	}
	seenUUID := map[[16]byte]string{}
	for _, c := range cands {
		if c.meta.ArrayUUID != nm.ArrayUUID {
			errs = append(errs, fmt.Errorf("%w: %s belongs to array %q (uuid %s), not %q (uuid %s); leave it out", ErrForeign, c.dev.Path, c.meta.Name, superblock.FormatUUID(c.meta.ArrayUUID), nm.Name, superblock.FormatUUID(nm.ArrayUUID)))
		}
		if p, dup := seenUUID[c.meta.MemberUUID]; dup {
			errs = append(errs, fmt.Errorf("%w: %s and %s are the same member (uuid %s); list it once", ErrConfig, p, c.dev.Path, superblock.FormatUUID(c.meta.MemberUUID)))
		}
		seenUUID[c.meta.MemberUUID] = c.dev.Path
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	geo, err := stripe.New(stripe.Level(nm.Level), int(nm.RaidDisks), int64(nm.ChunkSize), int64(nm.DataSize))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrCorrupt, newest.dev.Path, err)
	}
	rebuildHint := func(c candidate) string {
		path := c.dev.Path
		if geo.Tolerance() == 0 {
			return geo.Level().String() + " cannot rebuild a member: if its data is intact, start the array with 'raidd serve --force-assemble'"
		}
		for _, mi := range nm.Members {
			if mi.UUID == c.meta.MemberUUID || mi.Role != c.meta.Role || c.meta.Role < 0 ||
				(mi.State != superblock.MemberActive && mi.State != superblock.MemberRebuilding) {
				continue
			}
			holder := superblock.FormatUUID(mi.UUID)
			for _, o := range cands {
				if o.meta.MemberUUID == mi.UUID {
					holder = o.dev.Path
				}
			}
			return fmt.Sprintf("its role %d is held by %s now, so 'raidd add %s %s' makes it a spare, rebuilt in full when a role needs it", c.meta.Role, holder, nm.Name, path)
		}
		if nm.BitmapRegion == 0 {
			return fmt.Sprintf("'raidd add %s %s' rebuilds it in full (the array keeps no write-intent bitmap, so it cannot resync only what it missed)", nm.Name, path)
		}
		return fmt.Sprintf("re-add it with 'raidd add %s %s' (only regions written since it left are resynced when the write-intent bitmap covers them)", nm.Name, path)
	}
	meta := nm.Clone()
	slots := map[[16]byte]*slot{}
	var (
		dead      []*slot
		deadCands []candidate
		short     []*slot // left out for being smaller than the array needs
		// members in sync at the newest event left out for their size,
		// with how to bring them back
		shortInSync = map[[16]byte]string{}
	)
	index := map[[16]byte]int{}
	bare := map[*slot]string{} // a left-out member's reason without its advice
	for i, mi := range meta.Members {
		index[mi.UUID] = i
	}
	log := o.Logger
	for _, c := range cands {
		s := &slot{dev: c.dev.Member, path: c.dev.Path, uuid: c.meta.MemberUUID, writeMostly: c.dev.WriteMostly, events: c.meta.Events}
		i, known := index[c.meta.MemberUUID]
		reason, advice := "", "" // advice: the re-add, which needs the array started
		switch {
		case !known:
			reason = "not in the newest member table (it was removed); add it again with 'raidd add " + nm.Name + " " + c.dev.Path + "'"
		case c.meta != nm && recordsFailed(c.meta, nm.MemberUUID):
			reason = fmt.Sprintf("split brain: it records %s (the newest member) as failed, so their contents diverged; check which copy holds your data, then re-add this one with 'raidd add %s %s'", newest.dev.Path, nm.Name, c.dev.Path)
		case meta.Members[i].State == superblock.MemberFailed || meta.Members[i].State == superblock.MemberRemoved:
			reason = fmt.Sprintf("stale: the newest superblock (event %d) records it as %s; its data is out of date", nm.Events, meta.Members[i].State)
			advice = ": " + rebuildHint(c)
		case c.meta.Events+1 < nm.Events:
			reason = fmt.Sprintf("stale: event counter %d is behind %d", c.meta.Events, nm.Events)
			advice = "; " + rebuildHint(c)
		case !sameGeometry(c.meta, nm):
			reason = fmt.Sprintf("geometry differs from the newest member's; rebuild it with 'raidd add %s %s'", nm.Name, c.dev.Path)
		case int64(nm.DataOffset+nm.DataSize) > c.dev.Member.Size():
			reason = fmt.Sprintf("device is %d bytes, smaller than the array needs (%d): its data past that end cannot be read (lost, if its file was truncated; a loop device attached with a size limit shows less than its file holds), so it comes back by a full rebuild", c.dev.Member.Size(), nm.DataOffset+nm.DataSize)
			short = append(short, s)
			if known && meta.Members[i].State == superblock.MemberActive && c.meta.Events+1 >= nm.Events {
				// In sync but too small: a forced start must not trust
				// members that left before it in its place.
				shortInSync[c.meta.MemberUUID] = fmt.Sprintf("was left out (%s: %s): give it its whole size again (a loop device: attach its whole file)", c.dev.Path, reason)
			}
		}
		if reason != "" {
			s.note = reason + advice
			bare[s] = reason
			dead = append(dead, s)
			deadCands = append(deadCands, c)
			if known && (meta.Members[i].State == superblock.MemberActive || meta.Members[i].State == superblock.MemberRebuilding) {
				meta.Members[i].State = superblock.MemberFailed
			}
			if log != nil {
				log.Warn("member left out", "array", nm.Name, "path", c.dev.Path, "events", c.meta.Events, "reason", s.note)
			}
			continue
		}
		slots[s.uuid] = s
	}
	// Members the newest table records in sync that were not given at all
	// (missingRoles records them failed): a forced start must not trust
	// members in their place that left before them (absentInSync).
	absent := map[[16]byte]string{}
	for _, mi := range meta.Members {
		if mi.State == superblock.MemberActive && slots[mi.UUID] == nil {
			absent[mi.UUID] = "is not among the members given: supply it (its superblock names it; 'raidd examine DEVICE' shows a device's member UUID)"
		}
	}
	for u, how := range shortInSync {
		absent[u] = how
	}
	missing, why := missingRoles(meta, slots)
	forced := false
	if !geo.Survives(missing) {
		fm, err := forceable(geo, meta, nm, slots, dead, deadCands, missing, absent, o.AcceptLoss)
		switch {
		case o.ForceAssemble && err != nil:
			return nil, fmt.Errorf("%w: %q: forced assembly refused: %w", ErrCannotStart, meta.Name, err)
		case o.ForceAssemble:
			forced = true
			for _, k := range fm {
				s, c := dead[k], deadCands[k]
				i := index[c.meta.MemberUUID]
				meta.Members[i].Role, meta.Members[i].State = c.meta.Role, superblock.MemberActive
				s.note = ""
				slots[s.uuid] = s
				if log != nil {
					log.Warn("forced assembly: trusting a member the others recorded as failed", "array", nm.Name, "path", s.path, "role", c.meta.Role, "events", c.meta.Events, "newest_events", nm.Events)
				}
			}
			kept := dead[:0]
			for _, s := range dead {
				if slots[s.uuid] != s {
					kept = append(kept, s)
				}
			}
			dead = kept
			missing, _ = missingRoles(meta, slots)
		default:
			// The reasons without their advice to re-add: a re-add needs
			// the array running, which it cannot be.
			for _, s := range dead {
				why = append(why, s.path+": "+bare[s])
			}
			hint := "supply the missing members"
			var absent *absentInSyncError
			if errors.As(err, &absent) {
				hint = absent.Error()
			}
			if err == nil {
				var names []string
				for _, k := range fm {
					names = append(names, fmt.Sprintf("%s (event %d)", dead[k].path, deadCands[k].meta.Events))
				}
				hint = fmt.Sprintf("if the members left because of an operator mistake or a transient fault, 'raidd serve --force-assemble' (or 'raidd assemble --force' with the same members, then 'raidd serve') would start it trusting %s", strings.Join(names, ", "))
				if geo.Tolerance() > 0 && len(dead) > len(fm) {
					hint += "; re-add the others with 'raidd add' once it runs"
				}
			}
			tol := fmt.Sprintf("%s tolerates only %d", geo.Level(), geo.Tolerance())
			if geo.Level() == stripe.RAID10 {
				// Tolerance is the worst case; which roles may be missing
				// together depends on which hold the same chunks.
				tol = "raid10 has no copy left of some of the chunks these roles hold (a chunk survives while one member holding it is present)"
			}
			return nil, fmt.Errorf("%w: %q (%s) is missing roles %s and %s; %s: %s", ErrCannotStart, meta.Name, geo.Level(), roleList(missing), tol, hint, strings.Join(why, "; "))
		}
	}
	if forced && log != nil {
		var used []string
		for _, mi := range meta.Members {
			if s := slots[mi.UUID]; s != nil && mi.State == superblock.MemberActive {
				used = append(used, fmt.Sprintf("role %d %s (event %d)", mi.Role, s.path, s.events))
			}
		}
		log.Warn("forced assembly: members in use", "array", nm.Name, "members", strings.Join(used, ", "), "missing_roles", roleList(missing))
	}
	// A rebuild in progress resumes at its checkpoint, and so does a
	// replace: while the member it copies is in use, as a replace; when
	// that member is gone, as a rebuild of the replacement from where the
	// copy was (every row below was copied, and every write since reached
	// both). A replacement that is not here is recorded as failed.
	var resume *slot
	resumeRow := int64(0)
	resumeKind := jobRebuild
	for i := range meta.Members {
		mi := &meta.Members[i]
		switch mi.State {
		case superblock.MemberRebuilding:
			resume = slots[mi.UUID]
			resumeRow = int64(meta.RebuildCheckpoint) / geo.Chunk()
		case superblock.MemberReplacing:
			s := slots[mi.UUID]
			if s == nil {
				mi.Role, mi.State = -1, superblock.MemberFailed
				continue
			}
			resume, resumeRow = s, int64(meta.RebuildCheckpoint)/geo.Chunk()
			if missing&(1<<uint(mi.Role)) == 0 {
				resumeKind = jobReplace
			} else {
				mi.State = superblock.MemberRebuilding
				if log != nil {
					log.Warn("the member a replace copied is gone: rebuilding its replacement from where the copy was", "array", nm.Name, "path", s.path, "role", mi.Role, "row", resumeRow)
				}
			}
		}
	}
	if resume == nil {
		meta.RebuildRole, meta.RebuildCheckpoint = -1, 0
	}
	// After a forced assembly, rows being written when the members left
	// may be inconsistent: resync the bitmap's dirty regions.
	unclean := meta.State == superblock.StateDirty || (forced && geo.Tolerance() > 0)
	a, err := newArray(meta, slots, dead, o)
	if err != nil {
		return nil, err
	}
	if a.bitmap != nil {
		// A region is dirty if any member in use says so: a member added
		// after its bit was set (a claimed spare) or a commit that reached
		// only some members before a crash holds fewer bits than the others.
		img := make([]byte, len(a.bitmap.image))
		if _, err := newest.dev.Member.ReadAt(img, superblock.BitmapOffset); err != nil {
			a.Close()
			return nil, fmt.Errorf("raid: assemble %q: read the write-intent bitmap of %s: %w", meta.Name, newest.dev.Path, err)
		}
		a.bitmap.load(img)
		for _, s := range slots {
			if rawDev(s.dev) == newest.dev.Member {
				continue
			}
			if _, err := s.dev.ReadAt(img, superblock.BitmapOffset); err == nil {
				a.bitmap.load(img)
			} else {
				a.log.Warn("cannot read a member's write-intent bitmap; using the others'", "path", s.path, "err", err)
			}
		}
	}
	if a.journal != nil {
		// Replay the write-hole log before anything reads or resyncs.
		if err := a.journal.open(unclean); err != nil {
			a.Close()
			return nil, fmt.Errorf("raid: assemble %q: %w", meta.Name, err)
		}
	}
	if resume != nil && unclean && a.bitmap != nil {
		// Writes in flight at the crash may have torn rows below the
		// checkpoint: rebuild again from the first dirty region.
		if d := a.bitmap.dirtyRegions(); len(d) > 0 {
			resumeRow = min(resumeRow, d[0]<<a.bitmap.rowShift)
		}
	} else if resume != nil && unclean {
		resumeRow = 0
	}
	a.lockConfig()
	if unclean {
		a.dirty.Store(true)
	}
	err = a.commitLocked()
	if err == nil && !o.ReadOnly {
		// A member too small for the array lost the data past its end:
		// its own header must say it failed, or a 'raidd add' after its
		// size is restored would resync only the regions written since
		// and trust the lost tail (as for a member that shrinks while
		// served: markContentLostLocked).
		for _, s := range short {
			if slots[s.uuid] == nil {
				a.recordLostOnOwnHeaderLocked(s, false)
			}
		}
	}
	a.publishLocked()
	a.unlockConfig()
	if err != nil {
		a.Close()
		return nil, fmt.Errorf("raid: assemble %q: write superblocks: %w", meta.Name, err)
	}
	// degraded from the view: a member whose superblock write failed just
	// now was failed by commitLocked, after missing was counted.
	a.log.Info("array assembled", "level", geo.Level(), "members", geo.Members(), "size", geo.Size(), "degraded", a.view.Load().readable != fullMask(geo.Members()), "unclean", unclean, "forced", forced)
	// With checksums RAID0 resyncs too: its rows' checksums are resealed.
	resync := unclean && !o.NoResync && (geo.Tolerance() > 0 || a.csum != nil)
	reseal := false
	if resync && missing != 0 && !a.traits.ResyncDegraded && !(a.traits.ResyncRedundant && bits.OnesCount64(missing) < geo.Tolerance()) {
		// The level cannot resync its rows while a member is missing, but
		// the checksums of the dirty rows' blocks on the members present
		// must still follow the data a write in flight at the crash left
		// there (old or new bytes): else every torn block reads as corrupt,
		// and so does every block of the missing member that needs it.
		reseal = a.csum != nil
		switch {
		case a.journal != nil:
			a.log.Info("unclean shutdown while degraded: the partial parity log recomputed the parity of the rows being written; no data those writes did not touch was lost", "records", a.journal.replayed)
		case o.ReadOnly && ConsistencyPolicyOf(meta) != "bitmap":
			a.log.Warn("unclean shutdown while degraded, started read-only: the write-hole log (consistency policy "+ConsistencyPolicyOf(meta)+") is not replayed without writes, so the parity of stripes being written at the crash may be stale and the missing member's chunks of those stripes may read wrong; a read-write start replays it", "policy", ConsistencyPolicyOf(meta))
		default:
			a.log.Warn("unclean shutdown while degraded: parity of stripes written at the crash may be stale (write hole: consistency policy bitmap); data on surviving members is intact")
		}
		resync = false
	}
	for _, s := range dead {
		role := -1 // not in the member table
		if i := slices.IndexFunc(meta.Members, func(mi superblock.MemberInfo) bool { return mi.UUID == s.uuid }); i >= 0 {
			role = int(meta.Members[i].Role)
		}
		a.event(Event{Kind: EventMemberStale, Role: role, Path: s.path, Detail: s.note})
	}
	for i, d := range unread {
		a.event(Event{Kind: EventMemberStale, Role: -1, Path: d.Path, Detail: unreadBy[i].Error() + "; the array records a failed member it may have been: re-add it with 'raidd add' once it is sound"})
	}
	if missing != 0 {
		a.event(Event{Kind: EventDegraded, Role: -1, Detail: "missing roles " + roleList(missing)})
	}
	a.start(resync, reseal, resume, resumeKind, resumeRow)
	return a, nil
}

// majorityArray returns the candidates of the array most of them belong
// to (by array UUID), or, between arrays with as many, of the one whose
// member is newest. A device reused for another array since (its
// counter may be the highest) is then the one called foreign, not the
// members it was listed with.
func majorityArray(cands []candidate) []candidate {
	count := map[[16]byte]int{}
	for _, c := range cands {
		count[c.meta.ArrayUUID]++
	}
	most := 0
	for _, n := range count {
		most = max(most, n)
	}
	var largest []candidate
	for _, c := range cands {
		if count[c.meta.ArrayUUID] == most {
			largest = append(largest, c)
		}
	}
	best := newestOf(largest).meta.ArrayUUID
	var out []candidate
	for _, c := range cands {
		if c.meta.ArrayUUID == best {
			out = append(out, c)
		}
	}
	return out
}

// newestOf returns the candidate with the highest event counter (the most
// recent update on a tie).
func newestOf(cands []candidate) candidate {
	newest := cands[0]
	for _, c := range cands[1:] {
		switch {
		case c.meta.Events != newest.meta.Events:
			if c.meta.Events > newest.meta.Events {
				newest = c
			}
		case c.meta.UpdateTime != newest.meta.UpdateTime:
			if c.meta.UpdateTime > newest.meta.UpdateTime {
				newest = c
			}
		case !selfRemoved(c.meta) && selfRemoved(newest.meta):
			// A device retired by a replace carries the table that
			// retired it, itself added as removed; a member of that
			// table speaks for it.
			newest = c
		}
	}
	return newest
}

// selfRemoved reports whether m's member table records m's own member as
// removed (a device retired by a replace).
func selfRemoved(m *superblock.Meta) bool {
	return slices.ContainsFunc(m.Members, func(mi superblock.MemberInfo) bool {
		return mi.UUID == m.MemberUUID && mi.State == superblock.MemberRemoved
	})
}

// lostFailed counts the members that the newest superblock among cands
// records as failed in a role and that no candidate is: the members a
// device without a readable superblock may be.
func lostFailed(cands []candidate) int {
	newest := newestOf(cands)
	present := map[[16]byte]bool{}
	for _, c := range cands {
		present[c.meta.MemberUUID] = true
	}
	n := 0
	for _, mi := range newest.meta.Members {
		if mi.Role >= 0 && mi.State == superblock.MemberFailed && !present[mi.UUID] {
			n++
		}
	}
	return n
}

func recordsFailed(m *superblock.Meta, u [16]byte) bool {
	for _, mi := range m.Members {
		if mi.UUID == u {
			return mi.State == superblock.MemberFailed || mi.State == superblock.MemberRemoved
		}
	}
	return false
}

func roleList(mask uint64) string {
	var s []string
	for mask != 0 {
		r := bits.TrailingZeros64(mask)
		s = append(s, fmt.Sprint(r))
		mask &^= 1 << uint(r)
	}
	return strings.Join(s, ", ")
}

func sameGeometry(m, nm *superblock.Meta) bool {
	return m.DataOffset == nm.DataOffset && m.DataSize == nm.DataSize && m.ChunkSize == nm.ChunkSize && m.Level == nm.Level && m.RaidDisks == nm.RaidDisks
}

// missingRoles marks the roles of meta without a present, in-sync member
// as failed and returns them, with a description of each missing member.
// A role being rebuilt counts as missing until its rebuild finishes.
func missingRoles(meta *superblock.Meta, slots map[[16]byte]*slot) (uint64, []string) {
	var missing uint64
	var why []string
	for r := 0; r < int(meta.RaidDisks); r++ {
		ok := false
		for i := range meta.Members {
			mi := &meta.Members[i]
			if int(mi.Role) != r {
				continue
			}
			switch {
			case mi.State != superblock.MemberRebuilding:
			case slots[mi.UUID] == nil:
				mi.State = superblock.MemberFailed
			case meta.RebuildRole != mi.Role:
				// A second target of a rebuild of several roles: its
				// progress is not recorded, so it is a spare again and
				// is claimed anew.
				mi.Role, mi.State = -1, superblock.MemberSpare
				continue
			}
			if mi.State == superblock.MemberActive {
				if slots[mi.UUID] != nil {
					ok = true
				} else {
					mi.State = superblock.MemberFailed
					why = append(why, fmt.Sprintf("role %d (member %s) is missing", r, superblock.FormatUUID(mi.UUID)))
				}
			}
		}
		if !ok {
			missing |= 1 << uint(r)
		}
	}
	return missing, why
}

// forceable chooses the left-out members a forced assembly trusts so that
// the array can start (mdadm --assemble --force): members whose own
// superblock says they were in sync in a role that is now missing, with
// matching geometry, freshest event counter first. Only members with the
// freshest counter among them are taken: one with an older counter left
// while the array still ran and missed writes it acknowledged. It returns
// indexes into dead, or an error wrapping ErrDiverged or ErrCannotStart
// saying why no safe choice exists.
func forceable(geo stripe.Geometry, meta, newest *superblock.Meta, slots map[[16]byte]*slot, dead []*slot, cands []candidate, missing uint64, absent map[[16]byte]string, acceptLoss bool) ([]int, error) {
	var (
		ok       []int
		refusals []string
	)
	for k, c := range cands {
		m := c.meta
		own := superblock.MemberState(255)
		for _, mi := range m.Members {
			if mi.UUID == m.MemberUUID {
				own = mi.State
			}
		}
		diverged := ""
		for _, mi := range m.Members {
			if (mi.State == superblock.MemberFailed || mi.State == superblock.MemberRemoved) && slots[mi.UUID] != nil {
				diverged = slots[mi.UUID].path
			}
		}
		known := false
		for _, mi := range meta.Members {
			known = known || mi.UUID == m.MemberUUID
		}
		switch {
		case !known || m.Role < 0 || int(m.Role) >= geo.Members():
			continue // a spare or a removed member holds no data of a role
		case missing&(1<<uint(m.Role)) == 0:
			continue // its role is served by another member
		case diverged != "":
			refusals = append(refusals, fmt.Sprintf("%s (event %d) records %s, which the array trusts, as failed: their histories diverged (split brain)", dead[k].path, m.Events, diverged))
		case own != superblock.MemberActive:
			refusals = append(refusals, fmt.Sprintf("%s (event %d) was %s, not in sync, when it last wrote", dead[k].path, m.Events, own))
		case !sameGeometry(m, meta) || int64(meta.DataOffset+meta.DataSize) > c.dev.Member.Size():
			refusals = append(refusals, dead[k].path+": its geometry or size does not match the array")
		default:
			ok = append(ok, k)
		}
	}
	sort.SliceStable(ok, func(x, y int) bool { return cands[ok[x]].meta.Events > cands[ok[y]].meta.Events })
	var (
		chosen []int
		behind []string
		early  *leftEarlyError
	)
	for _, k := range ok {
		r := uint64(1) << uint(cands[k].meta.Role)
		if geo.Survives(missing) {
			break
		}
		if missing&r == 0 {
			continue // two candidates for one role: the fresher one was taken
		}
		if len(chosen) == 0 && !acceptLoss {
			if stayed := stayedAfter(cands[k], cands, newest, slots, dead); len(stayed) > 0 && geo.Survives(missing&^stayedRoles(stayed)) {
				if early == nil {
					early = &leftEarlyError{name: meta.Name, path: dead[k].path, events: cands[k].meta.Events, stayed: stayed}
					// A member the newest table still has in sync says
					// more: it is merely absent, or too small.
					if err := absentInSync(meta, absent, dead, cands, []int{k}, stayedRoles(stayed)); err != nil {
						return nil, err
					}
				}
				continue
			}
		}
		if len(chosen) > 0 && cands[k].meta.Events < cands[chosen[0]].meta.Events && !leftAsItFailed(geo, cands[k].meta, cands[chosen[0]].meta) {
			behind = append(behind, fmt.Sprintf("%s (event %d)", dead[k].path, cands[k].meta.Events))
			continue
		}
		chosen = append(chosen, k)
		missing &^= r
	}
	if geo.Survives(missing) {
		if err := absentInSync(meta, absent, dead, cands, chosen, missing); err != nil && !acceptLoss {
			return nil, err
		}
		return chosen, nil
	}
	if early != nil {
		return nil, early
	}
	if len(behind) > 0 {
		refusals = append(refusals, fmt.Sprintf("%s left before %s (event %d) while the array still ran, so they missed writes it acknowledged", strings.Join(behind, ", "), dead[chosen[0]].path, cands[chosen[0]].meta.Events))
	}
	if len(refusals) > 0 {
		return nil, fmt.Errorf("%w: roles %s would still be missing: %s", ErrDiverged, roleList(missing), strings.Join(refusals, "; "))
	}
	return nil, fmt.Errorf("%w: roles %s have no member to force in; supply their members", ErrCannotStart, roleList(missing))
}

// stayedMember is a member that stayed in sync after a forced candidate
// left, as the candidate's own table and the members given tell.
type stayedMember struct {
	role int
	name string // its path, or its UUID when it was not given
}

// stayedAfter returns the members that stayed in sync after c left: those
// c's own table (its last superblock) records in sync, less those given
// that left no later than c (their own last superblock is no newer). A
// member not given is assumed to have stayed (it may hold writes c
// lacks), unless the newest superblock records it as failed at the very
// next update after c's last (newest.Events <= c's + 1): it then left in
// the update that recorded c's departure (two disks dropped at once),
// since c's own table had it in sync and no later update exists. Present
// in-sync members (slots) stayed too, and are left out of the list: the
// operator supplies the others. cands and dead are the members given that
// were left out.
func stayedAfter(c candidate, cands []candidate, newest *superblock.Meta, slots map[[16]byte]*slot, dead []*slot) []stayedMember {
	var out []stayedMember
	for _, mi := range c.meta.Members {
		if mi.UUID == c.meta.MemberUUID || mi.Role < 0 || mi.State != superblock.MemberActive {
			continue
		}
		if slots[mi.UUID] != nil {
			continue // present and in sync: it stayed, and is given
		}
		name := superblock.FormatUUID(mi.UUID) + " (not given)"
		left := newest.Events <= c.meta.Events+1 && recordsFailed(newest, mi.UUID)
		for k, o := range cands {
			if o.meta.MemberUUID == mi.UUID {
				name = fmt.Sprintf("%s (event %d)", dead[k].path, o.meta.Events)
				left = o.meta.Events <= c.meta.Events
			}
		}
		if !left {
			out = append(out, stayedMember{int(mi.Role), name})
		}
	}
	return out
}

func stayedRoles(stayed []stayedMember) uint64 {
	var m uint64
	for _, s := range stayed {
		m |= 1 << uint(s.role)
	}
	return m
}

// leftEarlyError refuses a forced assembly whose freshest candidate left
// while the array could still run without it: members it knew in sync
// stayed, so the array may have acknowledged writes after it left that it
// lacks. The member that failed after it holds them.
type leftEarlyError struct {
	name   string
	path   string
	events uint64
	stayed []stayedMember
}

func (e *leftEarlyError) Error() string {
	var names []string
	for _, s := range e.stayed {
		names = append(names, fmt.Sprintf("role %d's %s", s.role, s.name))
	}
	return fmt.Sprintf("%s (event %d) left while %q still ran without it: by its own superblock %s stayed in sync after it, so the array may have acknowledged writes it lacks. Supply the member that failed after it (the one whose role is missing besides its own; 'raidd examine' shows each member's events); only if that member is lost for good, 'raidd assemble --force --accept-loss MEMBER...' starts %q trusting %s and losing those writes",
		e.path, e.events, e.name, strings.Join(names, ", "), e.name, e.path)
}

func (e *leftEarlyError) Is(target error) bool { return target == ErrCannotStart }

// absentInSyncError refuses a forced assembly that would trust members in
// place of one that was in sync at the newest event and is merely absent
// (not given): the forced members left earlier, while the array still
// ran, so they missed writes that the absent member holds.
type absentInSyncError struct {
	name   string
	role   int
	uuid   [16]byte
	events uint64
	how    string   // why it is missing, and how to bring it back
	forced []string // the members a forced start would trust, with their events
}

func (e *absentInSyncError) Error() string {
	return fmt.Sprintf("role %d's member %s was in sync at event %d, the newest, and %s. Trusting %s in its place would lose the writes the array acknowledged after they left. Only if that member is lost for good: 'raidd assemble --force --accept-loss MEMBER...' starts %q without it, trusting them and losing those writes",
		e.role, superblock.FormatUUID(e.uuid), e.events, e.how, strings.Join(e.forced, ", "), e.name)
}

func (e *absentInSyncError) Is(target error) bool { return target == ErrCannotStart }

// absentInSync returns an absentInSyncError when a role still missing
// after forcing the chosen candidates belongs, in the newest member table,
// to a member in sync that was not given (absent), or nil.
func absentInSync(meta *superblock.Meta, absent map[[16]byte]string, dead []*slot, cands []candidate, chosen []int, missing uint64) error {
	if len(chosen) == 0 {
		return nil
	}
	for _, mi := range meta.Members {
		how, ok := absent[mi.UUID]
		if !ok || mi.Role < 0 || missing&(1<<uint(mi.Role)) == 0 {
			continue
		}
		e := &absentInSyncError{name: meta.Name, role: int(mi.Role), uuid: mi.UUID, events: meta.Events, how: how}
		for _, k := range chosen {
			e.forced = append(e.forced, fmt.Sprintf("%s (event %d)", dead[k].path, cands[k].meta.Events))
		}
		return e
	}
	return nil
}

// leftAsItFailed reports whether the member whose last superblock is km
// holds every write the array acknowledged although fresh, the freshest
// member a forced start trusts, left after it: the commit that recorded
// km's departure (the event after km's last) was fresh's last, and km's
// own table shows that its departure left the array FAILED, so the array
// acknowledged no write after it left. (Two members failed one after the
// other on a RAID5: the second is as good as the first to trust.)
func leftAsItFailed(geo stripe.Geometry, km, fresh *superblock.Meta) bool {
	if km.Role < 0 || km.Events+1 < fresh.Events || !recordsFailed(fresh, km.MemberUUID) {
		return false
	}
	var present uint64
	for _, mi := range km.Members {
		if mi.State == superblock.MemberActive && mi.Role >= 0 && mi.UUID != km.MemberUUID {
			present |= 1 << uint(mi.Role)
		}
	}
	return !geo.Survives(fullMask(geo.Members()) &^ present)
}
