package raid

import (
	"context"
	"fmt"
	"time"
)

// resync makes rows consistent after an unclean shutdown, in the
// background, taking each row's stripe locks in turn: the rows of the
// regions the write-intent bitmap marked, or every row without a bitmap.
func (a *Array) resync(ctx context.Context, rows [][2]int64, total int64) {
	start := time.Now()
	what := "no write-intent bitmap: every row"
	if a.bitmap != nil {
		per, regions := int64(1)<<a.bitmap.rowShift, int64(0)
		for _, r := range rows {
			regions += (r[1]+per-1)/per - r[0]/per
		}
		what = fmt.Sprintf("%d dirty bitmap regions", regions)
	}
	a.event(Event{Kind: EventResyncStarted, Role: -1, Detail: fmt.Sprintf("%d of %d rows (%s)", total, a.geo.Rows(), what)})
	j := &recovery{}
	j.lastOps = a.clientOps.Load()
	done := int64(0)
	win := newWindow(a)
	var learned uint64
	for _, r := range rows {
		for lo := r[0]; lo < r[1]; {
			if ctx.Err() != nil {
				a.log.Info("resync interrupted; it restarts at the next assembly", "row", lo)
				return
			}
			a.throttle(ctx, j)
			hi := min(lo+a.windowFor(j), r[1])
			moved, n, err := a.resyncWindow(win, &learned, lo, hi)
			a.charge(j, moved)
			done += n
			a.resyncRow.Store(done)
			if err != nil {
				a.log.Error("resync stopped", "row", lo+n, "err", err)
				return
			}
			lo = hi
		}
	}
	a.sealed()
	// The event is recorded before Status stops showing the resync, so
	// that a caller who waited for the resync to end finds it.
	a.event(Event{Kind: EventResyncFinished, Role: -1, Detail: fmt.Sprintf("%d rows in %s", done, time.Since(start).Round(time.Millisecond))})
	a.resyncing.Store(false)
}

// resyncPlan returns the row ranges [from, to) to resync.
func (a *Array) resyncPlan() [][2]int64 {
	rows := a.geo.Rows()
	if a.bitmap == nil {
		return [][2]int64{{0, rows}}
	}
	var out [][2]int64
	per := int64(1) << a.bitmap.rowShift
	for _, r := range a.bitmap.dirtyRegions() {
		lo, hi := r*per, min((r+1)*per, rows)
		if n := len(out); n > 0 && out[n-1][1] == lo {
			out[n-1][1] = hi
		} else {
			out = append(out, [2]int64{lo, hi})
		}
	}
	return out
}

// resyncWindow resyncs member rows [lo, hi) under their stripe locks, as a
// job window (window.go): each member the resync reads is read for the
// whole window in one request, all members in parallel, and each row's
// Resync finds its reads there. (Row by row, a resync read one chunk per
// member per request, which a disk that charges per operation serves at a
// fraction of its bandwidth.) After the first window only the members the
// Layout read are loaded (learned): a mirror's resync reads one copy. It
// returns the bytes moved on the busiest member, for the rate limiter, and
// how many rows it resynced.
func (a *Array) resyncWindow(win *window, learned *uint64, lo, hi int64) (moved, done int64, err error) {
	unlock, err := a.lockRows(lo, hi, true)
	if err != nil {
		return 0, 0, err
	}
	defer unlock()
	v := a.view.Load()
	if v.failed {
		return 0, 0, ErrFailed
	}
	win.reset(lo, hi, nil)
	if a.csum != nil {
		a.arbitrateWindow(win, v, lo, hi)
	} else if hi-lo > 1 {
		roles := *learned & v.readable
		if roles == 0 {
			roles = v.readable
		}
		win.load(a, v, roles, lo, hi)
	}
	for row := lo; row < hi; row++ {
		op := a.windowOp(win)
		err = a.resyncOne(op, row)
		a.endWindowOp(win, op)
		if err != nil {
			return win.busiest(), done, err
		}
		done++
	}
	*learned = win.read
	return win.busiest(), done, nil
}

// arbitrateWindow, for a crash resync of member rows [lo, hi) (whose
// stripe locks the caller holds) on an array with checksums, reads the
// rows of every readable role from under its checksum wrapper into w,
// one request per role, all in parallel (loadRaw); arbitrates there the
// blocks that fail their checksums (preferMatchingCopies,
// preferParityData), rewriting rot from a copy or the parity; and
// reseals from w's bytes what still fails, a torn write (SealIn). The
// window then serves the rows to the Layout's resync, except a role with
// a block still failing its checksum (a block a rebuild marked lost),
// whose reads go to the device and meet the mismatch there. Before, the
// arbitration and the reseal each read every chunk of every row from the
// devices on their own, one request at a time: on disks that charge per
// operation a resync with checksums ran at 3% of one without
// (bench/disks.sh CSUM=1).
func (a *Array) arbitrateWindow(w *window, v *View, lo, hi int64) {
	w.loadRaw(a, v, v.readable, lo, hi)
	a.preferMatchingCopies(v, w, lo, hi)
	a.preferParityData(v, w, lo, hi)
	a.markArbitrated(lo, hi)
	clean := w.sealRaw(v) // the roles sealRow skips; the others it reseals from the device
	for m := range v.devs {
		if clean&(1<<uint(m)) != 0 {
			w.dev[m] = v.devs[m]
		}
	}
}

// resyncOne resyncs one row on op, which holds the row's stripe locks.
func (a *Array) resyncOne(op *Op, row int64) error {
	if op.v.failed {
		return ErrFailed
	}
	op.cause, op.noElide = causeResync, true
	if err := a.sealRow(op, row); err != nil {
		return err
	}
	err := a.layout.Resync(op, row)
	if err != nil && a.csum != nil && a.geo.Mirrored() && op.lostOnly() {
		return a.salvageResync(row)
	}
	return err
}

// rowStep runs fn on one member row as background work, under the row's
// stripe locks: exclusive ones when write is set (work that writes, such as
// resync, rebuild or a scrub's repair), shared ones otherwise (a check that
// only reads). The member failures fn runs into are recorded before rowStep
// returns.
func (a *Array) rowStep(row int64, write bool, fn func(op *Op) error) error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	first, last := a.geo.RowStripes(row)
	if write {
		if err := a.beginWrite(); err != nil {
			return err
		}
		defer a.endWrite()
		a.locks.Lock(first, last)
		defer a.locks.Unlock(first, last)
	} else {
		a.locks.RLock(first, last)
		defer a.locks.RUnlock(first, last)
	}
	op := a.getOp()
	defer a.putOp(op)
	op.locked = true
	if op.v.failed {
		return ErrFailed
	}
	err := fn(op)
	if op.settle() {
		a.handleFailures(op)
	}
	return err
}
