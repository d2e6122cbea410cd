package integrity

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
)

// Member is the device a Dev wraps: the same method set as raid.Member.
type Member interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Discard(off, n int64) error
	Size() int64
	io.Closer
}

type vectorIO interface {
	ReadvAt(bufs [][]byte, off int64) (int, error)
	WritevAt(bufs [][]byte, off int64) (int, error)
}

// sumIO is implemented by devices whose writes may be copies into memory
// (member.File on tmpfs, member.Memory): they compute the CRC32C of each
// block in the copy's pass (crc32c.CopySums) and report summed, or write
// as WriteAt and WritevAt do and leave sums alone.
type sumIO interface {
	WriteAtSums(p []byte, off int64, sums []uint32) (int, bool, error)
	WritevAtSums(bufs [][]byte, off int64, sums []uint32) (int, bool, error)
	ReadAtSums(p []byte, off int64, sums []uint32) (int, bool, error)
	ReadvAtSums(bufs [][]byte, off int64, sums []uint32) (int, bool, error)
}

// Config places the data region and the checksum area on the device.
// Offsets are absolute device offsets.
type Config struct {
	DataOffset int64 // start of the data region
	DataSize   int64 // bytes of the data region
	AreaOffset int64 // start of the checksum area; it holds AreaSize(DataSize) bytes
	// CachePages bounds the checksum pages kept in memory (PageSize bytes
	// each). 0 means 1024 (4 MiB, the checksums of about 4 GiB of data).
	// Requests in flight may exceed it by the pages they touch.
	CachePages int
	// OnPageRebuilt, if set, is called (with internal locks held: it must
	// not call back into the Dev) when a checksum page fails its own
	// checksum: first and n give the data-region bytes it covers.
	OnPageRebuilt func(first, n int64)
}

// Stats are a Dev's counters since it was made.
type Stats struct {
	Mismatches   int64 // blocks that failed verification and were reported
	Resealed     int64 // blocks whose checksum was recomputed from their data after a crash
	PagesRebuilt int64 // checksum pages that failed their own checksum
	CachedPages  int64 // pages in memory now
	// Summed counts the data blocks whose CRC this Dev computed for writes
	// (blocks whose CRC another Dev computed for a Shared write are not
	// counted again).
	Summed int64
}

// granule is the number of blocks that share one lock; locks is the number
// of lock stripes.
const (
	granule = 16
	nlocks  = 64
)

type page struct {
	idx   int64
	buf   []byte
	dirty bool
	// ref is set by every use of the page and cleared by the eviction
	// scan, which gives a page used since it last passed a second chance
	// (CLOCK) instead of moving the page in the list on every use.
	ref        bool
	writing    int // flushes in progress that hold a copy of this page
	prev, next *page
}

// The cached pages are found through a two-level table indexed by page
// number: dir holds one chunk per chunkPages pages of the area, allocated
// while one of its pages is cached. It costs 8 bytes per chunkPages pages
// of the area (512 KiB for a 16 TiB member) and at most a chunk (512
// bytes) per cached page.
const (
	chunkShift = 6
	chunkPages = 1 << chunkShift
)

type pageChunk struct {
	pgs [chunkPages]*page
	n   int // pages set in pgs
}

// Dev wraps a member device: every data-region read is verified against
// the stored checksums, every write and discard updates them. Offsets
// outside the data region pass through untouched (superblock, bitmap).
// See the package documentation for the rules.
type Dev struct {
	inner            Member
	vec              vectorIO // nil if inner reads one buffer at a time
	sio              sumIO    // nil if inner's copies cannot sum
	dataOff, dataEnd int64
	areaOff          int64
	npages           int64
	maxPages         int
	onPage           func(first, n int64)

	locks [nlocks]sync.Mutex // by granule: writes, discards and re-verification

	flushMu sync.Mutex // orders page write-backs (taken before mu)
	mu      sync.Mutex // guards dir, npg, lru, nDirty and page contents
	dir     []*pageChunk
	npg     int  // pages cached
	lru     page // sentinel: lru.next is the most recently loaded or given a second chance
	nDirty  int

	unsealed atomic.Pointer[[][2]int64] // data ranges whose mismatches are resealed (after a crash)

	mismatches, resealed, rebuilt atomic.Int64
	summed                        atomic.Int64 // Stats.Summed
	cached                        atomic.Int64 // len(pages), for Stats without mu

	bufPool sync.Pool // *[]uint32: entries scratch
	blkPool sync.Pool // *[]byte: one block, for partial-block writes
}

// New wraps inner. It fails with ErrConfig if the areas do not fit inner
// or overlap.
func New(inner Member, c Config) (*Dev, error) {
	area := AreaSize(c.DataSize)
	switch {
	case c.DataOffset < 0 || c.DataSize <= 0 || c.AreaOffset < 0:
		return nil, fmt.Errorf("%w: negative offsets or empty data region", ErrConfig)
	case c.AreaOffset+area > c.DataOffset && c.AreaOffset < c.DataOffset+c.DataSize:
		return nil, fmt.Errorf("%w: checksum area [%d, %d) overlaps the data region at %d", ErrConfig, c.AreaOffset, c.AreaOffset+area, c.DataOffset)
	case c.DataOffset+c.DataSize > inner.Size() || c.AreaOffset+area > inner.Size():
		return nil, fmt.Errorf("%w: device of %d bytes is too small for data [%d, %d) and checksums at %d", ErrConfig, inner.Size(), c.DataOffset, c.DataOffset+c.DataSize, c.AreaOffset)
	}
	if c.CachePages <= 0 {
		c.CachePages = 1024
	}
	d := &Dev{
		inner: inner, dataOff: c.DataOffset, dataEnd: c.DataOffset + c.DataSize,
		areaOff: c.AreaOffset, npages: area / PageSize, maxPages: c.CachePages,
		onPage: c.OnPageRebuilt, dir: make([]*pageChunk, (area/PageSize+chunkPages-1)/chunkPages),
	}
	d.lru.next, d.lru.prev = &d.lru, &d.lru
	d.vec, _ = inner.(vectorIO)
	if s, ok := inner.(sumIO); ok && inMemory(inner) {
		d.sio = s
	}
	d.blkPool.New = func() any { b := make([]byte, BlockSize); return &b }
	return d, nil
}

