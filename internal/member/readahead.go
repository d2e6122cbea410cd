package member

import (
	"sync"
	"sync/atomic"
	"time"
)

// raSlots is how many read-ahead entries (reading or read) a member keeps.
const raSlots = 4

// raMax is the largest read-ahead, in bytes: a hint for more is cut to it.
const raMax = 1 << 20

// raTTL is how long a read-ahead that nobody reads is kept.
const raTTL = 200 * time.Millisecond

// raWasteLimit is how many read-aheads in a row may be dropped unread
// (a write came, they expired, or they were evicted) before the member
// ignores the next raBackoff hints: a stream that writes as it reads, or
// whose next requests are not the ones the hints foresaw, must not keep
// paying for bytes nobody reads.
const (
	raWasteLimit = 8
	raBackoff    = 256
)

// readAhead holds a direct member's read-ahead entries: bytes read in the
// same preadv as a caller's read, just after it on the member, because the
// engine said the caller's stream reads them next (File.ReadvAhead). The
// next read they cover is served from memory, once.
//
// Coherence is a sequence lock over every write of the member: the File
// counts the writes (data writes, vectored and RWF_DSYNC ones included,
// discards, trims, zeroing) that started (wstart) and ended (wend). An
// entry is started only when no write is in flight (wend equals wstart,
// read after it), and remembers wstart; it is kept once its read
// completed only if wstart has not moved, and a read is served from it
// only if wstart has still not moved when that read looks. So a write
// that started after the entry's read was issued, anywhere on the member,
// voids it, and one that started before had completed before the read was
// issued, which therefore saw it: a read never returns bytes older than a
// write that completed before the read began. The counters see only this
// File's writes: another descriptor of the same device writing behind the
// member's back is as unsupported as it is for the array above it.
type readAhead struct {
	mu sync.Mutex
	// live counts the entries present, so that reads skip the lookup when
	// there are none (every read of a member that is not streaming).
	live atomic.Int32
	ents [raSlots]*raEntry
	// missed counts the entries dropped unread since the last hit; skip
	// is how many hints are still to be ignored after too many.
	missed, skip          int
	noBackoff             bool        // a test's: never skip hints
	timer                 *time.Timer // drops entries nobody read (sweep)
	armed                 bool
	closed                bool
	issued, hits, dropped atomic.Int64
}

// raEntry is one read-ahead: device range [off, end), read into buf.
// Entries are not pooled: a reader waiting for one (done) holds it after
// it may have left the table.
type raEntry struct {
	off, end int64
	buf      *[]byte // a bounce buffer (getBounce), owned by whoever takes the entry out of the table
	seq      uint64  // wstart when the read was issued
	done     chan struct{}
	reading  bool  // the read is in flight: wait for done
	ok       bool  // the read filled buf and no write started since seq
	born     int64 // when the read completed (time.Now().UnixNano())
	iov      [][]byte
}

// ReadAheadStats counts a member's read-aheads: started, read by a later
// call, and dropped unread (a write voided them, they expired, were
// evicted, or their read failed).
type ReadAheadStats struct {
	Issued, Hits, Dropped int64
}

// ReadAhead returns the member's read-ahead counters (all zero but on a
// direct member given hints: ReadvAhead).
func (m *File) ReadAhead() ReadAheadStats {
	return ReadAheadStats{Issued: m.ra.issued.Load(), Hits: m.ra.hits.Load(), Dropped: m.ra.dropped.Load()}
}

// beginWrite and endWrite bracket every system call that changes a direct
// member's bytes (see readAhead). Other members never read ahead and
// count nothing.
func (m *File) beginWrite() {
	if m.direct {
		m.wstart.Add(1)
	}
}

func (m *File) endWrite() {
	if m.direct {
		m.wend.Add(1)
	}
}

