package raid

import (
	"sync"

	"github.com/raidd/raidd/raid/internal/integrity"
	"github.com/raidd/raidd/stripe"
)

// Background jobs (scrub, rebuild, replace) work in windows of rows: the
// stripe locks of the whole window are taken once, each member the job
// reads is read for the whole window in one request (all members in
// parallel), and the Layout's per-row Check or Rebuild then finds its reads
// served from those buffers (Op.Read). A rebuild's or replace's writes to
// its targets are gathered the same way and written at the end of the
// window in one request per target. One chunk per member per request is
// what kept the scrub at a fraction of a disk's sequential rate: a disk
// that charges per operation, or that idles between two small requests,
// delivers its bandwidth only to large requests kept in flight, and the
// job's two workers keep one window's reads in flight while the other
// window is verified or written.

// windowBytes is how much of each member a window covers.
const windowBytes = 1 << 20

// maxWindowRows bounds a window of small chunks.
const maxWindowRows = 256

// windowRows returns how many rows a job window holds: 1 when a chunk is
// already windowBytes or more, so that the job works row by row.
func (a *Array) windowRows() int64 {
	return min(max(windowBytes/a.geo.Chunk(), 1), maxWindowRows)
}

// windowFor returns the rows of j's next window: windowRows, or fewer when
// the rate limit charge applied last allows less than 16 windows a second,
// so that a limited job still moves in even steps. Not smaller: under a
// client load a window's requests wait in the disks' queues behind the
// clients' (at 1000 IOPS and a client queue of 16, about 16 ms a request
// whatever its size), so small windows cannot keep up even with the
// rebuild_min_rate they are allowed. With 1/64 s of the limit per window
// (256 KiB at 16 MiB/s) a rebuild under random client I/O on bench/disks.sh
// reached 0.46-0.56 of rebuild_min_rate; with 1/16 s (1 MiB) 0.95-0.98, the
// clients' IOPS unchanged.
func (a *Array) windowFor(j *recovery) int64 {
	rows := a.windowRows()
	j.tmu.Lock()
	limit := j.limit
	j.tmu.Unlock()
	if limit > 0 {
		rows = min(rows, max(limit/16/a.geo.Chunk(), 1))
	}
	return rows
}

// window is one job worker's buffers; a worker reuses its window for each
// of its windows in turn. It is owned by one goroutine.
type window struct {
	chunk  int64
	lo, hi int64 // member rows held: data-region offsets [lo*chunk, hi*chunk)
	// dev and buf, by role: the device read for the window and what it
	// returned; a role whose read failed, or that was not read, has dev nil
	// and its rows are read row by row through the ordinary path (where a
	// failure is handled as in any request).
	dev []Member
	buf [][]byte
	// read is the set of roles the Layout read during the window (from the
	// buffers or not): the next window reads those, so that a mirror
	// rebuild reads one copy, not every copy.
	read uint64
	// raw is the set of roles whose buf holds the bytes of the device
	// under the checksum wrapper (loadRaw), which the window serves only
	// once a crash resync has arbitrated and sealed them (dev is nil until
	// then); sealed, the roles whose rows that resync sealed from buf.
	raw, sealed uint64
	// targets are the devices whose whole-row writes are held back and
	// written when the window ends (a rebuild's or replace's targets).
	targets []windowTarget
	// moved counts the bytes read or written per device during the
	// window (roles, then replacements), for the rate limiter.
	moved [2 * stripe.MaxMembers]int64
}

// windowTarget is one device whose writes a window gathers.
type windowTarget struct {
	m    int    // role
	dev  Member // the device written (the role's member, or its replacement)
	repl bool   // dev is the role's replacement (raidd replace)
	buf  []byte
	// state, by row of the window: what the window has for the row.
	state []rowState
}

type rowState uint8

const (
	rowUntouched rowState = iota // nothing gathered: written directly, if at all
	rowFilled                    // buf holds the row
	rowHole                      // the row is to read as zeroes
)

func newWindow(a *Array) *window {
	n := a.geo.Members()
	return &window{chunk: a.geo.Chunk(), dev: make([]Member, n), buf: make([][]byte, n)}
}

