package raid

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/raidd/raidd/raid/internal/integrity"
	"github.com/raidd/raidd/stripe"
)

// Per-block checksums (CreateOptions.Checksums). Every member device is
// wrapped in an integrity.Dev below the levels, so the levels stay unaware:
// a block that fails its CRC32C is, to them, a member read error like a bad
// sector. They already reconstruct such reads from redundancy and rewrite
// them (Op.RepairExtents, the mirror's repair), and the rewrite through the
// Dev stores a fresh checksum. The engine differs from a read error in one
// thing only: a mismatch never fails the member (settle). When no copy is
// correct the request fails with ErrIO and a checksum-lost event names the
// block.

// DefaultChecksumCache is the default bound of checksum pages kept in
// memory, in bytes, over all members of an array.
const DefaultChecksumCache = 64 << 20

// csumState is the engine side of per-block checksums.
type csumState struct {
	pages    int                              // cache bound per member, in pages
	repaired [stripe.MaxMembers]atomic.Int64  // blocks' reads repaired, by role
	lost     [stripe.MaxMembers]atomic.Int64  // reads that found no correct copy, by role
	rebuilt  atomic.Int64                     // checksum pages that failed their own CRC
	devs     atomic.Pointer[[]*integrity.Dev] // every Dev made, for Status
	unsealed atomic.Pointer[[][2]int64]       // data ranges resealed on mismatch until the resync ends
	// arbitrated has a bit per member row of the unsealed ranges whose
	// blocks that fail their checksums were arbitrated (settleUnsealed);
	// nil with unsealed.
	arbitrated atomic.Pointer[[]atomic.Uint64]
}

// wrapDev returns dev wrapped for checksums when the array has them.
func (a *Array) wrapDev(dev Member) (Member, error) {
	if a.csum == nil {
		return dev, nil
	}
	if d, ok := dev.(*integrity.Dev); ok {
		return d, nil
	}
	var d *integrity.Dev
	d, err := integrity.New(dev, integrity.Config{
		DataOffset: int64(a.meta.DataOffset), DataSize: int64(a.meta.DataSize),
		AreaOffset: int64(a.meta.ChecksumOffset), CachePages: a.csum.pages,
		OnPageRebuilt: func(first, n int64) {
			a.csum.rebuilt.Add(1)
			a.event(Event{Kind: EventChecksumPageRebuilt, Role: a.roleOf(d),
				Detail: fmt.Sprintf("checksum page of data bytes [%d, %d) failed its own CRC; every block it covers is checked against its data, and a block that does not match is reconstructed", first, first+n)})
		},
	})
	if err != nil {
		return nil, err
	}
	if p := a.csum.unsealed.Load(); p != nil {
		d.Unseal(*p)
	}
	for {
		old := a.csum.devs.Load()
		var next []*integrity.Dev
		if old != nil {
			next = append(next, *old...)
		}
		next = append(next, d)
		if a.csum.devs.CompareAndSwap(old, &next) {
			break
		}
	}
	return d, nil
}

// shareSums gives writes in the batch that write the same buffers at the
// same block alignment to different devices (the copies of a mirrored
// chunk, a role and its replacement) one integrity.Shared: each block's
// CRC is then computed once for every copy, by the copies' writers
// together, instead of once per copy. Only mirrored levels and roles being
// replaced write the same buffers twice.
func (op *Op) shareSums() {
	if op.geo.Level() != stripe.RAID1 && op.geo.Level() != stripe.RAID10 && !op.v.replacing() {
		return
	}
	for i := range op.batch {
		r := &op.batch[i]
		if !shareable(r) || r.shared != nil {
			continue
		}
		var s *integrity.Shared
		for j := i + 1; j < len(op.batch); j++ {
			q := &op.batch[j]
			if !shareable(q) || q.shared != nil || q.dev == r.dev || q.off%csumBlock != r.off%csumBlock || !sameBufs(r, q) {
				continue
			}
			if s == nil {
				if op.nSums == len(op.sums) {
					op.sums = append(op.sums, new(integrity.Shared))
				}
				s = op.sums[op.nSums]
				ok := false
				if r.vec != nil {
					ok = s.Reset(r.vec)
				} else {
					ok = s.Reset([][]byte{r.p})
				}
				if !ok {
					break
				}
				op.nSums++
				r.shared = s
			}
			q.shared = s
		}
	}
}

// shareable reports whether r is a write that may share its checksums.
func shareable(r *ioReq) bool {
	if r.kind != ioWrite || r.merged || len(r.p) == 0 {
		return false
	}
	_, ok := r.dev.(*integrity.Dev)
	return ok
}

