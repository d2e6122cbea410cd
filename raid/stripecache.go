package raid

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// The stripe cache of parity RAID (md's stripe cache). A partial-stripe
// write costs reads and a parity update; a stream whose requests do not
// line up with the stripe width pays that at both ends of every request.
// So the partial-stripe pieces of client writes that may belong to such a
// stream (a piece that begins or ends at a stripe boundary, continues a
// recent write that ended up to streamWindow stripe widths before it, or
// falls in a stripe already cached) are copied into a
// stripe-width buffer per stripe and acknowledged. Other pieces (a random
// write inside one stripe) are held too when the array keeps a write-hole
// log on members that are not held in memory (holdsRandom): written out
// side by side by the flusher, their log records share log writes.
// Otherwise they go to the members at once, since waiting would not save
// them anything. A cached stripe is written to the members when
//
//   - it is complete: one full-stripe write, no reads (inline, by the
//     write that completed it);
//   - its deadline passes (Options.StripeCacheDelay after the stripe was
//     first cached), or the cache is more than three quarters full (the
//     oldest go first): by the flusher, as the partial writes they are,
//     up to flushParallel at once, each as a background op (no client
//     waits for it; see Op.background);
//   - a FLUSH (Sync), a FUA write to the stripe, a TRIM or WRITE_ZEROES
//     overlapping it, or Close: before that call returns.
//
// Only FLUSH and FUA promise durability (NBD), so holding acknowledged
// writes in memory is allowed; a crash loses what is cached, never what a
// FLUSH or a FUA made durable.
//
// Invariants:
//   - An entry is changed, written out and removed only under its stripe's
//     lock; it is removed only after its member writes returned. A reader
//     that finds no entry for a stripe therefore finds its data on the
//     members; a reader that finds one takes the stripe's read lock and
//     copies the cached bytes over what the members returned.
//   - Every write that reaches the members (cached or not) is ordered
//     against the cached pieces of its stripe: a full-stripe write drops
//     the entry it supersedes; any other write merges into the entry or
//     writes it out first.
//   - Memory is bounded: at most limit/width buffers are ever allocated
//     (lazily, then reused). When none is free a partial write goes to the
//     members at once, as without a cache.
//   - A member failure while stripes are cached loses nothing: the data is
//     in memory, and is written around the failed member like any write.

// span is a byte range [lo, hi) within a stripe.
type span struct{ lo, hi int64 }

// centry is one cached stripe.
type centry struct {
	stripe     int64
	buf        []byte // stripe width; valid where runs say
	runs       []span // sorted, disjoint, not touching
	valid      int64  // bytes covered by runs
	born       time.Time
	prev, next *centry // age list, oldest first
	flushing   bool    // handed to a flusher goroutine (due), until removed or given back (undue)
}

func (e *centry) add(lo, hi int64) {
	i := 0
	for i < len(e.runs) && e.runs[i].hi < lo {
		i++
	}
	j := i
	for j < len(e.runs) && e.runs[j].lo <= hi { // overlaps or touches: merge
		lo, hi = min(lo, e.runs[j].lo), max(hi, e.runs[j].hi)
		j++
	}
	if i == j {
		e.runs = slices.Insert(e.runs, i, span{lo, hi})
	} else {
		e.runs[i] = span{lo, hi}
		e.runs = slices.Delete(e.runs, i+1, j)
	}
	e.valid = 0
	for _, r := range e.runs {
		e.valid += r.hi - r.lo
	}
}

type stripeCache struct {
	width int64
	delay time.Duration
	max   int // buffers at most

	mu         sync.Mutex
	entries    map[int64]*centry
	head, tail *centry
	free       []*centry // unused entries, each with its buffer
	allocated  int
	err        error // a write-out failed since the last Sync
	wake       chan struct{}
	busy       int // entries handed to flusher goroutines (flushing)

	// marks counts the entries of the stripes s with s % cacheMarks equal
	// to its index (see lookup).
	marks   [cacheMarks]atomic.Int32
	count   atomic.Int64 // entries, read without mu on the read path
	flushes atomic.Int64 // stripes written out
	full    atomic.Int64 // of which complete (full-stripe, no reads)
	bypass  atomic.Int64 // partial writes sent to the members because the cache was full
}

func newStripeCache(width, limit int64, delay time.Duration) *stripeCache {
	n := limit / width
	if n <= 0 {
		return nil
	}
	return &stripeCache{width: width, delay: delay, max: int(n), entries: map[int64]*centry{}, wake: make(chan struct{}, 1)}
}

