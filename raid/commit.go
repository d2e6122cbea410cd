package raid

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/raidd/raidd/raid/superblock"
)

// commitLocked bumps the event counter and writes the table to every
// member that is in use, syncing each. A member whose superblock cannot be
// written is marked failed, the commit is retried without it, and the View
// is republished so that I/O stops using it. Callers hold commitMu and
// cfgMu; commitLocked releases cfgMu while it writes and holds it again
// when it returns, so that readers of the table never wait for member I/O.
// commitMu keeps the table unchanged meanwhile and orders the commits.
func (a *Array) commitLocked() error {
	if a.readOnly {
		return nil
	}
	type write struct {
		i    int
		s    *slot
		meta *superblock.Meta
	}
	failed := false  // members were marked failed: the View must follow
	var lost []*slot // of them, those whose superblock write failed
	for {
		a.meta.Events++
		a.meta.UpdateTime = time.Now().UnixNano()
		a.noteDegradedLocked()
		var writes []write
		for i, mi := range a.meta.Members {
			s := a.slots[mi.UUID]
			if s == nil || (mi.State != superblock.MemberActive && mi.State != superblock.MemberRebuilding && mi.State != superblock.MemberSpare && mi.State != superblock.MemberReplacing) {
				continue
			}
			m := a.meta.Clone()
			m.Role, m.MemberUUID = mi.Role, mi.UUID
			writes = append(writes, write{i, s, m})
		}
		results := make([]error, len(writes))
		a.cfgMu.Unlock()
		var wg sync.WaitGroup
		for k, w := range writes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := superblock.Write(w.s.dev, w.meta)
				if err == nil {
					err = w.s.dev.Sync()
				}
				results[k] = err
			}()
		}
		wg.Wait()
		a.cfgMu.Lock()
		for _, err := range results {
			// A table the encoder refuses is raidd's own error, not the
			// members': failing them for it would turn one bug into a
			// FAILED array.
			if errors.Is(err, superblock.ErrInvalid) {
				a.log.Error("superblock update refused: the member table breaks an invariant (a raidd bug); no member is blamed", "err", err)
				return fmt.Errorf("raid: superblock update: %w", err)
			}
		}
		var errs []error
		for k, w := range writes {
			if results[k] == nil {
				w.s.events = w.meta.Events
				continue
			}
			errs = append(errs, &MemberError{Op: "superblock", Member: int(w.meta.Role), Path: w.s.path, Offset: -1, Err: results[k]})
		}
		if len(errs) == 0 {
			if failed {
				a.publishLocked() // stop using the members recorded as failed
			}
			for _, s := range lost {
				a.markContentLostLocked(s)
			}
			return nil
		}
		if !a.redundant() && len(errs) < len(writes) {
			// Without redundancy, recording the member as failed would make
			// every range unreachable and keep the array from starting:
			// like a request error, it is kept. Its counter falls behind; a
			// member more than one update behind is stale at the next
			// assembly, and a forced assembly takes it back.
			a.keepMembers(errors.Join(errs...))
			return nil
		}
		for k, w := range writes {
			if results[k] == nil {
				continue
			}
			mi := &a.meta.Members[w.i]
			a.log.Error("member failed while writing superblock", "role", mi.Role, "path", w.s.path, "err", results[k])
			if mi.State == superblock.MemberReplacing { // the replace is abandoned
				if j := a.job; j != nil && j.target == w.s {
					a.job = nil
					j.cancel()
				}
				if a.meta.RebuildRole == mi.Role {
					a.meta.RebuildRole, a.meta.RebuildCheckpoint = -1, 0
				}
				mi.Role = -1
			}
			wasRebuilding := mi.State == superblock.MemberRebuilding
			inRole := mi.State == superblock.MemberActive || wasRebuilding
			mi.State = superblock.MemberFailed
			if wasRebuilding && a.meta.RebuildRole == mi.Role {
				// As markFailedLocked: a rebuild target that failed takes
				// its rebuild record with it (a spare claimed onto a
				// device that refuses writes, before its job started).
				a.meta.RebuildRole, a.meta.RebuildCheckpoint = -1, 0
			}
			w.s.note = "superblock write failed"
			lost = append(lost, w.s)
			a.event(Event{Kind: EventMemberFailed, Role: int(mi.Role), Path: w.s.path, Detail: w.s.note})
			if inRole {
				// As markFailedLocked: a running job must follow.
				a.jobMemberFailedLocked(int(mi.Role), w.s, wasRebuilding)
			}
		}
		failed = true
		if len(errs) == len(writes) {
			a.publishLocked()
			return errors.Join(errs...)
		}
	}
}

