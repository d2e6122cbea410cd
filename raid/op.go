package raid

import (
	"bytes"
	"errors"
	"io"
	"math/bits"
	"sync"
	"sync/atomic"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid/internal/integrity"
	"github.com/raidd/raidd/stripe"
)

// View is an immutable snapshot of the member set: which devices fill which
// roles and which of them may be read or written. The Array publishes a new
// View through an atomic pointer whenever a member changes state; requests
// take the current View once and use it throughout.
type View struct {
	geo      stripe.Geometry
	dataOff  int64
	devs     []Member // by role; nil for a missing role
	repl     []Member // by role: a replacement being built while the role's member serves (raidd replace)
	readable uint64   // roles that are active and in sync
	writable uint64   // roles that receive writes (active or rebuilding)
	slow     uint64   // write-mostly roles: read only when nothing else can serve
	failed   bool     // the array has lost more than it tolerates
	// ahead: some member reads ahead (readahead.go) and the level is
	// striped.
	ahead bool
	// inMemory: every device and replacement of the view is held in
	// memory (allInMemory), where a write that returned is as durable as a
	// sync would make it (journal.keep).
	inMemory bool

	// ctr and replCtr hold the counters of devs and repl (memberstats.go);
	// nil in a View built by NewOp.
	ctr, replCtr []*memberCounters
}

// Geometry returns the array geometry.
func (v *View) Geometry() stripe.Geometry { return v.geo }

// Degraded reports whether any role is not readable.
func (v *View) Degraded() bool { return v.readable != fullMask(v.geo.Members()) }

func fullMask(n int) uint64 {
	if n >= 64 {
		return ^uint64(0)
	}
	return 1<<uint(n) - 1
}

type ioKind uint8

const (
	ioRead ioKind = iota
	ioWrite
	ioDiscard
	ioSync
)

var ioNames = [...]string{"read", "write", "discard", "sync"}

// ioReq is one member operation of a request, run by the Array's workers.
type ioReq struct {
	kind ioKind
	m    int
	dev  Member
	p    []byte
	off  int64 // absolute device offset
	n    int64
	err  error
	wg   *sync.WaitGroup
	// repl: the I/O goes to the role's replacement device; repair: a write
	// that rewrites bytes that failed to read.
	repl, repair bool
	// vec, when set, holds the buffers of this request and of the later
	// requests merged into it (back to back on the same member): one
	// preadv/pwritev serves them all. merged marks a request served by the
	// one at index head.
	vec    [][]byte
	merged bool
	head   int
	// shared, when set, holds this write's buffers and their block
	// checksums, which other writes of the same buffers share (checksums.go).
	shared *integrity.Shared
	// ahead, for a read, is how many bytes after it the member is asked
	// to read ahead (readahead.go); one holds p for its vectored call.
	ahead int64
	one   [1][]byte
	// done: already served, with the batch's other reads of members held
	// in memory (readSideBySide).
	done bool
}

// vectorIO is implemented by members that read or write several buffers
// at consecutive offsets in one call.
type vectorIO interface {
	ReadvAt(bufs [][]byte, off int64) (int, error)
	WritevAt(bufs [][]byte, off int64) (int, error)
}

func (r *ioReq) do() {
	switch {
	case r.ahead > 0:
		bufs := r.vec
		if bufs == nil {
			r.one[0] = r.p
			bufs = r.one[:]
		}
		_, r.err = r.dev.(aheadReader).ReadvAhead(bufs, r.off, r.ahead)
		return
	case r.shared != nil:
		_, r.err = r.dev.(*integrity.Dev).WriteShared(r.off, r.shared)
		return
	case r.vec != nil && r.kind == ioRead:
		_, r.err = r.dev.(vectorIO).ReadvAt(r.vec, r.off)
		return
	case r.vec != nil:
		_, r.err = r.dev.(vectorIO).WritevAt(r.vec, r.off)
		return
	}
	switch r.kind {
	case ioRead:
		_, r.err = r.dev.ReadAt(r.p, r.off)
	case ioWrite:
		_, r.err = r.dev.WriteAt(r.p, r.off)
	case ioDiscard:
		r.err = r.dev.Discard(r.off, r.n)
	case ioSync:
		r.err = r.dev.Sync()
	}
}