// inMemory reports whether m says it is held in memory (its writes are
// copies, which can checksum as they go).
func inMemory(m Member) bool {
	im, ok := m.(interface{ InMemory() bool })
	return ok && im.InMemory()
}

// Inner returns the wrapped device.
func (d *Dev) Inner() Member { return d.inner }

// Size returns the wrapped device's size.
func (d *Dev) Size() int64 { return d.inner.Size() }

// CanDiscard forwards the wrapped device's answer (false if it has none).
func (d *Dev) CanDiscard() bool {
	z, ok := d.inner.(interface{ CanDiscard() bool })
	return ok && z.CanDiscard()
}

// HasData forwards the wrapped device's hole probe; without one it answers
// true (the range may hold data).
func (d *Dev) HasData(off, n int64) bool {
	p, ok := d.inner.(interface{ HasData(off, n int64) bool })
	return !ok || p.HasData(off, n)
}

// Stats returns the counters. It takes no lock, so it never waits for the
// device.
func (d *Dev) Stats() Stats {
	return Stats{Mismatches: d.mismatches.Load(), Resealed: d.resealed.Load(), PagesRebuilt: d.rebuilt.Load(), CachedPages: d.cached.Load(), Summed: d.summed.Load()}
}

// Unseal records data-region ranges [from, to) in which blocks may disagree
// with their checksums because writes were in flight at a crash: there a
// mismatch is resolved by recomputing the checksum from the data (which is
// what was written, or what was there before), not reported. Seal and
// SealAll end it.
func (d *Dev) Unseal(ranges [][2]int64) {
	r := slices.Clone(ranges)
	d.unsealed.Store(&r)
}

// SealAll ends every Unseal range (the resync has sealed them).
func (d *Dev) SealAll() { d.unsealed.Store(nil) }

func (d *Dev) isUnsealed(rel int64) bool {
	p := d.unsealed.Load()
	if p == nil {
		return false
	}
	for _, r := range *p {
		if rel >= r[0] && rel < r[1] {
			return true
		}
	}
	return false
}

// blockLen returns the length of block b (the last may be short).
func (d *Dev) blockLen(b int64) int64 {
	return min(BlockSize, d.dataEnd-d.dataOff-b*BlockSize)
}

// split calls inData for the part of [off, off+n) inside the data region
// and outside for the rest, in order.
func (d *Dev) split(off, n int64, inData, outside func(o, k int64) error) error {
	for n > 0 {
		var k int64
		var err error
		switch {
		case off < d.dataOff:
			k = min(n, d.dataOff-off)
			err = outside(off, k)
		case off < d.dataEnd:
			k = min(n, d.dataEnd-off)
			err = inData(off, k)
		default:
			k = n
			err = outside(off, k)
		}
		if err != nil {
			return err
		}
		off += k
		n -= k
	}
	return nil
}

