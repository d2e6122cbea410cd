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
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
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
// for cfgMu and marks the array dirty again before writing.
func (a *Array) tryClean() error {
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	if !a.dirty.Load() || a.resyncing.Load() {
		return nil
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

func (a *Array) cleaner(ctx context.Context) {
	for {
		if a.clock.Sleep(ctx, a.cleanDelay/2) != nil {
			return
		}
		if a.clock.Now().Sub(time.Unix(0, a.lastWrite.Load())) < a.cleanDelay {
			continue
		}
		if n, err := a.cleanBitmap(); err != nil {
			a.log.Warn("cannot clean write-intent bitmap", "err", err)
		} else if n > 0 {
			a.log.Debug("write-intent bitmap regions cleaned", "regions", n)
		}
		if a.dirty.Load() {
			if err := a.tryClean(); err != nil {
				a.log.Warn("cannot mark array clean", "err", err)
			}
		}
	}
}