// sameBufs reports whether r and q write the same buffers (the same
// memory, not merely equal bytes).
func sameBufs(r, q *ioReq) bool {
	if r.vec == nil || q.vec == nil {
		return r.vec == nil && q.vec == nil && len(r.p) == len(q.p) && &r.p[0] == &q.p[0]
	}
	if len(r.vec) != len(q.vec) {
		return false
	}
	for k, b := range r.vec {
		c := q.vec[k]
		if len(b) != len(c) || len(b) == 0 || &b[0] != &c[0] {
			return false
		}
	}
	return true
}

// releaseSums ends the batch's uses of shared checksums.
func (op *Op) releaseSums() {
	for _, s := range op.sums[:op.nSums] {
		s.Release()
	}
	op.nSums = 0
}

// syncWrites makes the writes already done on dev durable, for a caller
// that needs only its own metadata on disk: a write-hole log record before
// the row's writes, the log's checkpoint (the writes its records describe,
// then its new header), a bitmap image before writes to its regions.
// On a checksum wrapper it does not write the dirty checksum pages back:
// they are written by the next full Sync (FLUSH, FUA, the clean marking),
// and until a region is marked clean after such a Sync the bitmap covers
// its blocks (they are resealed after a crash). Writing them at every
// journal record cost a RAID5 with checksums two thirds of its random 4K
// writes on throttled disks (bench/checksums.sh MEMBERS=disks).
func syncWrites(dev Member) error {
	if d, ok := dev.(*integrity.Dev); ok {
		return d.SyncData()
	}
	return dev.Sync()
}

// csumBlock is the block one checksum covers.
const csumBlock = integrity.BlockSize

// readBlocks serves a read that is not block-aligned, on an array with
// checksums, by reading the whole blocks around it: a block that fails its
// checksum is then repaired whole (a rewrite of part of a bad block cannot
// give it a trustworthy checksum, see integrity's partial writes).
func (a *Array) readBlocks(p []byte, off int64) (int, error) {
	lo := off &^ (csumBlock - 1)
	hi := (off + int64(len(p)) + csumBlock - 1) &^ (csumBlock - 1)
	var buf []byte
	if bp := a.bufPool.Get().(*[]byte); int64(len(*bp)) >= hi-lo { // one chunk: most unaligned reads
		defer a.bufPool.Put(bp)
		buf = (*bp)[:hi-lo]
	} else {
		a.bufPool.Put(bp)
		buf = make([]byte, hi-lo)
	}
	if _, err := a.read(buf, lo); err != nil {
		return 0, err
	}
	copy(p, buf[off-lo:])
	a.stats.clientRead.Add(int64(len(p) - len(buf))) // count what the client asked for
	return len(p), nil
}

// rereadByBlock reads p at off (checksum-block aligned) one checksum block
// at a time, each with an Op of its own, under the stripe locks the
// caller holds: a read that failed because blocks failed their checksums
// on more members of a row than the level can rebuild at once succeeds
// when, at each block's offset, few enough of them are bad (two copies of
// a mirrored chunk rotten at different blocks, two chunks of a RAID5 row).
// Each block read rebuilds and rewrites what it can, as any read does; the
// first that cannot fails the read with the error a read returns, and
// reports its blocks lost.
func (a *Array) rereadByBlock(p []byte, off int64) error {
	for b := int64(0); b < int64(len(p)); b += csumBlock {
		op := a.getOp()
		op.locked = true
		err := a.layout.ReadAt(op, p[b:b+csumBlock], off+b)
		if op.settle() {
			a.handleFailures(op)
		}
		if err != nil {
			if op.csumLost != 0 {
				a.csumLost(op)
			}
			err = a.ioError(op, err)
		}
		a.putOp(op)
		if err != nil {
			return err
		}
	}
	return nil
}

// readLocked reads p at off (checksum-block aligned) through the read
// path under the stripe locks the caller holds, block by block where
// blocks fail their checksums on several members (rereadByBlock): the
// bad blocks that can be rebuilt are, and are rewritten.
func (a *Array) readLocked(p []byte, off int64) error {
	op := a.getOp()
	op.locked = true
	err := a.layout.ReadAt(op, p, off)
	if op.settle() {
		a.handleFailures(op)
	}
	err, reread := a.rereadIfLost(op, p, off, err)
	if err != nil && !reread && op.csumLost != 0 {
		a.csumLost(op)
	}
	a.putOp(op)
	return err
}