// Op is the context of one request while a Layout serves it. Layouts queue
// member I/O on it (Read, Write, Discard), run the queue with Run, and read
// which members are usable. Member failures seen by Run are recorded on the
// Op; the Array marks those members failed and persists that before the
// request completes. An Op is owned by one goroutine; it is pooled and
// must not be retained after the Layout call returns.
type Op struct {
	a      *Array
	v      *View
	geo    stripe.Geometry
	locked bool
	// Zero is set when the data being written is all zeroes (write-zeroes
	// and discard of partial parity stripes).
	Zero bool
	// noElide disables turning all-zero member writes into discards
	// (write-zeroes with NO_HOLE).
	noElide bool

	// cause says on whose behalf the op's member I/O is done, for the
	// byte counters (Stats). moved counts, for background ops, the bytes
	// read or written per device (roles, then their replacements), which
	// the rate limiter charges.
	cause cause
	moved [2 * stripe.MaxMembers]int64
	// background says no client waits for the op (the stripe cache's
	// flusher): its write-hole log records may wait longer for others to
	// share their log write (journal.gather).
	background bool

	failed  uint64 // members that failed during this op
	errs    [stripe.MaxMembers]error
	touched uint64 // members written (for FUA)
	// readErr holds members whose reads failed in this op. They are not
	// Readable any more in this op; unless a Layout repairs every such
	// member (Repair) the Array marks them failed.
	readErr    uint64
	repaired   uint64
	replFailed uint64 // roles whose replacement device failed
	// csumLost holds members whose reads failed their checksum and were
	// not repaired: the member stays in the array, the request fails.
	csumLost uint64
	// salvage (a rebuild past lost blocks, checksums.go): reads of
	// checksummed members return what the member holds even where it fails
	// its checksum, and the in-chunk offsets of those blocks are recorded
	// in lost, and the blocks themselves in lostAt.
	salvage bool
	lostMu  sync.Mutex
	lost    []int64
	lostAt  []lostBlock

	batch []ioReq
	iov   [][]byte // backing store of the ioReq.vec slices
	rest  [][]byte // receiveAll's scratch
	wg    sync.WaitGroup
	exts  []stripe.Extent
	locs  []stripe.Loc
	bufs  []*[]byte
	// Shards, Scratch and List are scratch slices for the Layout serving the
	// request, so that parity code need not allocate. The Op owns the
	// slices; the Layout owns their entries while its call runs.
	//
	// Shards and Scratch have one entry per member (len == Members()), are
	// distinct (they never share a backing array) and are all nil when the
	// call starts. A Layout may store any buffer in an entry (a Buf, a
	// slice of the caller's p, its own) and reslice them into locals
	// (shards := op.Shards[:k]), but must neither append to them nor assign
	// op.Shards or op.Scratch.
	//
	// List starts empty (len 0; its capacity is kept from earlier requests).
	// A Layout appends to op.List[:0] and stores the result back in op.List
	// so that the capacity is reused.
	//
	// When the op ends every entry of all three is set to nil; the buffers
	// they pointed to are not touched, but a Buf among them is back in the
	// pool. So neither the slices nor what they point to may be kept after
	// the Layout call returns, and entries alias whatever the Layout put in
	// them: writing through op.Shards[i] writes that buffer.
	Shards  [][]byte
	Scratch [][]byte
	List    [][]byte

	// repair asks a Check to rewrite what it finds wrong; found collects
	// what it reports (Op.Mismatch).
	repair bool
	found  []Mismatch

	gathered    []*gather // writes a coalescing leader performs
	gatherOrder []int

	// The write-hole journal (journal.go): inRow is set between BeginRow
	// and EndRow (the journal's shared lock is held), rowMark is where the
	// row's queued I/O starts in batch, journaled says a record of the row
	// is durable and its writes must run before EndRow, and rowLog,
	// pplSpans and recVec are scratch for building records.
	inRow, journaled bool
	rowMark          int
	rowLog           RowLog
	pplSpans         []pplSpan
	recVec           [][]byte
	logPend          [2]pendingRec // the record's places in its logs' queues
	logPlan          [2]int        // the logs the row's record is planned for (logQueue.planned)
	nLogPlan         int
	logBufs          [2]*[]byte // the buffers of the row's record's P' and Q' (logBuf)
	// logSlots are the slots the row's record took (a slotted log,
	// journal.slot): EndRow clears them once the row's writes are done.
	logSlots  [2]logSlot
	nLogSlots int

	// sums are the shared checksums of writes of the same buffers to
	// several members (checksums.go); the first nSums are in use.
	sums  []*integrity.Shared
	nSums int

	// fill hands a Layout's Filler to a member (WriteFill, fill.go).
	fill opFill
	hot  [1][]byte // WriteHot's source

	// win, for one row of a background job's window (window.go), serves
	// reads from what the window read and gathers writes to its targets.
	win *window

	// plan, while on, makes Run record the queued reads for a spliced
	// read instead of running them (splice.go).
	plan splicePlan

	// nextN, for a client read of a sequential stream on an array whose
	// members read ahead, is its length, and nextOff where it ends: the
	// next request's range, which Run asks members to read ahead of
	// (readahead.go). Zero otherwise.
	nextOff, nextN int64
}

