package raid

import (
	"context"
	"errors"
	"time"

	"github.com/raidd/raidd/raid/superblock"
)

// beginWrite marks the array dirty on disk before the first write after a
// clean state. See cleaner for the protocol that keeps this race-free
// without a lock on the fast path.
func (a *Array) beginWrite() error {
	a.inflight.Add(1)
	if a.dirty.Load() {
		return nil
	}
	a.lockConfig()
	defer a.unlockConfig()
	if a.view.Load().failed {
		// A failed array takes no writes: leave its state as it is.
		a.inflight.Add(-1)
		return ErrFailed
	}
	if !a.dirty.Load() {
		a.meta.State = superblock.StateDirty
		if err := a.commitLocked(); err != nil {
			a.inflight.Add(-1)
			return errors.Join(ErrFailed, err)
		}
		a.dirty.Store(true)
		a.log.Info("array dirty")
	}
	return nil
}

func (a *Array) endWrite() {
	a.lastWrite.Store(a.clock.Now().UnixNano())
	a.inflight.Add(-1)
}

// tryClean marks the array clean if no write is in flight: it syncs every
// member, then writes the clean state. A writer increments inflight before
// it loads dirty; tryClean stores dirty=false before it loads inflight. With
// sequentially consistent atomics, either tryClean sees the writer and backs
// off, or the writer sees dirty=false and takes the slow path, which waits
// for the configuration locks and marks the array dirty again before writing.
func (a *Array) tryClean() error {
	a.lockConfig()
	defer a.unlockConfig()
	if !a.dirty.Load() || a.resyncing.Load() || a.view.Load().failed {
		return nil // a failed array stays dirty: nobody knows what its stripes hold
	}
	a.dirty.Store(false)
	if a.inflight.Load() != 0 {
		a.dirty.Store(true)
		return nil
	}
	if err := a.syncMembersLocked(); err != nil {
		a.dirty.Store(true)
		return err
	}
	a.meta.State = superblock.StateClean
	if err := a.commitLocked(); err != nil {
		a.dirty.Store(true)
		return err
	}
	a.log.Info("array clean")
	return nil
}

// cleaner clears write-intent bitmap regions and marks the array clean
// after cleanDelay of quiet. A failed array is left alone: it takes no
// writes, and its bitmap and dirty state are what the next assembly needs.
// A failure to clean is logged once, not at every tick, until cleaning
// works again.
func (a *Array) cleaner(ctx context.Context) {
	var bitmapErr, cleanErr bool // the last attempt failed (and was logged)
	for {
		if a.clock.Sleep(ctx, a.cleanDelay/2) != nil {
			return
		}
		if a.view.Load().failed {
			continue
		}
		if a.clock.Now().Sub(time.Unix(0, a.lastWrite.Load())) < a.cleanDelay {
			continue
		}
		n, err := a.cleanBitmap()
		switch {
		case err != nil && !bitmapErr:
			a.log.Warn("cannot clean write-intent bitmap; retrying quietly", "err", err)
		case err != nil:
			a.log.Debug("cannot clean write-intent bitmap", "err", err)
		case bitmapErr:
			a.log.Info("write-intent bitmap cleaning works again")
		}
		bitmapErr = err != nil
		if n > 0 {
			a.log.Debug("write-intent bitmap regions cleaned", "regions", n)
		}
		if a.dirty.Load() {
			err := a.tryClean()
			switch {
			case err != nil && !cleanErr:
				a.log.Warn("cannot mark array clean; retrying quietly", "err", err)
			case err != nil:
				a.log.Debug("cannot mark array clean", "err", err)
			}
			cleanErr = err != nil
		}
	}
}
