package raid

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/raidd/raidd/raid/superblock"
)

// bitmap is the write-intent bitmap: one bit per region of member data
// offsets (64 MiB by default), stored in every member's header at
// superblock.BitmapOffset. A bit is set on disk, on every member, before
// any write to its region starts; it is cleared lazily, once every write to
// the region has completed and been synced. After an unclean shutdown only
// the rows of regions whose bit is set need a resync.
//
// The fast path of a write is two atomic adds and an atomic load. A writer
// increments the region's in-flight count before it loads the bit; the
// cleaner clears the bit before it loads the in-flight count and restores it
// if a writer is there. With sequentially consistent atomics one of them
// always sees the other, so a region is never clean on disk while a write
// to it is in flight.
type bitmap struct {
	region   int64 // member data bytes per bit
	rowShift uint  // log2(rows per region)
	n        int64 // regions
	bits     []atomic.Uint64
	inflight []atomic.Int32
	gen      []atomic.Uint32 // bumped by every write that starts
	mu       sync.Mutex      // serializes changes of the on-disk image
	image    []byte          // scratch for the on-disk image, guarded by mu
}

func newBitmap(region, chunk, memberSize int64) *bitmap {
	if region <= 0 {
		return nil
	}
	rowsPer := region / chunk
	if rowsPer < 1 {
		rowsPer = 1
		region = chunk
	}
	shift := uint(0)
	for int64(1)<<(shift+1) <= rowsPer {
		shift++
	}
	n := (memberSize + region - 1) / region
	b := &bitmap{region: region, rowShift: shift, n: n,
		bits: make([]atomic.Uint64, (n+63)/64), inflight: make([]atomic.Int32, n), gen: make([]atomic.Uint32, n)}
	size := (n + 7) / 8
	size = (size + 4095) &^ 4095
	b.image = make([]byte, size)
	return b
}

func (b *bitmap) isSet(r int64) bool { return b.bits[r/64].Load()&(1<<uint(r%64)) != 0 }
func (b *bitmap) set(r int64)        { b.bits[r/64].Or(1 << uint(r%64)) }
func (b *bitmap) clear(r int64)      { b.bits[r/64].And(^(uint64(1) << uint(r%64))) }

// regions converts a member row range into a region range.
func (b *bitmap) regions(firstRow, lastRow int64) (int64, int64) {
	return firstRow >> b.rowShift, lastRow >> b.rowShift
}

// load sets the in-memory bits from an on-disk image.
func (b *bitmap) load(img []byte) {
	for r := int64(0); r < b.n && r/8 < int64(len(img)); r++ {
		if img[r/8]&(1<<uint(r%8)) != 0 {
			b.set(r)
		}
	}
}

// dirtyRows calls fn for every region whose bit is set, with its rows.
func (b *bitmap) dirtyRegions() []int64 {
	var out []int64
	for r := int64(0); r < b.n; r++ {
		if b.isSet(r) {
			out = append(out, r)
		}
	}
	return out
}

// snapshot renders the bits as the on-disk image. Callers hold mu.
func (b *bitmap) snapshot() []byte {
	clear(b.image)
	for r := int64(0); r < b.n; r++ {
		if b.isSet(r) {
			b.image[r/8] |= 1 << uint(r%8)
		}
	}
	return b.image
}

// markWrite is called before a write to member rows [firstRow, lastRow]:
// it makes sure their bits are on disk, persisting them if needed.
func (a *Array) markWrite(firstRow, lastRow int64) error {
	b := a.bitmap
	if b == nil {
		return nil
	}
	r0, r1 := b.regions(firstRow, lastRow)
	need := false
	for r := r0; r <= r1; r++ {
		b.inflight[r].Add(1)
		b.gen[r].Add(1)
		if !b.isSet(r) {
			need = true
		}
	}
	if !need {
		return nil
	}
	b.mu.Lock()
	changed := false
	for r := r0; r <= r1; r++ {
		if !b.isSet(r) {
			b.set(r)
			changed = true
		}
	}
	var err error
	if changed {
		err = a.persistBitmap()
	}
	b.mu.Unlock()
	if err != nil {
		a.doneWrite(firstRow, lastRow)
	}
	return err
}

