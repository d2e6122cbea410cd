package raid

import "runtime/debug"

// Parity writes received into the members (NBD WRITE payloads on RAID5
// and RAID6 of members held in memory, with the stripe cache).
//
// A large sequential write on a parity level is mostly whole stripes: a
// 1 MiB write on RAID5×4 with 64 KiB chunks holds five of its 192 KiB
// stripes, and its two ends are pieces of the stripes before and after.
// WriteAt writes a whole stripe with no reads and no write-hole record:
// its data chunks are copied from the write's buffer into the data
// members, and its parity is computed from that buffer straight into the
// parity member (Op.WriteFill). receiveStripes lets the payload of those
// whole stripes go from the socket straight into the data members' pages,
// as ReceiveAt does for RAID0, and computes each row's parity from the
// members' own memory (RowFiller) once its data is there: the copy from
// the buffer into the members is not made. The pieces at either end are
// received, in the same vectored read, into the caller's buffer p and
// written from it through the stripe cache, as WriteAt would write them.
//
// The rows written so are locked (their stripe locks, exclusively) from
// before the receive until their parity is written, so no other write,
// resync, rebuild or scrub sees a row whose data is new and whose parity
// is not. A reader may (a healthy read takes no lock), but only of bytes
// the write is changing: a request in flight over the same bytes, whose
// result the protocol leaves open.
//
// It declines, before any byte is received, unless the write holds at
// least one whole stripe and: the level has a RowFiller; the array keeps
// a stripe cache (the pieces at either end go there), no checksums, and
// is healthy (no missing, failed or rebuilding member, no replacement);
// every member is held in memory and can receive in place; no row of the
// whole stripes has pieces in the stripe cache (they would have to be
// written out first), or a record in the write-hole log's current epoch
// (a write of the row must then be recorded too, lest a replay end on
// the stale record; see Op.PlanRowLog). Whole stripes need no record
// otherwise: every byte the parity covers is being written, so no byte
// outside the write can be lost to a hole.
//
// When the receive stops early (the client went away, a page of a
// member could not be written), the parity of every row it reached is
// computed from what the members hold, new bytes and old, so the row is
// consistent, and the caller writes the rest of the write with WriteAt,
// as for RAID0. A row whose data cannot be read from memory (a member
// file shrunk behind raidd's back) is resynced through the members'
// ordinary reads instead, which meet the fault and fail the member.

// RowFiller is implemented by parity Layouts that can compute a whole
// row's parity from data already on the members (ReceiveAt).
type RowFiller interface {
	// FillRow sets par, the row's parity chunks (P, then Q where the
	// level has it), from data, its data chunks by data index, all of one
	// length. Both are the members' own memory, which the caller holds,
	// in op's Shards and List: FillRow must not keep them, nor queue or
	// run member I/O. It may use op's Scratch entries.
	FillRow(op *Op, data, par [][]byte)
}

