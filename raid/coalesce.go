package raid

import (
	"slices"
	"sync"
	"time"
)

// Write coalescing for parity RAID. A partial-stripe write costs reads and
// a parity update; several partial writes to the same stripe cost that once
// each. Writes to one stripe that wait for its lock at the same time are
// therefore gathered: each enqueues itself before taking the lock, and the
// writer that gets the lock performs every queued write of that stripe,
// merging contiguous ones into one write (which, when they fill the stripe,
// becomes a full-stripe write with no reads at all). The others then find
// their write done when they get the lock, and return its result. Every
// write is acknowledged only after its data (and, for FUA, its durability)
// is where a lone write's would be.
//
// Sequential streams get one more chance (md's "plugging", bounded): when
// the leading write continues where a recent write ended, other writes are
// in flight, and the queue does not yet reach the end of the stripe, the
// leader waits up to gatherWait for the rest of the stream to arrive, so
// that the stripe goes out whole. Random writes never wait, and neither
// does a lone sequential writer (queue depth 1).

// gather is one write waiting for a stripe lock.
type gather struct {
	p      []byte
	off    int64
	stripe int64
	fua    bool
	done   bool // set by the leader, under the stripe lock
	err    error
}

const gatherSlots = 1024

type gatherQueue struct {
	mu     sync.Mutex
	q      []*gather
	notify chan struct{} // poked after each enqueue, for a waiting leader
}

// gatherWait bounds how long a leader waits for a sequential stream to
// fill its stripe.
const gatherWait = 500 * time.Microsecond

// recentEnds is how many recent write ends are kept to recognise streams.
const recentEnds = 16

// noteEnd records where a write ended; continues reports whether a write
// starting at off continues a recent one: one that ended at most a stripe
// width before it (requests of a stream arrive slightly out of order).
//
// An end goes to the slot of its stripe (its stripe number modulo
// recentEnds), not to the next slot in turn: a shared turn counter was an
// atomic add on one cache line for every write of every CPU, which moved
// that line between the CPUs of concurrent writers.
func (a *Array) noteEnd(end int64) {
	a.ends[uint64(end/a.geo.StripeWidth())%recentEnds].Store(end)
}

func (a *Array) continues(off int64) bool {
	return a.continuesWithin(off, a.geo.StripeWidth())
}

// continuesWithin reports whether a recent write ended at most window
// bytes before off. A slot no write has filled yet holds 0: on a fresh
// array, writes within window of the start count as a stream's.
func (a *Array) continuesWithin(off, window int64) bool {
	for i := range a.ends {
		if e := a.ends[i].Load(); e <= off && e > off-window {
			return true
		}
	}
	return false
}

var gatherPool = sync.Pool{New: func() any { return new(gather) }}

// coalescable reports whether a write of n bytes at off may be gathered.
func (a *Array) coalescable(off, n int64, first, last int64) bool {
	return a.coalesce && first == last && n < a.geo.StripeWidth()
}

// writeGathered performs a partial-stripe write through the gather queue.
// The caller has done the dirty and bitmap marking; it holds no lock.
func (a *Array) writeGathered(p []byte, off int64, stripe int64, fua bool) error {
	seq := off > 0 && a.continues(off)
	a.noteEnd(off + int64(len(p)))
	g := gatherPool.Get().(*gather)
	*g = gather{p: p, off: off, stripe: stripe, fua: fua}
	q := &a.gq[stripe%gatherSlots]
	q.mu.Lock()
	q.q = append(q.q, g)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}

	a.locks.Lock(stripe, stripe)
	defer a.locks.Unlock(stripe, stripe)
	if !g.done {
		if seq && a.inflight.Load() > 1 {
			a.awaitStripe(q, g)
		}
		a.lead(q, stripe)
	}
	err := g.err
	*g = gather{}
	gatherPool.Put(g)
	return err
}

// awaitStripe waits, up to gatherWait, until the queued writes of g's
// stripe reach contiguously from g to the end of the stripe. The caller
// holds the stripe lock, so writes arriving meanwhile queue up behind it.
func (a *Array) awaitStripe(q *gatherQueue, g *gather) {
	width := a.geo.StripeWidth()
	stripeEnd := (g.off/width + 1) * width
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		if a.queuedReach(q, g) >= stripeEnd {
			return
		}
		if t == nil {
			t = time.NewTimer(gatherWait)
		}
		select {
		case <-q.notify:
		case <-t.C:
			return
		}
	}
}

// queuedReach returns how far queued writes of g's stripe extend
// contiguously from g's start.
func (a *Array) queuedReach(q *gatherQueue, g *gather) int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	end := g.off + int64(len(g.p))
	for grew := true; grew; {
		grew = false
		for _, o := range q.q {
			if o.stripe == g.stripe && o.off <= end && o.off+int64(len(o.p)) > end {
				end, grew = o.off+int64(len(o.p)), true
			}
		}
	}
	return end
}

// lead takes every queued write of stripe and performs them. The caller
// holds the stripe lock.
func (a *Array) lead(q *gatherQueue, stripe int64) {
	op := a.getOp()
	defer a.putOp(op)
	op.locked, op.cause = true, causeWrite
	batch := op.gathered[:0]
	q.mu.Lock()
	kept := q.q[:0]
	for _, g := range q.q {
		if g.stripe == stripe {
			batch = append(batch, g)
		} else {
			kept = append(kept, g)
		}
	}
	clear(q.q[len(kept):])
	q.q = kept
	q.mu.Unlock()
	op.gathered = batch

	var err error
	if op.v.failed {
		err = ErrFailed
	} else {
		fua := false
		for _, g := range batch {
			fua = fua || g.fua
		}
		err = a.redoOnNewerView(op, func(op *Op) error {
			err := a.writeBatch(op, batch)
			if err == nil && fua {
				a.syncTouched(op)
			}
			return err
		})
	}
	err = a.finishWrite(op, err)
	for _, g := range batch {
		g.done, g.err = true, err
	}
	clear(op.gathered)
	op.gathered = op.gathered[:0]
}

// writeBatch writes a stripe's gathered writes: contiguous or overlapping
// ones are merged (later arrivals win where they overlap), the rest are
// written one by one.
func (a *Array) writeBatch(op *Op, batch []*gather) error {
	if len(batch) == 1 {
		return a.layout.WriteAt(op, batch[0].p, batch[0].off)
	}
	order := op.gatherOrder[:0]
	for i := range batch {
		order = append(order, i)
	}
	slices.SortStableFunc(order, func(x, y int) int {
		switch {
		case batch[x].off < batch[y].off:
			return -1
		case batch[x].off > batch[y].off:
			return 1
		}
		return 0
	})
	op.gatherOrder = order
	for i := 0; i < len(order); {
		lo := batch[order[i]].off
		hi := lo + int64(len(batch[order[i]].p))
		j := i + 1
		for j < len(order) && batch[order[j]].off <= hi {
			hi = max(hi, batch[order[j]].off+int64(len(batch[order[j]].p)))
			j++
		}
		if j == i+1 {
			if err := a.layout.WriteAt(op, batch[order[i]].p, lo); err != nil {
				return err
			}
		} else {
			buf := a.widthPool.Get().(*[]byte)
			run := (*buf)[:hi-lo]
			// Copy in arrival order so that later writes win overlaps.
			for _, g := range batch {
				if g.off >= lo && g.off < hi {
					copy(run[g.off-lo:], g.p)
				}
			}
			a.stats.coalesced.Add(int64(j - i - 1))
			err := a.layout.WriteAt(op, run, lo)
			a.widthPool.Put(buf)
			if err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}