// doneWrite is called when a write marked by markWrite has completed.
func (a *Array) doneWrite(firstRow, lastRow int64) {
	b := a.bitmap
	if b == nil {
		return
	}
	r0, r1 := b.regions(firstRow, lastRow)
	for r := r0; r <= r1; r++ {
		b.inflight[r].Add(-1)
	}
}

// persistBitmap writes the bitmap image to every writable member and syncs
// it. Members that fail are marked failed; an error is returned only when
// no member took the image. Callers hold b.mu.
func (a *Array) persistBitmap() error {
	img := a.bitmap.snapshot()
	v := a.view.Load()
	var wg sync.WaitGroup
	errs := make([]error, 2*len(v.devs))
	ok := 0
	var mu sync.Mutex
	for m := range v.devs {
		for k, d := range []Member{v.devs[m], v.repl[m]} {
			if d == nil || v.writable&(1<<uint(m)) == 0 {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := d.WriteAt(img, superblock.BitmapOffset)
				if err == nil {
					err = syncWrites(d)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs[2*m+k] = &MemberError{Op: "bitmap", Member: m, Offset: -1, Err: err}
				} else {
					ok++
				}
			}()
		}
	}
	wg.Wait()
	err := errors.Join(errs...)
	if err != nil {
		a.log.Warn("write-intent bitmap update failed on a member", "err", err)
		if ok == 0 {
			return errors.Join(ErrFailed, err)
		}
		// A member that cannot take its bitmap is not trusted after a crash:
		// fail it now. (Lock order: b.mu, then the configuration locks; see
		// the package doc.)
		var mask uint64
		roleErrs := make([]error, len(v.devs))
		for m := range v.devs {
			if errs[2*m] != nil {
				mask |= 1 << uint(m)
				roleErrs[m] = errs[2*m]
			}
		}
		if mask != 0 {
			a.lockConfig()
			a.markFailedLocked(v, mask, roleErrs)
			a.unlockConfig()
		}
	}
	return nil
}

// cleanBitmap clears the bits of regions that had no write in flight and no
// new write since the members were synced. It returns how many it cleared.
//
// Nothing is cleared while a role is not in sync (a member failed, is
// missing or is being rebuilt) or a resync is pending: as in md, the bits
// then record every region the missing member has not seen, so that a
// re-add resyncs only those (and a resync still knows its rows).
func (a *Array) cleanBitmap() (int, error) {
	b := a.bitmap
	if b == nil || !a.bitmapMayClean() {
		return 0, nil
	}
	type cand struct {
		r   int64
		gen uint32
	}
	var cands []cand
	for r := int64(0); r < b.n; r++ {
		if b.isSet(r) && b.inflight[r].Load() == 0 {
			cands = append(cands, cand{r, b.gen[r].Load()})
		}
	}
	if len(cands) == 0 {
		return 0, nil
	}
	if err := a.Sync(); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !a.bitmapMayClean() { // a member failed meanwhile (perhaps in that Sync)
		return 0, nil
	}
	cleared := 0
	for _, c := range cands {
		if b.gen[c.r].Load() != c.gen {
			continue
		}
		b.clear(c.r)
		if b.inflight[c.r].Load() != 0 || b.gen[c.r].Load() != c.gen {
			b.set(c.r) // a writer arrived: it saw the bit set, keep it
			continue
		}
		cleared++
	}
	if cleared == 0 {
		return 0, nil
	}
	return cleared, a.persistBitmap()
}

// bitmapMayClean reports whether bitmap bits may be cleared: every role is
// in sync and no resync is pending.
func (a *Array) bitmapMayClean() bool {
	return !a.view.Load().Degraded() && !a.resyncing.Load()
}
