package member

// Writes received into the mapping.
//
// A write whose bytes come from a socket (an NBD WRITE's payload) can go
// from the socket straight into a mapped member's pages: the kernel's
// receive copies them there, and the copy from a buffer into the mapping
// (writeMapped) is not made at all. On raidd's RAID0 of tmpfs members that
// copy was a third of the NBD reader's time on sequential 1 MiB writes.
//
// The caller holds the mapping (HoldForReceive) across the receive, takes
// the memory of each range it receives into (ReceiveSlice), records what
// it placed (Received) and lets go (ReleaseReceive). The mapping is written
// by the kernel, not by a load or store of raidd: a page that cannot be
// had (past a shrunk file's end, a full tmpfs) makes the receive fail with
// EFAULT instead of raising SIGBUS. The caller then writes what it could
// not receive in place with WriteAt, which meets and reports the cause, as
// a faulted copy does.

// HoldForReceive takes the mapping's read lock for receives into it and
// reports true; ReleaseReceive must follow. It reports false, holding
// nothing, when the file cannot be written that way: not mapped (not held
// in memory, closed) or read-only. Close waits while the mapping is held,
// so a holder must be bounded in time (the NBD server's receive is, by its
// I/O timeout and by a halt of the connection). A goroutine holds a File
// at most once at a time, and holds several Files in a fixed order.
func (m *File) HoldForReceive() bool {
	if m.readOnly || m.mapped.data == nil {
		return false
	}
	m.mapped.mu.RLock()
	if m.mapped.mem == nil {
		m.mapped.mu.RUnlock()
		return false
	}
	return true
}

// ReceiveSlice returns the mapped memory of [off, off+n), or false if the
// mapping does not serve that range (the file's last page: see the shrink
// rule in mapped.go). Only while the mapping is held.
func (m *File) ReceiveSlice(off, n int64) ([]byte, bool) {
	if !m.mappable(off, n) {
		return nil, false
	}
	return m.mapped.mem[off : off+n : off+n], true
}

// Received records that [off, off+n) was received into and now holds data.
func (m *File) Received(off, n int64) { m.wrote(off, n) }

// ReleaseReceive lets go of the mapping taken by HoldForReceive.
func (m *File) ReleaseReceive() { m.mapped.mu.RUnlock() }