// get returns the entry of stripe s, or nil. Callers hold mu.
func (c *stripeCache) get(s int64) *centry { return c.entries[s] }

// cacheMarks is the number of counters that tell lookup which stripes
// surely have no entry.
const cacheMarks = 4096

// lookup is get for a caller that holds stripe s's lock, without mu when
// s's counter in marks is zero: no stripe that shares it has an entry, so
// s has none, and none comes or goes meanwhile (put and remove run under
// the stripe's lock). Every write of a piece of a stripe looks the stripe
// up, and most random pieces find none (at most 341 entries of 192 KiB in
// 64 MiB, so most counters are zero): with mu taken for each lookup,
// writers on different CPUs moved its cache line between them, and slept
// on it (BenchmarkTmpfsRandomWrite4K).
func (c *stripeCache) lookup(s int64) *centry {
	if c.marks[uint64(s)%cacheMarks].Load() == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[s]
}

// put copies p into stripe s at in-stripe offset lo, creating the entry if
// needed. It returns the entry, or nil when a new entry was needed and no
// buffer is free. The caller holds the stripe lock.
func (c *stripeCache) put(s, lo int64, p []byte, now time.Time) *centry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[s]
	if e == nil {
		switch {
		case len(c.free) > 0:
			e = c.free[len(c.free)-1]
			c.free = c.free[:len(c.free)-1]
		case c.allocated < c.max:
			e = &centry{buf: make([]byte, c.width)}
			c.allocated++
		default:
			return nil
		}
		e.stripe, e.born = s, now
		e.prev = c.tail
		if c.tail != nil {
			c.tail.next = e
		} else {
			c.head = e
		}
		c.tail = e
		c.entries[s] = e
		c.marks[uint64(s)%cacheMarks].Add(1)
		if c.count.Add(1) == 1 {
			select {
			case c.wake <- struct{}{}:
			default:
			}
		}
	}
	copy(e.buf[lo:], p)
	e.add(lo, lo+int64(len(p)))
	return e
}

// remove drops the entry of stripe s, if any. The caller holds the stripe
// lock.
func (c *stripeCache) remove(s int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[s]
	if e == nil {
		return
	}
	delete(c.entries, s)
	c.marks[uint64(s)%cacheMarks].Add(-1)
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		c.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		c.tail = e.prev
	}
	if e.flushing {
		c.busy--
	}
	e.runs, e.valid, e.prev, e.next, e.flushing = e.runs[:0], 0, nil, nil, false
	c.free = append(c.free, e)
	c.count.Add(-1)
}

// cached reports whether bytes of [off, off+n) (stripes first..last) are
// in the cache.
func (c *stripeCache) cached(off, n, first, last int64) bool {
	if c.count.Load() == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	found := false
	c.each(first, last, func(e *centry) {
		base := e.stripe * c.width
		for _, r := range e.runs {
			if base+r.lo < off+n && base+r.hi > off {
				found = true
			}
		}
	})
	return found
}

// each calls fn for the entries of stripes first..last. Callers hold mu.
func (c *stripeCache) each(first, last int64, fn func(*centry)) {
	if last-first+1 <= int64(len(c.entries)) {
		for s := first; s <= last; s++ {
			if e := c.entries[s]; e != nil {
				fn(e)
			}
		}
		return
	}
	for s, e := range c.entries {
		if s >= first && s <= last {
			fn(e)
		}
	}
}

