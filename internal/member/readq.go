package member

import (
	"sync"
)

// readDepth is how many reads near other reads (see readQueue) a direct
// member on a rotational device keeps in flight before it queues the next
// ones. One: on bench/disks.sh's throttled disks, RAID6×4 sequential 1 MiB
// reads reached 0.86-0.87 of the ideal with 2 or 4 (too few reads waited
// to meet their neighbours) and 0.91-0.93 with 1, and random reads, which
// are not near, never wait. A disk that seeks gains more from one large
// read than from several reads in flight.
const readDepth = 1

// readDepthSolid is the same for a device that says it does not rotate
// (queue/rotational 0: SSD, NVMe), which gains from many reads in flight
// even within one sequential stream: holding its reads to one in flight
// would cut its parallelism. Its reads wait, and merge, only behind a
// backlog this deep, as the kernel's "none" scheduler leaves such devices
// their queue depth.
const readDepthSolid = 16

// maxPassed is how many runs led by younger reads the oldest waiting
// read lets go first, waiting for a neighbour to merge with.
const maxPassed = 8

// nextScan is how many of the oldest waiting reads next considers as
// leaders, which bounds its work when many reads wait.
const nextScan = 64

// readQueue merges reads of a direct member that are adjacent on the member
// and wait at the same time, as a block layer's queue merges requests while
// the device is busy. A RAID6×4 member's 2-row data runs cross the row
// boundaries where 1 MiB-aligned client requests end, so one client
// request's last chunk and the next one's first chunk are back to back on
// that member, in different calls; read apart, they cost that member a
// third disk operation per 256 KiB where the others pay two
// (bench/README.md, "disks.sh: RAID6 sequential reads").
//
// A read that lies within the member's merge limit (max) of another read
// in flight or waiting on the member, or of one of the last reads it
// completed, is near: part of a stream that may merge. A near read that
// finds its depth of reads in flight (readDepth, or readDepthSolid on a device that does not rotate), or reads already waiting, waits; every
// other read goes to the device at once, so an idle member never waits and
// reads far from any other (random reads) keep all the device's
// parallelism. When a read completes and reads are waiting, its place goes
// to the oldest waiting read that has a waiting neighbour on the member
// (the oldest of all once it has been passed over maxPassed times, or when
// none has), which takes with it every waiting read that extends its run
// on either side, up to max bytes and maxIovecs buffers, and issues one
// preadv straight into all their buffers: no bounce copy. If that preadv
// fails or comes up short, each read of the run is issued alone, so that an
// error reaches only the reads whose bytes it covers (the engine repairs
// read errors per request).
//
// A merged read reads each waiting caller's bytes while that caller's call
// is in progress, after it began: exactly what the caller's own read would
// have done, so no write that completed before a read began can be missed,
// and ordering against writes is as for any concurrent read.
type readQueue struct {
	mu      sync.Mutex
	busy    int           // reads in flight (merged runs count once)
	spans   []span        // the device ranges of the reads in flight
	waiting []*queuedRead // in arrival order
	recent  [8]span       // the last reads completed, for near
	nrecent uint
	// issued holds the last reads issued to the device, for overlaps:
	// a read-ahead of bytes another read just took is waste.
	issued  [16]span
	nissued uint
	max     int64 // the largest merged read, in bytes: the device's MaxIO
	depth   int   // readDepth or readDepthSolid
}

// span is a device range [off, end).
type span struct{ off, end int64 }

// queuedRead is one read waiting in a readQueue, or leading a merged run.
type queuedRead struct {
	bufs [][]byte
	off  int64
	n    int64
	// wake receives when the read's fate is decided: state says which.
	wake  chan struct{}
	state readState
	// passed counts the runs led by younger reads while this one waited.
	passed int
	// group, run and iov are a leader's: the reads of its run in device
	// order (gather), the run's device range, and scratch for their
	// buffers.
	group []*queuedRead
	run   span
	iov   [][]byte
}

type readState uint8

const (
	readWaiting readState = iota
	readLead              // it holds a place in flight: issue the run
	readDone              // a leader's preadv filled its buffers
	readAlone             // the run failed: issue the read alone
)

var queuedReadPool = sync.Pool{New: func() any {
	return &queuedRead{wake: make(chan struct{}, 1)}
}}

// near reports whether [off, end) lies within q.max bytes of a read in
// flight, waiting, or among the last len(q.recent) completed. q.mu is
// held.
func (q *readQueue) near(off, end int64) bool {
	gap := q.max
	for _, s := range q.spans {
		if off < s.end+gap && s.off < end+gap {
			return true
		}
	}
	for _, w := range q.waiting {
		if off < w.off+w.n+gap && w.off < end+gap {
			return true
		}
	}
	for _, s := range q.recent {
		if s.end > 0 && off < s.end+gap && s.off < end+gap {
			return true
		}
	}
	return false
}

// issue records s as a read in flight. q.mu is held.
func (q *readQueue) issue(s span) {
	q.spans = append(q.spans, s)
	q.issued[q.nissued%uint(len(q.issued))] = s
	q.nissued++
}

// overlaps reports whether [off, end) overlaps a read in flight, waiting,
// or among the last len(q.issued) issued: whether a read-ahead of it
// would read what another read has or will have read.
func (q *readQueue) overlaps(off, end int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range q.spans {
		if off < s.end && s.off < end {
			return true
		}
	}
	for _, w := range q.waiting {
		if off < w.off+w.n && w.off < end {
			return true
		}
	}
	for _, s := range q.issued {
		if off < s.end && s.off < end {
			return true
		}
	}
	return false
}