// Geometry returns the geometry of the array.
func (op *Op) Geometry() stripe.Geometry { return op.geo }

// Locked reports whether the caller holds the stripe locks of the request.
func (op *Op) Locked() bool { return op.locked }

// NeedLock is what a Layout's ReadAt returns when it must reconstruct (a
// copy or a member failed, or the array is degraded) and Locked is false:
// the Array then calls ReadAt again, with a fresh View, under the stripe
// locks. It is an internal signal that never reaches the Array's callers.
func (op *Op) NeedLock() error { return errNeedLock }

// Readable reports whether member m may serve reads in this op.
func (op *Op) Readable(m int) bool {
	return op.v.readable&^(op.failed|op.readErr)&(1<<uint(m)) != 0
}

// Writable reports whether member m must receive writes in this op. A
// role whose member failed during the op stays writable while its
// replacement (raidd replace) works: the failure turns the replacement
// into the role's member, rebuilt only from the row the copy had reached,
// so every row before it must get the op's writes, as a rebuilding member
// would (queue then sends them to the replacement alone). Without them, a
// request that met the failure in one row and went on to the next left
// that row stale on the replacement (TestReplaceGetsWritesAfterOldFails).
func (op *Op) Writable(m int) bool {
	bit := uint64(1) << uint(m)
	if op.v.writable&bit == 0 {
		return false
	}
	return op.failed&bit == 0 || (op.v.repl[m] != nil && op.replFailed&bit == 0)
}

// devWritable reports whether role m's own member (not its replacement)
// receives writes in this op: it is writable and has not failed. Writes
// that go to the member device alone (the write-hole log, poison marks)
// use it.
func (op *Op) devWritable(m int) bool {
	return op.v.writable&^op.failed&(1<<uint(m)) != 0
}

// Slow reports whether member m is write-mostly: readers prefer other copies.
func (op *Op) Slow(m int) bool { return op.v.slow&(1<<uint(m)) != 0 }

// ResyncPending reports whether member row row may still differ between
// its copies after an unclean shutdown: the resync runs, and row lies in a
// region it covers (a region the write-intent bitmap marked, or any row
// without a bitmap). A mirror reads such a row from the copy the resync
// copies over the others (its first readable one), as md's read balancing
// does ahead of its resync point, so that a chunk a write in flight at the
// crash tore between its copies reads the same bytes every time rather
// than old and new by turns until the resync reaches it.
func (op *Op) ResyncPending(row int64) bool {
	a := op.a
	if !a.resyncing.Load() {
		return false
	}
	if a.bitmap == nil {
		return true
	}
	r, _ := a.bitmap.regions(row, row)
	return a.bitmap.isSet(r)
}

// Unreadable returns the number of members that cannot serve reads.
func (op *Op) Unreadable() int {
	return op.geo.Members() - bits.OnesCount64(op.v.readable&^(op.failed|op.readErr)&fullMask(op.geo.Members()))
}

// Extents returns the extents of [off, off+n) in scratch space owned by the op.
func (op *Op) Extents(off, n int64) []stripe.Extent {
	op.exts = op.geo.Extents(op.exts[:0], off, n)
	return op.exts
}

// Copies returns the copies of chunk c at chunk offset in, in scratch space
// owned by the op.
func (op *Op) Copies(c, in int64) []stripe.Loc {
	op.locs = op.geo.Copies(op.locs[:0], c, in)
	return op.locs
}

