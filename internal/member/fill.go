package member

import "runtime/debug"

// In-place writes: bytes computed straight into a member held in memory.
//
// A RAID5 full-stripe write computes the row's parity from the data and
// writes it to the parity member. Computed into a scratch buffer and then
// written, the parity costs a copy more than it must: a member held in
// memory (a mapped tmpfs File, a Memory) can instead lend its own bytes
// to the computation. FillAt does that, under the same rules as a write
// through the mapping (mapped.go): only inside the mapped range, never on
// the last page, with a fault (a shrunk file, a full tmpfs) caught and
// reported as "not done", after which the caller writes the bytes the
// ordinary way, which reports the error the fault stood for.

// Filler computes the bytes of an in-place write (FillAt): it sets every
// byte of dst from src. dst is the member's own memory: Fill must not keep
// it, and must write each byte of it (it may read it back after writing).
type Filler = interface {
	Fill(dst []byte, src [][]byte)
}

// FillAt has f write the n bytes at off in place, into the member's
// mapping, and records them as written, as a write of them would. It
// reports false when it cannot serve the write so (the file is not mapped,
// is read-only, closed or shrunk, the range is outside the mapped part, a
// test hook fails member I/O, or the computation faulted): f may then have
// run, in part or whole, and the caller must write the bytes with
// WriteAt or WritevAt, which reports any error. Concurrent calls, and
// WriteAt and ReadAt, are allowed on ranges that do not overlap.
func (m *File) FillAt(off, n int64, f Filler, src [][]byte) (ok bool) {
	if m.readOnly || m.closed.Load() || m.shrunk.Load() || !m.mappable(off, n) || testHookIO != nil || testHookFault != nil {
		return false
	}
	if err := m.fillMapped(off, n, f, src); err != nil {
		return false
	}
	m.wrote(off, n)
	return true
}

// fillMapped runs f on the mapping's bytes [off, off+n) under the
// mapping's read lock, with faults caught (see copyMapped).
func (m *File) fillMapped(off, n int64, f Filler, src [][]byte) (err error) {
	m.mapped.mu.RLock()
	defer m.mapped.mu.RUnlock()
	mem := m.mapped.mem
	if mem == nil {
		return errFault
	}
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if recover() != nil {
			err = errFault
		}
	}()
	if testHookMapped != nil {
		testHookMapped(m, true)
	}
	f.Fill(mem[off:off+n:off+n], src)
	return nil
}

// FillAt has f write the n bytes at off in place, into the member's
// buffer. It reports false, having done nothing, for a range outside the
// member or after Close; the caller then writes the bytes with WriteAt,
// which reports the error. Safe for concurrent use on non-overlapping
// ranges.
func (m *Memory) FillAt(off, n int64, f Filler, src [][]byte) bool {
	if m.closed.Load() || off < 0 || n < 0 || off > int64(len(m.buf)) || n > int64(len(m.buf))-off {
		return false
	}
	f.Fill(m.buf[off:off+n:off+n], src)
	return true
}