// dropSpan removes one in-flight span equal to s. q.mu is held.
func (q *readQueue) dropSpan(s span) {
	for i, t := range q.spans {
		if t == s {
			last := len(q.spans) - 1
			q.spans[i] = q.spans[last]
			q.spans = q.spans[:last]
			return
		}
	}
}

// unqueue removes and returns the i-th waiting read, keeping the order of
// the others and the slice's capacity. q.mu is held.
func (q *readQueue) unqueue(i int) *queuedRead {
	w := q.waiting[i]
	copy(q.waiting[i:], q.waiting[i+1:])
	q.waiting[len(q.waiting)-1] = nil
	q.waiting = q.waiting[:len(q.waiting)-1]
	return w
}

// release ends the read in flight over s: its place goes to the oldest
// waiting read, if any, with the run it leads.
func (q *readQueue) release(s span) {
	q.mu.Lock()
	q.dropSpan(s)
	q.recent[q.nrecent%uint(len(q.recent))] = s
	q.nrecent++
	if len(q.waiting) == 0 {
		q.busy--
		q.mu.Unlock()
		return
	}
	w := q.unqueue(q.next())
	q.gather(w)
	w.state = readLead
	q.mu.Unlock()
	w.wake <- struct{}{}
}

// next returns the index of the waiting read to lead the next run: the
// oldest that can merge with another waiting read, so that a read whose
// neighbour has not arrived yet keeps waiting for it while others can go,
// unless the oldest read has been passed over maxPassed times already
// (then the oldest). q.mu is held and a read is waiting.
func (q *readQueue) next() int {
	if q.waiting[0].passed < maxPassed {
		for i, w := range q.waiting[:min(len(q.waiting), nextScan)] {
			if q.mergeable(w) {
				for _, v := range q.waiting[:i] {
					v.passed++
				}
				return i
			}
		}
	}
	return 0
}

// mergeable reports whether another waiting read is adjacent to w on the
// member. q.mu is held.
func (q *readQueue) mergeable(w *queuedRead) bool {
	for _, v := range q.waiting {
		if v.off == w.off+w.n || v.off+v.n == w.off {
			return true
		}
	}
	return false
}

// gather makes r, just taken from the queue, the leader of a run: r and
// every waiting read that extends it on either side, up to q.max bytes
// and maxIovecs buffers, taken from the queue in device order into
// r.group, whose span it records as in flight. It runs in the critical
// section that takes r from the queue: a second place freed at the same
// time must not go to a read that this run takes. q.mu is held.
func (q *readQueue) gather(r *queuedRead) {
	run := span{r.off, r.off + r.n}
	r.group = append(r.group[:0], r)
	iovs := len(r.bufs)
	for grown := true; grown; {
		grown = false
		for i := 0; i < len(q.waiting); i++ {
			w := q.waiting[i]
			if run.end-run.off+w.n > q.max || iovs+len(w.bufs) > maxIovecs {
				continue
			}
			switch {
			case w.off == run.end:
				r.group = append(r.group, w)
				run.end += w.n
			case w.off+w.n == run.off:
				r.group = append(r.group, nil)
				copy(r.group[1:], r.group)
				r.group[0] = w
				run.off = w.off
			default:
				continue
			}
			iovs += len(w.bufs)
			q.unqueue(i)
			i--
			grown = true
		}
	}
	r.run = run
	q.issue(run)
}

// readQueued reads bufs from off with one preadv, through the member's
// read queue (see readQueue): the buffers and off are aligned for O_DIRECT
// and lie inside the member. It returns what vectored returns: the bytes
// read and the unwrapped error of the system call.
func (m *File) readQueued(bufs [][]byte, off int64) (int, error) {
	q := &m.rq
	n := total(bufs)
	s := span{off, off + n}
	q.mu.Lock()
	if n > q.max || (len(q.waiting) == 0 && q.busy < q.depth) || !q.near(s.off, s.end) {
		q.busy++
		q.issue(s)
		q.mu.Unlock()
		got, err := m.vectored(bufs, off, sysPreadv)
		q.release(s)
		return got, err
	}
	r := queuedReadPool.Get().(*queuedRead)
	r.bufs, r.off, r.n, r.state, r.passed = bufs, off, n, readWaiting, 0
	q.waiting = append(q.waiting, r)
	q.mu.Unlock()
	<-r.wake
	var got int
	var err error
	switch r.state {
	case readDone:
		got = int(n)
	case readAlone:
		got, err = m.vectored(bufs, off, sysPreadv)
	case readLead:
		got, err = m.leadRun(r)
	}
	r.bufs = nil
	queuedReadPool.Put(r)
	return got, err
}

// leadRun issues the run r leads (gathered when r was handed its place in
// flight) in one preadv, tells the other reads of the run how it went, and
// then releases the place.
func (m *File) leadRun(r *queuedRead) (int, error) {
	q := &m.rq
	run := r.run
	if len(r.group) == 1 {
		r.group[0] = nil
		got, err := m.vectored(r.bufs, r.off, sysPreadv)
		q.release(run)
		return got, err
	}
	r.iov = r.iov[:0]
	for _, w := range r.group {
		r.iov = append(r.iov, w.bufs...)
	}
	got, err := m.vectored(r.iov, run.off, sysPreadv)
	clear(r.iov)
	state := readDone
	if err != nil || int64(got) != run.end-run.off {
		state = readAlone
	}
	for _, w := range r.group {
		if w != r {
			w.state = state
			w.wake <- struct{}{}
		}
	}
	clear(r.group)
	r.group = r.group[:0]
	var n int
	if state == readDone {
		n, err = int(r.n), nil
	} else {
		n, err = m.vectored(r.bufs, r.off, sysPreadv)
	}
	q.release(run)
	return n, err
}