// ReadvAhead is ReadvAt that may also read the ahead bytes that follow
// bufs on the member, in the same preadv, into the member's read-ahead,
// from which the next read of them is served without a system call. The
// caller says that its stream reads them next (the engine does, for a
// sequential client stream, when the member's next chunk holds the data
// the next request will ask of it; see the package documentation). The
// member reads ahead only in direct mode, for buffers aligned for it, when
// no write of the member is in flight, the range is not being read or
// waiting to be read, was not read lately and is not already read ahead,
// and a slot is free; otherwise, and when its earlier read-aheads went
// unread too often, it reads bufs alone as ReadvAt does. What it returns
// is ReadvAt's: the read-ahead's bytes never count, and its failure is
// nobody's (the next read of them goes to the device).
func (m *File) ReadvAhead(bufs [][]byte, off, ahead int64) (int, error) {
	want := total(bufs)
	if !m.direct || ahead <= 0 || m.closed.Load() || m.shrunk.Load() || off < 0 || off+want > m.size ||
		len(bufs) >= maxIovecs || !m.alignedVec(bufs, off) {
		return m.ReadvAt(bufs, off)
	}
	if n, ok := m.raServe(bufs, off, want); ok {
		return n, nil
	}
	end := off + want
	ahead = min(ahead, raMax, m.size-end) &^ (m.align - 1)
	var e *raEntry
	if ahead > 0 {
		e = m.raStart(end, ahead)
	}
	if e == nil {
		return m.readvDevice(bufs, off)
	}
	e.iov = append(append(e.iov[:0], bufs...), (*e.buf)[:ahead])
	n, err := m.readQueued(e.iov, off)
	clear(e.iov)
	m.raFinish(e, err == nil && int64(n) == want+ahead)
	if err != nil {
		return 0, m.wrap("preadv", err)
	}
	if int64(n) >= want {
		return int(want), nil
	}
	// Short: end of file below Size. The rest one by one reports it.
	k, err := readEach(m, skip(bufs, int64(n)), off+int64(n))
	return n + k, err
}

// raServe copies [off, off+want) into bufs from a read-ahead entry that
// covers it, waiting for the entry's read if it is in flight, and takes
// the entry out (it serves one read). It reports false, having copied
// nothing, when no valid entry covers the range.
func (m *File) raServe(bufs [][]byte, off, want int64) (int, bool) {
	ra := &m.ra
	if ra.live.Load() == 0 {
		return 0, false
	}
	ra.mu.Lock()
	i := ra.find(off, off+want)
	if i < 0 {
		ra.mu.Unlock()
		return 0, false
	}
	e := ra.ents[i]
	if e.reading {
		ra.mu.Unlock()
		<-e.done
		ra.mu.Lock()
		if i = ra.slot(e); i < 0 { // its read failed, or another read took it
			ra.mu.Unlock()
			return 0, false
		}
	}
	ra.take(i)
	if !e.ok || m.wstart.Load() != e.seq {
		ra.wasted(e)
		ra.mu.Unlock()
		return 0, false
	}
	ra.missed = 0
	ra.mu.Unlock()
	gather := (*e.buf)[off-e.off : off-e.off+want]
	for _, b := range bufs {
		gather = gather[copy(b, gather):]
	}
	putBounce(e.buf)
	ra.hits.Add(1)
	return int(want), true
}

