package raid

import "github.com/raidd/raidd/stripe"

// maxStatusRun bounds one BlockStatus answer, so that a caller walking a
// huge hole gets answers in reasonable time and lengths fit in 32 bits.
const maxStatusRun = 1 << 30

// BlockStatus reports the allocation of array bytes from off: the length of
// the run (at most n) that is either all data or all hole, and whether it is
// a hole, which reads as zeroes. A chunk is a hole when the member(s) that
// serve its reads hold no data there (for a parity level's chunk on a
// missing member: when no surviving member of its row does). Members that cannot
// tell holes from data count as data, so "zero" is only ever reported for
// bytes that really read as zero; bytes held in the stripe cache count as
// data. The answer may be stale by the time the
// caller acts on it if writes run concurrently, as with any file system.
func (a *Array) BlockStatus(off, n int64) (length int64, zero bool, err error) {
	if err := a.enter(); err != nil {
		return 0, false, err
	}
	defer a.leave()
	if err := a.checkRange(off, n, false); err != nil {
		return 0, false, err
	}
	if n == 0 {
		return 0, false, nil
	}
	v := a.view.Load()
	if v.failed {
		return 0, false, ErrFailed
	}
	chunk := a.geo.Chunk()
	n = min(n, maxStatusRun)
	piece := min(n, chunk-off%chunk)
	zero = a.zeroAt(v, off, piece)
	length = piece
	for length < n {
		piece = min(chunk, n-length)
		if a.zeroAt(v, off+length, piece) != zero {
			break
		}
		length += piece
	}
	return length, zero, nil
}

// zeroAt reports whether array bytes [off, off+l), inside one chunk, read
// as zeroes because every member serving them holds a hole there.
func (a *Array) zeroAt(v *View, off, l int64) bool {
	// Bytes in the stripe cache are data, whatever the members hold. The
	// cache is asked first: a cached stripe is dropped only after its
	// member writes returned, so if it is gone now the members have it.
	if c := a.cache; c != nil && c.cached(off, l, a.geo.StripeOf(off), a.geo.StripeOf(off+l-1)) {
		return false
	}
	var buf [1]stripe.Extent
	e := a.geo.Extents(buf[:0], off, l)[0]
	hole := func(m int, memOff int64) bool {
		d := v.devs[m]
		p, ok := d.(dataProber)
		return ok && !p.HasData(v.dataOff+memOff, l)
	}
	readable := func(m int) bool { return v.readable&(1<<uint(m)) != 0 }
	if a.geo.Mirrored() {
		var locs [stripe.MaxMembers]stripe.Loc
		for _, loc := range a.geo.Copies(locs[:0], e.Chunk, e.Off%a.geo.Chunk()) {
			if readable(loc.Member) {
				return hole(loc.Member, loc.Off) // copies are identical
			}
		}
		return false
	}
	if readable(e.Member) {
		return hole(e.Member, e.Off)
	}
	// The chunk is reconstructed from the rest of its row: it reads as
	// zeroes if every other member holds a hole there.
	for m := 0; m < a.geo.Members(); m++ {
		if m != e.Member && (!readable(m) || !hole(m, e.Off)) {
			return false
		}
	}
	return true
}