// reset empties w for the rows [lo, hi) and gathers writes to targets.
func (w *window) reset(lo, hi int64, targets []windowTarget) {
	w.lo, w.hi = lo, lo
	clear(w.dev)
	clear(w.moved[:])
	w.read, w.raw, w.sealed = 0, 0, 0
	rows := int(hi - lo)
	size := (hi - lo) * w.chunk
	for i := range targets {
		t := &w.targets
		if i < len(*t) {
			(*t)[i].m, (*t)[i].dev, (*t)[i].repl = targets[i].m, targets[i].dev, targets[i].repl
		} else {
			*t = append(*t, targets[i])
		}
		wt := &(*t)[i]
		if int64(cap(wt.buf)) < size {
			wt.buf = make([]byte, size)
		}
		wt.buf = wt.buf[:size]
		if cap(wt.state) < rows {
			wt.state = make([]rowState, rows)
		}
		wt.state = wt.state[:rows]
		clear(wt.state)
	}
	w.targets = w.targets[:len(targets)]
}

// load reads rows [lo, hi) of every role in roles, one request per role,
// all in parallel. A read that fails leaves its role out of the window:
// the Layout's own reads of it then go to the device and meet the error
// there, where it is handled (repaired or failed) as in any request.
func (w *window) load(a *Array, v *View, roles uint64, lo, hi int64) {
	w.loadFrom(a, v, roles, lo, hi, false)
}

// loadRaw is load from the devices under the roles' checksum wrappers:
// their blocks are not checked (nor, in the rows a crash left unsealed,
// resealed) on the way. The window holds them in buf for a crash resync,
// which checks them itself (arbitrateWindow), and serves them to the
// Layout only once it has (w.dev is set then).
func (w *window) loadRaw(a *Array, v *View, roles uint64, lo, hi int64) {
	w.loadFrom(a, v, roles, lo, hi, true)
}

func (w *window) loadFrom(a *Array, v *View, roles uint64, lo, hi int64, raw bool) {
	w.lo, w.hi = lo, hi
	if lo >= hi || roles == 0 {
		return
	}
	size := (hi - lo) * w.chunk
	reqs := make([]ioReq, 0, v.geo.Members())
	for m := range v.devs {
		if roles&(1<<uint(m)) == 0 || v.devs[m] == nil {
			continue
		}
		if int64(cap(w.buf[m])) < size {
			w.buf[m] = make([]byte, size)
		}
		w.buf[m] = w.buf[m][:size]
		dev := v.devs[m]
		if raw {
			dev = rawDev(dev)
		}
		reqs = append(reqs, ioReq{kind: ioRead, m: m, dev: dev, p: w.buf[m], off: v.dataOff + lo*w.chunk, n: size})
	}
	var wg sync.WaitGroup
	for i := range reqs[:max(len(reqs)-1, 0)] {
		wg.Add(1)
		reqs[i].wg = &wg
		a.reqs <- &reqs[i]
	}
	if len(reqs) > 0 {
		reqs[len(reqs)-1].do()
	}
	wg.Wait()
	for i := range reqs {
		r := &reqs[i]
		switch {
		case r.err != nil:
		case raw:
			w.raw |= 1 << uint(r.m)
			w.moved[r.m] += r.n
		default:
			w.dev[r.m] = r.dev
			w.moved[r.m] += r.n
		}
	}
}

// sealRaw reseals, on each role whose rows loadRaw read, the checksums of
// the blocks that fail them from the window's bytes (integrity.SealIn),
// and records the roles it sealed in w.sealed. It returns the roles left
// with no block failing its checksum (none marked lost).
func (w *window) sealRaw(v *View) (clean uint64) {
	for m := range v.devs {
		d, ok := v.devs[m].(*integrity.Dev)
		if !ok || w.raw&(1<<uint(m)) == 0 {
			continue
		}
		_, lost, err := d.SealIn(w.buf[m][:(w.hi-w.lo)*w.chunk], w.lo*w.chunk)
		if err != nil {
			continue // resealed from the device instead
		}
		w.sealed |= 1 << uint(m)
		if lost == 0 {
			clean |= 1 << uint(m)
		}
	}
	return clean
}

// sealedDev reports whether d, a checksum wrapper in v, is a role's
// member whose rows sealRaw sealed from the window's bytes.
func (w *window) sealedDev(v *View, d *integrity.Dev) bool {
	m := roleIn(v, d)
	return m >= 0 && w.sealed&(1<<uint(m)) != 0
}