// handleFailures marks the members that failed during op as failed,
// persists that on the survivors and publishes the new View. It runs before
// the request that saw the failure is acknowledged, under its stripe locks.
func (a *Array) handleFailures(op *Op) {
	if !a.redundant() {
		a.keepMembers(op.memberErrors())
		return
	}
	a.lockConfig()
	defer a.unlockConfig()
	a.markFailedLocked(op.v, op.failed, op.errs[:])
}

// markFailedLocked records the members in mask (roles of view v) as failed,
// commits and publishes. errs is indexed by role. Callers hold commitMu and
// cfgMu.
func (a *Array) markFailedLocked(v *View, mask uint64, errs []error) {
	changed := false
	var failed []*slot // the members this call failed
	for m := 0; m < a.geo.Members(); m++ {
		if mask&(1<<uint(m)) == 0 {
			continue
		}
		for i := range a.meta.Members {
			mi := &a.meta.Members[i]
			if int(mi.Role) != m || (mi.State != superblock.MemberActive && mi.State != superblock.MemberRebuilding) {
				continue
			}
			s := a.slots[mi.UUID]
			if s == nil || s.dev != v.devs[m] {
				continue
			}
			wasRebuilding := mi.State == superblock.MemberRebuilding
			mi.State = superblock.MemberFailed
			detail := ""
			if errs[m] != nil {
				s.note = errs[m].Error()
				detail = s.note
			}
			changed = true
			failed = append(failed, s)
			a.event(Event{Kind: EventMemberFailed, Role: m, Path: s.path, Detail: detail})
			a.jobMemberFailedLocked(m, s, wasRebuilding)
			if wasRebuilding && a.meta.RebuildRole == int32(m) {
				// A rebuild that had stopped (the array failed under it)
				// keeps its checkpoint with no job running: it goes too.
				a.meta.RebuildRole, a.meta.RebuildCheckpoint = -1, 0
			}
		}
	}
	if !changed {
		return
	}
	if err := a.commitLocked(); err != nil {
		a.log.Error("cannot record member failure on any member", "err", err)
	}
	for _, s := range failed {
		a.markContentLostLocked(s)
	}
	// Status shows the failure no later than requests see it: a request
	// that loads the new View fails at once, while this goroutine (a
	// rebuild that met the failure, say) still has events to send and
	// spares to claim before its unlock records the table again.
	nv := a.viewLocked()
	a.snapshotOf(nv)
	a.view.Store(nv)
	if nv.failed {
		a.event(Event{Kind: EventFailed, Role: -1, Detail: "more members lost than " + a.geo.Level().String() + " tolerates"})
		return
	}
	a.event(Event{Kind: EventDegraded, Role: -1})
	a.claimSparesLocked()
}

// markContentLostLocked writes the current member table, which records
// s's member as failed, onto that member's own header when its file is
// now shorter than at open (whatever error the failure was recorded
// with: a shrink is met by whichever request gets there first). The bytes
// past the new end are gone, so the member must not come back by a
// re-add, which resyncs only the regions written while it was out (and
// would trust the lost tail), but by a full rebuild. A re-add refuses a
// member whose own superblock does not say it was in sync
// (reAddBlockerLocked), and that survives a restart. The member's File
// refuses every write once it found the file short, so the header is
// written through a descriptor of its own; the write is best effort (a
// file shrunk into its header has lost it anyway, and is refused as
// damaged). Callers hold commitMu and cfgMu, after the commit that
// recorded the failure.
func (a *Array) markContentLostLocked(s *slot) {
	a.recordLostOnOwnHeaderLocked(s, true)
}

