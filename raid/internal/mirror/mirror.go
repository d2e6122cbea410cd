package mirror

import (
	"bytes"
	"fmt"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// Layout is the mirrored personality.
type Layout struct {
	g stripe.Geometry
}

// New returns the mirrored personality for a RAID1 or RAID10 geometry.
func New(g stripe.Geometry) (raid.Layout, error) {
	if g.Level() != stripe.RAID1 && g.Level() != stripe.RAID10 {
		return nil, fmt.Errorf("mirror: %s is not a mirrored level", g.Level())
	}
	return &Layout{g: g}, nil
}

// Traits: writes are locked so that every copy sees overlapping writes in
// the same order; reads run unlocked (a degraded mirror reads a surviving
// copy, no reconstruction); a degraded mirror resyncs from a readable copy.
func (l *Layout) Traits() raid.Traits {
	return raid.Traits{LockWrites: true, ResyncDegraded: true}
}

// pick chooses a readable copy of a chunk, trying locs[start mod n] first and
// then the following copies, and preferring members that are not
// write-mostly.
func pick(op *raid.Op, locs []stripe.Loc, start int64) int {
	best := -1
	n := len(locs)
	for k := 0; k < n; k++ {
		i := int((start + int64(k)) % int64(n))
		m := locs[i].Member
		if !op.Readable(m) {
			continue
		}
		if !op.Slow(m) {
			return i
		}
		if best < 0 {
			best = i
		}
	}
	return best
}

// firstReadable returns the index in locs of the first copy op can read,
// or -1.
func firstReadable(op *raid.Op, locs []stripe.Loc) int {
	for i, loc := range locs {
		if op.Readable(loc.Member) {
			return i
		}
	}
	return -1
}

// firstCopy returns the copy of chunk c, the j-th of the k chunks of a
// read, to try first. Small reads rotate with the chunk so that random
// reads spread over all members: for RAID1 chunk c starts at copy c mod n;
// for RAID10 the copy alternates every ceil(n/2) chunks. A read of several
// chunks also splits into one contiguous stretch of chunks per copy (the
// first k/copies chunks from the first copy, and so on), so that each
// member serves one run of back-to-back chunks, which the engine merges
// into one I/O, rather than every copies-th chunk of the request.
func firstCopy(g stripe.Geometry, copies int, c, j, k int64) int64 {
	start := c - j // the request's first chunk
	if g.Level() == stripe.RAID10 {
		start /= int64((g.Members() + 1) / 2)
	}
	return start + j*int64(copies)/k
}

// ReadAt reads each chunk from one copy. When a copy fails to read, the
// read is served from another under the stripe locks, and the bad copy is
// rewritten with the good bytes (md's read-error correction).
func (l *Layout) ReadAt(op *raid.Op, p []byte, off int64) error {
	var exts []stripe.Extent
	for {
		exts = op.Extents(off, int64(len(p)))
		if len(exts) == 0 {
			return nil
		}
		first, k := exts[0].Chunk, exts[len(exts)-1].Chunk-exts[0].Chunk+1
		for _, e := range exts {
			locs := op.Copies(e.Chunk, e.Off-e.Row*l.g.Chunk())
			var i int
			if op.ResyncPending(e.Row) {
				i = firstReadable(op, locs) // the resync's source (resyncChunk)
			} else {
				i = pick(op, locs, firstCopy(l.g, len(locs), e.Chunk, e.Chunk-first, k))
			}
			if i < 0 {
				return raid.ErrTooManyFailures
			}
			op.Read(locs[i].Member, p[e.BufOff:e.BufOff+e.Len], locs[i].Off)
		}
		if op.Run() == 0 {
			break
		}
		if !op.Locked() {
			return op.NeedLock()
		}
		// A failed copy is never chosen again in this op: read everything
		// again from the survivors.
	}
	repair := false
	for _, e := range exts {
		for _, loc := range op.Copies(e.Chunk, e.Off-e.Row*l.g.Chunk()) {
			if op.ReadFailed(loc.Member) && op.Writable(loc.Member) {
				op.Repair(loc.Member, p[e.BufOff:e.BufOff+e.Len], loc.Off)
				repair = true
			}
		}
	}
	if repair {
		op.Run()
	}
	return nil
}

// forCopies queues fn for every writable copy of every extent of [off, off+n).
// It fails if some chunk has no writable copy left.
func (l *Layout) forCopies(op *raid.Op, off, n int64, fn func(m int, e stripe.Extent, memOff int64)) error {
	if l.g.Level() == stripe.RAID1 {
		// Every member holds the array at the same offsets: one I/O per member.
		any := false
		for m := 0; m < l.g.Members(); m++ {
			if op.Writable(m) {
				fn(m, stripe.Extent{Len: n}, off)
				any = true
			}
		}
		if !any {
			return raid.ErrTooManyFailures
		}
		return nil
	}
	for _, e := range op.Extents(off, n) {
		in := e.Off - e.Row*l.g.Chunk()
		any := false
		for _, loc := range op.Copies(e.Chunk, in) {
			if op.Writable(loc.Member) {
				fn(loc.Member, e, loc.Off)
				any = true
			}
		}
		if !any {
			return raid.ErrTooManyFailures
		}
	}
	return nil
}

// survived checks that every chunk of [off, off+n) still has a copy that
// took the write after the members that failed during it are removed.
func (l *Layout) survived(op *raid.Op, off, n int64) error {
	ok := true
	for _, e := range op.Extents(off, n) {
		in := e.Off - e.Row*l.g.Chunk()
		any := false
		for _, loc := range op.Copies(e.Chunk, in) {
			if op.Writable(loc.Member) {
				any = true
			}
		}
		ok = ok && any
	}
	if !ok {
		return raid.ErrTooManyFailures
	}
	return nil
}

// WriteAt writes every writable copy.
func (l *Layout) WriteAt(op *raid.Op, p []byte, off int64) error {
	err := l.forCopies(op, off, int64(len(p)), func(m int, e stripe.Extent, memOff int64) {
		op.Write(m, p[e.BufOff:e.BufOff+e.Len], memOff)
	})
	if err != nil {
		return err
	}
	if op.Run() == 0 {
		return nil
	}
	return l.survived(op, off, int64(len(p)))
}

// Discard discards every writable copy.
func (l *Layout) Discard(op *raid.Op, off, n int64) error {
	err := l.forCopies(op, off, n, func(m int, e stripe.Extent, memOff int64) {
		op.Discard(m, memOff, e.Len)
	})
	if err != nil {
		return err
	}
	if op.Run() == 0 {
		return nil
	}
	return l.survived(op, off, n)
}

// rowChunks calls fn for every array chunk with a copy in member row row.
func (l *Layout) rowChunks(row int64, fn func(c int64) error) error {
	first, last := l.g.RowStripes(row)
	for c := first; c <= last; c++ {
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// Resync makes the copies of each chunk of the row agree: it reads every
// readable copy and writes the first to the writable copies that differ
// from it. A crash leaves most of a dirty region's copies equal already, so
// the resync reads every member (in the job window's large requests) and
// writes little, where copying one copy over the others wrote every chunk
// of every other copy in a request of its own. If a copy cannot be read,
// the chunk is copied from a readable one to the others as before.
func (l *Layout) Resync(op *raid.Op, row int64) error {
	return l.rowChunks(row, func(c int64) error { return l.resyncChunk(op, c) })
}

// resyncChunk is Resync for chunk c.
func (l *Layout) resyncChunk(op *raid.Op, c int64) error {
	chunk := l.g.Chunk()
	locs := op.Copies(c, 0)
	var bufs [stripe.MaxMembers][]byte
	for i, loc := range locs {
		if op.Readable(loc.Member) {
			bufs[i] = op.Buf(chunk)
			op.Read(loc.Member, bufs[i], loc.Off)
		}
	}
	if op.Run() != 0 {
		return l.copyChunk(op, c, -1)
	}
	locs = op.Copies(c, 0)
	src := -1
	for i := range locs {
		if bufs[i] != nil {
			src = i
			break
		}
	}
	// (The reads of a row the resync has yet to reach come from this same
	// copy: ReadAt, Op.ResyncPending.)
	if src < 0 {
		return raid.ErrTooManyFailures
	}
	for i, loc := range locs {
		if i == src || !op.Writable(loc.Member) || (bufs[i] != nil && bytes.Equal(bufs[i], bufs[src])) {
			continue
		}
		op.Write(loc.Member, bufs[src], loc.Off)
	}
	op.Run()
	return nil
}

// Rebuild writes every chunk with a copy on target in the row from a readable copy.
func (l *Layout) Rebuild(op *raid.Op, row int64, target int) error {
	return l.rowChunks(row, func(c int64) error { return l.copyChunk(op, c, target) })
}

// copyChunk reads chunk c from a readable copy and writes it to the other
// writable copies (only to target if target >= 0).
func (l *Layout) copyChunk(op *raid.Op, c int64, target int) error {
	chunk := l.g.Chunk()
	buf := op.Buf(chunk)
	for {
		locs := op.Copies(c, 0)
		i := pick(op, locs, 0)
		if i < 0 {
			return raid.ErrTooManyFailures
		}
		src := locs[i]
		op.Read(src.Member, buf, src.Off)
		if op.Run() != 0 {
			continue
		}
		locs = op.Copies(c, 0)
		for _, loc := range locs {
			if loc.Member == src.Member || !op.Writable(loc.Member) || (target >= 0 && loc.Member != target) {
				continue
			}
			op.Write(loc.Member, buf, loc.Off)
		}
		op.Run()
		return nil
	}
}

// Check compares every readable copy of each chunk of the row. When copies
// differ, the copy the Op trusts wins (Op.TrustedCopy: one its checksum
// confirms, else the first readable copy, as in md); each copy that
// differs from it is a Mismatch, rewritten from the trusted copy when the
// Op is repairing. A copy whose read fails is rewritten from a good copy
// too (the read-error repair every read does). A chunk with fewer than two
// copies that could be read (the others on missing members, or failing the
// read) cannot be verified: the row then reports ErrUnverifiable, unless
// another chunk of it differs (ErrInconsistent).
func (l *Layout) Check(op *raid.Op, row int64) error {
	chunk := l.g.Chunk()
	unverified, inconsistent := false, false
	var copies []raid.Copy
	_ = l.rowChunks(row, func(c int64) error {
		copies = copies[:0]
		for _, loc := range op.Copies(c, 0) {
			if !op.Readable(loc.Member) {
				continue
			}
			buf := op.Buf(chunk)
			op.Read(loc.Member, buf, loc.Off)
			copies = append(copies, raid.Copy{Member: loc.Member, Off: loc.Off, Data: buf})
		}
		if op.Run() != 0 {
			ok := copies[:0]
			var failed []raid.Copy
			for _, cp := range copies {
				if op.ReadFailed(cp.Member) {
					failed = append(failed, cp)
				} else {
					ok = append(ok, cp)
				}
			}
			copies = ok
			if len(copies) > 0 {
				for _, cp := range failed {
					if op.Writable(cp.Member) {
						op.Repair(cp.Member, copies[0].Data, cp.Off)
					}
				}
				op.Run()
			}
		}
		if len(copies) < 2 {
			unverified = true
			return nil
		}
		differ := false
		for _, cp := range copies[1:] {
			if !bytes.Equal(copies[0].Data, cp.Data) {
				differ = true
			}
		}
		if !differ {
			return nil
		}
		inconsistent = true
		t, located, why := op.TrustedCopy(copies)
		good := copies[t]
		var found []raid.Mismatch
		for i, cp := range copies {
			if i == t || bytes.Equal(good.Data, cp.Data) {
				continue
			}
			m := raid.Mismatch{Row: row, Role: cp.Member, Shard: "copy", Offset: cp.Off + int64(mismatch(good.Data, cp.Data)), Located: located, Detail: why}
			if op.Repairing() && op.Writable(cp.Member) {
				op.Write(cp.Member, good.Data, cp.Off)
				m.Detail += fmt.Sprintf("; rewritten from role %d", good.Member)
			}
			found = append(found, m)
		}
		ok := op.Run() == 0
		for _, m := range found {
			m.Repaired = op.Repairing() && ok && !op.Failed(m.Role) && op.Writable(m.Role)
			op.Mismatch(m)
		}
		return nil
	})
	switch {
	case inconsistent:
		return fmt.Errorf("%w: row %d: copies differ", raid.ErrInconsistent, row)
	case unverified:
		return fmt.Errorf("%w: row %d has a chunk with fewer than two readable copies", raid.ErrUnverifiable, row)
	}
	return nil
}

// mismatch returns the first offset where a and b differ, or 0.
func mismatch(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return 0
}