// rereadIfLost is what a read on op (settled, under the stripe locks)
// that failed with err does when only blocks failing their checksums
// made it fail: blocks on more members than the level can rebuild at
// once, but perhaps at different offsets. It reads p again block by
// block (rereadByBlock), each block rebuilt from the copies or parity
// that are right at its offset, and returns that read's error and true;
// the first attempt's mismatches are not reported lost, since a block
// that is lost is reported by its own read. Otherwise it returns err and
// false.
func (a *Array) rereadIfLost(op *Op, p []byte, off int64, err error) (error, bool) {
	if err == nil || op.csumLost == 0 || op.failed != 0 || int64(len(p)) <= csumBlock {
		return err, false
	}
	op.csumLost = 0
	return a.rereadByBlock(p, off), true
}

// preferMatchingCopies, before a crash resync of mirror rows [lo, hi)
// (whose stripe locks the caller holds), rewrites each block of a copy
// that fails its checksum from a copy of the same chunk that matches
// its own. The resync then reseals what still mismatches on every copy
// (a write torn there) and makes the copies agree, the first winning.
// Without this pass the resync resealed a rotten block of the first copy,
// which made it valid, and copied it over the others, which were right:
// the rot was served as data, and a check found the copies consistent.
// For a write torn by the crash, a copy that matches its checksum holds
// either the write or what was there before, both allowed. Parity levels
// and RAID0 still reseal (the checksums cannot tell rot from a torn
// write there without the parity's arbitration; see the README).
//
// w, when not nil, holds the rows as loadRaw read them: the pass checks
// and rewrites them there (rewriting a block updates w too), and reads
// from the devices only what w does not hold.
func (a *Array) preferMatchingCopies(v *View, w *window, lo, hi int64) {
	if a.csum == nil || !a.geo.Mirrored() {
		return
	}
	g, chunk := a.geo, a.geo.Chunk()
	done := map[int64]bool{}
	var locs []stripe.Loc
	for row := lo; row < hi; row++ {
		for m := 0; m < g.Members(); m++ {
			arr, role := g.Locate(m, row*chunk)
			if role != stripe.RoleData || done[arr/chunk] {
				continue
			}
			done[arr/chunk] = true
			locs = g.Copies(locs[:0], arr/chunk, 0)
			a.healCopies(v, w, locs, lo, hi)
		}
	}
}

// preferParityData is preferMatchingCopies for RAID5 and RAID6, with the
// parity as arbiter: before a crash resync of rows [lo, hi) (whose stripe
// locks the caller holds) on a whole array, a data block that fails its
// checksum, alone at its offset in the row with the row's P matching its
// own, is rebuilt from P and the row's other data; when the rebuilt block
// matches the bad block's stored checksum, the bad block was rot (or a
// write torn before it reached the parity, which then reverts to what
// was there before, as allowed), and it is rewritten. Otherwise it is
// left to the resync's reseal, as a torn write. Before, the reseal made
// rot valid, and the resync then recomputed the parity from it.
func (a *Array) preferParityData(v *View, w *window, lo, hi int64) {
	if a.csum == nil || a.geo.Mirrored() || a.geo.Tolerance() == 0 || v.Degraded() {
		return
	}
	g, chunk, n := a.geo, a.geo.Chunk(), a.geo.Members()
	bufs := make([][]byte, n)
	scratch := make([][]byte, n)
	bad := make([]map[int64]bool, n)
	for row := lo; row < hi; row++ {
		found, ok := false, true
		for m := 0; m < n; m++ {
			d, isDev := v.devs[m].(*integrity.Dev)
			if !isDev {
				ok = false
				break
			}
			var lost []int64
			var err error
			bufs[m], lost, err = a.arbitrationChunk(d, w, &scratch[m], m, v.dataOff, row)
			if err != nil {
				ok = false // the resync meets the read error itself
				break
			}
			bad[m] = map[int64]bool{}
			for _, rel := range lost {
				bad[m][(rel-row*chunk)/csumBlock] = true
				found = true
			}
		}
		if !ok || !found {
			continue
		}
		pm := g.ParityMember(row)
		for k := int64(0); k < chunk/csumBlock; k++ {
			victim := -1
			for m := 0; m < n; m++ {
				if bad[m][k] {
					if victim >= 0 || m == pm || g.DataIndex(row, m) < 0 {
						victim = -2 // more than one bad, or a parity block
						break
					}
					victim = m
				}
			}
			if victim < 0 {
				continue
			}
			b0, b1 := k*csumBlock, (k+1)*csumBlock
			blk := make([]byte, csumBlock)
			copy(blk, bufs[pm][b0:b1])
			for m := 0; m < n; m++ {
				if m == pm || m == victim || g.DataIndex(row, m) < 0 {
					continue
				}
				for i, b := range bufs[m][b0:b1] {
					blk[i] ^= b
				}
			}
			d := v.devs[victim].(*integrity.Dev)
			rel := row*chunk + b0
			if match, err := d.Verify(blk, rel); err != nil || !match {
				continue // a torn write: the resync reseals it
			}
			if _, err := d.WriteAt(blk, v.dataOff+rel); err != nil {
				a.log.Warn("resync: cannot rewrite a block that fails its checksum from the parity", "role", victim, "offset", rel, "err", err)
				continue
			}
			copy(bufs[victim][b0:b1], blk) // the window's bytes too, when they are w's
			a.csumRepaired(victim, &integrity.MismatchError{Offset: rel, Len: csumBlock, Blocks: 1})
		}
	}
}