// Buf returns a scratch buffer of n bytes (n ≤ chunk size) whose contents
// are undefined. It is returned to the pool when the op ends.
func (op *Op) Buf(n int64) []byte {
	b := op.a.bufPool.Get().(*[]byte)
	op.bufs = append(op.bufs, b)
	return (*b)[:n]
}

// Zeroes returns n ≤ chunk size bytes of zeroes that must not be modified.
func (op *Op) Zeroes(n int64) []byte { return op.a.zero[:n] }

func (op *Op) queue(kind ioKind, m int, p []byte, off, n int64) {
	if op.win != nil && kind != ioRead {
		op.win.invalidate(m, op.v.devs[m], off-op.v.dataOff, n)
	}
	dev := op.v.devs[m]
	if op.salvage && kind == ioRead {
		dev = op.salvageDev(dev)
	}
	if kind == ioRead || op.failed&(1<<uint(m)) == 0 {
		op.batch = append(op.batch, ioReq{kind: kind, m: m, dev: dev, p: p, off: off, n: n})
	}
	if kind != ioRead && op.v.repl[m] != nil && op.replFailed&(1<<uint(m)) == 0 {
		op.batch = append(op.batch, ioReq{kind: kind, m: m, dev: op.v.repl[m], p: p, off: off, n: n, repl: true})
	}
}

// ReadFailed reports whether a read from member m failed in this op.
func (op *Op) ReadFailed(m int) bool { return op.readErr&(1<<uint(m)) != 0 }

// Repair queues a rewrite of p at data-region offset off of member m,
// whose read failed in this op, with the bytes the Layout reconstructed
// from redundancy (md's read-error correction). If every repair of the
// member succeeds, the member stays in the array.
func (op *Op) Repair(m int, p []byte, off int64) {
	op.touched |= 1 << uint(m)
	n := len(op.batch)
	op.queue(ioWrite, m, p, op.v.dataOff+off, int64(len(p)))
	for i := n; i < len(op.batch); i++ {
		op.batch[i].repair = true
	}
}

// RepairExtents rewrites, on every member whose read failed during this
// Op and that is still writable, the bytes of exts (extents of p, as
// Extents returned them) that the caller has reconstructed into p, and runs
// those writes. A striped level calls it at the end of a read that had to
// reconstruct.
func (op *Op) RepairExtents(exts []stripe.Extent, p []byte) {
	repair := false
	for _, e := range exts {
		if op.ReadFailed(e.Member) && op.Writable(e.Member) {
			op.Repair(e.Member, p[e.BufOff:e.BufOff+e.Len], e.Off)
			repair = true
		}
	}
	if repair {
		op.Run()
	}
}

// Read queues a read of len(p) bytes at data-region offset off of member m.
func (op *Op) Read(m int, p []byte, off int64) {
	if op.win != nil && op.win.readFrom(op, m, p, off) {
		return
	}
	op.queue(ioRead, m, p, op.v.dataOff+off, int64(len(p)))
}

// Write queues a write of p at data-region offset off of member m. When
// the array elides zeroes, every aligned 4 KiB block of p that is all
// zeroes is discarded (punched) instead of written; the rest of p, including
// unaligned head and tail bytes, is written. Either way the member then
// reads back exactly p, so mirrors and parity stay consistent.
func (op *Op) Write(m int, p []byte, off int64) {
	op.touched |= 1 << uint(m)
	if op.win != nil {
		if t := op.win.target(op, m, false); t != nil && t.gatherWrite(op.win, p, off) {
			return
		}
	}
	if op.noElide || !op.a.zeroElide || len(p) < elideMin {
		op.queue(ioWrite, m, p, op.v.dataOff+off, int64(len(p)))
		return
	}
	abs := op.v.dataOff + off
	// [head, tail) is the part of p made of whole aligned blocks.
	head := int((elideMin - abs%elideMin) % elideMin)
	tail := head + (len(p)-head)/elideMin*elideMin
	if tail-head < elideMin {
		op.queue(ioWrite, m, p, abs, int64(len(p)))
		return
	}
	// Runs of data blocks (with the unaligned edges) are written, runs of
	// zero blocks discarded. start is where the pending run begins and
	// zero says which kind it is.
	start, zero := 0, false
	flush := func(end int) {
		if end == start {
			return
		}
		if zero {
			op.queue(ioDiscard, m, nil, abs+int64(start), int64(end-start))
		} else {
			op.queue(ioWrite, m, p[start:end], abs+int64(start), int64(end-start))
		}
		start = end
	}
	for b := head; b < tail; b += elideMin {
		z := isZero(p[b : b+elideMin])
		if z != zero {
			flush(b)
			zero = z
		}
	}
	if zero && tail < len(p) {
		flush(tail)
		zero = false
	}
	flush(len(p))
}