// stripes appends to dst the cached stripes among first..last, in
// ascending order.
func (c *stripeCache) stripes(dst []int64, first, last int64) []int64 {
	if c.count.Load() == 0 {
		return dst
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if last-first+1 <= int64(len(c.entries)) {
		for s := first; s <= last; s++ {
			if c.entries[s] != nil {
				dst = append(dst, s)
			}
		}
		return dst
	}
	n := len(dst)
	for s := range c.entries {
		if s >= first && s <= last {
			dst = append(dst, s)
		}
	}
	slices.Sort(dst[n:])
	return dst
}

// overlay copies the cached bytes of [off, off+len(p)) into p. The caller
// holds the read locks of the stripes.
func (c *stripeCache) overlay(p []byte, off, first, last int64) {
	if c.count.Load() == 0 {
		return
	}
	end := off + int64(len(p))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.each(first, last, func(e *centry) {
		base := e.stripe * c.width
		for _, r := range e.runs {
			lo, hi := max(base+r.lo, off), min(base+r.hi, end)
			if lo < hi {
				copy(p[lo-off:hi-off], e.buf[lo-base:hi-base])
			}
		}
	})
}

// due appends the stripes the flusher should write out now, so that at
// most limit are being written out at once, and marks them as handed out
// (a later due skips them until they are removed or undue gives them
// back): those past their deadline and, while more than three quarters of
// the buffers are in use by entries not already being written out, the
// oldest others.
func (c *stripeCache) due(dst []int64, now time.Time, limit int) []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	room := limit - c.busy
	over := len(c.entries) - c.busy - c.max*3/4
	for e := c.head; e != nil && room > 0; e = e.next {
		if e.flushing {
			continue
		}
		if now.Sub(e.born) < c.delay && over <= 0 {
			break
		}
		e.flushing = true
		c.busy++
		dst = append(dst, e.stripe)
		room--
		over--
	}
	return dst
}

// undue gives stripe s, handed out by due, back to later dues (its write-out
// could not start).
func (c *stripeCache) undue(s int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[s]; e != nil && e.flushing {
		e.flushing = false
		c.busy--
	}
}

// saturated reports whether at least half of the cache's buffers are in
// use: the members do not keep up with the writes the cache takes, so the
// flusher's write-outs keep the logs fed and a background op's log batch
// may wait for others (journal.gather). Below that the members keep up,
// and a write-out that waited for a batch would only hold its stripe lock
// (and the log's shared lock, which a FLUSH and a checkpoint wait for)
// the longer: on bench/disks.sh, a condition of 16 write-outs in
// flight fed itself under random reads and writes (each write-out waiting
// 40 ms kept 16 in flight), and a rebuild under that load ran at half its
// rebuild_min_rate, the client at 0.63 of its IOPS.
func (c *stripeCache) saturated() bool {
	return c != nil && c.count.Load() >= int64(c.max/2)
}

// setErr records a failed write-out for the next Sync.
func (c *stripeCache) setErr(err error) {
	c.mu.Lock()
	c.err = errors.Join(c.err, err)
	c.mu.Unlock()
}

// takeErr returns and clears the recorded write-out failures.
func (c *stripeCache) takeErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.err
	c.err = nil
	return err
}

// writeCached serves a data write through the stripe cache. The caller
// has done the dirty and bitmap marking of the whole range. Whole stripes
// go to the members at once (superseding what is cached of them); the
// partial ones are cached and written out when they are complete, or at
// once for FUA.
func (a *Array) writeCached(p []byte, off, first, last int64, fua bool) error {
	c := a.cache
	a.locks.Lock(first, last)
	defer a.locks.Unlock(first, last)
	op := a.getOp()
	defer a.putOp(op)
	op.locked, op.cause = true, causeWrite
	if op.v.failed {
		return ErrFailed
	}
	w := c.width
	end := off + int64(len(p))
	now := a.clock.Now()
	stream := off > 0 && a.continuesWithin(off, streamWindow*w)
	a.noteEnd(end)
	var err error
	for pos := off; pos < end && err == nil; {
		s := pos / w
		base := s * w
		if pos == base && end-pos >= w {
			// Whole stripes: write them, then drop the cached pieces they
			// supersede (not before: a reader that finds no entry must
			// find the newer data on the members).
			fullEnd := pos + (end-pos)/w*w
			err = a.layout.WriteAt(op, p[pos-off:fullEnd-off], pos)
			for t := s; t < fullEnd/w; t++ {
				c.remove(t)
			}
			pos = fullEnd
			continue
		}
		k := min(end, base+w) - pos
		piece := p[pos-off : pos-off+k]
		// A piece is cached when its stripe is cached already, or when it
		// may be part of a stream that will fill the stripe: it begins or
		// ends at a stripe boundary (the end of a request that crosses
		// one), or continues a recent write. Other pieces (random writes
		// inside a stripe) gain nothing from waiting and go out at once.
		e := c.lookup(s)
		want := e != nil || (!fua && (pos == base || pos+k == base+w || stream || a.holdsRandom()))
		if want {
			e = c.put(s, pos-base, piece, now)
		}
		switch {
		case e == nil:
			// Not worth caching, FUA, or no room: write it now.
			if want {
				c.bypass.Add(1)
			}
			// A random piece that found the cache full waits for the
			// flusher's write-outs anyway: its log record may wait with
			// theirs (journal.gather) rather than cut their gathering short.
			op.background = want && !fua && a.holdsRandom()
			err = a.layout.WriteAt(op, piece, pos)
			op.background = false
		case fua || e.valid == w:
			err = a.writeOut(op, s)
		}
		pos += k
	}
	if err == nil && fua {
		a.syncTouched(op)
	}
	return a.finishWrite(op, err)
}