// rawChunk returns role m's chunk of member row row as loadRaw read it,
// or nil when the window does not hold it.
func (w *window) rawChunk(m int, row int64) []byte {
	if w == nil || w.raw&(1<<uint(m)) == 0 || row < w.lo || row >= w.hi {
		return nil
	}
	return w.buf[m][(row-w.lo)*w.chunk:][:w.chunk]
}

// readFrom serves a read of len(p) bytes at data-region offset off of role
// m from the window, when the window holds it from the device the op
// reads. It reports whether it did.
func (w *window) readFrom(op *Op, m int, p []byte, off int64) bool {
	w.read |= 1 << uint(m)
	d := w.dev[m]
	if d == nil || d != op.v.devs[m] {
		return false
	}
	base := w.lo * w.chunk
	if off < base || off+int64(len(p)) > w.hi*w.chunk {
		return false
	}
	copy(p, w.buf[m][off-base:])
	return true
}

// target returns the gathered target for a write to role m's member
// (repl false) or its replacement (repl true) in the op's View, or nil.
func (w *window) target(op *Op, m int, repl bool) *windowTarget {
	for i := range w.targets {
		t := &w.targets[i]
		if t.m != m || t.repl != repl {
			continue
		}
		dev := op.v.devs[m]
		if repl {
			dev = op.v.repl[m]
		}
		if dev == t.dev {
			return t
		}
	}
	return nil
}

// rows returns the window rows [r0, r1) that [off, off+n) touches, and
// whether it covers them whole; ok is false when it leaves the window.
func (w *window) rows(off, n int64) (r0, r1 int64, whole, ok bool) {
	base, end := w.lo*w.chunk, w.hi*w.chunk
	if n <= 0 || off < base || off+n > end {
		return 0, 0, false, false
	}
	r0, r1 = (off-base)/w.chunk, (off+n-base+w.chunk-1)/w.chunk
	whole = (off-base)%w.chunk == 0 && n%w.chunk == 0
	return r0, r1, whole, true
}

// gatherWrite takes a write of p at data-region offset off into t when it
// can, keeping the order of every write to the device: whole rows are
// gathered; a partial row is gathered when the row already is (otherwise
// it is written directly, and a later gathered write of the row, written
// after it, supersedes it). It reports whether it took the write.
func (t *windowTarget) gatherWrite(w *window, p []byte, off int64) bool {
	r0, r1, whole, ok := w.rows(off, int64(len(p)))
	if !ok {
		return false
	}
	if !whole {
		for r := r0; r < r1; r++ {
			if t.state[r] == rowUntouched {
				return false
			}
		}
	}
	base := w.lo * w.chunk
	for r := r0; r < r1; r++ {
		if t.state[r] == rowHole {
			clear(t.buf[r*w.chunk : (r+1)*w.chunk])
		}
		t.state[r] = rowFilled
	}
	copy(t.buf[off-base:], p)
	return true
}

// gatherDiscard takes a discard of [off, off+n) into t, as gatherWrite
// takes writes.
func (t *windowTarget) gatherDiscard(w *window, off, n int64) bool {
	r0, r1, whole, ok := w.rows(off, n)
	if !ok {
		return false
	}
	if whole {
		for r := r0; r < r1; r++ {
			t.state[r] = rowHole
		}
		return true
	}
	for r := r0; r < r1; r++ {
		if t.state[r] == rowUntouched {
			return false
		}
	}
	base := w.lo * w.chunk
	clear(t.buf[off-base : off-base+n])
	return true
}

// invalidate forgets what the window read of role m's device dev when a
// write or discard of [off, off+n) reaches it: later reads of it go to
// the device.
func (w *window) invalidate(m int, dev Member, off, n int64) {
	if w.dev[m] == nil || w.dev[m] != dev {
		return
	}
	if off < w.hi*w.chunk && off+n > w.lo*w.chunk {
		w.dev[m] = nil
	}
}

