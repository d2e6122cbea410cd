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
// written from it through the stripe cache, as WriteAt would write them,
// but for one case: in a sequential stream the stripe cache holds the
// tail piece of the write before, and the head piece completes that
// stripe. Then the cached bytes are copied into the data members, the
// head is received next to them, and the row's parity computed there,
// as for a whole stripe: the head's copies into the cache and out of it
// are not made. The bytes the NBD server had already buffered (pre) are
// copied straight to where they go, in the members or in p.
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
func (a *Array) receiveStripes(p []byte, off int64, pre []byte, recv func(dsts [][]byte, atLeast int) (int, error)) (done int, err error) {
	n := int64(len(p))
	filler, ok := a.layout.(RowFiller)
	if !ok || a.csum != nil || a.cache == nil {
		return 0, nil
	}
	w, chunk := a.geo.StripeWidth(), a.geo.Chunk()
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
	head := fs - off            // the head piece: the end of stripe first-1
	// The head piece completes its stripe in place when the stripe cache
	// holds exactly the rest of it (the tail of the write before, in a
	// sequential stream): the cached bytes are copied into the data
	// members, the head received next to them, and the row's parity
	// computed there, as for a whole stripe. Otherwise the head goes
	// through the cache after the receive, under its own lock. The rows
	// from lo on are locked: the head's too when the cache has an entry
	// for it now (whose pieces are read only under that lock).
	lo := first
	if head > 0 && a.cache.lookup(first-1) != nil {
		lo--
	}
	end, ok := a.markReceive(off, n)
	if !ok {
		return 0, nil
	}
	defer end()
	a.locks.Lock(lo, last)
	locked := true
	unlock := func() {
		if locked {
			a.locks.Unlock(lo, last)
			locked = false
		}
	}
	defer unlock()
	if a.cache.cached(fs, fe-fs, first, last) || a.journalHolds(v, lo, last+1) {
		return 0, nil
	}
	var he *centry // the head's stripe's cache entry, when it completes
	if lo < first {
		if e := a.cache.lookup(first - 1); e != nil && len(e.runs) == 1 && e.runs[0] == (span{0, w - head}) {
			he = e
		}
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
	// The payload's places, in its order: the head piece (into its data
	// members, or into p), each whole row's data chunks into their
	// members, the tail piece into p.
	dsts := op.iov[:0]
	defer func() {
		clear(op.iov)
		op.iov = op.iov[:0]
	}()
	if he == nil && head > 0 {
		dsts = append(dsts, p[:head])
	}
	inPlace := first // the first row received in place
	if he != nil {
		inPlace--
	}
	for row := inPlace; row <= last; row++ {
		_, rlo, ln := a.rowSpan(row, first, head)
		var ok bool
		if dsts, ok = a.appendRowMemory(dsts, v, row, rlo, rlo+ln); !ok {
			op.iov = dsts
			return 0, nil
		}
	}
	if off+n > fe {
		dsts = append(dsts, p[fe-off:])
	}
	op.iov = dsts
	a.clientOps.Add(1)
	op.locked, op.cause = true, causeWrite
	var moved, punched int64 // bytes copied into the members; queued punches
	if he != nil {
		// The cached rest of the head's stripe joins the members now
		// (under the row's lock; a reader still finds it in the cache).
		moved += a.copyIntoRow(v, first-1, 0, he.buf[:w-head])
	}

	// Receive the payload, and compute each row's parity as soon as its
	// data is in: between recv's returns, while the client sends the
	// next bytes, and from data the receive has just brought into the
	// CPU's cache. A row whose parity cannot be computed in memory (a
	// fault) ends the receive; it and every later row that got data are
	// resynced below.
	filled, resyncFrom := inPlace, int64(-1)
	take := func(row, n int64) bool {
		_, rlo, _ := a.rowSpan(row, first, head)
		if !a.takeRow(op, filler, v, row, rlo, n, &punched) {
			resyncFrom = row
			return false
		}
		filled++
		return true
	}
	done, err = receiveAll(recv, dsts, pre, &op.rest, func(placed int) int {
		for filled <= last {
			at, _, ln := a.rowSpan(filled, first, head)
			if int64(placed) < at+ln {
				return int(at + ln) // the next row's data
			}
			if !take(filled, ln) {
				return -1
			}
		}
		return int(n) // the tail piece
	})
	// The row the receive stopped in, its parity computed from what its
	// members hold (the head's stripe's too when none of the head came:
	// its cached bytes did); after a fault, every row that got data is
	// resynced instead.
	reached := filled // rows [inPlace, reached) changed on the members
	for row := filled; row <= last; row++ {
		at, rlo, ln := a.rowSpan(row, first, head)
		k := min(max(int64(done)-at, 0), ln)
		if k == 0 && row != first-1 {
			break
		}
		reached = row + 1
		if resyncFrom < 0 {
			take(row, k)
		} else {
			a.receivedRow(v, row, rlo, k)
		}
	}
	if he != nil {
		moved += min(int64(done), head+fe-fs)
	} else {
		moved += min(max(int64(done)-head, 0), fe-fs)
	}
	release()
	// Punch the zero blocks found (after the parity read them), and
	// resync the rows whose parity could not be computed from memory.
	op.Run()
	op.cause, op.noElide = causeResync, true
	for row := resyncFrom; resyncFrom >= 0 && row < reached; row++ {
		_ = a.layout.Resync(op, row)
	}
	op.cause, op.noElide = causeWrite, false
	if he != nil {
		a.cache.flushes.Add(1)
		a.cache.full.Add(1)
		a.cache.remove(first - 1)
	}
	parity := (filled - inPlace) * chunk * int64(a.geo.Tolerance())
	a.member.written[causeWrite].Add(moved + parity - punched)
	a.stats.clientWritten.Add(int64(done))
	unlock()

	// The pieces at either end received into p go through the stripe
	// cache as WriteAt's would (each under its own stripe's lock).
	var werr error
	if h := min(int64(done), head); h > 0 && he == nil {
		werr = a.writeCached(p[:h], off, first-1, first-1, false)
	}
	if tail := int64(done) - (fe - off); tail > 0 && werr == nil {
		werr = a.writeCached(p[fe-off:fe-off+tail], fe, last+1, last+1, false)
	}
	if ferr := a.finishWrite(op, werr); err == nil {
		err = ferr
	}
	return done, err
}

// rowSpan returns where row row's bytes received in place start in the
// payload (at), and which bytes of the row they are: [lo, lo+n), of a
// write whose whole stripes start at row first, after head bytes of the
// stripe before (whose row, first-1, receives them at its end).
func (a *Array) rowSpan(row, first, head int64) (at, lo, n int64) {
	w := a.geo.StripeWidth()
	if row < first {
		return 0, w - head, head
	}
	return head + (row-first)*w, 0, w
}

// appendRowMemory appends to dsts the memory of bytes [lo, hi) of row
// row's data, in the order of the array: the pieces of its data chunks,
// on their members (held by the caller).
func (a *Array) appendRowMemory(dsts [][]byte, v *View, row, lo, hi int64) ([][]byte, bool) {
	chunk := a.geo.Chunk()
	for i := lo / chunk; i*chunk < hi; i++ {
		mem, ok := a.memberChunk(v, a.geo.DataMember(row, int(i)), row)
		if !ok {
			return dsts, false
		}
		dsts = append(dsts, mem[max(lo-i*chunk, 0):min(hi-i*chunk, chunk)])
	}
	return dsts, true
}

// copyIntoRow copies p into row row's data on the members (held by the
// caller), at row offset lo, records it as written, and returns its
// length.
func (a *Array) copyIntoRow(v *View, row, lo int64, p []byte) int64 {
	var stack [8][]byte
	dsts, _ := a.appendRowMemory(stack[:0], v, row, lo, lo+int64(len(p)))
	pos := 0
	for _, d := range dsts {
		pos += copy(d, p[pos:])
	}
	a.receivedRow(v, row, lo, int64(len(p)))
	return int64(len(p))
}

// receivedRow records bytes [lo, lo+n) of row row's data as written on
// their members.
func (a *Array) receivedRow(v *View, row, lo, n int64) {
	chunk := a.geo.Chunk()
	for i := lo / chunk; i*chunk < lo+n; i++ {
		a0, a1 := max(lo, i*chunk), min(lo+n, (i+1)*chunk)
		v.devs[a.geo.DataMember(row, int(i))].(receiver).Received(v.dataOff+row*chunk+a0-i*chunk, a1-a0)
	}
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
func (a *Array) takeRow(op *Op, f RowFiller, v *View, row, lo, n int64, punched *int64) (ok bool) {
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
		c0 := int64(i) * chunk
		if a0, a1 := max(lo, c0), min(lo+n, c0+chunk); a0 < a1 {
			v.devs[m].(receiver).Received(at+a0-c0, a1-a0)
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
	// The zero scans run after the parity: FillRow has just read the
	// data, so the scan finds it in the cache (before it, each 4 KiB
	// block's first line was a miss). The parity, which FillRow stored
	// past the cache, is scanned only when a data block of the row was
	// zero: a parity block is zero where the row's data blocks are, and
	// otherwise only where they cancel out (equal blocks), which is left
	// written rather than paid for with a miss per block of every row.
	var zero int64
	for i := range data {
		c0 := int64(i) * chunk
		if a0, a1 := max(lo, c0), min(lo+n, c0+chunk); a0 < a1 {
			zero += a.elideReceived(op, a.geo.DataMember(row, i), at+a0-c0, data[i][a0-c0:a1-c0])
		}
	}
	for k := range np {
		v.devs[pm[k]].(receiver).Received(at, chunk)
		if zero > 0 {
			zero += a.elideReceived(op, pm[k], at, par[k])
		}
	}
	*punched += zero
	return true
}

// isFault reports whether r, a recovered panic, is a memory fault that
// debug.SetPanicOnFault turned into one (a runtime.Error with the faulting
// address).
func isFault(r any) bool {
	_, ok := r.(interface{ Addr() uintptr })
	return ok
}
