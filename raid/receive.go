package raid

import (
	"errors"
	"io"
	"runtime/debug"
	"unsafe"
)

// Writes received into the members (NBD WRITE payloads on RAID0 of
// members held in memory; parity levels: receivestripes.go).
//
// ReceiveAt is the write-side twin of SpliceReadAt: it plans a write
// exactly as WriteAt does, through the Layout's WriteAt on an Op that
// records its member writes instead of running them, and if every byte of
// the write goes to exactly one place of a member that can take bytes
// straight from the caller's receive (internal/member.File: a file held
// in memory, through its mapping), it hands the caller the members' memory
// for the whole write, in the write's order, to receive into with one
// vectored read. The NBD server's receive then copies the payload from the
// socket into the members' pages, and the copy from its buffer into them
// is not made.
//
// On RAID0 it declines, before any byte is received, whenever the plan is anything
// else: a level that writes a byte twice (mirrors), the gather queue, a
// member
// being replaced, checksums (each block's sum is computed as it is
// written), a degraded or failed array, members not held in memory. The
// caller then writes with WriteAt. Zero elision is kept: all-zero aligned
// blocks that were received are punched afterwards, so the members end as
// WriteAt would leave them.

// receiver is implemented by members that can take a write's bytes
// straight from a receive (internal/member.File; see receive.go there).
type receiver interface {
	HoldForReceive() bool
	ReceiveSlice(off, n int64) ([]byte, bool)
	Received(off, n int64)
	ReleaseReceive()
}

// ReceiveAt writes len(p) bytes at array offset off: first pre, the
// write's first bytes, which the caller had received already (its read
// buffer), then the rest from recv, which places the write's next bytes
// into dsts, in order, and returns how many it placed: at least atLeast
// (waiting for them), and beyond that what has arrived, fewer only with
// an error. ReceiveAt calls it until it has the write or an error
// (receiveAll); a parity level computes each row's parity in between
// (receivestripes.go). p is the caller's buffer of the write's length,
// whose content on the call is not read: RAID0 uses only its address, to
// plan; a parity level receives the write's pieces of partial stripes
// into it and writes them from there. It returns the length of the prefix
// of the write that was received and written, pre's bytes included (0
// when it declined, see above: then it took nothing of pre, and recv was
// not called), and recv's error or the array's. The caller writes the
// rest, [off+done, off+len(p)), itself (WriteAt): what a member could not
// receive in place (a fault, a range its mapping does not serve) is
// written, and its failure met and reported, there. Not durable on
// return, as WriteAt.
func (a *Array) ReceiveAt(p []byte, off int64, pre []byte, recv func(dsts [][]byte, atLeast int) (int, error)) (done int, err error) {
	if len(pre) > len(p) {
		pre = pre[:len(p)]
	}
	if a.geo.Tolerance() > 0 && !a.geo.Mirrored() {
		return a.receiveStripes(p, off, pre, recv)
	}
	n := int64(len(p))
	if n == 0 || a.csum != nil || a.cache != nil || a.traits.LockWrites {
		return 0, nil
	}
	if err := a.enter(); err != nil {
		return 0, nil
	}
	defer a.leave()
	first, last := a.geo.StripeRange(off, n)
	if a.checkRange(off, n, true) != nil || a.coalescable(off, n, first, last) {
		return 0, nil
	}
	op := a.getOp()
	defer a.putOp(op)
	if op.v.failed || !op.v.inMemory {
		return 0, nil
	}
	pl := &op.plan
	pl.on, pl.ok, pl.write = true, true, true
	pl.base, pl.size = uintptr(unsafe.Pointer(unsafe.SliceData(p))), n
	op.noElide = true // plan the bytes, not what they will turn out to be
	perr := a.layout.WriteAt(op, p, off)
	op.noElide, pl.on = false, false
	if perr != nil || !pl.ok || !pl.tiles() {
		return 0, nil
	}
	// The array is marked dirty (and the write-intent bitmap set) before
	// any member byte changes, as for WriteAt.
	end, ok := a.markReceive(off, n)
	if !ok {
		return 0, nil
	}
	defer end()
	// Hold every member written, once each, in the order of their roles,
	// until the bytes are received and searched for zero blocks (and
	// before the punches run: a member that cannot punch writes zeroes,
	// through its mapping).
	var held uint64
	release := func() {
		for m := 0; held != 0; m++ {
			if held&(1<<uint(m)) != 0 {
				op.v.devs[m].(receiver).ReleaseReceive()
				held &^= 1 << uint(m)
			}
		}
	}
	defer release()
	for m := 0; m < len(op.v.devs); m++ {
		if pl.touched&(1<<uint(m)) == 0 {
			continue
		}
		if !op.v.devs[m].(receiver).HoldForReceive() {
			return 0, nil
		}
		held |= 1 << uint(m)
	}
	dsts := op.iov[:0]
	for _, pc := range pl.pieces {
		d, ok := pc.dev.(receiver).ReceiveSlice(pc.off, pc.n)
		if !ok {
			break // the rest is the caller's
		}
		dsts = append(dsts, d)
	}
	op.iov = dsts
	if len(dsts) == 0 {
		return 0, nil
	}
	a.clientOps.Add(1)
	op.cause = causeWrite
	done, err = receiveAll(recv, dsts, pre, &op.rest, nil)
	left, punched := done, int64(0)
	for i, d := range dsts {
		if left == 0 {
			break
		}
		pc := pl.pieces[i]
		got := min(left, len(d))
		left -= got
		pc.dev.(receiver).Received(pc.off, int64(got))
		punched += a.elideReceived(op, pc.m, pc.off, d[:got])
	}
	release()
	clear(op.iov)
	op.iov = op.iov[:0]
	// Punched blocks count as elided (when the punch succeeds), as
	// WriteAt counts them, not as written.
	a.member.written[causeWrite].Add(int64(done) - punched)
	a.stats.clientWritten.Add(int64(done))
	op.touched = pl.touched
	op.Run() // the punches of received zero blocks
	if ferr := a.finishWrite(op, nil); err == nil {
		err = ferr
	}
	return done, err
}

