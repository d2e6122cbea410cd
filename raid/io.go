package raid

import (
	"errors"

	"github.com/raidd/raidd/raid/internal/integrity"
)

func (a *Array) checkRange(off, n int64, write bool) error {
	if off < 0 || n < 0 || off > a.geo.Size() || n > a.geo.Size()-off {
		return rangeError(write, off, n, a.geo.Size())
	}
	if write && a.readOnly {
		return ErrReadOnly
	}
	return nil
}

// ReadAt reads len(p) bytes at array offset off. It follows io.ReaderAt:
// it returns len(p), nil or an error. p is owned by the caller and not
// retained. Reads are served around failed members; a member that fails
// during the read is marked failed before ReadAt returns. Errors: ErrRange
// (wraps EINVAL), ErrFailed (wraps EIO) joined with the member errors,
// ErrClosed.
func (a *Array) ReadAt(p []byte, off int64) (int, error) {
	if err := a.enter(); err != nil {
		return 0, err
	}
	defer a.leave()
	if err := a.checkRange(off, int64(len(p)), false); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	a.settleUnsealed(off, int64(len(p)))
	if a.csum != nil && (off%csumBlock != 0 || len(p)%csumBlock != 0) {
		return a.readBlocks(p, off)
	}
	return a.read(p, off)
}

// read serves ReadAt once the request is validated.
func (a *Array) read(p []byte, off int64) (int, error) {
	op := a.getOp()
	defer a.putOp(op)
	if op.v.failed {
		return 0, ErrFailed
	}
	if n := int64(len(p)); op.v.ahead && a.streams.follows(off, n) {
		op.nextOff, op.nextN = off+n, n
	}
	// A read that must reconstruct runs under the stripe locks. A degraded
	// read takes them at once if the level says so (Traits); any other read
	// takes them only if the layout finds it needs them (a read error, a
	// member lost meanwhile).
	first, last := a.geo.StripeRange(off, int64(len(p)))
	lock := func() {
		a.locks.RLock(first, last)
		op.v, op.locked = a.view.Load(), true
	}
	// A read of bytes held in the stripe cache takes them too, so that the
	// cached pieces cannot be written out (and dropped) between the member
	// reads and the copy of the cached bytes over them.
	if (a.traits.LockDegradedReads && op.v.Degraded()) || (a.cache != nil && a.cache.cached(off, int64(len(p)), first, last)) {
		lock()
	}
	err := a.layout.ReadAt(op, p, off)
	if errors.Is(err, errNeedLock) && !op.locked {
		lock()
		err = a.layout.ReadAt(op, p, off)
	}
	if op.settle() {
		a.handleFailures(op) // before unlocking: the failure is recorded first
	}
	var reread bool
	if op.locked {
		err, reread = a.rereadIfLost(op, p, off, err)
	}
	if err == nil && op.locked && a.cache != nil {
		a.cache.overlay(p, off, first, last)
	}
	if op.locked {
		a.locks.RUnlock(first, last)
	}
	a.clientOps.Add(1)
	if err != nil {
		if reread {
			return 0, err
		}
		if op.csumLost != 0 {
			a.csumLost(op)
		}
		return 0, a.ioError(op, err)
	}
	a.stats.clientRead.Add(int64(len(p)))
	return len(p), nil
}

func (a *Array) ioError(op *Op, err error) error {
	if op.csumLost != 0 && op.failed == 0 && !op.v.failed {
		return errors.Join(ErrIO, op.csumErrors())
	}
	if (errors.Is(err, ErrTooManyFailures) || op.failed != 0) && !a.redundant() && !op.v.failed {
		return errors.Join(ErrIO, op.memberErrors())
	}
	if errors.Is(err, ErrTooManyFailures) || op.failed != 0 {
		return errors.Join(ErrFailed, op.memberErrors())
	}
	return err
}