// arbitrationChunk returns role m's chunk of member row row (d is its
// checksum wrapper) for an arbitration pass, and the data-region offsets
// of its blocks that fail their checksums: from w when it holds the chunk
// as loadRaw read it, else read from the device into *scratch (allocated
// on first use).
func (a *Array) arbitrationChunk(d *integrity.Dev, w *window, scratch *[]byte, m int, dataOff, row int64) ([]byte, []int64, error) {
	chunk := a.geo.Chunk()
	if p := w.rawChunk(m, row); p != nil {
		bad, err := d.LostIn(p, row*chunk)
		return p, bad, err
	}
	if *scratch == nil {
		*scratch = make([]byte, chunk)
	}
	_, bad, err := d.ReadLost(*scratch, dataOff+row*chunk)
	return *scratch, bad, err
}

// healCopies is preferMatchingCopies for one chunk's copies, at locs.
func (a *Array) healCopies(v *View, w *window, locs []stripe.Loc, lo, hi int64) {
	chunk := a.geo.Chunk()
	type copyOf struct {
		m   int
		d   *integrity.Dev
		off int64 // data-region offset of the chunk
		buf []byte
		bad map[int64]bool // bad blocks, by index in the chunk
	}
	var cps []copyOf
	for _, l := range locs {
		d, ok := v.devs[l.Member].(*integrity.Dev)
		if row := l.Off / chunk; !ok || v.readable&(1<<uint(l.Member)) == 0 || row < lo || row >= hi {
			continue
		}
		c := copyOf{m: l.Member, d: d, off: l.Off, bad: map[int64]bool{}}
		var scratch []byte
		var bad []int64
		var err error
		c.buf, bad, err = a.arbitrationChunk(d, w, &scratch, l.Member, v.dataOff, l.Off/chunk)
		if err != nil {
			continue // the resync meets the read error itself
		}
		for _, rel := range bad {
			c.bad[(rel-l.Off)/csumBlock] = true
		}
		cps = append(cps, c)
	}
	if len(cps) < 2 {
		return
	}
	for _, c := range cps {
		n, first := 0, int64(-1)
		for k := range c.bad {
			for _, src := range cps {
				if src.bad[k] {
					continue
				}
				blk := src.buf[k*csumBlock : (k+1)*csumBlock]
				if _, err := c.d.WriteAt(blk, v.dataOff+c.off+k*csumBlock); err != nil {
					a.log.Warn("resync: cannot rewrite a block that fails its checksum from a copy that matches", "role", c.m, "offset", c.off+k*csumBlock, "err", err)
					break
				}
				copy(c.buf[k*csumBlock:], blk) // the window's bytes too, when they are w's
				n++
				if rel := c.off + k*csumBlock; first < 0 || rel < first {
					first = rel
				}
				break
			}
		}
		if n > 0 {
			a.csumRepaired(c.m, &integrity.MismatchError{Offset: first, Len: chunk - (first - c.off), Blocks: n})
		}
	}
}

// rawDev returns the device under a checksum wrapper.
func rawDev(m Member) Member {
	if d, ok := m.(*integrity.Dev); ok {
		return d.Inner()
	}
	return m
}

// roleOf returns the role dev serves in the current View, or -1.
func (a *Array) roleOf(dev Member) int {
	v := a.view.Load()
	if v == nil {
		return -1
	}
	for m, d := range v.devs {
		if d == dev || v.repl[m] == dev {
			return m
		}
	}
	return -1
}

// csumDevs returns the checksum wrappers of the View's devices.
func csumDevs(v *View) []*integrity.Dev {
	var out []*integrity.Dev
	for m := range v.devs {
		for _, d := range []Member{v.devs[m], v.repl[m]} {
			if c, ok := d.(*integrity.Dev); ok {
				out = append(out, c)
			}
		}
	}
	return out
}

