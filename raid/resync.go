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
	a.event(Event{Kind: EventResyncStarted, Role: -1, Detail: fmt.Sprintf("%d of %d rows (%d dirty bitmap regions)", total, a.geo.Rows(), len(rows))})
	j := &recovery{}
	j.lastOps = a.clientOps.Load()
	done := int64(0)
	for _, r := range rows {
		for row := r[0]; row < r[1]; row++ {
			if ctx.Err() != nil {
				a.log.Info("resync interrupted; it restarts at the next assembly", "row", row)
				return
			}
			a.throttle(ctx, j)
			moved, err := a.resyncRowStep(row)
			a.charge(j, moved)
			if err != nil {
				a.log.Error("resync stopped", "row", row, "err", err)
				return
			}
			done++
			a.resyncRow.Store(done)
		}
	}
	a.resyncing.Store(false)
	a.sealed()
	a.event(Event{Kind: EventResyncFinished, Role: -1, Detail: fmt.Sprintf("%d rows in %s", done, time.Since(start).Round(time.Millisecond))})
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

// resyncRowStep resyncs one row. It returns the bytes it read or wrote on
// its busiest member, for the rate limiter.
func (a *Array) resyncRowStep(row int64) (moved int64, err error) {
	err = a.rowStep(row, true, func(op *Op) error {
		op.cause, op.noElide = causeResync, true
		defer func() { moved = op.busiest() }()
		if err := a.sealRow(op, row); err != nil {
			return err
		}
		err := a.layout.Resync(op, row)
		if err != nil && a.csum != nil && a.geo.Mirrored() && op.lostOnly() {
			return a.salvageResync(row)
		}
		return err
	})
	return moved, err
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