// Discard queues a discard of [off, off+n) of member m's data region. If the
// member cannot discard, zeroes are written instead.
func (op *Op) Discard(m int, off, n int64) {
	op.touched |= 1 << uint(m)
	if op.win != nil {
		if t := op.win.target(op, m, false); t != nil && t.gatherDiscard(op.win, off, n) {
			return
		}
	}
	op.queue(ioDiscard, m, nil, op.v.dataOff+off, n)
}

// elideMin is the granularity at which all-zero blocks of writes become
// discards.
const elideMin = 4096

func isZero(p []byte) bool {
	for len(p) > 0 {
		n := min(len(p), len(zeroPage))
		if !bytes.Equal(p[:n], zeroPage[:n]) {
			return false
		}
		p = p[n:]
	}
	return true
}

var zeroPage [64 << 10]byte

// dropQueued forgets member I/O that was queued but never run: a Layout
// that returns an error part way through planning (a second member found
// unreadable while the reads of a reconstruction were being queued) leaves
// it behind. Run must never issue it later, into buffers its caller has
// taken back (a pooled Op's next request ran a stale read into the buffer
// of the request after it: TestStaleQueuedReadDropped).
func (op *Op) dropQueued() {
	clear(op.batch)
	op.batch = op.batch[:0]
	op.rowMark = 0
}