// unsealForResync makes mismatches in the rows about to be resynced
// resolve by recomputing the checksum: writes in flight at the crash may
// have reached the data but not the checksum, or the other way round.
func (a *Array) unsealForResync(plan [][2]int64) {
	if a.csum == nil {
		return
	}
	chunk := a.geo.Chunk()
	ranges := make([][2]int64, len(plan))
	for i, r := range plan {
		ranges[i] = [2]int64{r[0] * chunk, r[1] * chunk}
	}
	bits := make([]atomic.Uint64, (a.geo.Rows()+63)/64)
	a.csum.arbitrated.Store(&bits)
	a.csum.unsealed.Store(&ranges)
	if p := a.csum.devs.Load(); p != nil {
		for _, d := range *p {
			d.Unseal(ranges)
		}
	}
}

// sealRow recomputes, on every member, the checksums of row's blocks that
// do not match their data (resync after a crash).
func (a *Array) sealRow(op *Op, row int64) error {
	if a.csum == nil {
		return nil
	}
	chunk := a.geo.Chunk()
	for _, d := range csumDevs(op.v) {
		if op.win != nil && op.win.sealedDev(op.v, d) {
			continue // arbitrateWindow sealed it from the window's bytes
		}
		if _, err := d.Seal(row*chunk, chunk); err != nil {
			// The level's resync meets the same read error and handles it.
			a.log.Warn("resync: cannot reseal a row's checksums", "row", row, "err", err)
		}
	}
	return nil
}

// resealRows reseals the checksums of the rows in plan on the members
// present, row by row under the rows' stripe locks, then ends the unsealed
// ranges: the part of a resync after an unclean shutdown that a parity
// level missing a member can still do. Until it reaches a row, a read
// there resolves a mismatch by resealing too (unsealForResync). The
// rows' parity is left to the resync or rebuild that makes the array
// whole again: a missing member's chunk is served from the parity, which
// the partial parity log's replay made consistent with the data present.
func (a *Array) resealRows(ctx context.Context, plan [][2]int64) {
	n := int64(0)
	w := newWindow(a)
	for _, r := range plan {
		for lo := r[0]; lo < r[1]; {
			if ctx.Err() != nil {
				return // the next assembly finds the rows dirty again
			}
			hi := min(lo+a.windowRows(), r[1])
			if err := a.resealWindow(w, lo, hi); err != nil {
				a.log.Warn("reseal after an unclean shutdown stopped", "row", lo, "err", err)
				return
			}
			n += hi - lo
			lo = hi
		}
	}
	a.sealed()
	a.log.Info("unclean shutdown while degraded: the checksums of the rows being written were resealed to the data on the members present", "rows", n)
}

// settleUnsealed runs, before a client request touches array bytes
// [off, off+n), the crash resync's arbitration of blocks that fail their
// checksums (preferMatchingCopies, preferParityData) on the member rows
// those bytes are on that are unsealed and not arbitrated yet, under the
// rows' stripe locks. A
// read or a partial-block write there would otherwise reseal such a block
// as it met it, as a torn write, before the resync could tell it from
// rot: a rotten block the other copies or the parity still had right was
// served to the client and made valid. What still mismatches after the
// arbitration is a torn write, which the request reseals as before.
func (a *Array) settleUnsealed(off, n int64) {
	if a.csum == nil {
		return
	}
	ranges := a.csum.unsealed.Load()
	if ranges == nil || (!a.geo.Mirrored() && a.geo.Tolerance() == 0) {
		return
	}
	lo, last := a.geo.RowRange(off, n)
	hi := last + 1
	for _, r := range *ranges {
		rlo, rhi := max(lo, r[0]/a.geo.Chunk()), min(hi, r[1]/a.geo.Chunk())
		for rlo < rhi && a.arbitrated(rlo) {
			rlo++
		}
		if rlo >= rhi {
			continue
		}
		unlock, err := a.lockRows(rlo, rhi, true)
		if err != nil {
			return // the request meets the same error
		}
		if v := a.view.Load(); !v.failed {
			for row := rlo; row < rhi; row++ {
				if !a.arbitrated(row) {
					a.preferMatchingCopies(v, nil, row, row+1)
					a.preferParityData(v, nil, row, row+1)
					a.markArbitrated(row, row+1)
				}
			}
		}
		unlock()
	}
}

// arbitrated reports whether member row row is not unsealed or its
// checksum failures were arbitrated already.
func (a *Array) arbitrated(row int64) bool {
	bits := a.csum.arbitrated.Load()
	return bits == nil || (*bits)[row/64].Load()&(1<<(row%64)) != 0
}

// markArbitrated records member rows [lo, hi) as arbitrated. Callers hold
// the rows' stripe locks.
func (a *Array) markArbitrated(lo, hi int64) {
	if a.csum == nil {
		return
	}
	if bits := a.csum.arbitrated.Load(); bits != nil {
		for row := lo; row < hi; row++ {
			(*bits)[row/64].Or(1 << (row % 64))
		}
	}
}