// holdsRandom reports whether the stripe cache holds random partial-stripe
// pieces too (Options.RandomWriteBack; by default when the array keeps a
// write-hole log on members not held in memory).
//
// A random partial write sent to the members at once costs, with the
// write-hole log, a durable log write of its own on a disk (a write and a
// flush where the disk has no FUA) unless another row write's record is
// ready to share it, and that is rare: the client has only so many writes
// in flight, and each waits for its reads, its log write and its member
// writes before the next takes its place. Held in the cache, the write is
// acknowledged at once; the flusher writes it out by its deadline with up
// to flushParallel others, and their records share log writes. On
// bench/disks.sh (4 disks, random 4 KiB writes, 2 rounds) RAID5 went from
// 0.59 of the disks' ideal to 0.96 (policy bitmap: 0.99), RAID6 from 0.57
// to 0.95 (bitmap 1.00): about 27 records per log write, where it was 1.5.
// Members held in memory gain nothing (a log write there is a copy: see
// journal.writeNow), and without the log a random write has nothing to
// share, so it goes out at once as before.
func (a *Array) holdsRandom() bool {
	switch a.writeBack {
	case WriteBackOn:
		return true
	case WriteBackOff:
		return false
	}
	return a.journal != nil && !a.allInMemory()
}

// streamWindow is how many stripe widths before a write a recent write
// may have ended for the write to count as part of a stream, for the
// stripe cache. The requests in flight of a stream run side by side and
// reach the cache out of order: with 16 requests of 64 KiB in flight on a
// 3-chunk stripe, a stripe's middle piece often came before its first and
// before the previous stripe's last, found no recent end a stripe width
// before it, and went to the members as a partial write, which on a
// degraded array costs a write-hole log record (bench/checksums.sh
// FEATURE=ppl DEGRADED=1: 0.07 records per 64 KiB write). A random write
// that a wider window takes for a stream costs only a copy into the
// cache: it is written out by the deadline, as it would have been at
// once.
const streamWindow = 8

// writeOut writes the cached pieces of stripe s to the members and drops
// the entry. The caller holds the stripe lock and op is locked: the
// entry's pieces change only under that lock (put, remove), so they are
// read without mu.
//
// The entry is dropped even when the write-out fails, so it must not fail
// for a reason the array does not share: a write-out that fails on a View
// older than the array's is done again on a fresh op (redoOnNewerView).
func (a *Array) writeOut(op *Op, s int64) error {
	c := a.cache
	e := c.lookup(s)
	if e == nil {
		return nil
	}
	runs := e.runs
	err := a.redoOnNewerView(op, func(op *Op) error { return a.writeRuns(op, e) })
	c.flushes.Add(1)
	if len(runs) == 1 && runs[0].hi-runs[0].lo == c.width {
		c.full.Add(1)
	}
	c.remove(s)
	return err
}

// writeRuns writes e's cached pieces to the members on op.
func (a *Array) writeRuns(op *Op, e *centry) error {
	base := e.stripe * a.cache.width
	for _, r := range e.runs {
		if err := a.layout.WriteAt(op, e.buf[r.lo:r.hi], base+r.lo); err != nil {
			return err
		}
	}
	return nil
}

// writeOutLocked writes out the cached stripes among first..last. The
// caller holds their stripe locks.
func (a *Array) writeOutLocked(op *Op, first, last int64) error {
	if a.cache == nil {
		return nil
	}
	var stack [8]int64
	for _, s := range a.cache.stripes(stack[:0], first, last) {
		if err := a.writeOut(op, s); err != nil {
			return err
		}
	}
	return nil
}

// flushParallel bounds the stripes written out at once, by the flusher and
// by flushStripes (a Sync, Close). With random pieces held (holdsRandom)
// the flusher carries the array's whole random write load, and its row
// writes are what share the write-hole log's durable writes
// (journal.gather): the more of them run side by side, the fewer log
// writes each costs. A Sync's write-outs share them the same way.
const flushParallel = 128