// Run executes the queued member I/O in parallel and clears the queue. It
// returns the number of operations that failed; each failed member is
// recorded on the op and is no longer Readable or Writable in it.
func (op *Op) Run() int {
	n := len(op.batch)
	if n == 0 {
		return 0
	}
	if op.plan.on {
		// Planning a spliced read (splice.go): record, run nothing.
		op.plan.record(op.batch)
		op.dropQueued()
		return 0
	}
	for i := range op.batch {
		if op.batch[i].repair {
			// Read-error repairs run under shared stripe locks (a
			// client read, a scrub's check), so two of them may rewrite
			// the same bad bytes at once, with the same good data: a
			// scrub and a read that met the same failed copy (a data
			// race the model test found under -race). They are rare:
			// one batch of them at a time.
			op.a.repairMu.Lock()
			defer op.a.repairMu.Unlock()
			break
		}
	}
	if n > 1 {
		op.vectorize()
		if op.a.csum != nil {
			op.shareSums()
		}
	}
	if op.nextN > 0 {
		op.planAhead()
	}
	if n > 1 && op.v.inMemory {
		op.readSideBySide()
	}
	// Hand all but the last unmerged request to the workers; do that one
	// here. When enough requests already run at once to keep every core
	// busy, fanning out only adds hand-offs: then do them all here, and let
	// the concurrency come from the requests themselves. Not when the
	// batch reads a member that waits for its device (O_DIRECT): one after
	// another, a request's reads would wait for the disks in turn, and its
	// last read of a member would reach the member's read queue long after
	// the next request's first, adjacent one had gone, so that the two
	// could never merge (internal/member's readQueue).
	last := n - 1
	for op.batch[last].merged {
		last--
	}
	if op.a.active.Load() > op.a.inlineAbove && !op.readsDirect() {
		for i := 0; i <= last; i++ {
			if r := &op.batch[i]; !r.merged && !r.done {
				r.do()
			}
		}
		last = -1
	}
	// Writes to a member that goes through the page cache (a file opened
	// without O_DIRECT) are copies into memory that do not wait for a
	// device, and so are reads of a member held in memory (tmpfs, read
	// through its mapping): a worker would run them no sooner, and the
	// hand-off costs more than the copy's share of a request, so they run
	// here too, after the hand-offs (I/O to members whose devices work in
	// parallel).
	cheap := false
	for i := 0; i < last; i++ {
		r := &op.batch[i]
		if r.merged || r.done {
			continue
		}
		if r.cheap() {
			cheap = true
			continue
		}
		op.wg.Add(1)
		r.wg = &op.wg
		op.a.reqs <- r
	}
	if cheap {
		for i := 0; i < last; i++ {
			if r := &op.batch[i]; !r.merged && !r.done && r.cheap() {
				r.do()
			}
		}
	}
	if last >= 0 && !op.batch[last].done {
		op.batch[last].do()
	}
	op.wg.Wait()
	op.releaseSums()
	bad := 0
	for i := range op.batch {
		r := &op.batch[i]
		if r.merged {
			r.err = op.batch[r.head].err
		}
		kind := r.kind
		if r.err != nil && kind == ioDiscard && errors.Is(r.err, errors.ErrUnsupported) {
			r.err = op.writeZeroes(r.dev, r.off, r.n)
			kind = ioWrite
		}
		switch {
		case r.err != nil && r.repl:
			// The replacement failed: the replace is abandoned; the role's member is unaffected.
			if op.replFailed&(1<<uint(r.m)) == 0 {
				op.replFailed |= 1 << uint(r.m)
				op.a.replaceFailed(op.v, r.m, r.err)
			}
		case r.err != nil && r.kind == ioRead && !shortDevice(r.err):
			bad++
			if op.readErr&(1<<uint(r.m)) == 0 {
				op.readErr |= 1 << uint(r.m)
				if op.errs[r.m] == nil {
					op.errs[r.m] = &MemberError{Op: "read", Member: r.m, Offset: r.off - op.v.dataOff, Err: r.err}
				}
			}
		case r.err != nil:
			bad++
			op.fail(r.m, &MemberError{Op: ioNames[r.kind], Member: r.m, Offset: r.off - op.v.dataOff, Err: r.err})
		case r.repair && !r.repl:
			op.repaired |= 1 << uint(r.m)
			op.countRepair(r.m, r.n)
		}
		if r.err != nil && !r.merged { // a merged request shares its head's one system call
			op.countError(r.m, r.repl, kind)
		}
		if r.err == nil {
			op.account(r, kind)
		}
		r.p, r.dev, r.wg, r.err, r.repl, r.repair = nil, nil, nil, nil, false, false
		r.vec, r.merged, r.shared = nil, false, nil
		r.ahead, r.one[0], r.done = 0, nil, false
	}
	clear(op.iov)
	op.iov = op.iov[:0]
	if op.failed&op.repaired != 0 {
		op.repaired &^= op.failed
	}
	op.batch = op.batch[:0]
	op.rowMark = 0 // what a row queued before this Run has run
	return bad
}

// readsDirect reports whether the batch reads a member opened with
// O_DIRECT (see Run).
func (op *Op) readsDirect() bool {
	for i := range op.batch {
		if r := &op.batch[i]; r.kind == ioRead && !r.merged && direct(r.dev) {
			return true
		}
	}
	return false
}

// direct reports whether dev says that its I/O bypasses the page cache
// and waits for the device (Direct() true: a member opened with
// O_DIRECT); a checksummed member answers for its device.
func direct(dev Member) bool {
	x, ok := unwrapped(dev).(interface{ Direct() bool })
	return ok && x.Direct()
}

// inlineReadMax is the largest read that Array.ReadsInline lets the NBD
// request reader serve itself.
const inlineReadMax = 64 << 10

// readSideBySide serves the batch's plain reads of member files held in
// memory side by side, when there are two or more (the old data and parity
// of a read-modify-write, a reconstruct-write's other data chunks): their
// copies out of pages that are out of the cache then wait for memory
// together instead of in turn (member.ReadSideBySide). It marks them done;
// if they cannot all be served so, it leaves them all to Run. Reads
// larger than a chunk of the default size (sideBySideMax) are left to
// Run: the CPU's prefetcher streams such a read once its first page is
// in, and whole chunks of sequential reads come merged (vectorize).
func (op *Op) readSideBySide() {
	var reads [16]member.SideRead
	var at [len(reads)]int
	n := 0
	for i := range op.batch {
		r := &op.batch[i]
		if r.kind != ioRead || r.merged || r.vec != nil || r.ahead > 0 || r.repair || len(r.p) > sideBySideMax {
			continue
		}
		f, ok := r.dev.(*member.File)
		if !ok {
			continue
		}
		if n == len(reads) {
			break
		}
		reads[n], at[n] = member.SideRead{F: f, P: r.p, Off: r.off}, i
		n++
	}
	if n < 2 || !member.ReadSideBySide(reads[:n]) {
		return
	}
	for _, i := range at[:n] {
		op.batch[i].done = true
	}
}