// raStart registers a read-ahead of [off, off+n) that the caller is about
// to read, or returns nil when it must not (see ReadvAhead).
func (m *File) raStart(off, n int64) *raEntry {
	ra := &m.ra
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.closed {
		return nil
	}
	if ra.skip > 0 {
		ra.skip--
		return nil
	}
	seq := m.wstart.Load()
	if m.wend.Load() != seq {
		return nil // a write in flight: the read might miss its bytes
	}
	now := time.Now().UnixNano()
	free := -1
	for i, e := range ra.ents {
		switch {
		case e == nil:
		case !e.reading && (m.wstart.Load() != e.seq || now-e.born > int64(raTTL)):
			ra.take(i)
			ra.wasted(e)
		case e.off < off+n && off < e.end:
			return nil // already read ahead
		default:
			continue
		}
		if free < 0 {
			free = i
		}
	}
	if free < 0 { // evict the oldest entry read, none if all are reading
		for i, e := range ra.ents {
			if !e.reading && (free < 0 || e.born < ra.ents[free].born) {
				free = i
			}
		}
		if free < 0 {
			return nil
		}
		e := ra.ents[free]
		ra.take(free)
		ra.wasted(e)
	}
	if m.rq.overlaps(off, off+n) {
		return nil
	}
	e := &raEntry{off: off, end: off + n, seq: seq, done: make(chan struct{}), reading: true, buf: getBounce(int(n))}
	ra.ents[free] = e
	ra.live.Add(1)
	ra.issued.Add(1)
	return e
}

// raFinish records how the read of e went: the entry stays, for a later
// read, only if its read filled it and no write of the member started
// since the read was issued.
func (m *File) raFinish(e *raEntry, ok bool) {
	ra := &m.ra
	ra.mu.Lock()
	e.reading = false
	e.ok = ok && m.wstart.Load() == e.seq && !ra.closed
	e.born = time.Now().UnixNano()
	close(e.done)
	if !e.ok {
		if i := ra.slot(e); i >= 0 {
			ra.take(i)
			ra.wasted(e)
		}
	} else if !ra.armed {
		ra.armed = true
		if ra.timer == nil {
			ra.timer = time.AfterFunc(raTTL, m.raSweep)
		} else {
			ra.timer.Reset(raTTL)
		}
	}
	ra.mu.Unlock()
}

// raSweep drops the entries read more than raTTL ago, or voided by a
// write, so that a member whose stream stopped keeps no buffers.
func (m *File) raSweep() {
	ra := &m.ra
	ra.mu.Lock()
	defer ra.mu.Unlock()
	ra.armed = false
	now := time.Now().UnixNano()
	left := false
	for i, e := range ra.ents {
		switch {
		case e == nil || e.reading:
		case ra.closed || m.wstart.Load() != e.seq || now-e.born >= int64(raTTL):
			ra.take(i)
			ra.wasted(e)
		default:
			left = true
		}
	}
	if left {
		ra.armed = true
		ra.timer.Reset(raTTL)
	}
}

// raClose drops every entry read and stops starting new ones; entries
// still reading are dropped when their reads complete (raFinish).
func (m *File) raClose() {
	ra := &m.ra
	ra.mu.Lock()
	ra.closed = true
	if ra.timer != nil {
		ra.timer.Stop()
		ra.armed = false
	}
	ra.mu.Unlock()
	m.raSweep()
}

// find returns the slot of the entry that covers [off, end), or -1. ra.mu
// is held.
func (ra *readAhead) find(off, end int64) int {
	for i, e := range ra.ents {
		if e != nil && e.off <= off && end <= e.end {
			return i
		}
	}
	return -1
}

// slot returns the slot of e, or -1 once it left the table. ra.mu is held.
func (ra *readAhead) slot(e *raEntry) int {
	for i, x := range ra.ents {
		if x == e {
			return i
		}
	}
	return -1
}

// take removes the entry in slot i from the table: its buffer is the
// caller's from then on. ra.mu is held.
func (ra *readAhead) take(i int) {
	ra.ents[i] = nil
	ra.live.Add(-1)
}

// wasted returns the buffer of e, taken out of the table unread, and
// counts it; after raWasteLimit in a row the next raBackoff hints are
// ignored. ra.mu is held.
func (ra *readAhead) wasted(e *raEntry) {
	putBounce(e.buf)
	e.buf = nil
	ra.dropped.Add(1)
	if ra.missed++; ra.missed >= raWasteLimit && !ra.noBackoff {
		ra.missed, ra.skip = 0, raBackoff
	}
}