// flush queues on op (which must not gather) the writes and discards the
// window gathered, one request per run of rows, and runs them. It reports
// false when a target that has rows gathered left the op's View (a replace
// turned into a rebuild, or the target failed): its rows are not written,
// so the window is not done.
func (w *window) flush(op *Op) bool {
	ok := true
	for i := range w.targets {
		t := &w.targets[i]
		if t.target(op) == nil {
			for _, s := range t.state {
				ok = ok && s == rowUntouched
			}
			continue
		}
		for r := 0; r < len(t.state); {
			s := t.state[r]
			e := r + 1
			for e < len(t.state) && t.state[e] == s {
				e++
			}
			off := (w.lo + int64(r)) * w.chunk
			n := int64(e-r) * w.chunk
			switch {
			case s == rowFilled && !t.repl:
				op.Write(t.m, t.buf[int64(r)*w.chunk:int64(e)*w.chunk], off)
			case s == rowFilled:
				op.batch = append(op.batch, ioReq{kind: ioWrite, m: t.m, dev: t.dev, p: t.buf[int64(r)*w.chunk : int64(e)*w.chunk], off: op.v.dataOff + off, n: n, repl: true})
			case s == rowHole && !t.repl:
				op.Discard(t.m, off, n)
			case s == rowHole:
				op.batch = append(op.batch, ioReq{kind: ioDiscard, m: t.m, dev: t.dev, off: op.v.dataOff + off, n: n, repl: true})
			}
			r = e
		}
	}
	op.Run()
	return ok
}

// target reports t itself when its device is still where it was in op's
// View, else nil.
func (t *windowTarget) target(op *Op) *windowTarget {
	dev := op.v.devs[t.m]
	if t.repl {
		dev = op.v.repl[t.m]
	}
	if dev != t.dev || (!t.repl && !op.Writable(t.m)) {
		return nil
	}
	return t
}

// addMoved adds what op moved to the window's count.
func (w *window) addMoved(op *Op) {
	for i, n := range op.moved {
		w.moved[i] += n
	}
}

// busiest returns the most bytes the window read or wrote on one device.
func (w *window) busiest() int64 {
	most := int64(0)
	for _, n := range w.moved {
		most = max(most, n)
	}
	return most
}

// lockRows takes what a background step over member rows [lo, hi) needs:
// the array open, and the rows' stripe locks (exclusive ones when write is
// set: the step writes, and the array is marked dirty first). It returns
// the function that releases them.
func (a *Array) lockRows(lo, hi int64, write bool) (func(), error) {
	if err := a.enter(); err != nil {
		return nil, err
	}
	first, _ := a.geo.RowStripes(lo)
	_, last := a.geo.RowStripes(hi - 1)
	if write {
		if err := a.beginWrite(); err != nil {
			a.leave()
			return nil, err
		}
		a.locks.Lock(first, last)
		return func() { a.locks.Unlock(first, last); a.endWrite(); a.leave() }, nil
	}
	a.locks.RLock(first, last)
	return func() { a.locks.RUnlock(first, last); a.leave() }, nil
}

// windowOp returns an Op for one row of a window (the stripe locks are
// held): its reads are served from w where w holds them.
func (a *Array) windowOp(w *window) *Op {
	op := a.getOp()
	op.locked, op.win = true, w
	return op
}

// endWindowOp records the member failures op ran into, adds what it moved
// to w's count and releases it.
func (a *Array) endWindowOp(w *window, op *Op) {
	if op.settle() {
		a.handleFailures(op)
	}
	w.addMoved(op)
	a.putOp(op)
}

// replWrite queues a write of p at data-region offset off of role m's
// replacement only (a replace's copy), gathered by the window if any.
func (op *Op) replWrite(m int, p []byte, off int64) {
	if op.win != nil {
		if t := op.win.target(op, m, true); t != nil && t.gatherWrite(op.win, p, off) {
			return
		}
	}
	op.batch = append(op.batch, ioReq{kind: ioWrite, m: m, dev: op.v.repl[m], p: p, off: op.v.dataOff + off, n: int64(len(p)), repl: true})
}

// replDiscard is replWrite for a discard of [off, off+n).
func (op *Op) replDiscard(m int, off, n int64) {
	if op.win != nil {
		if t := op.win.target(op, m, true); t != nil && t.gatherDiscard(op.win, off, n) {
			return
		}
	}
	op.batch = append(op.batch, ioReq{kind: ioDiscard, m: m, dev: op.v.repl[m], off: op.v.dataOff + off, n: n, repl: true})
}
