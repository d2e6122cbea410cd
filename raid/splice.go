package raid

import (
	"syscall"
	"unsafe"
)

// Reads sent from the members' files (splice).
//
// A large read of an array whose members are files in the page cache
// (tmpfs, or regular files opened without O_DIRECT) need not be copied by
// raidd at all. SpliceReadAt plans the read exactly as ReadAt does, through
// the Layout's ReadAt on an Op that records its member reads instead of
// running them, and hands the caller (the NBD server, nbd.Splicer) each
// member file range in the order of the read. The server moves those
// ranges into a pipe with splice(2), which takes references to the files'
// pages (holes become the kernel's zero page, nothing is allocated), and
// from the pipe into the socket, again by reference. The only copy left is
// the client's own receive. ReadAt makes two: member to buffer, buffer to
// socket (nbdkit's file plugin makes the same two: pread, then send).
//
// SpliceReadAt declines, before handing anything over, whenever the plan is
// not a set of plain reads of such files that tile the request exactly:
// an array with checksums (the bytes must be verified first), a range the
// stripe cache holds, a degraded read that must reconstruct (reads of a
// degraded array's surviving chunks are spliced), a
// member that is not a page-cache file (O_DIRECT, memory, a test double).
// The caller then serves the request with ReadAt. A range the caller
// cannot move whole (a read error, a file shorter than it should be) also
// ends in ReadAt, for the whole request, which meets the error and handles
// it as any read does (repairing from redundancy, failing the member).
//
// What a client may see: as with ReadAt, a healthy read takes no stripe
// lock. The pages are referenced rather than copied, so the bytes a client
// receives are those the pages hold when the client takes its reply off the
// socket, not when the server sent it. Only a write the client issued
// before it had its whole reply can change them: a request overlapping the
// read in flight, whose result the protocol leaves open. The engine never
// moves data between locations (no reshape): it rewrites a location's data
// only with the bytes a client wrote there (stripe cache write-outs, which
// a read of cached bytes never splices), or with the bytes it should hold
// (repairs, resync), so no reply can carry another block's data.

// spliceSource is implemented by members whose bytes the kernel can splice
// from a file descriptor (internal/member.File in the page cache).
type spliceSource interface {
	SpliceSource() (syscall.RawConn, bool)
}

// splicePiece is one member file range of a planned read.
type splicePiece struct {
	m   int             // the member's role
	dev Member          // the member
	src syscall.RawConn // a read's file (nil for a write)
	off int64           // file offset
	n   int64
	at  int64 // offset in the read
}

// splicePlan collects the member reads of an Op in planning mode (Run
// records them instead of running them).
type splicePlan struct {
	on    bool // the Op plans: Run records
	write bool // it plans a received write (receive.go), not a read
	ok    bool // every recorded request can be served so
	// touched: the members the recorded writes go to (Op.touched).
	touched uint64
	base    uintptr // address of the read's buffer
	size    int64
	pieces  []splicePiece
}

// record takes the batch of a planning Op. Every request must be a read of
// a page-cache file into the read's own buffer (a reconstruction's scratch
// buffer, a write, a replacement: the plan fails).
//
// Planning a received write (write set), every request must instead be a
// write, from the write's own buffer, to a member that can receive in
// place (receiver).
func (pl *splicePlan) record(batch []ioReq) {
	want := ioRead
	if pl.write {
		want = ioWrite
	}
	for i := range batch {
		r := &batch[i]
		if r.kind != want || r.repl || r.repair || r.ahead > 0 || len(r.p) == 0 {
			pl.ok = false
			return
		}
		var src syscall.RawConn
		ok := false
		if pl.write {
			_, ok = r.dev.(receiver)
		} else if s, is := r.dev.(spliceSource); is {
			src, ok = s.SpliceSource()
		}
		at := int64(uintptr(unsafe.Pointer(unsafe.SliceData(r.p))) - pl.base)
		if !ok || at < 0 || at+r.n > pl.size || int64(len(r.p)) != r.n {
			pl.ok = false
			return
		}
		pl.touched |= 1 << uint(r.m)
		pl.pieces = append(pl.pieces, splicePiece{m: r.m, dev: r.dev, src: src, off: r.off, n: r.n, at: at})
	}
}

// tiles sorts the pieces by their place in the read and merges those back
// to back in one file; it reports whether they cover the read exactly.
func (pl *splicePlan) tiles() bool {
	ps := pl.pieces
	// Layouts queue reads in the order of the read; sort the rare others
	// (insertion sort: a handful of pieces).
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].at < ps[j-1].at; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
	k, at := 0, int64(0)
	for _, p := range ps {
		if p.at != at {
			return false // a gap or an overlap
		}
		at += p.n
		if k > 0 && ps[k-1].dev == p.dev && ps[k-1].off+ps[k-1].n == p.off {
			ps[k-1].n += p.n
			continue
		}
		ps[k] = p
		k++
	}
	pl.pieces = ps[:k]
	return at == pl.size
}

func (pl *splicePlan) reset() {
	clear(pl.pieces)
	pl.pieces = pl.pieces[:0]
	pl.on, pl.write, pl.ok, pl.base, pl.size, pl.touched = false, false, false, 0, 0, 0
}

// SpliceReadAt serves a read of len(p) bytes at off by calling send for
// each member file range that holds them, in order (src the file, srcOff
// the offset in it, n bytes), instead of copying them into p. It returns
// true once every range was sent. It returns false if the read cannot be
// served that way, or if send returned an error; the caller then serves
// the request with ReadAt (any ranges sent so far are the caller's to
// discard). p is scratch: its content is neither read nor changed. See
// the comment at the top of this file.
func (a *Array) SpliceReadAt(p []byte, off int64, send func(src syscall.RawConn, srcOff int64, n int) error) bool {
	if len(p) == 0 || a.csum != nil {
		return false
	}
	if err := a.enter(); err != nil {
		return false
	}
	defer a.leave()
	if a.checkRange(off, int64(len(p)), false) != nil {
		return false
	}
	op := a.getOp()
	defer a.putOp(op)
	// A degraded array's reads are planned as a healthy one's: a read that
	// must reconstruct asks for the stripe locks (errNeedLock), and is
	// declined; reads of the surviving members' chunks are spliced.
	if op.v.failed {
		return false
	}
	if a.cache != nil {
		first, last := a.geo.StripeRange(off, int64(len(p)))
		if a.cache.cached(off, int64(len(p)), first, last) {
			return false
		}
	}
	pl := &op.plan
	pl.on, pl.ok = true, true
	pl.base, pl.size = uintptr(unsafe.Pointer(unsafe.SliceData(p))), int64(len(p))
	err := a.layout.ReadAt(op, p, off)
	pl.on = false
	if err != nil || !pl.ok || !pl.tiles() {
		return false
	}
	for _, pc := range pl.pieces {
		if send(pc.src, pc.off, int(pc.n)) != nil {
			return false
		}
	}
	a.clientOps.Add(1)
	a.stats.clientRead.Add(int64(len(p)))
	return true
}