// recordLostOnOwnHeaderLocked writes the current member table, which
// records s's member as failed, onto that member's own header (see
// markContentLostLocked), so that a later 'raidd add' of it rebuilds it in
// full. With shrunkOnly it does so only when the member's file is now
// shorter than at open; assembly, which leaves out a member too small for
// the array, asks without. Callers hold commitMu and cfgMu, after the
// commit that recorded the failure.
func (a *Array) recordLostOnOwnHeaderLocked(s *slot, shrunkOnly bool) {
	i := slices.IndexFunc(a.meta.Members, func(mi superblock.MemberInfo) bool { return mi.UUID == s.uuid })
	if i < 0 || a.meta.Members[i].State != superblock.MemberFailed || s.path == "" {
		return
	}
	f, err := os.OpenFile(s.path, os.O_WRONLY, 0)
	if err != nil {
		return
	}
	defer f.Close()
	// A block device's size is its end (fstat says 0): a loop device
	// shrinks with its backing file ('losetup -c').
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil || size < superblock.HeaderSize {
		return // shrunk into its header, which is lost anyway
	}
	if shrunkOnly && size >= s.dev.Size() {
		return // not shrunk
	}
	meta := a.meta.Clone()
	meta.Role, meta.MemberUUID = a.meta.Members[i].Role, s.uuid
	err = superblock.Write(f, meta)
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		a.log.Warn("cannot record on the member's own superblock that it failed and lost data: a 'raidd add' of it would resync only the regions written while it was out; zero its first MiB first, so that it is rebuilt in full", "path", s.path, "err", err)
	}
}

// jobMemberFailedLocked adjusts the running job to the failure of s, which
// held role m (wasRebuilding: as a rebuild target): a replace whose old
// member failed turns into a rebuild of the replacement; a job whose
// target failed stops, its other targets becoming spares again. Callers
// hold commitMu and cfgMu, and commit and publish afterwards.
func (a *Array) jobMemberFailedLocked(m int, s *slot, wasRebuilding bool) {
	j := a.job
	if j == nil {
		return
	}
	switch {
	case j.role == m && j.kind == jobReplace && !wasRebuilding:
		a.promoteReplacementLocked(m)
	case j.hasTarget(s):
		a.job = nil
		j.cancel()
		a.meta.RebuildRole, a.meta.RebuildCheckpoint = -1, 0
		// The job's other targets become spares again, to be claimed anew.
		for _, t := range j.targets() {
			if t.target == s {
				continue
			}
			for k := range a.meta.Members {
				if o := &a.meta.Members[k]; o.UUID == t.target.uuid && o.State == superblock.MemberRebuilding {
					o.Role, o.State = -1, superblock.MemberSpare
				}
			}
		}
		a.event(Event{Kind: EventRebuildStopped, Role: m, Path: s.path, Detail: "the member being rebuilt failed"})
	}
}

// syncMembersLocked fdatasyncs every writable member in parallel. A member
// that fails to sync is marked failed; the error is returned only if the
// array has failed. Callers hold commitMu and cfgMu; cfgMu is released
// while the members sync.
func (a *Array) syncMembersLocked() error {
	v := a.view.Load()
	a.cfgMu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(v.devs))
	var mask uint64
	for m, d := range v.devs {
		if d == nil || v.writable&(1<<uint(m)) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[m] = d.Sync()
			if r := v.repl[m]; r != nil {
				_ = r.Sync() // a replacement that cannot sync fails on its next write
			}
		}()
	}
	wg.Wait()
	a.cfgMu.Lock()
	for m, err := range errs {
		if err != nil {
			mask |= 1 << uint(m)
			errs[m] = &MemberError{Op: "sync", Member: m, Offset: -1, Err: err}
		}
	}
	if mask == 0 {
		return nil
	}
	if !a.redundant() {
		a.keepMembers(errors.Join(errs...))
		return errors.Join(ErrIO, errors.Join(errs...))
	}
	a.markFailedLocked(v, mask, errs)
	if a.view.Load().failed {
		return errors.Join(ErrFailed, errors.Join(errs...))
	}
	return nil
}