// elideReceived queues the punch of every aligned all-zero block of mem,
// the bytes just received at offset off of member m, as Op.Write punches
// them instead of writing them when the array elides zeroes. mem is the
// member's mapping, which the caller holds; a fault (a file shrunk behind
// raidd's back) ends the search, and those bytes stay written. It returns
// the bytes queued for punching.
func (a *Array) elideReceived(op *Op, m int, off int64, mem []byte) (punched int64) {
	if !a.zeroElide || len(mem) < elideMin {
		return 0
	}
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		_ = recover()
	}()
	start := -1 // where the current run of zero blocks starts
	b := int((elideMin - off%elideMin) % elideMin)
	for ; b+elideMin <= len(mem); b += elideMin {
		switch z := isZero(mem[b : b+elideMin]); {
		case z && start < 0:
			start = b
		case !z && start >= 0:
			op.queue(ioDiscard, m, nil, off+int64(start), int64(b-start))
			punched += int64(b - start)
			start = -1
		}
	}
	if start >= 0 {
		op.queue(ioDiscard, m, nil, off+int64(start), int64(b-start))
		punched += int64(b - start)
	}
	return punched
}

// receiveAll fills dsts with the write's payload: first with pre, its
// first bytes, which the caller had received already (copied, with faults
// caught: a page that cannot be had ends the receive with errPreFault),
// then from recv, calling it until every byte is placed or it fails.
// Without step, recv waits for all of them. With step, step is called
// first with the bytes pre placed and then after each call with the bytes
// placed so far: it does what it can with them and returns how many must
// be placed in all before it can do more, which recv waits for (taking
// what has arrived besides), or -1 to end the receive there. rest is
// scratch for the slices of what is left.
func receiveAll(recv func([][]byte, int) (int, error), dsts [][]byte, pre []byte, rest *[][]byte, step func(placed int) int) (done int, err error) {
	r := append((*rest)[:0], dsts...)
	defer func() {
		clear(r)
		*rest = r[:0]
	}()
	total := 0
	for _, d := range dsts {
		total += len(d)
	}
	i := 0 // r[i] is the first piece not full
	advance := func(n int) {
		for ; n > 0; i++ {
			k := min(n, len(r[i]))
			n -= k
			if r[i] = r[i][k:]; len(r[i]) > 0 {
				break
			}
		}
	}
	if len(pre) > 0 {
		n := copyGuarded(r, pre[:min(len(pre), total)])
		done += n
		advance(n)
		if n < min(len(pre), total) {
			err = errPreFault
		}
	}
	for done < total && err == nil {
		want := total
		if step != nil {
			if want = step(done); want < 0 {
				return done, nil
			}
		}
		for len(r[i]) == 0 {
			i++
		}
		var n int
		n, err = recv(r[i:], min(max(want, done+1), total)-done)
		if n <= 0 && err == nil {
			err = io.ErrNoProgress // recv broke its contract
		}
		n = min(max(n, 0), total-done)
		done += n
		advance(n)
	}
	if step != nil && (err != nil || done == total) {
		step(done) // what the last call placed
	}
	return done, err
}

// errPreFault says that the bytes a receive had already could not be
// copied into a member's memory (a fault).
var errPreFault = errors.New("raid: a member's memory faulted taking the buffered payload")

// copyGuarded copies src into dsts, in order, a page at a time with
// faults caught, and returns the bytes copied (fewer than len(src) only
// when a page of dsts faulted).
func copyGuarded(dsts [][]byte, src []byte) (n int) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil && !isFault(r) {
			panic(r)
		}
	}()
	for _, d := range dsts {
		for len(d) > 0 && n < len(src) {
			k := copy(d[:min(len(d), 4096)], src[n:])
			d = d[k:]
			n += k
		}
	}
	return n
}

// markReceive marks the array dirty and sets the write-intent bitmap for
// a received write of [off, off+n) before any member byte changes, as
// WriteAt does; end, once the write is done, ends what it began. It
// reports false, with nothing begun, when either fails (the array has
// failed or is closing): the receive then declines, and WriteAt meets it.
func (a *Array) markReceive(off, n int64) (end func(), ok bool) {
	if a.beginWrite() != nil {
		return nil, false
	}
	rowLo, rowHi := a.geo.RowRange(off, n)
	if a.markWrite(rowLo, rowHi) != nil {
		a.endWrite()
		return nil, false
	}
	return func() {
		a.doneWrite(rowLo, rowHi)
		a.endWrite()
	}, true
}