// receiveStripes is ReceiveAt on a parity level (see above).
func (a *Array) receiveStripes(p []byte, off int64, recv func(dsts [][]byte, atLeast int) (int, error)) (done int, err error) {
	n := int64(len(p))
	filler, ok := a.layout.(RowFiller)
	if !ok || a.csum != nil || a.cache == nil {
		return 0, nil
	}
	w, chunk, dk := a.geo.StripeWidth(), a.geo.Chunk(), a.geo.DataMembers()
	fs := (off + w - 1) / w * w // the whole stripes: [fs, fe)
	fe := (off + n) / w * w
	if fe-fs < w {
		return 0, nil
	}
	if err := a.enter(); err != nil {
		return 0, nil
	}
	defer a.leave()
	if a.checkRange(off, n, true) != nil {
		return 0, nil
	}
	op := a.getOp()
	defer a.putOp(op)
	v := op.v
	full := fullMask(a.geo.Members())
	if v.failed || !v.inMemory || v.readable != full || v.writable != full {
		return 0, nil
	}
	for m, d := range v.devs {
		if _, ok := d.(receiver); !ok || v.repl[m] != nil {
			return 0, nil
		}
	}
	first, last := fs/w, fe/w-1 // stripes, which are rows on parity levels
	if a.beginWrite() != nil {
		return 0, nil
	}
	defer a.endWrite()
	rowLo, rowHi := a.geo.RowRange(off, n)
	if a.markWrite(rowLo, rowHi) != nil {
		return 0, nil
	}
	defer a.doneWrite(rowLo, rowHi)
	a.locks.Lock(first, last)
	locked := true
	unlock := func() {
		if locked {
			a.locks.Unlock(first, last)
			locked = false
		}
	}
	defer unlock()
	if a.cache.cached(fs, fe-fs, first, last) || a.journalHolds(v, first, last+1) {
		return 0, nil
	}
	// Hold every member, in the order of their roles, until the rows'
	// parity is computed: the punches and any resync run after the
	// release (they go through the mappings, which take the same lock).
	held := 0
	release := func() {
		for ; held > 0; held-- {
			v.devs[held-1].(receiver).ReleaseReceive()
		}
	}
	defer release()
	for held < len(v.devs) {
		if !v.devs[held].(receiver).HoldForReceive() {
			return 0, nil
		}
		held++
	}
	// The payload's places: the head piece into p, each whole row's data
	// chunks into their members, in the order of the array, the tail
	// piece into p.
	dsts := op.iov[:0]
	if fs > off {
		dsts = append(dsts, p[:fs-off])
	}
	for row := first; row <= last; row++ {
		for i := range dk {
			d, ok := a.memberChunk(v, a.geo.DataMember(row, i), row)
			if !ok {
				op.iov = dsts
				return 0, nil
			}
			dsts = append(dsts, d)
		}
	}
	if off+n > fe {
		dsts = append(dsts, p[fe-off:])
	}
	op.iov = dsts
	defer func() {
		clear(op.iov)
		op.iov = op.iov[:0]
	}()
	a.clientOps.Add(1)
	op.locked, op.cause = true, causeWrite

	// Receive the payload, and compute each row's parity as soon as its
	// data is in: between recv's returns, while the client sends the
	// next bytes, and from data the receive has just brought into the
	// CPU's cache. A row whose parity cannot be computed in memory (a
	// fault) ends the receive; it and every later row that got data are
	// resynced below.
	head := fs - off
	filled, resyncFrom := first, int64(-1)
	var punched int64
	done, err = receiveAll(recv, dsts, &op.rest, func(placed int) int {
		for filled <= last && int64(placed) >= head+(filled-first+1)*w {
			if !a.takeRow(op, filler, v, filled, w, &punched) {
				resyncFrom = filled
				return -1
			}
			filled++
		}
		if filled > last {
			return int(n) // the tail piece
		}
		return int(head + (filled-first+1)*w) // the next row's data
	})
	if done <= 0 {
		return 0, err
	}
	got := min(max(int64(done)-head, 0), fe-fs) // bytes of whole stripes received
	reached := first + (got+w-1)/w              // the rows that got any
	if resyncFrom < 0 && filled < reached {
		// The row the receive stopped in.
		if !a.takeRow(op, filler, v, filled, got-(filled-first)*w, &punched) {
			resyncFrom = filled
		} else {
			filled++
		}
	}
	for row := filled; row < reached; row++ {
		for i, left := 0, got-(row-first)*w; i < dk && left > 0; i++ {
			c := min(left, chunk)
			v.devs[a.geo.DataMember(row, i)].(receiver).Received(v.dataOff+row*chunk, c)
			left -= c
		}
	}
	release()
	// Punch the zero blocks found (after the parity read them), and
	// resync the rows whose parity could not be computed from memory.
	op.Run()
	op.cause, op.noElide = causeResync, true
	for row := filled; row < reached; row++ {
		_ = a.layout.Resync(op, row)
	}
	op.cause, op.noElide = causeWrite, false
	parity := (filled - first) * chunk * int64(a.geo.Tolerance())
	a.member.written[causeWrite].Add(got + parity - punched)
	a.stats.clientWritten.Add(int64(done))
	unlock()

	// The pieces at either end, received into p, go through the stripe
	// cache as WriteAt's would (each under its own stripe's lock).
	var werr error
	if head := min(int64(done), fs-off); head > 0 {
		werr = a.writeCached(p[:head], off, first-1, first-1, false)
	}
	if tail := int64(done) - (fe - off); tail > 0 && werr == nil {
		werr = a.writeCached(p[fe-off:fe-off+tail], fe, last+1, last+1, false)
	}
	if ferr := a.finishWrite(op, werr); err == nil {
		err = ferr
	}
	return done, err
}