// flushStripes writes out the given cached stripes, each under its own
// lock, as a write of its own (dirty marking, bitmap, failure handling),
// up to flushParallel at a time. The caller holds no stripe lock.
// Failures are returned, and recorded for the next Sync (flushStripe).
func (a *Array) flushStripes(stripes []int64) error {
	var (
		mu   sync.Mutex
		errs error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, flushParallel)
	)
	for _, s := range stripes {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := a.flushStripe(s, false); err != nil {
				mu.Lock()
				errs = errors.Join(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// flushStripe writes out cached stripe s as a write of its own. A failure
// is recorded for the next Sync before the stripe lock is let go, so that
// a Sync that waited for the lock, and then found the stripe written out,
// sees it.
func (a *Array) flushStripe(s int64, background bool) error {
	c := a.cache
	c.mu.Lock()
	e := c.get(s)
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	if err := a.beginWrite(); err != nil {
		a.locks.Lock(s, s)
		c.remove(s) // a failed array takes no writes
		c.setErr(err)
		a.locks.Unlock(s, s)
		return err
	}
	defer a.endWrite()
	if err := a.markWrite(s, s); err != nil {
		c.undue(s) // kept: retried by the flusher or the next Sync
		c.setErr(err)
		return err
	}
	defer a.doneWrite(s, s)
	a.locks.Lock(s, s)
	defer a.locks.Unlock(s, s)
	op := a.getOp()
	defer a.putOp(op)
	op.locked, op.cause, op.background = true, causeWrite, background
	if op.v.failed {
		c.remove(s)
		c.setErr(ErrFailed)
		return ErrFailed
	}
	err := a.finishWrite(op, a.writeOut(op, s))
	if err != nil {
		c.setErr(err)
	}
	return err
}

// flushCache writes out every stripe cached when it is called.
func (a *Array) flushCache() error {
	c := a.cache
	if c == nil || c.count.Load() == 0 {
		return nil
	}
	c.mu.Lock()
	all := make([]int64, 0, len(c.entries))
	for s := range c.entries {
		all = append(all, s)
	}
	c.mu.Unlock()
	slices.Sort(all)
	return a.flushStripes(all)
}

// cacheFlusher writes out stripes past their deadline, and the oldest
// while the cache is more than three quarters full, up to flushParallel
// at once: it does not wait for one batch to finish before it starts the
// next, so a slow row write (a read-modify-write on a disk) holds back no
// other. The write-outs run on goroutines it starts as they are needed
// (one more whenever none is idle, up to flushParallel) and keeps: a
// goroutine per stripe, as before, grew a fresh stack for every
// write-out, and on RAID5 random 4 KiB writes on tmpfs (where about one
// write in 16 is held, at a stripe boundary or near a recent end) its
// start and stack growth were 2% of raidd's CPU. It sleeps while the
// cache is empty, and before it returns its goroutines write out what it
// handed them.
func (a *Array) cacheFlusher(ctx context.Context) {
	c := a.cache
	var (
		due  []int64
		wg   sync.WaitGroup
		live int // write-out goroutines started
		// idle counts the goroutines done with their last stripe that no
		// stripe handed out since has claimed. Each stripe sent claims
		// one, or starts one, before it is sent: so every stripe in work
		// has a goroutine of its own, and none waits in the channel
		// behind another's write-out (one waiting for its log batch, or
		// for a slow member). Counting a goroutine idle only while it was
		// blocked in its receive let the flusher send a stripe to one
		// that had just taken another: the stripe then waited for that
		// write-out, and a write-out waiting for its log batch to fill
		// (journal.gather) waited for records that could not come.
		idle atomic.Int32
	)
	work := make(chan int64, flushParallel)
	defer func() {
		close(work)
		wg.Wait()
	}()
	claim := func() bool {
		for {
			n := idle.Load()
			if n == 0 {
				return false
			}
			if idle.CompareAndSwap(n, n-1) {
				return true
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		}
		for c.count.Load() > 0 {
			if a.clock.Sleep(ctx, max(c.delay/2, time.Millisecond/2)) != nil {
				return
			}
			due = c.due(due[:0], a.clock.Now(), flushParallel)
			for _, s := range due {
				if !claim() && live < flushParallel {
					live++
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next := range work {
							_ = a.flushStripe(next, true) // recorded for the next Sync
							idle.Add(1)
						}
					}()
				}
				work <- s
			}
		}
	}
}
