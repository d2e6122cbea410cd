package raid

import "github.com/raidd/raidd/raid/superblock"

// tableSnap is a copy of the member table as of the end of the last
// configuration change, for Status: reading it takes no lock, so Status
// never waits for a commit (and so for member I/O), and it never sees a
// change half made (a job ended but its member not yet active, say).
type tableSnap struct {
	view    *View
	meta    *superblock.Meta
	slots   map[[16]byte]slot // by UUID; copies
	dead    []slot
	job     *jobSnap // the running job
	lastJob *jobSnap // the job started last, once it has ended
}

// jobSnap is a job as recorded: its kind may change later (a replace
// turned into a rebuild); its other fields do not, and its progress
// counters move without a lock.
type jobSnap struct {
	kind jobKind
	j    *recovery
}

// snapshotLocked records the table for Status. Callers hold cfgMu (and,
// to record a finished change, commitMu).
func (a *Array) snapshotLocked() { a.snapshotOf(a.view.Load()) }

// snapshotOf is snapshotLocked for the View v, which may not be published
// yet.
func (a *Array) snapshotOf(v *View) {
	s := &tableSnap{view: v, meta: a.meta.Clone(), slots: make(map[[16]byte]slot, len(a.slots))}
	for u, sl := range a.slots {
		countersLocked(sl)
		s.slots[u] = *sl
	}
	for _, sl := range a.dead {
		countersLocked(sl)
		s.dead = append(s.dead, *sl)
	}
	if j := a.job; j != nil {
		s.job = &jobSnap{kind: j.kind, j: j}
	} else if j := a.lastJob; j != nil {
		s.lastJob = &jobSnap{kind: j.kind, j: j}
	}
	a.snap.Store(s)
}

// unlockCommit ends a configuration change made under commitMu (with
// cfgMu taken and released inside it): it records the table for Status and
// releases commitMu.
func (a *Array) unlockCommit() {
	a.cfgMu.Lock()
	a.snapshotLocked()
	a.cfgMu.Unlock()
	a.commitMu.Unlock()
}
