package raid

import "sync/atomic"

// memberCounters count one member device's failed member I/O and the
// repairs made on it, since the device was opened by this Array (a device
// that is re-added gets fresh counters). Status reports them per member
// (MemberStatus.IOErrors, Repairs, RepairBytes).
//
// They live on the slot and are reached from a View by role, so the I/O
// path counts without a lock. Code that repairs a member other than
// through Op.Repair (which Op.Run counts when the write succeeds) calls
// Op.countRepair.
type memberCounters struct {
	// ioErrors counts member requests that returned an error, by ioKind
	// (read, write, discard, sync); a vectored request that failed counts
	// once.
	ioErrors [len(ioNames)]atomic.Int64
	// repairs counts ranges rewritten with data reconstructed from
	// redundancy (read-error correction), and repairBytes their bytes.
	repairs     atomic.Int64
	repairBytes atomic.Int64
}

// MemberIOErrors counts the member requests that failed on one device, by
// kind. A failed request usually fails the member; a read error that is
// repaired, and any error on an array without redundancy, do not.
type MemberIOErrors struct {
	Read    int64 `json:"read"`
	Write   int64 `json:"write"`
	Discard int64 `json:"discard"`
	Sync    int64 `json:"sync"`
}

// load reads c; a nil c reads as zeroes.
func (c *memberCounters) load(ms *MemberStatus) {
	if c == nil {
		return
	}
	ms.IOErrors = MemberIOErrors{
		Read:    c.ioErrors[ioRead].Load(),
		Write:   c.ioErrors[ioWrite].Load(),
		Discard: c.ioErrors[ioDiscard].Load(),
		Sync:    c.ioErrors[ioSync].Load(),
	}
	ms.Repairs = c.repairs.Load()
	ms.RepairBytes = c.repairBytes.Load()
}

// countersLocked returns the counters of s, creating them on first use.
// Callers hold cfgMu, which guards the field.
func countersLocked(s *slot) *memberCounters {
	if s.ctr == nil {
		s.ctr = new(memberCounters)
	}
	return s.ctr
}

// counters returns the counters of role m's device, or of its replacement
// (repl), or nil when the View has none (a View built by NewOp).
func (v *View) counters(m int, repl bool) *memberCounters {
	cs := v.ctr
	if repl {
		cs = v.replCtr
	}
	if m < 0 || m >= len(cs) {
		return nil
	}
	return cs[m]
}

// countError counts a failed member request of the given kind.
func (op *Op) countError(m int, repl bool, kind ioKind) {
	if c := op.v.counters(m, repl); c != nil {
		c.ioErrors[kind].Add(1)
	}
}

// countRepair counts a range of n bytes rewritten on member m with data
// reconstructed from redundancy.
func (op *Op) countRepair(m int, n int64) {
	if c := op.v.counters(m, false); c != nil {
		c.repairs.Add(1)
		c.repairBytes.Add(n)
	}
}