// memberChunk returns the memory of member m's chunk of row row, which
// the caller holds (receiver.HoldForReceive).
func (a *Array) memberChunk(v *View, m int, row int64) ([]byte, bool) {
	chunk := a.geo.Chunk()
	return v.devs[m].(receiver).ReceiveSlice(v.dataOff+row*chunk, chunk)
}

// journalHolds reports whether the write-hole log must record a write of
// rows [lo, hi): it has a record of one of them in its current epoch, or
// it must checkpoint first (a new view; see Op.BeginRow). The caller
// holds the rows' stripe locks, so no record of them can be added.
func (a *Array) journalHolds(v *View, lo, hi int64) bool {
	j := a.journal
	if j == nil {
		return false
	}
	j.mu.RLock()
	defer j.mu.RUnlock()
	return j.need.Load() || j.view != v || j.anyInEpoch(lo, hi)
}

// takeRow takes n bytes of row row's data just received into the data
// members (held by the caller): it records them as written, queues the
// punch of their zero blocks, computes the row's parity from the row's
// data with f, in the members' memory, and records and elides it as
// well, adding the bytes queued for punching to *punched. It reports
// false when reading the row's data or writing its parity faulted (a
// member file shrunk behind raidd's back): the caller then resyncs the
// row through the members' ordinary reads, which meet the fault and fail
// the member.
func (a *Array) takeRow(op *Op, f RowFiller, v *View, row, n int64, punched *int64) (ok bool) {
	chunk, dk, np := a.geo.Chunk(), a.geo.DataMembers(), a.geo.Tolerance()
	at := v.dataOff + row*chunk
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if !ok {
			if r := recover(); r != nil && !isFault(r) {
				panic(r)
			}
		}
	}()
	// The op's own slices (an array here would escape to the heap through
	// the interface call: an allocation per row).
	data := op.Shards[:dk]
	defer clear(data)
	for i := range data {
		m := a.geo.DataMember(row, i)
		data[i], _ = a.memberChunk(v, m, row)
		if c := min(max(n-int64(i)*chunk, 0), chunk); c > 0 {
			v.devs[m].(receiver).Received(at, c)
			*punched += a.elideReceived(op, m, at, data[i][:c])
		}
	}
	pm := [2]int{a.geo.ParityMember(row), a.geo.QMember(row)}
	par := op.List[:0]
	defer func() { clear(par); op.List = par[:0] }()
	for k := range np {
		d, _ := a.memberChunk(v, pm[k], row)
		par = append(par, d)
	}
	f.FillRow(op, data, par)
	for k := range np {
		v.devs[pm[k]].(receiver).Received(at, chunk)
		*punched += a.elideReceived(op, pm[k], at, par[k])
	}
	return true
}

// isFault reports whether r, a recovered panic, is a memory fault that
// debug.SetPanicOnFault turned into one (a runtime.Error with the faulting
// address).
func isFault(r any) bool {
	_, ok := r.(interface{ Addr() uintptr })
	return ok
}