// resealWindow reseals the checksums of member rows [lo, hi) on the
// members present, under the rows' stripe locks: each role's rows are
// read in one request, all roles in parallel (loadRaw), and resealed from
// those bytes (SealIn); a device the window could not read, or a
// replacement, is resealed by reading it (Seal). Row by row, one chunk
// per member per request, the reseal ran at a few percent of the disks'
// bandwidth.
func (a *Array) resealWindow(w *window, lo, hi int64) error {
	unlock, err := a.lockRows(lo, hi, true)
	if err != nil {
		return err
	}
	defer unlock()
	v := a.view.Load()
	if v.failed {
		return ErrFailed
	}
	w.reset(lo, hi, nil)
	w.loadRaw(a, v, v.readable, lo, hi)
	w.sealRaw(v)
	chunk := a.geo.Chunk()
	for _, d := range csumDevs(v) {
		if w.sealedDev(v, d) {
			continue
		}
		if _, err := d.Seal(lo*chunk, (hi-lo)*chunk); err != nil {
			a.log.Warn("reseal: cannot reseal the checksums of a window of rows", "rows", fmt.Sprintf("[%d, %d)", lo, hi), "err", err)
		}
	}
	return nil
}

// roleIn returns the role whose member in v is d, or -1 (a replacement).
func roleIn(v *View, d *integrity.Dev) int {
	for m := range v.devs {
		if v.devs[m] == Member(d) {
			return m
		}
	}
	return -1
}

// sealed ends the resync's unsealed ranges.
func (a *Array) sealed() {
	if a.csum == nil {
		return
	}
	a.csum.unsealed.Store(nil)
	a.csum.arbitrated.Store(nil)
	if p := a.csum.devs.Load(); p != nil {
		for _, d := range *p {
			d.SealAll()
		}
	}
}

// csumVerifier is the scrub's CopyVerifier on an array with checksums: a
// copy of a mirrored chunk is right when every block of it matches the
// checksums stored on its member.
type csumVerifier struct{ a *Array }

// VerifyCopy reports whether c matches its checksums; every copy is known
// (covered by checksums).
func (v csumVerifier) VerifyCopy(c Copy) (ok, known bool) {
	view := v.a.view.Load()
	if c.Member < 0 || c.Member >= len(view.devs) {
		return false, false
	}
	d, isCsum := view.devs[c.Member].(*integrity.Dev)
	if !isCsum {
		return false, false
	}
	ok, err := d.Verify(c.Data, c.Off)
	return ok && err == nil, err == nil
}

// mismatch returns the checksum mismatch behind err, if that is what it is.
func mismatch(err error) (*integrity.MismatchError, bool) {
	var me *integrity.MismatchError
	return me, errors.As(err, &me)
}

// csumRepaired counts and reports a checksum mismatch on member m that the
// level repaired from redundancy.
func (a *Array) csumRepaired(m int, me *integrity.MismatchError) {
	a.csum.repaired[m].Add(int64(me.Blocks))
	a.event(Event{Kind: EventChecksumRepaired, Role: m, Detail: fmt.Sprintf("member %d data offset %d: %d block(s) failed their checksum; rewritten from redundancy", m, me.Offset, me.Blocks)})
}

// csumRepairedTotal returns the blocks rewritten so far, on every role,
// after they failed their checksums (0 without checksums).
func (a *Array) csumRepairedTotal() int64 {
	if a.csum == nil {
		return 0
	}
	var n int64
	for m := range a.csum.repaired {
		n += a.csum.repaired[m].Load()
	}
	return n
}

// csumLost reports the blocks of a read that no copy could serve
// correctly.
func (a *Array) csumLost(op *Op) {
	for m := 0; m < op.geo.Members(); m++ {
		if op.csumLost&(1<<uint(m)) == 0 {
			continue
		}
		me, _ := mismatch(op.errs[m])
		a.csum.lost[m].Add(int64(me.Blocks))
		a.event(Event{Kind: EventChecksumLost, Role: m, Detail: fmt.Sprintf("member %d data offset %d: %d block(s) failed their checksum and no other copy or parity could rebuild them; the read failed with EIO", m, me.Offset, me.Blocks)})
	}
}

// ChecksumStatus describes an array's per-block checksums.
type ChecksumStatus struct {
	AreaOffset int64 `json:"area_offset"`
	AreaLength int64 `json:"area_length"`
	// Repaired counts blocks that failed their checksum and were rewritten
	// from redundancy; Lost, blocks no copy could serve (reads failed).
	Repaired int64 `json:"repaired_blocks"`
	Lost     int64 `json:"lost_blocks"`
	// Detected counts mismatches reported by the members, including those
	// found again after a repair failed; PagesRebuilt, checksum pages that
	// failed their own CRC; Resealed, blocks whose checksum a resync after
	// a crash recomputed from their data.
	Detected     int64 `json:"detected_blocks"`
	PagesRebuilt int64 `json:"pages_rebuilt"`
	Resealed     int64 `json:"resealed_blocks"`
	// CachedBytes is the checksum pages in memory now; CacheLimit its bound.
	CachedBytes int64 `json:"cached_bytes"`
	CacheLimit  int64 `json:"cache_limit"`
}