// sideBySideMax is the largest read readSideBySide takes.
const sideBySideMax = 64 << 10

// cheap reports whether r is memory work that never waits for a device
// and is not worth a hand-off (see Run).
func (r *ioReq) cheap() bool {
	switch r.kind {
	case ioWrite:
		return buffered(r.dev)
	case ioRead:
		// Of any size: the member is read through its mapping, a copy
		// with no system call, and the request's own goroutine copies
		// no slower than a worker would. Handing the reads of a 1 MiB
		// read over 4 members to the workers, to copy side by side, cost
		// more CPU per byte than it saved (bench/README.md, "CPU per
		// byte"): the requests in flight already keep the cores busy.
		return inMemory(r.dev)
	}
	return false
}

// buffered reports whether dev says that its I/O goes through the page
// cache (Direct() false: a member file opened without O_DIRECT); a
// checksummed member answers for its device, as in direct. Members that
// do not say are taken to wait for a device.
func buffered(dev Member) bool {
	d, ok := unwrapped(dev).(interface{ Direct() bool })
	return ok && !d.Direct()
}

// shortDevice reports whether a member read error means the device ended
// inside its data region (io.EOF or io.ErrUnexpectedEOF: a file truncated
// behind the array's back). That is a member failure, never a sector to
// repair: a rewrite there would extend the file and leave holes below it
// that read as zeroes without any error.
func shortDevice(err error) bool {
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// vectorize merges queued reads (or writes) that lie back to back on the
// same member into one vectored request, so that, say, a 1 MiB RAID0 read
// over 64 KiB chunks costs one preadv per member instead of sixteen preads
// and fifteen hand-offs to workers.
func (op *Op) vectorize() {
	n := len(op.batch)
	if cap(op.iov) < n {
		op.iov = make([][]byte, 0, 2*n) // grows rarely; never reallocated mid-pass
	}
	for i := 0; i < n; i++ {
		r := &op.batch[i]
		if r.merged || (r.kind != ioRead && r.kind != ioWrite) || r.repl || r.repair {
			continue
		}
		if _, ok := r.dev.(vectorIO); !ok {
			continue
		}
		end := r.off + r.n
		start := len(op.iov)
		for j := i + 1; j < n; j++ {
			q := &op.batch[j]
			if q.merged || q.kind != r.kind || q.dev != r.dev || q.repl || q.repair || q.off != end {
				continue
			}
			if len(op.iov) == start {
				op.iov = append(op.iov, r.p)
			}
			op.iov = append(op.iov, q.p)
			q.merged, q.head = true, i
			end += q.n
		}
		if len(op.iov) > start {
			r.vec = op.iov[start:len(op.iov):len(op.iov)]
		}
	}
}

// cause is on whose behalf member I/O is done.
type cause uint8

const (
	causeOther   cause = iota // reads, syncs, checks: no member writes but repairs
	causeWrite                // client writes
	causeZero                 // client discards and write-zeroes
	causeRebuild              // rebuild and replace
	causeResync               // resync after an unclean shutdown
	causeScrub                // scrub (check and repair)
	numCauses
)

// byteCounters are the member bytes written and punched, by cause, and the
// bytes read-error repairs rewrote.
type byteCounters struct {
	written  [numCauses]atomic.Int64
	punched  [numCauses]atomic.Int64
	repaired atomic.Int64
}

// account counts a member request that succeeded; kind is what it turned
// into (a discard the member could not do is written as zeroes).
func (op *Op) account(r *ioReq, kind ioKind) {
	c := &op.a.member
	switch kind {
	case ioWrite:
		if r.repair {
			c.repaired.Add(r.n)
		} else {
			c.written[op.cause].Add(r.n)
		}
	case ioDiscard:
		c.punched[op.cause].Add(r.n)
	}
	if op.cause == causeRebuild || op.cause == causeResync || op.cause == causeScrub {
		if kind == ioRead || kind == ioWrite {
			i := r.m
			if r.repl {
				i += stripe.MaxMembers
			}
			op.moved[i] += r.n
		}
	}
}

// busiest returns the most bytes the op read or wrote on one device.
func (op *Op) busiest() int64 {
	most := int64(0)
	for _, n := range op.moved {
		most = max(most, n)
	}
	return most
}

// writeZeroes is the fallback for members that cannot discard.
func (op *Op) writeZeroes(dev Member, off, n int64) error {
	for n > 0 {
		k := min(n, int64(len(op.a.zero)))
		if _, err := dev.WriteAt(op.a.zero[:k], off); err != nil {
			return err
		}
		off += k
		n -= k
	}
	return nil
}

func (op *Op) fail(m int, err error) {
	if op.failed&(1<<uint(m)) == 0 {
		op.failed |= 1 << uint(m)
		if op.errs[m] == nil || op.readErr&(1<<uint(m)) == 0 {
			op.errs[m] = err
		}
	}
}

// settle turns read errors that the Layout did not repair into failures,
// and returns whether any member failed. Repaired members are logged.
// A checksum mismatch is never a failure: repaired it is counted and
// reported (checksum-repaired), unrepaired it is kept in csumLost.
func (op *Op) settle() bool {
	if op.readErr != 0 {
		for m := 0; m < op.geo.Members(); m++ {
			bit := uint64(1) << uint(m)
			if op.readErr&bit == 0 || op.failed&bit != 0 {
				continue
			}
			me, csum := mismatch(op.errs[m])
			switch {
			case op.repaired&bit != 0 && csum:
				op.a.csumRepaired(m, me)
			case op.repaired&bit != 0:
				op.a.event(Event{Kind: EventReadRepaired, Role: m, Detail: op.errs[m].Error()})
			case csum:
				// The member answered; one of its blocks is wrong. That
				// fails the request, never the member.
				op.csumLost |= bit
			default:
				op.fail(m, op.errs[m])
			}
		}
	}
	return op.failed != 0
}

// Failed reports whether member m failed during this op.
func (op *Op) Failed(m int) bool { return op.failed&(1<<uint(m)) != 0 }

// Fail records that member m must be treated as failed (for example, a
// Layout found it returns data it cannot trust).
func (op *Op) Fail(m int, err error) { op.fail(m, err) }

// csumErrors joins the checksum mismatches nobody repaired.
func (op *Op) csumErrors() error {
	var errs []error
	for m := 0; m < op.geo.Members(); m++ {
		if op.csumLost&(1<<uint(m)) != 0 {
			errs = append(errs, op.errs[m])
		}
	}
	return errors.Join(errs...)
}

// memberErrors joins the recorded member errors.
func (op *Op) memberErrors() error {
	var errs []error
	for m := 0; m < op.geo.Members(); m++ {
		if op.failed&(1<<uint(m)) != 0 {
			errs = append(errs, op.errs[m])
		}
	}
	return errors.Join(errs...)
}

func (op *Op) reset() {
	op.dropQueued()
	for _, b := range op.bufs {
		op.a.bufPool.Put(b)
	}
	op.bufs = op.bufs[:0]
	for m := 0; m < op.geo.Members(); m++ {
		op.errs[m] = nil
	}
	op.failed, op.touched, op.Zero, op.noElide, op.locked = 0, 0, false, false, false
	if op.cause == causeRebuild || op.cause == causeResync || op.cause == causeScrub {
		clear(op.moved[:])
	}
	op.repair, op.background = false, false
	clear(op.found)
	op.found = op.found[:0]
	op.cause = causeOther
	op.readErr, op.repaired, op.replFailed, op.csumLost = 0, 0, 0, 0
	op.salvage, op.lost, op.lostAt = false, op.lost[:0], op.lostAt[:0]
	if op.inRow {
		panic("raid: an Op ended between BeginRow and EndRow")
	}
	op.v, op.win = nil, nil
	op.nextOff, op.nextN = 0, 0
	op.plan.reset()
	for i := range op.Shards {
		op.Shards[i], op.Scratch[i] = nil, nil
	}
	clear(op.List)
	op.List = op.List[:0]
}