// splitIO runs an I/O of p at off that is not wholly inside the data region
// as its parts: those inside through checked (this Dev's own method), the
// rest through raw (the wrapped device's).
func (d *Dev) splitIO(p []byte, off int64, checked, raw func([]byte, int64) (int, error)) (int, error) {
	part := func(io func([]byte, int64) (int, error)) func(o, k int64) error {
		return func(o, k int64) error {
			_, err := io(p[o-off:o-off+k], o)
			return err
		}
	}
	if err := d.split(off, int64(len(p)), part(checked), part(raw)); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (d *Dev) inData(off, n int64) bool { return off >= d.dataOff && off+n <= d.dataEnd }

// outside reports whether [off, off+n) lies wholly outside the data region
// (the header, the write-hole log, the checksum area): such I/O passes
// through untouched.
func (d *Dev) outside(off, n int64) bool { return off+n <= d.dataOff || off >= d.dataEnd }

// lockRange takes the granule locks of blocks [b0, b1] in ascending order
// and returns the mask to unlock.
func (d *Dev) lockRange(b0, b1 int64) uint64 {
	var mask uint64
	if b1-b0+1 >= granule*nlocks {
		mask = ^uint64(0)
	} else {
		for g := b0 / granule; g <= b1/granule; g++ {
			mask |= 1 << uint(g%nlocks)
		}
	}
	d.lockMask(mask)
	return mask
}

// lockEdges takes the granule locks of blocks b0 and b1 only (the partial
// blocks at the ends of an unaligned read, whose other bytes a concurrent
// write may be changing).
func (d *Dev) lockEdges(b0, b1 int64) uint64 {
	mask := uint64(1)<<uint((b0/granule)%nlocks) | uint64(1)<<uint((b1/granule)%nlocks)
	d.lockMask(mask)
	return mask
}

// lockMask takes the granule locks in mask, lowest first (the one order
// every caller uses); it visits only the set bits.
func (d *Dev) lockMask(mask uint64) {
	for m := mask; m != 0; m &= m - 1 {
		d.locks[bits.TrailingZeros64(m)].Lock()
	}
}

func (d *Dev) unlock(mask uint64) {
	for m := mask; m != 0; m &= m - 1 {
		d.locks[bits.TrailingZeros64(m)].Unlock()
	}
}

// ReadAt reads from the wrapped device and verifies every data block the
// read touches (a read that covers part of a block reads and verifies the
// whole block). A block that fails verification makes the read fail with a
// *MismatchError; p's contents are then undefined.
func (d *Dev) ReadAt(p []byte, off int64) (int, error) {
	if !d.inData(off, int64(len(p))) {
		return d.splitIO(p, off, d.ReadAt, d.inner.ReadAt)
	}
	rel := off - d.dataOff
	a0 := rel &^ (BlockSize - 1)
	a1 := min((rel+int64(len(p))+BlockSize-1)&^(BlockSize-1), d.dataEnd-d.dataOff)
	if a0 == rel && a1 == rel+int64(len(p)) && int64(len(p))%BlockSize == 0 && d.copySums(int64(len(p))/BlockSize) {
		return d.readSummed(p, nil, off, int64(len(p)))
	}
	if a0 == rel && a1 == rel+int64(len(p)) {
		// The caller may have widened its read to whole blocks (the raid
		// package does): a concurrent write may be changing the other
		// bytes of the edge blocks, as in ReadvAt.
		mask := d.lockEdges(a0/BlockSize, (a1-1)/BlockSize)
		_, err := d.inner.ReadAt(p, off)
		d.unlock(mask)
		if err != nil {
			return 0, err
		}
		if err := d.verify(p, a0); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	buf := make([]byte, a1-a0)
	mask := d.lockEdges(a0/BlockSize, (a1-1)/BlockSize)
	_, err := d.inner.ReadAt(buf, d.dataOff+a0)
	d.unlock(mask)
	if err != nil {
		return 0, err
	}
	if err := d.verify(buf, a0); err != nil {
		return 0, err
	}
	copy(p, buf[rel-a0:])
	return len(p), nil
}

// ReadvAt reads consecutive buffers starting at off and verifies them.
func (d *Dev) ReadvAt(bufs [][]byte, off int64) (int, error) {
	total := int64(0)
	aligned := off >= d.dataOff && (off-d.dataOff)%BlockSize == 0
	for _, b := range bufs {
		total += int64(len(b))
		if int64(len(b))%BlockSize != 0 {
			aligned = false
		}
	}
	if d.vec != nil && d.outside(off, total) {
		return d.vec.ReadvAt(bufs, off) // nothing to verify: one request, as without the Dev
	}
	if d.vec == nil || !aligned || !d.inData(off, total) {
		o := off
		for _, b := range bufs {
			if _, err := d.ReadAt(b, o); err != nil {
				return int(o - off), err
			}
			o += int64(len(b))
		}
		return int(total), nil
	}
	// The caller may have widened its read to whole blocks (the raid
	// package does, so that a bad block is repaired whole): a concurrent
	// write may be changing the other bytes of the edge blocks, as in
	// ReadAt.
	rel := off - d.dataOff
	if nb := total / BlockSize; d.copySums(nb) {
		return d.readSummed(nil, bufs, off, total)
	}
	mask := d.lockEdges(rel/BlockSize, (rel+total-1)/BlockSize)
	_, err := d.vec.ReadvAt(bufs, off)
	d.unlock(mask)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, b := range bufs {
		if err := d.verify(b, rel); err != nil {
			errs = append(errs, err)
		}
		rel += int64(len(b))
	}
	if len(errs) > 0 {
		return 0, errors.Join(errs...)
	}
	return int(total), nil
}

// readSummed serves ReadAt of p, or ReadvAt of bufs if p is nil (whole
// blocks of the data region, total bytes), through the wrapped device's
// summing copy: the copy computes the blocks' CRCs as it goes, and they
// are compared with the entries without another pass over the bytes. A
// buffer with a block that matches neither its entry nor, being zero, a
// hole's goes through verify, which checks it again under the locks.
func (d *Dev) readSummed(p []byte, bufs [][]byte, off, total int64) (int, error) {
	rel := off - d.dataOff
	b0, nb := rel/BlockSize, total/BlockSize
	sp := d.getEntries(2 * nb)
	defer d.putEntries(sp)
	sums, es := (*sp)[:nb], (*sp)[nb:]
	mask := d.lockEdges(b0, b0+nb-1)
	var summed bool
	var err error
	if p != nil {
		_, summed, err = d.sio.ReadAtSums(p, off, sums)
	} else {
		_, summed, err = d.sio.ReadvAtSums(bufs, off, sums)
	}
	d.unlock(mask)
	if err != nil {
		return 0, err
	}
	if summed {
		err = d.entries(b0, es)
	}
	if err != nil {
		return 0, err
	}
	if p != nil {
		if err := d.checkSummed(p, rel, sums, es, summed); err != nil {
			return 0, err
		}
		return int(total), nil
	}
	var errs []error
	k := int64(0)
	for _, b := range bufs {
		n := int64(len(b)) / BlockSize
		if err := d.checkSummed(b, rel+k*BlockSize, sums[k:k+n], es[k:k+n], summed); err != nil {
			errs = append(errs, err)
		}
		k += n
	}
	if len(errs) > 0 {
		return 0, errors.Join(errs...)
	}
	return int(total), nil
}

// checkSummed checks b, whole blocks read from data-region offset rel,
// whose CRCs the read's copy computed into sums (if summed), against
// their entries es: a block matches if its sum is its entry, or its entry
// is 0 (a hole) and it is zero. Unless every block matches, b goes
// through verify, which computes the CRCs itself and checks mismatches
// again under the locks.
func (d *Dev) checkSummed(b []byte, rel int64, sums, es []uint32, summed bool) error {
	ok := summed
	for j := 0; ok && j < len(sums); j++ {
		ok = sums[j] == es[j] || es[j] == 0 && isZero(b[j*BlockSize:(j+1)*BlockSize])
	}
	if ok {
		return nil
	}
	return d.verify(b, rel)
}

// entries fills es with the stored checksums of blocks [b0,
// b0+len(es)).
func (d *Dev) entries(b0 int64, es []uint32) error {
	d.mu.Lock()
	err := d.loadLocked(b0, es)
	flush := d.evictLocked()
	d.mu.Unlock()
	if flush {
		d.flushDirty()
	}
	return err
}

// loadLocked fills es with the entries of blocks [b0, b0+len(es)).
// Callers hold mu.
func (d *Dev) loadLocked(b0 int64, es []uint32) error {
	for k := 0; k < len(es); {
		pg, i, n, err := d.runLocked(b0+int64(k), len(es)-k)
		if err != nil {
			return err
		}
		for j := range n {
			es[k+j] = Entry(pg.buf, i+j)
		}
		k += n
	}
	return nil
}

// runLocked returns the page holding the entry of block b, the entry's
// index in it, and how many of the n entries from b's on the page holds.
// Callers hold mu.
func (d *Dev) runLocked(b int64, n int) (pg *page, i, run int, err error) {
	pg, err = d.pageLocked(b / PerPage)
	if err != nil {
		return nil, 0, 0, err
	}
	i = int(b % PerPage)
	return pg, i, min(n, PerPage-i), nil
}

// entry returns the stored checksum of block b.
func (d *Dev) entry(b int64) (uint32, error) {
	var e [1]uint32
	err := d.entries(b, e[:])
	return e[0], err
}

// smallEntries is the number of entries a request keeps on its stack
// (requests of up to 64 KiB); larger ones take a pooled slice.
const smallEntries = 16

// scratch returns n entries: small's if they fit, or a pooled slice, in
// which case ep is to be given back with putEntries.
func (d *Dev) scratch(small []uint32, n int64) (es []uint32, ep *[]uint32) {
	if n <= int64(len(small)) {
		return small[:n], nil
	}
	ep = d.getEntries(n)
	return *ep, ep
}

// putEntries gives back a pooled slice from getEntries or scratch (nil:
// none).
func (d *Dev) putEntries(ep *[]uint32) {
	if ep != nil {
		d.bufPool.Put(ep)
	}
}

// pageLocked returns page idx, loading it if needed, marked used. Callers
// hold mu.
func (d *Dev) pageLocked(idx int64) (*page, error) {
	if c := d.dir[idx>>chunkShift]; c != nil {
		if pg := c.pgs[idx&(chunkPages-1)]; pg != nil {
			if !pg.ref {
				pg.ref = true
			}
			return pg, nil
		}
	}
	pg := &page{idx: idx, buf: make([]byte, PageSize), ref: true}
	if _, err := d.inner.ReadAt(pg.buf, d.areaOff+idx*PageSize); err != nil {
		return nil, fmt.Errorf("integrity: read checksum page %d: %w", idx, err)
	}
	if !PageValid(idx, pg.buf) {
		// Never trusted as a whole: every entry is still compared with its
		// block before the block is returned, so a damaged entry shows as a
		// mismatch that is repaired from redundancy. The page gets a fresh
		// self-checksum when it is next written back.
		d.rebuilt.Add(1)
		pg.dirty = true
		d.nDirty++
		if d.onPage != nil {
			first := idx * PerPage * BlockSize
			d.onPage(first, min(PerPage*BlockSize, d.dataEnd-d.dataOff-first))
		}
	}
	c := d.dir[idx>>chunkShift]
	if c == nil {
		c = new(pageChunk)
		d.dir[idx>>chunkShift] = c
	}
	c.pgs[idx&(chunkPages-1)] = pg
	c.n++
	d.npg++
	d.cached.Store(int64(d.npg))
	pg.next, pg.prev = d.lru.next, &d.lru
	d.lru.next.prev = pg
	d.lru.next = pg
	return pg, nil
}

// evictLocked drops clean pages while the cache is over its bound,
// scanning from the list's tail (the page loaded or given its second
// chance longest ago): a page used since the scan last passed it (ref,
// also set when it is loaded) is
// given a second chance, moved to the head with ref cleared, where the
// same scan reaches it again last; the others are dropped unless dirty or
// being written. So it stops only with the cache within its bound or
// every page left dirty or being written, as a strict LRU would. It
// returns true when dirty pages keep it over the bound (the caller then
// flushes them, without mu).
func (d *Dev) evictLocked() bool {
	for pg := d.lru.prev; d.npg > d.maxPages && pg != &d.lru; {
		prev := pg.prev
		switch {
		case pg.ref:
			pg.ref = false
			pg.prev.next, pg.next.prev = pg.next, pg.prev
			pg.next, pg.prev = d.lru.next, &d.lru
			d.lru.next.prev = pg
			d.lru.next = pg
		case !pg.dirty && pg.writing == 0:
			pg.prev.next, pg.next.prev = pg.next, pg.prev
			d.dropLocked(pg.idx)
		}
		pg = prev
	}
	return d.npg > d.maxPages && d.nDirty > 0
}

// dropLocked removes page idx from the table. Callers hold mu.
func (d *Dev) dropLocked(idx int64) {
	c := d.dir[idx>>chunkShift]
	c.pgs[idx&(chunkPages-1)] = nil
	if c.n--; c.n == 0 {
		d.dir[idx>>chunkShift] = nil
	}
	d.npg--
	d.cached.Store(int64(d.npg))
}

// flushDirty writes every dirty page back (not synced).
func (d *Dev) flushDirty() error {
	d.flushMu.Lock()
	defer d.flushMu.Unlock()
	d.mu.Lock()
	if d.nDirty == 0 {
		d.mu.Unlock()
		return nil
	}
	type wb struct {
		pg  *page
		buf []byte
	}
	var out []wb
	for pg := d.lru.next; pg != &d.lru; pg = pg.next {
		if pg.dirty {
			SealPage(pg.idx, pg.buf)
			out = append(out, wb{pg, slices.Clone(pg.buf)})
			pg.dirty = false
			pg.writing++
		}
	}
	d.nDirty = 0
	d.mu.Unlock()
	slices.SortFunc(out, func(a, b wb) int { return int(a.pg.idx - b.pg.idx) })
	var errs []error
	for _, w := range out {
		if _, err := d.inner.WriteAt(w.buf, d.areaOff+w.pg.idx*PageSize); err != nil {
			errs = append(errs, fmt.Errorf("integrity: write checksum page %d: %w", w.pg.idx, err))
		}
	}
	d.mu.Lock()
	for _, w := range out {
		w.pg.writing--
	}
	if len(errs) > 0 {
		for _, w := range out { // written or not, they are not known to be on disk
			if !w.pg.dirty {
				w.pg.dirty = true
				d.nDirty++
			}
		}
	}
	d.evictLocked()
	d.mu.Unlock()
	return errors.Join(errs...)
}

// verify checks the blocks of buf, which holds data-region bytes from a0
// (block-aligned) on. A mismatch is checked again under the granule locks
// (a write may have been in flight): the block is read again into buf and
// compared with its entry as it is now.
func (d *Dev) verify(buf []byte, a0 int64) error {
	b0 := a0 / BlockSize
	n := (int64(len(buf)) + BlockSize - 1) / BlockSize
	var small [smallEntries]uint32
	es, ep := d.scratch(small[:], n)
	if err := d.entries(b0, es); err != nil {
		d.putEntries(ep)
		return err
	}
	var bad []int64
	for k := int64(0); k < n; k++ {
		blk := buf[k*BlockSize : min(int64(len(buf)), (k+1)*BlockSize)]
		if !Matches(blk, es[k]) {
			bad = append(bad, k)
		}
	}
	d.putEntries(ep)
	if len(bad) == 0 {
		return nil
	}
	var me *MismatchError
	for _, k := range bad {
		b := b0 + k
		blk := buf[k*BlockSize : min(int64(len(buf)), (k+1)*BlockSize)]
		mask := d.lockRange(b, b)
		ok, err := d.recheck(b, blk)
		d.unlock(mask)
		if err != nil {
			return err
		}
		if ok {
			continue
		}
		d.mismatches.Add(1)
		off := b * BlockSize
		if me == nil {
			me = &MismatchError{Offset: off}
		}
		me.Len = off + int64(len(blk)) - me.Offset
		me.Blocks++
	}
	if me != nil {
		return me
	}
	return nil
}

// recheck reads block b into blk again and compares it with its entry;
// in an unsealed range a mismatch is resealed. Callers hold b's granule lock.
func (d *Dev) recheck(b int64, blk []byte) (bool, error) {
	if _, err := d.inner.ReadAt(blk, d.dataOff+b*BlockSize); err != nil {
		return false, err
	}
	e, err := d.entry(b)
	if err != nil {
		return false, err
	}
	if Matches(blk, e) {
		return true, nil
	}
	if !d.isUnsealed(b*BlockSize) || !reseals(blk, e) {
		return false, nil
	}
	d.resealed.Add(1)
	return true, d.store(b, []uint32{Sum(blk)})
}

// store sets the entries of blocks [b0, b0+len(es)).
func (d *Dev) store(b0 int64, es []uint32) error {
	d.mu.Lock()
	err := d.storeLocked(b0, es)
	flush := d.evictLocked() || d.nDirty > d.maxPages/2
	d.mu.Unlock()
	if flush {
		if ferr := d.flushDirty(); err == nil {
			err = ferr
		}
	}
	return err
}

// storeLocked sets the entries of blocks [b0, b0+len(es)). Callers hold
// mu.
func (d *Dev) storeLocked(b0 int64, es []uint32) error {
	for k := 0; k < len(es); {
		pg, i, n, err := d.runLocked(b0+int64(k), len(es)-k)
		if err != nil {
			return err
		}
		for j := range n {
			if Entry(pg.buf, i+j) == es[k+j] {
				continue
			}
			setEntry(pg.buf, i+j, es[k+j])
			if !pg.dirty {
				pg.dirty = true
				d.nDirty++
			}
		}
		k += n
	}
	return nil
}

// edge computes the new entry of block b when [lo, hi) of it (block
// offsets) changes to src (nil: zeroes). It reads the old block; if that
// block does not match its entry the old entry is kept, so the damage in
// the bytes not rewritten stays detectable. Callers hold b's granule lock.
func (d *Dev) edge(b int64, lo, hi int64, src []byte) (uint32, error) {
	bp := d.blkPool.Get().(*[]byte)
	defer d.blkPool.Put(bp)
	blk := (*bp)[:d.blockLen(b)]
	if _, err := d.inner.ReadAt(blk, d.dataOff+b*BlockSize); err != nil {
		return 0, err
	}
	old, err := d.entry(b)
	if err != nil {
		return 0, err
	}
	if !Matches(blk, old) {
		if d.isUnsealed(b * BlockSize) {
			d.resealed.Add(1)
		} else {
			return old, nil
		}
	}
	if src == nil {
		clear(blk[lo:hi])
	} else {
		copy(blk[lo:hi], src)
	}
	return Sum(blk), nil
}

// getEntries returns a pooled slice of n entries; put it back with
// putEntries.
func (d *Dev) getEntries(n int64) *[]uint32 {
	ep, _ := d.bufPool.Get().(*[]uint32)
	if ep == nil {
		ep = new([]uint32)
	}
	if int64(cap(*ep)) < n {
		*ep = make([]uint32, n)
	}
	*ep = (*ep)[:n]
	return ep
}

// sums computes into es (one entry per block touched) the entries for
// writing p at data-region offset rel: whole blocks from p, partial blocks
// by reading them (edge).
func (d *Dev) sums(p []byte, rel, n int64, es []uint32) error {
	b0, b1 := rel/BlockSize, (rel+n-1)/BlockSize
	summed := int64(0)
	defer func() { d.summed.Add(summed) }()
	for b := b0; b <= b1; b++ {
		bs, be := b*BlockSize, b*BlockSize+d.blockLen(b)
		lo, hi := max(bs, rel), min(be, rel+n)
		if lo == bs && hi == be {
			if p == nil {
				es[b-b0] = 0
			} else {
				es[b-b0] = Sum(p[bs-rel : be-rel])
				summed++
			}
			continue
		}
		var src []byte
		if p != nil {
			src = p[lo-rel : hi-rel]
		}
		summed++
		e, err := d.edge(b, lo-bs, hi-bs, src)
		if err != nil {
			return err
		}
		es[b-b0] = e
	}
	return nil
}

// blocks returns the first and the number of blocks that data-region
// bytes [rel, rel+n) touch (n > 0).
func blocks(rel, n int64) (int64, int64) {
	b0 := rel / BlockSize
	return b0, (rel+n-1)/BlockSize - b0 + 1
}

// WriteAt writes p and stores the checksums of the blocks it touches. A
// write that covers part of a block reads the rest of the block first.
func (d *Dev) WriteAt(p []byte, off int64) (int, error) {
	if !d.inData(off, int64(len(p))) {
		return d.splitIO(p, off, d.WriteAt, d.inner.WriteAt)
	}
	if len(p) == 0 {
		return 0, nil
	}
	rel := off - d.dataOff
	n := int64(len(p))
	b0, nb := blocks(rel, n)
	if d.copySums(nb) && rel%BlockSize == 0 && n%BlockSize == 0 {
		ep := d.getEntries(nb)
		defer d.putEntries(ep)
		return d.writeSummed(p, nil, off, n, *ep)
	}
	mask := d.lockRange(b0, b0+nb-1)
	defer d.unlock(mask)
	var small [smallEntries]uint32
	es, ep := d.scratch(small[:], nb)
	defer d.putEntries(ep)
	if err := d.sums(p, rel, n, es); err != nil {
		return 0, err
	}
	if _, err := d.inner.WriteAt(p, off); err != nil {
		return 0, err
	}
	if err := d.store(b0, es); err != nil {
		return 0, err
	}
	return len(p), nil
}

// wholeBlocks reports whether bufs, written from off, cover only whole
// blocks of the data region, and returns their total length.
func (d *Dev) wholeBlocks(bufs [][]byte, off int64) (int64, bool) {
	total := int64(0)
	aligned := off >= d.dataOff && (off-d.dataOff)%BlockSize == 0
	for _, b := range bufs {
		total += int64(len(b))
		if int64(len(b))%BlockSize != 0 {
			aligned = false
		}
	}
	return total, aligned && d.inData(off, total) && total > 0
}

// WritevAt writes consecutive buffers starting at off.
func (d *Dev) WritevAt(bufs [][]byte, off int64) (int, error) {
	total, whole := d.wholeBlocks(bufs, off)
	if d.vec != nil && d.outside(off, total) {
		// Nothing to checksum (a write-hole log record): one request, as
		// without the Dev. Split into one write per buffer, a record of
		// three buffers cost three member writes, each under the log's
		// lock, and RAID5 random 4K writes on throttled disks ran at 40%
		// of their speed without checksums.
		return d.vec.WritevAt(bufs, off)
	}
	if d.vec == nil || !whole {
		return d.writeEach(bufs, off)
	}
	if nb := total / BlockSize; d.copySums(nb) {
		ep := d.getEntries(nb) // not the stack: the entries reach the device
		defer d.putEntries(ep)
		return d.writeSummed(nil, bufs, off, total, *ep)
	}
	var small [smallEntries]uint32
	es, ep := d.scratch(small[:], total/BlockSize)
	defer d.putEntries(ep)
	k := 0
	for _, b := range bufs {
		for i := 0; i < len(b); i += BlockSize {
			es[k] = Sum(b[i : i+BlockSize])
			k++
		}
	}
	d.summed.Add(int64(k))
	return d.writeBlocks(bufs, off, total, es, nil)
}

// dsyncWriter is implemented by members that make one vectored write
// durable by itself (member.File: pwritev2 with RWF_DSYNC).
type dsyncWriter interface {
	WritevAtDSync(bufs [][]byte, off int64) (int, error)
}

// WritevAtDSync is WritevAt that returns once the bytes are durable. Outside
// the data region (a write-hole log record) it passes through to a wrapped
// device that can do it; otherwise it is WritevAt followed by SyncData.
func (d *Dev) WritevAtDSync(bufs [][]byte, off int64) (int, error) {
	total, _ := d.wholeBlocks(bufs, off)
	if w, ok := d.inner.(dsyncWriter); ok && d.outside(off, total) {
		return w.WritevAtDSync(bufs, off)
	}
	n, err := d.WritevAt(bufs, off)
	if err == nil {
		err = d.SyncData()
	}
	return n, err
}

// writeEach writes the buffers one at a time through WriteAt.
func (d *Dev) writeEach(bufs [][]byte, off int64) (int, error) {
	o := off
	for _, b := range bufs {
		if _, err := d.WriteAt(b, o); err != nil {
			return int(o - off), err
		}
		o += int64(len(b))
	}
	return int(o - off), nil
}

// copySums reports whether a request of nb whole blocks goes through the
// wrapped device's summing copy (writeSummed, readSummed): it can, and the
// request has at least copySumsMin blocks. Smaller ones keep their entries
// on the stack (entries handed to the device through an interface would
// escape to the heap, so the summing paths take pooled ones), and their
// CRCs cost little as a separate pass: the bytes are still in the
// first-level cache.
func (d *Dev) copySums(nb int64) bool { return d.sio != nil && nb >= copySumsMin }

// copySumsMin is the fewest blocks a request needs to go through the
// summing copy: 32 KiB, half a 64 KiB chunk.
const copySumsMin = 8

// writeSummed writes p, or bufs if p is nil (whole blocks of the data
// region, total bytes) at off through the wrapped device's summing copy, which computes their
// checksums into es (len(es) = total/BlockSize) in the same pass, and
// stores them. If the device wrote another way (summed false), or failed,
// es is computed from bufs: es is valid on return either way (a Shared's
// other writers use it).
func (d *Dev) writeSummed(p []byte, bufs [][]byte, off, total int64, es []uint32) (int, error) {
	rel := off - d.dataOff
	b0 := rel / BlockSize
	mask := d.lockRange(b0, (rel+total-1)/BlockSize)
	defer d.unlock(mask)
	var summed bool
	var err error
	if p != nil {
		_, summed, err = d.sio.WriteAtSums(p, off, es)
	} else {
		_, summed, err = d.sio.WritevAtSums(bufs, off, es)
	}
	if err != nil || !summed {
		if p != nil {
			sumBlocks(p, es)
		} else {
			k := 0
			for _, b := range bufs {
				sumBlocks(b, es[k:])
				k += len(b) / BlockSize
			}
		}
	}
	d.summed.Add(int64(len(es)))
	if err != nil {
		return 0, err
	}
	if err := d.store(b0, es); err != nil {
		return 0, err
	}
	return int(total), nil
}

// sumBlocks sets es to the checksums of the blocks of b (a whole number
// of blocks), in order.
func sumBlocks(b []byte, es []uint32) {
	for i := 0; i < len(b); i += BlockSize {
		es[i/BlockSize] = Sum(b[i : i+BlockSize])
	}
}

// writeBlocks writes bufs (whole blocks of the data region, total bytes)
// at off and stores es, their checksums; or, with s, the checksums s
// gives once the bytes are written (Shared.sums).
func (d *Dev) writeBlocks(bufs [][]byte, off, total int64, es []uint32, s *Shared) (int, error) {
	rel := off - d.dataOff
	b0 := rel / BlockSize
	mask := d.lockRange(b0, (rel+total-1)/BlockSize)
	defer d.unlock(mask)
	var err error
	switch {
	case len(bufs) == 1:
		_, err = d.inner.WriteAt(bufs[0], off)
	case d.vec != nil:
		_, err = d.vec.WritevAt(bufs, off)
	default:
		o := off
		for _, b := range bufs {
			if _, err = d.inner.WriteAt(b, o); err != nil {
				break
			}
			o += int64(len(b))
		}
	}
	if s != nil {
		var n int
		es, n = s.sums() // also on error: it helps the other writers
		d.summed.Add(int64(n))
	}
	if err != nil {
		return 0, err
	}
	if err := d.store(b0, es); err != nil {
		return 0, err
	}
	return int(total), nil
}

// WriteShared writes the buffers s was Reset with, back to back from off,
// as WritevAt does, taking their checksums from s, which other devices
// writing the same buffers share: each block's CRC is computed once for
// all of them. A write that does not cover whole blocks of the data region
// computes its own.
func (d *Dev) WriteShared(off int64, s *Shared) (int, error) {
	bufs := s.bufs
	total, whole := d.wholeBlocks(bufs, off)
	if !whole || int64(len(s.es))*BlockSize != total {
		if len(bufs) == 1 {
			return d.WriteAt(bufs[0], off)
		}
		return d.WritevAt(bufs, off)
	}
	if d.copySums(int64(len(s.es))) {
		if s.claimAll() {
			// Nobody has started: this write's copy computes every
			// checksum, and the other writers use them.
			defer s.doneAll()
			if len(bufs) == 1 {
				return d.writeSummed(bufs[0], nil, off, total, s.es)
			}
			return d.writeSummed(nil, bufs, off, total, s.es)
		}
		// Another writer computes them (or some): write first, then take
		// them, so that this copy overlaps their computation.
		return d.writeBlocks(bufs, off, total, nil, s)
	}
	es, n := s.sums()
	d.summed.Add(int64(n))
	return d.writeBlocks(bufs, off, total, es, nil)
}

// Discard discards [off, off+n) on the wrapped device; whole blocks become
// holes (entry 0), partial blocks get the checksum of what they now hold.
// If the device cannot discard (errors.ErrUnsupported) nothing changes and
// the caller writes zeroes instead.
func (d *Dev) Discard(off, n int64) error {
	if !d.inData(off, n) {
		return d.split(off, n, d.Discard, d.inner.Discard)
	}
	if n == 0 {
		return nil
	}
	rel := off - d.dataOff
	b0, nb := blocks(rel, n)
	mask := d.lockRange(b0, b0+nb-1)
	defer d.unlock(mask)
	var small [smallEntries]uint32
	es, ep := d.scratch(small[:], nb)
	defer d.putEntries(ep)
	if err := d.sums(nil, rel, n, es); err != nil {
		return err
	}
	if err := d.inner.Discard(off, n); err != nil {
		return err
	}
	return d.store(b0, es)
}

// Sync writes the dirty checksum pages back and then syncs the wrapped
// device, so that every checksum of a write that returned before Sync is
// as durable as the write.
func (d *Dev) Sync() error {
	if err := d.flushDirty(); err != nil {
		return err
	}
	return d.inner.Sync()
}

// SyncData syncs the wrapped device without writing dirty checksum pages
// back first: for a caller that needs only its own writes durable (a
// journal record, a bitmap image), not the checksums of data written
// before. Those stay cached until Sync; after a crash the blocks they
// cover lie in regions the write-intent bitmap still marks dirty, because
// a region is marked clean only after a Sync.
func (d *Dev) SyncData() error { return d.inner.Sync() }

// ReadLost reads p at off, as ReadAt does, but does not fail where
// blocks fail their checksum: it returns the bytes the member holds and
// the data-region offsets of those blocks. A rebuild past blocks no source
// can provide reads its sources this way (see Poison). The blocks of the
// data region that p covers only in part are not checked.
func (d *Dev) ReadLost(p []byte, off int64) (int, []int64, error) {
	n, err := d.inner.ReadAt(p, off)
	if err != nil {
		return n, nil, err
	}
	lo := max(off, d.dataOff)
	hi := min(off+int64(len(p)), d.dataEnd)
	var bad []int64
	for b := (lo - d.dataOff + BlockSize - 1) / BlockSize; ; b++ {
		rel := b * BlockSize
		if d.dataOff+rel >= hi {
			break
		}
		end := rel + d.blockLen(b)
		if d.dataOff+end > hi {
			break
		}
		blk := p[d.dataOff+rel-off : d.dataOff+end-off]
		e, err := d.entry(b)
		if err != nil {
			return n, bad, err
		}
		if !Matches(blk, e) {
			bad = append(bad, rel)
		}
	}
	return n, bad, nil
}

// Poison marks the blocks overlapping data-region bytes [rel, rel+n) as
// lost: each gets an entry that does not match what it holds (the CRC of
// its bytes with every bit flipped, never 0), so reads of it fail with a
// *MismatchError as they did on the copy it was rebuilt from, until a
// write covers the whole block or a repair rewrites it. A rebuild uses it
// for blocks whose data no source could provide (the last copy failed its
// checksum): the new member then reports them lost instead of serving the
// garbage it was given, and the rebuild goes on. It returns how many
// blocks it marked.
func (d *Dev) Poison(rel, n int64) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	end := min(rel+n, d.dataEnd-d.dataOff)
	b0, b1 := rel/BlockSize, (end-1)/BlockSize
	mask := d.lockRange(b0, b1)
	defer d.unlock(mask)
	bp := d.blkPool.Get().(*[]byte)
	defer d.blkPool.Put(bp)
	marked := 0
	for b := b0; b <= b1; b++ {
		blk := (*bp)[:d.blockLen(b)]
		if _, err := d.inner.ReadAt(blk, d.dataOff+b*BlockSize); err != nil {
			return marked, err
		}
		if err := d.store(b, []uint32{poisonOf(blk)}); err != nil {
			return marked, err
		}
		marked++
	}
	return marked, nil
}

// poisonOf is the entry Poison gives a lost block holding blk: the CRC of
// its bytes with every bit flipped, never 0 (a hole, which a zero block
// would match).
func poisonOf(blk []byte) uint32 {
	e := ^Sum(blk)
	if e == 0 {
		e = 1
	}
	return e
}

// reseals reports whether a block holding blk whose entry is e must get a
// new checksum after a crash: it does not match, and it is not a block
// Poison marked lost that still holds the bytes it was marked on. A crash
// leaves a block and its entry disagreeing only where a write was in
// flight, and a write that changed a lost block's bytes leaves an entry
// that is its poison no more; a lost block no write reached keeps its
// mark, so the resync does not turn it back into valid garbage.
func reseals(blk []byte, e uint32) bool {
	return !Matches(blk, e) && e != poisonOf(blk)
}

// Seal reads data-region bytes [rel, rel+n) and recomputes the checksum of
// every block there that does not match its entry (resync after a crash:
// the data is what was written or what was there before, and either is
// correct), except blocks Poison marked lost (see reseals). It returns how
// many blocks it resealed.
func (d *Dev) Seal(rel, n int64) (int, error) {
	end := min(rel+n, d.dataEnd-d.dataOff)
	rel &^= BlockSize - 1
	sealed := 0
	buf := make([]byte, sealStep)
	for o := rel; o < end; o += sealStep {
		k := min(sealStep, end-o)
		b0, nb := o/BlockSize, (k+BlockSize-1)/BlockSize
		mask := d.lockRange(b0, b0+nb-1)
		var s int
		_, err := d.inner.ReadAt(buf[:k], d.dataOff+o)
		if err == nil {
			s, _, err = d.sealLocked(buf[:k], b0)
		}
		d.unlock(mask)
		sealed += s
		if err != nil {
			return sealed, err
		}
	}
	return sealed, nil
}

// sealStep is the bytes Seal and SealIn handle under one lock.
const sealStep = 64 * BlockSize

// SealIn is Seal over p, data-region bytes from rel (block-aligned, whole
// blocks) that the caller read from the wrapped device (Inner) and that no
// write can change meanwhile (a resync holds the rows' stripe locks): it
// recomputes the checksum of every block of p that does not match its
// entry, except blocks Poison marked lost, without reading the device
// again. It returns how many blocks it resealed and how many still fail
// their checksums (the lost ones).
func (d *Dev) SealIn(p []byte, rel int64) (sealed, lost int, err error) {
	if err := d.checkIn(p, rel); err != nil {
		return 0, 0, err
	}
	for o := int64(0); o < int64(len(p)); o += sealStep {
		k := min(sealStep, int64(len(p))-o)
		b0, nb := (rel+o)/BlockSize, (k+BlockSize-1)/BlockSize
		mask := d.lockRange(b0, b0+nb-1)
		s, l, err := d.sealLocked(p[o:o+k], b0)
		d.unlock(mask)
		sealed, lost = sealed+s, lost+l
		if err != nil {
			return sealed, lost, err
		}
	}
	return sealed, lost, nil
}

// sealLocked reseals the blocks of buf (at most sealStep bytes, from block
// b0) that reseals says must get a new checksum, and counts those that
// still fail theirs. Callers hold the blocks' granule locks.
func (d *Dev) sealLocked(buf []byte, b0 int64) (sealed, lost int, err error) {
	var ents [sealStep / BlockSize]uint32
	nb := (int64(len(buf)) + BlockSize - 1) / BlockSize
	es := ents[:nb]
	if err := d.entries(b0, es); err != nil {
		return 0, 0, err
	}
	for j := int64(0); j < nb; j++ {
		blk := buf[j*BlockSize : min(int64(len(buf)), (j+1)*BlockSize)]
		switch {
		case reseals(blk, es[j]):
			if err := d.store(b0+j, []uint32{Sum(blk)}); err != nil {
				return sealed, lost, err
			}
			sealed++
			d.resealed.Add(1)
		case !Matches(blk, es[j]):
			lost++
		}
	}
	return sealed, lost, nil
}

// LostIn is ReadLost over p, data-region bytes from rel (block-aligned,
// whole blocks) that the caller read from the wrapped device: it returns
// the data-region offsets of the blocks of p that fail their checksums,
// without reading the device again.
func (d *Dev) LostIn(p []byte, rel int64) ([]int64, error) {
	if err := d.checkIn(p, rel); err != nil {
		return nil, err
	}
	n := (int64(len(p)) + BlockSize - 1) / BlockSize
	var small [smallEntries]uint32
	es, ep := d.scratch(small[:], n)
	defer d.putEntries(ep)
	if err := d.entries(rel/BlockSize, es); err != nil {
		return nil, err
	}
	var bad []int64
	for k := int64(0); k < n; k++ {
		if !Matches(p[k*BlockSize:min(int64(len(p)), (k+1)*BlockSize)], es[k]) {
			bad = append(bad, rel+k*BlockSize)
		}
	}
	return bad, nil
}

// checkIn validates the bytes a caller hands to Verify, LostIn or SealIn:
// data-region bytes from rel, block-aligned, inside the data region.
func (d *Dev) checkIn(p []byte, rel int64) error {
	if rel%BlockSize != 0 || rel < 0 || rel+int64(len(p)) > d.dataEnd-d.dataOff {
		return fmt.Errorf("%w: [%d, +%d) is not block-aligned inside the data region", ErrConfig, rel, len(p))
	}
	return nil
}

// Verify reports whether p, the data-region bytes from rel (block-aligned;
// p holds whole blocks, or ends at the end of the data region), match
// their stored checksums, without reading the device: a scrub that read
// the copies of a chunk asks which one the checksums vouch for.
func (d *Dev) Verify(p []byte, rel int64) (bool, error) {
	bad, err := d.LostIn(p, rel)
	return err == nil && len(bad) == 0, err
}

// Close closes the wrapped device. Checksum pages still dirty are
// dropped, as unsynced writes are: Sync first to keep them.
func (d *Dev) Close() error { return d.inner.Close() }

// Clear zeroes the checksum area [off, off+n) of m, so that every block
// reads as a hole (create, and a spare before its first rebuild).
func Clear(m Member, off, n int64) error {
	err := m.Discard(off, n)
	if errors.Is(err, errors.ErrUnsupported) {
		err = nil
		z := make([]byte, min(n, 1<<20))
		for o := int64(0); o < n && err == nil; o += int64(len(z)) {
			_, err = m.WriteAt(z[:min(int64(len(z)), n-o)], off+o)
		}
	}
	return err
}