// WriteAt writes p at array offset off on every member that needs it and
// returns len(p), nil once the data is on all writable members (not
// necessarily durable: see Sync and WriteAtFUA). p is owned by the caller
// and not retained. Errors: ErrRange (wraps ENOSPC), ErrReadOnly (EPERM),
// ErrFailed (EIO), ErrClosed.
func (a *Array) WriteAt(p []byte, off int64) (int, error) {
	if err := a.write(p, off, int64(len(p)), wkData, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteAtFUA is WriteAt that returns only once the data, its parity and
// the superblock state are durable on every member written.
func (a *Array) WriteAtFUA(p []byte, off int64) (int, error) {
	if err := a.write(p, off, int64(len(p)), wkData, true); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Discard makes [off, off+n) read as zeroes, releasing member space where
// the members can (punched holes), and keeps mirrors and parity consistent
// with what the range now reads as. Whole parity stripes are discarded on
// every member; partial ones are written as zeroes, whose aligned all-zero
// pieces become holes.
func (a *Array) Discard(off, n int64) error {
	return a.write(nil, off, n, wkDiscard, false)
}

// DiscardFUA is Discard followed by making the result durable.
func (a *Array) DiscardFUA(off, n int64) error {
	return a.write(nil, off, n, wkDiscard, true)
}

// WriteZeroes makes [off, off+n) read as zeroes. With noHole the space
// stays allocated (zeroes are written); without it holes are allowed and
// it behaves like Discard.
func (a *Array) WriteZeroes(off, n int64, noHole bool) error {
	if noHole {
		return a.write(nil, off, n, wkZeroesNoHole, false)
	}
	return a.write(nil, off, n, wkDiscard, false)
}

// WriteZeroesFUA is WriteZeroes followed by making the result durable.
func (a *Array) WriteZeroesFUA(off, n int64, noHole bool) error {
	if noHole {
		return a.write(nil, off, n, wkZeroesNoHole, true)
	}
	return a.write(nil, off, n, wkDiscard, true)
}

type writeKind uint8

const (
	wkData writeKind = iota
	wkDiscard
	wkZeroesNoHole
)

func (a *Array) write(p []byte, off, n int64, kind writeKind, fua bool) error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	if err := a.checkRange(off, n, true); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	a.settleUnsealed(off, n)
	if err := a.beginWrite(); err != nil {
		return err
	}
	defer a.endWrite()
	a.clientOps.Add(1)
	rowLo, rowHi := a.geo.RowRange(off, n)
	if err := a.markWrite(rowLo, rowHi); err != nil {
		return err
	}
	defer a.doneWrite(rowLo, rowHi)
	first, last := a.geo.StripeRange(off, n)
	if kind == wkData {
		a.stats.clientWritten.Add(n)
		if a.cache != nil {
			return a.writeCached(p, off, first, last, fua)
		}
		if a.coalescable(off, n, first, last) {
			return a.writeGathered(p, off, first, fua)
		}
	}
	if a.traits.LockWrites {
		a.locks.Lock(first, last)
		defer a.locks.Unlock(first, last)
	}
	op := a.getOp()
	defer a.putOp(op)
	op.locked = true
	if op.v.failed {
		return ErrFailed
	}
	op.cause = causeZero
	if kind == wkData {
		op.cause = causeWrite
	}
	// Cached pieces of these stripes go out first: the discard or zeroes
	// must land over them, not under them.
	if err := a.writeOutLocked(op, first, last); err != nil {
		return a.finishWrite(op, err)
	}
	if kind != wkData {
		a.stats.clientZeroed.Add(n)
	}
	err := a.redoOnNewerView(op, func(op *Op) error {
		var err error
		switch kind {
		case wkData:
			err = a.layout.WriteAt(op, p, off)
		case wkDiscard:
			err = a.layout.Discard(op, off, n)
		case wkZeroesNoHole:
			op.Zero, op.noElide = true, true
			err = a.writeZeroes(op, off, n)
		}
		if err == nil && fua {
			a.syncTouched(op)
		}
		return err
	})
	return a.finishWrite(op, err)
}

// redoOnNewerView runs write, a write on op, and returns its error; when
// it fails on a View older than the array's (which has not failed), it
// runs it again, whole, on a fresh op, until it succeeds or fails on the
// array's current View. The retries' failures are recorded (finishWrite);
// op's, the caller records.
//
// An op's View is the one of when the op was taken, and a write can wait
// long after that with its stripes locked (for a slow member, for its log
// batch) while the array changes: a rebuild that finishes meanwhile makes
// its target readable, but in op's View the target is still unreadable,
// so a member failure that the array survives looks to op like one too
// many (RAID6 missing a member, rebuilding another, and a third failing),
// and the Layout gives up with ErrTooManyFailures before it has written
// everything: a write the array can take would fail (and a stripe cache's
// write-out would drop acknowledged bytes). A write is idempotent under
// its stripe locks: rewriting what did reach the members writes the same
// bytes and parity again, and the retry's own writes meet, and record,
// the failures the first attempt met.
func (a *Array) redoOnNewerView(op *Op, write func(*Op) error) error {
	err := write(op)
	for seen := op.v; err != nil; {
		if v := a.view.Load(); v == seen || v.failed {
			break
		}
		retry := a.getOp()
		retry.locked, retry.cause, retry.background = op.locked, op.cause, op.background
		seen = retry.v
		err = a.finishWrite(retry, write(retry))
		a.putOp(retry)
	}
	return err
}

// syncTouched makes the members op wrote durable (FUA). With a write-hole
// log it syncs every member, as Sync does: a byte of a parity row is
// durable only when the other data of its row is (its member may be the
// one missing after a crash), and the log's rows then forget the spans
// they keep.
func (a *Array) syncTouched(op *Op) {
	if a.journal != nil {
		a.journal.syncMembers(op)
		return
	}
	for m := 0; m < a.geo.Members(); m++ {
		if op.touched&(1<<uint(m)) != 0 && op.Writable(m) {
			op.queue(ioSync, m, nil, 0, 0)
		}
	}
	op.Run()
}

// finishWrite records member failures seen by a write (before it is
// acknowledged) and returns the write's result.
func (a *Array) finishWrite(op *Op, err error) error {
	if op.settle() {
		a.handleFailures(op)
		if a.view.Load().failed {
			return errors.Join(ErrFailed, op.memberErrors())
		}
	}
	if err != nil {
		return a.ioError(op, err)
	}
	return nil
}

// writeZeroes writes zeroes chunk by chunk from the shared zero buffer.
func (a *Array) writeZeroes(op *Op, off, n int64) error {
	chunk := a.geo.Chunk()
	for n > 0 {
		k := min(n, chunk-off%chunk)
		if err := a.layout.WriteAt(op, a.zero[:k], off); err != nil {
			return err
		}
		off += k
		n -= k
	}
	return nil
}

// Sync returns once every write acknowledged before it was called is
// durable on every member that holds it. A member that fails to sync is
// marked failed; Sync fails only if the array has failed.
func (a *Array) Sync() error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	// Every stripe cached before this call is written out first. A stripe
	// whose write-out failed is reported here (the array recorded the
	// member failures; it fails only if the array has).
	var cacheErr error
	if a.cache != nil {
		_ = a.flushCache() // its failures are recorded, and taken here
		cacheErr = a.cache.takeErr()
	}
	op := a.getOp()
	defer a.putOp(op)
	if op.v.failed {
		return ErrFailed
	}
	if a.journal != nil {
		a.journal.syncMembers(op) // and forgets the spans rows keep
	} else {
		for m, d := range op.v.devs {
			if d != nil && op.Writable(m) {
				op.queue(ioSync, m, nil, 0, 0)
			}
		}
		op.Run()
	}
	if op.failed != 0 {
		a.handleFailures(op)
		if !a.redundant() {
			return errors.Join(ErrIO, op.memberErrors())
		}
		if a.view.Load().failed {
			return errors.Join(ErrFailed, op.memberErrors())
		}
	}
	return cacheErr
}

// CanFastZero reports whether WriteZeroes without NO_HOLE is cheaper than
// writing: true when every member can punch holes.
func (a *Array) CanFastZero() bool {
	v := a.view.Load()
	for _, d := range v.devs {
		if d == nil {
			continue
		}
		if z, ok := d.(interface{ CanDiscard() bool }); !ok || !z.CanDiscard() {
			return false
		}
	}
	return true
}

// FastZeroAt reports whether zeroing [off, off+n) (without NO_HOLE) is
// faster than writing it, once CanFastZero holds: always on levels without
// parity, where every piece is a hole punched on its members. On parity
// levels only whole stripes are discarded; a piece of a stripe is written
// as zeroes with its parity, a read-modify-write or reconstruct-write like
// a WRITE's, plus the zeroing's own work. So a range is fast only when it
// covers at least one whole stripe, whose punched holes then save more
// than the partial ends cost; the NBD server fails a FAST_ZERO request
// for any other range with ENOTSUP, as the protocol asks of a zero that
// would not beat a WRITE.
func (a *Array) FastZeroAt(off, n int64) bool {
	if a.geo.ParityMember(0) < 0 {
		return true
	}
	w := a.geo.StripeWidth()
	first := (off + w - 1) / w * w
	return n > 0 && first+w <= off+n
}

// CanMultiConn is true: Sync flushes every member, so a FLUSH on any
// connection makes every acknowledged write durable.
func (a *Array) CanMultiConn() bool { return true }

// BlockSizes returns the NBD block size constraints: minimum 1 byte (any
// alignment works), preferred the full stripe width (chunk × data members:
// on parity levels, requests that cover whole stripes need no reads), and
// maximum 32 MiB. The nbd package rounds the preferred size up to the power
// of two the protocol requires (a 192 KiB stripe is announced as 256 KiB)
// and keeps it at or below the maximum.
func (a *Array) BlockSizes() (minimum, preferred, maximum uint32) {
	return 1, uint32(min(a.geo.StripeWidth(), 32<<20)), 32 << 20
}

// WritesInline reports whether a write may be served on the goroutine that
// received it (the NBD server's request reader) instead of being handed to
// another: every member, and every replacement being built, is held in
// memory (a file on tmpfs or ramfs without O_DIRECT, or a memory member),
// so a write, with its parity, log record and bitmap syncs, is CPU work
// that never waits for a device, and a hand-off between goroutines would
// cost more than it overlaps. Writes to any other member can wait for a
// device (a disk behind the page cache at a sync, a direct member at every
// write), and a connection's writes must then run side by side. It is also
// false on parity levels. Their writes gathered without a stripe cache
// have a leader that may wait for the rest of a stream that the same reader
// would deliver. With the cache, a connection's writes run one at a time on
// the reader, and the parity work no longer overlaps with the next
// request's payload: on 4 tmpfs members (bench/nbd-ab.sh, load 2.3, two
// rounds) RAID5 sequential 1 MiB writes fell from 2075-2454 to 1618-1945
// MB/s and random 4K writes from 27.8-33.1K to 25.9-26.7K IOPS, though
// the CPU per GiB was lower. RAID0's sequential writes gained (0.51 to
// 0.40 CPU s/GiB, throughput 2-4% up) and its random writes were even.
//
// Parity writes that hold whole stripes may run on the reader too: see
// WritesInlineAt.
func (a *Array) WritesInline() bool {
	if a.geo.Tolerance() > 0 && !a.geo.Mirrored() {
		return false
	}
	return a.allInMemory()
}

// inlineStripes is how many whole stripes a parity write must hold to run
// on the NBD reader (WritesInlineAt).
const inlineStripes = 2

// WritesInlineAt is WritesInline for one write of n bytes at off
// (nbd.InlineWriterAt): on a parity level it is also true for a write
// that holds at least two whole stripes (inlineStripes) when every member
// is held in memory and a stripe cache is kept. Such a write's whole
// stripes need no write-hole record and no reads, and its pieces at either
// end are copied into the cache (or complete a cached stripe), so it is
// CPU work that never waits; on the reader, the NBD server writes it while
// its payload arrives (nbd/payload.go), which the workers cannot. Smaller
// parity writes still go to the workers: random 4K writes run side by
// side there (10% more IOPS than on the reader, at 6% more CPU), and with
// one whole stripe enough, two thirds of nbdcopy's 256 KiB writes ran on
// the reader, out of step with the third that did not, and the stripe
// cache joined fewer of their pieces (write amplification 1.362-1.363 ->
// 1.379-1.383; with two, 1.363-1.368 as before).
//
// History, all bench/nbd-ab.sh on 4 tmpfs members. This ran whole-stripe
// writes on the reader first on a machine at load 2-3 (RAID5 1 MiB writes
// 3.0-3.2 -> 3.4-3.7 GB/s, 0.33 -> 0.26 CPU s/GiB). A later stop's quiet
// machine measured the reverse (2.22-2.26 GB/s on the reader against
// 2.72-3.01 on the workers, the same CPU per GiB) and sent every parity
// write to the workers: the reader received a payload whole and then
// computed and copied its stripes while the client waited with a full
// socket. Since large inline writes are written while they arrive and
// copies into the members use non-temporal stores, the reader wins again
// on the quiet machine: 2901-2903 against 2355-2453 MB/s, 0.335-0.339
// against 0.404-0.424 CPU s/GiB, 2.2 against 5.6 context switches per
// request (two rounds).
func (a *Array) WritesInlineAt(off int64, n int) bool {
	if a.geo.Tolerance() == 0 || a.geo.Mirrored() {
		return a.WritesInline()
	}
	if a.cache == nil {
		return false
	}
	w := a.geo.StripeWidth()
	first := (off + w - 1) / w * w // the first stripe boundary at or after off
	return first+inlineStripes*w <= off+int64(n) && a.allInMemory()
}

// ReadsInline reports whether a read of n bytes may be served on the
// goroutine that received it (the NBD server's request reader): n is at
// most inlineReadMax and every member is held in memory, so the read is a
// copy or two that never waits for a device (Op.Run does such member reads
// on the request's goroutine anyway), and a hand-off to a worker would
// cost more than the copy. Larger reads go to the NBD workers (their
// member reads, too, run on the request's goroutine), so that the reader
// goes on reading the next requests meanwhile: served on the reader, 1 MiB
// sequential reads cost more CPU per byte on a quiet machine (commit
// 580bf09). bench/nbd-ab.sh measures it (random 4K reads).
func (a *Array) ReadsInline(n int) bool {
	return n <= inlineReadMax && a.allInMemory()
}

// allInMemory reports whether every member, and every replacement being
// built, is held in memory.
func (a *Array) allInMemory() bool { return a.view.Load().inMemory }

// heldInMemory reports whether every device and replacement of v is held
// in memory (View.inMemory).
func heldInMemory(v *View) bool {
	for _, devs := range [2][]Member{v.devs, v.repl} {
		for _, d := range devs {
			if d != nil && !inMemory(d) {
				return false
			}
		}
	}
	return true
}

// inMemory reports whether member d says it is held in memory, looking
// through the checksum wrapper.
func inMemory(d any) bool {
	m, ok := unwrapped(d).(interface{ InMemory() bool })
	return ok && m.InMemory()
}

// unwrapped returns the device under a checksummed member (which answers
// for it what its device says), or d itself.
func unwrapped(d any) any {
	if w, ok := d.(*integrity.Dev); ok {
		return w.Inner()
	}
	return d
}