func (a *Array) checksumStatus() *ChecksumStatus {
	if a.csum == nil {
		return nil
	}
	cs := &ChecksumStatus{AreaOffset: int64(a.meta.ChecksumOffset), AreaLength: int64(a.meta.ChecksumLength)}
	for m := range a.csum.repaired {
		cs.Repaired += a.csum.repaired[m].Load()
		cs.Lost += a.csum.lost[m].Load()
	}
	cs.PagesRebuilt = a.csum.rebuilt.Load()
	if p := a.csum.devs.Load(); p != nil {
		for _, d := range *p {
			s := d.Stats()
			cs.Detected += s.Mismatches
			cs.Resealed += s.Resealed
			cs.CachedBytes += s.CachedPages * integrity.PageSize
		}
	}
	cs.CacheLimit = int64(a.csum.pages) * integrity.PageSize * int64(a.geo.Members())
	return cs
}

// ChecksumRepairs returns, by role, the blocks repaired after a checksum
// mismatch since the array started (nil without checksums).
func (a *Array) ChecksumRepairs() []int64 {
	if a.csum == nil {
		return nil
	}
	out := make([]int64, a.geo.Members())
	for m := range out {
		out[m] = a.csum.repaired[m].Load()
	}
	return out
}

// replacing reports whether some role has a replacement being built (its
// writes go to two devices).
func (v *View) replacing() bool {
	for _, d := range v.repl {
		if d != nil {
			return true
		}
	}
	return false
}

// Rebuilding past lost blocks. A rebuild whose row needs a block that
// fails its checksum on the last source (the last mirror copy, or a block
// of a degraded parity row beyond what the parity can rebuild) cannot give
// the new member the right bytes there. md records such a block in its
// bad block log and goes on; raidd does the same with the checksums: the
// row is rebuilt again from what the sources hold (salvage), and each
// target block at the in-chunk offset of a source block that failed its
// checksum is written with a checksum marked bad (integrity.Dev.Poison).
// So the new member reads as lost exactly where the old one did, the
// rebuild finishes, and a whole-block write of those blocks heals them.

// lostOnly reports whether every read that failed in op failed its
// checksum, with no member failed: the row can be salvaged.
func (op *Op) lostOnly() bool {
	if op.readErr == 0 || op.failed != 0 {
		return false
	}
	for m := 0; m < op.geo.Members(); m++ {
		if op.readErr&(1<<uint(m)) == 0 {
			continue
		}
		if _, ok := mismatch(op.errs[m]); !ok {
			return false
		}
	}
	return true
}

// salvageReader reads a checksummed member for a salvaging op: blocks that
// fail their checksum are returned as they are and recorded on the op.
type salvageReader struct {
	*integrity.Dev
	op *Op
}

func (op *Op) salvageDev(dev Member) Member {
	if d, ok := dev.(*integrity.Dev); ok {
		return salvageReader{d, op}
	}
	return dev
}

func (s salvageReader) ReadAt(p []byte, off int64) (int, error) {
	n, bad, err := s.ReadLost(p, off)
	if len(bad) > 0 {
		chunk := s.op.geo.Chunk()
		s.op.lostMu.Lock()
		for _, rel := range bad {
			s.op.lost = append(s.op.lost, rel%chunk)
			s.op.lostAt = append(s.op.lostAt, lostBlock{s.Dev, rel})
		}
		s.op.lostMu.Unlock()
	}
	return n, err
}

func (s salvageReader) ReadvAt(bufs [][]byte, off int64) (int, error) {
	done := 0
	for _, b := range bufs {
		n, err := s.ReadAt(b, off+int64(done))
		done += n
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// lostBlock is a source block a salvaging op found failing its checksum.
type lostBlock struct {
	d   *integrity.Dev
	rel int64 // data-region offset
}

// poisonLost marks, on each target role, the blocks of row at the in-chunk
// offsets the salvaging op found lost on its sources, and reports them.
// The source blocks themselves are marked too: they fail their checksums
// already, but a crash resync reseals a block that disagrees with its
// checksum inside a dirty region (a torn write looks the same), and it
// would then serve the rotten bytes as valid. A poisoned block is one it
// keeps lost (integrity.Dev.Seal).
func (a *Array) poisonLost(op *Op, row int64, roles []int) error {
	slices.Sort(op.lost)
	lost := slices.Compact(op.lost)
	if len(lost) == 0 {
		return nil
	}
	for _, l := range op.lostAt {
		if _, err := l.d.Poison(l.rel, csumBlock); err != nil {
			// The source fails its checksum there anyway; a source that
			// cannot be marked must not stop the rebuild of the targets.
			a.log.Warn("rebuild: cannot mark a lost source block", "offset", l.rel, "err", err)
		}
	}
	chunk := a.geo.Chunk()
	for _, r := range roles {
		d, ok := op.v.devs[r].(*integrity.Dev)
		if !ok {
			continue
		}
		for _, in := range lost {
			if _, err := d.Poison(row*chunk+in, csumBlock); err != nil {
				return err
			}
		}
		a.csum.lost[r].Add(int64(len(lost)))
		a.event(Event{Kind: EventRebuildLostBlocks, Role: r,
			Detail: fmt.Sprintf("member %d data offset %d: %d block(s) of row %d could not be rebuilt (their last source failed its checksum); written with a checksum marked bad, so they read as lost (EIO) until rewritten whole", r, row*chunk+lost[0], len(lost), row)})
	}
	return nil
}

// salvageResync resyncs a mirrored row in which a chunk has no copy that
// passes its checksums, which the ordinary resync (copy the first good
// copy over the others) cannot do; without this the resync would stop at
// the row for good and the array stay dirty. A block a rebuild marked lost
// on every copy (see poisonLost) is such a block: the resync's reseal keeps
// it lost. Each chunk of the row is read from every readable copy as the
// copies hold it (integrity.Dev.ReadLost), and the copies are merged block
// by block: each block from a copy whose checksum vouches for it. The
// merged chunk is written to every copy, so the copies agree again, and a
// block no copy vouches for is marked lost on every copy (the write gave
// it a fresh checksum). A block bad on one copy and good on another is
// thereby repaired, never lost. The caller holds the row's stripe locks.
// Parity levels do not need this: their resync leaves a row it cannot read
// alone.
func (a *Array) salvageResync(row int64) error {
	op := a.getOp()
	defer a.putOp(op)
	op.locked, op.cause, op.noElide = true, causeResync, true
	chunk := a.geo.Chunk()
	first, last := a.geo.RowStripes(row)
	for c := first; c <= last; c++ {
		if err := a.salvageChunk(op, row, c, chunk); err != nil {
			return err
		}
	}
	if op.settle() {
		a.handleFailures(op)
	}
	return nil
}

// salvageChunk merges the copies of mirrored chunk c (see salvageResync).
func (a *Array) salvageChunk(op *Op, row, c, chunk int64) error {
	var merged []byte
	var lost []int64 // in-chunk offsets of blocks no copy vouches for
	bad := map[int][]int64{}
	locs := slices.Clone(op.Copies(c, 0))
	for _, loc := range locs {
		d, ok := op.v.devs[loc.Member].(*integrity.Dev)
		if !ok || !op.Readable(loc.Member) {
			continue
		}
		buf := op.Buf(chunk)
		_, b, err := d.ReadLost(buf, op.v.dataOff+loc.Off)
		if err != nil {
			continue // the write below meets the member's error and handles it
		}
		for i := range b {
			b[i] -= loc.Off
		}
		bad[loc.Member] = b
		if merged == nil {
			merged, lost = buf, bad[loc.Member]
			continue
		}
		// Blocks lost so far that this copy vouches for are taken from it.
		lost = slices.DeleteFunc(lost, func(in int64) bool {
			if slices.Contains(bad[loc.Member], in) {
				return false
			}
			copy(merged[in:min(in+csumBlock, chunk)], buf[in:])
			return true
		})
	}
	if merged == nil {
		return ErrTooManyFailures
	}
	for _, loc := range locs {
		if op.Writable(loc.Member) {
			op.Write(loc.Member, merged, loc.Off)
		}
	}
	op.Run()
	for _, in := range lost {
		for _, loc := range locs {
			d, ok := op.v.devs[loc.Member].(*integrity.Dev)
			if !ok || !op.devWritable(loc.Member) {
				continue
			}
			if _, err := d.Poison(loc.Off+in, csumBlock); err != nil {
				return err
			}
		}
		a.event(Event{Kind: EventChecksumLost, Role: locs[0].Member,
			Detail: fmt.Sprintf("member %d data offset %d: a block of row %d failed its checksum on every copy during the resync after a crash; the copies were resynced around it, and it stays marked lost (EIO) on each until rewritten whole", locs[0].Member, locs[0].Off+in, row)})
	}
	return nil
}
