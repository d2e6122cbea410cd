package raid6

import (
	"bytes"
	"fmt"

	"github.com/klauspost/reedsolomon"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/parity"
	"github.com/raidd/raidd/stripe"
)

func init() { raid.Register(stripe.RAID6, New) }

// Layout is the RAID6 personality. It is safe for concurrent use: the
// encoder is shared and keeps no per-call state on the paths used here.
type Layout struct {
	g     stripe.Geometry
	enc   reedsolomon.Encoder // dk data shards, then P and Q (md's syndrome)
	n, dk int
	chunk int64
}

// Matrix returns the parity rows of md's RAID6 code for dk data chunks:
// P = sum of D_i (all coefficients 1), Q = sum of 2^i · D_i over GF(2^8)
// with polynomial 0x11d, the field reedsolomon uses.
func Matrix(dk int) [][]byte {
	p := make([]byte, dk)
	q := make([]byte, dk)
	g := byte(1)
	for i := range dk {
		p[i] = 1
		q[i] = g
		// g *= 2 in GF(2^8) mod x^8+x^4+x^3+x^2+1 (0x11d)
		hi := g & 0x80
		g <<= 1
		if hi != 0 {
			g ^= 0x1d
		}
	}
	return [][]byte{p, q}
}

// New returns the RAID6 personality for a geometry.
func New(g stripe.Geometry) (raid.Layout, error) {
	if g.Level() != stripe.RAID6 {
		return nil, fmt.Errorf("raid6: geometry is %s", g.Level())
	}
	dk := g.Members() - 2
	enc, err := reedsolomon.New(dk, 2, reedsolomon.WithCustomMatrix(Matrix(dk)), reedsolomon.WithMaxGoroutines(1))
	if err != nil {
		return nil, fmt.Errorf("raid6: encoder: %w", err)
	}
	return &Layout{g: g, enc: enc, n: g.Members(), dk: dk, chunk: g.Chunk()}, nil
}

// Traits: as RAID5. Writes are locked (data, P and Q change together);
// degraded reads lock up front because most of them reconstruct; partial
// writes are coalesced; an array missing one member is resynced (P and Q
// made to agree, see Resync), one missing two is not (the write hole).
func (l *Layout) Traits() raid.Traits {
	return raid.Traits{LockWrites: true, LockDegradedReads: true, Coalesce: true, Journal: true, ResyncRedundant: true}
}

// member returns the member holding shard idx of row row: data index idx
// for idx < dk, P for dk, Q for dk+1.
func (l *Layout) member(row int64, idx int) int {
	switch idx {
	case l.dk:
		return l.g.ParityMember(row)
	case l.dk + 1:
		return l.g.QMember(row)
	}
	return l.g.DataMember(row, idx)
}

// accumulate adds shard idx's contribution to P and Q: p ^= d, q ^= 2^idx·d.
// It does not allocate (two parity rows stay below the library's
// code-generation threshold, which allocates).
func (l *Layout) accumulate(op *raid.Op, d []byte, idx int, p, q []byte) {
	par := op.Scratch[:2]
	par[0], par[1] = p, q
	if err := l.enc.EncodeIdx(d, idx, par); err != nil {
		panic("raid6: encode: " + err.Error()) // lengths are equal by construction
	}
	par[0], par[1] = nil, nil
}

// encode sets p and q to the P and Q of data (dk shards of equal length):
// in one pass over the data where the syndrome kernel runs (genSyndrome),
// and the rest (a tail shorter than its block, or everything without it)
// through the library, one data chunk at a time.
func (l *Layout) encode(op *raid.Op, data [][]byte, p, q []byte) {
	l.encodeFrom(op, data, p, q, genSyndrome(data[:l.dk], p, q))
}

// encodeFrom sets p[k:] and q[k:] to the P and Q of data[i][k:] through
// the library.
func (l *Layout) encodeFrom(op *raid.Op, data [][]byte, p, q []byte, k int) {
	if k == len(p) {
		return
	}
	p, q = p[k:], q[k:]
	copy(p, data[0][k:])
	copy(q, data[0][k:]) // weight 2^0 = 1
	for i := 1; i < l.dk; i++ {
		l.accumulate(op, data[i][k:], i, p, q)
	}
}

// reconstruct fills the shards of shards (dk+2, by shard index) that are
// zero-length, using the capacity they have, from the others.
func (l *Layout) reconstruct(shards [][]byte, dataOnly bool) error {
	var err error
	if dataOnly {
		err = l.enc.ReconstructData(shards)
	} else {
		err = l.enc.Reconstruct(shards)
	}
	if err != nil {
		return fmt.Errorf("raid6: reconstruct: %w", err)
	}
	return nil
}

// unreadable returns how many members are unreadable.
func (l *Layout) unreadable(op *raid.Op) int {
	c := 0
	for m := 0; m < l.n; m++ {
		if !op.Readable(m) {
			c++
		}
	}
	return c
}

// ReadAt reads data chunks directly; chunks on unreadable members are
// reconstructed from the rest of their row under the stripe locks. All
// reads of one attempt go out in one Run; a member that fails to read
// makes the next attempt reconstruct around it.
func (l *Layout) ReadAt(op *raid.Op, p []byte, off int64) error {
	var exts []stripe.Extent
	ns := l.dk + 2
	for {
		exts = op.Extents(off, int64(len(p)))
		list := op.List[:0]
		recon := false
		for _, e := range exts {
			dst := p[e.BufOff : e.BufOff+e.Len]
			if op.Readable(e.Member) {
				op.Read(e.Member, dst, e.Off)
				continue
			}
			recon = true
			if !op.Locked() {
				continue
			}
			if l.unreadable(op) > 2 {
				return raid.ErrTooManyFailures
			}
			// Queue the same range of every other shard of the row; the
			// missing ones stay zero-length for reconstruct.
			for idx := range ns {
				m := l.member(e.Row, idx)
				b := op.Buf(e.Len)
				if m == e.Member || !op.Readable(m) {
					b = b[:0]
				} else {
					op.Read(m, b, e.Off)
				}
				list = append(list, b)
			}
		}
		op.List = list
		failed := op.Run() != 0
		if (failed || recon) && !op.Locked() {
			return op.NeedLock()
		}
		if failed {
			continue // plan again around the member that failed
		}
		k := 0
		for _, e := range exts {
			if op.Readable(e.Member) {
				continue
			}
			shards := list[k : k+ns]
			k += ns
			if err := l.reconstruct(shards, true); err != nil {
				return err
			}
			copy(p[e.BufOff:e.BufOff+e.Len], shards[e.Index])
		}
		break
	}
	// Rewrite the reconstructed bytes on members whose reads failed.
	op.RepairExtents(exts, p)
	return nil
}

// errRetry tells a write plan that a member failed while reading: plan the row again.
var errRetry = parity.ErrReplan

type rowWrite = parity.RowWrite

// WriteAt writes p row by row (see the package doc for the plans).
func (l *Layout) WriteAt(op *raid.Op, p []byte, off int64) error {
	return l.write(op, p, off, int64(len(p)))
}

// write writes p (or zeroes when p is nil) to [off, off+n).
func (l *Layout) write(op *raid.Op, p []byte, off, n int64) error {
	if err := parity.EachRow(op, p, off, n, l.chunk, l.dk, func(w *rowWrite) error { return l.writeRow(op, w) }); err != nil {
		return err
	}
	op.Run()
	if l.unreadable(op) > 2 {
		return raid.ErrTooManyFailures
	}
	return nil
}

// writeRow plans and performs one row's write. It queues the final member
// writes without running them when the row needed no reads, so that
// consecutive full-stripe rows go out together; the caller runs the queue.
func (l *Layout) writeRow(op *raid.Op, w *rowWrite) error {
	return parity.PlanRow(op, func() error { return l.planRow(op, w) })
}

// logRow writes the row's write-hole log record when rl needs one: the
// partial parities P' = P - (the current data of W) and Q' = Q - (its
// weighted sum), where cur[i] is data index i's current bytes over [Lo, Hi)
// (nil: W holds only the write's own spans, whose bytes are w.Data). p and
// q are the new parities over [Lo, Hi).
func (l *Layout) logRow(op *raid.Op, w *rowWrite, rl *raid.RowLog, p, q []byte, cur [][]byte) error {
	if !rl.Need {
		return nil
	}
	if rl.Zero || (rl.Cached && cur == nil) {
		// Zero: nothing to compute; Cached, from rmw: P and Q hold P'
		// and Q' already.
		if op.LogRow(rl) != nil {
			return errRetry
		}
		return nil
	}
	// Both are computed together (one pass); a parity that is not logged
	// goes to scratch.
	pp, pq := rl.P, rl.Q
	if pp == nil {
		pp = op.Buf(int64(len(p)))
	}
	if pq == nil {
		pq = op.Buf(int64(len(q)))
	}
	copy(pp, p)
	copy(pq, q)
	for _, s := range rl.W {
		var d []byte
		if cur != nil {
			d = cur[s.Index][s.A-w.Lo : s.B-w.Lo]
		} else {
			d = w.Data[s.Index][s.A-w.A[s.Index] : s.B-w.A[s.Index]]
		}
		l.accumulate(op, d, s.Index, pp[s.A-w.Lo:s.B-w.Lo], pq[s.A-w.Lo:s.B-w.Lo])
	}
	if op.LogRow(rl) != nil {
		return errRetry
	}
	return nil
}

// planRow plans and performs (or queues) one row's write once.
func (l *Layout) planRow(op *raid.Op, w *rowWrite) error {
	rl := op.PlanRowLog(w.Row, w.Lo, w.Hi, w.Spans(l.dk))
	{
		cnt := l.unreadable(op)
		if cnt > 2 {
			return raid.ErrTooManyFailures
		}
		var err error
		if cnt == 0 {
			// Fewest member reads wins; on a tie, fewest bytes read.
			width := w.Hi - w.Lo
			rmwReads, rcwReads := 2, 0
			rmwBytes, rcwBytes := 2*width, int64(0)
			for i := 0; i < l.dk; i++ {
				if w.Touched(i) {
					rmwReads++
					rmwBytes += w.B[i] - w.A[i]
				}
				if !w.Covers(i) {
					rcwReads++
					rcwBytes += width
				}
			}
			// A record whose W holds bytes of earlier writes needs their
			// current value: a reconstruct-write reads it, unless the
			// record starts from the previous one's (rl.Cached), which a
			// read-modify-write can.
			if (rl.Extra && !rl.Cached) || rcwReads < rmwReads || (rcwReads == rmwReads && rcwBytes <= rmwBytes) {
				err = l.rcw(op, w, rl, false)
			} else {
				err = l.rmw(op, w, rl)
			}
		} else {
			// Degraded: reconstruct-write. The old contents of the whole
			// row range are needed only when a missing data chunk is not
			// entirely overwritten.
			full := false
			for i := 0; i < l.dk; i++ {
				if !op.Readable(l.g.DataMember(w.Row, i)) && !w.Covers(i) {
					full = true
				}
			}
			err = l.rcw(op, w, rl, full)
		}
		return err
	}
}

// queueData queues the writes of the new data chunks.
func (l *Layout) queueData(op *raid.Op, w *rowWrite) {
	for i := 0; i < l.dk; i++ {
		if m := l.g.DataMember(w.Row, i); w.Touched(i) && op.Writable(m) {
			op.Write(m, w.Data[i], w.Base+w.A[i])
		}
	}
}

// queueParity queues the writes of P and Q over [lo, hi).
func (l *Layout) queueParity(op *raid.Op, w *rowWrite, p, q []byte) {
	if pm := l.g.ParityMember(w.Row); op.Writable(pm) {
		op.Write(pm, p, w.Base+w.Lo)
	}
	if qm := l.g.QMember(w.Row); op.Writable(qm) {
		op.Write(qm, q, w.Base+w.Lo)
	}
}

// rcw is reconstruct-write over [lo, hi). Without full, the data chunks the
// write does not cover are read and every unreadable data chunk is covered
// by the write. With full, every readable chunk of the range is read, P and
// Q included, and the missing data is reconstructed before the new data is
// laid over it.
func (l *Layout) rcw(op *raid.Op, w *rowWrite, rl *raid.RowLog, full bool) error {
	width := w.Hi - w.Lo
	shards := op.Shards[:l.dk+2]
	reads, missing := false, false
	for idx := range l.dk + 2 {
		m := l.member(w.Row, idx)
		if idx < l.dk && !full && w.Covers(idx) {
			shards[idx] = w.Data[idx][w.Lo-w.A[idx] : w.Hi-w.A[idx]]
			continue
		}
		b := op.Buf(width)
		switch {
		case idx >= l.dk && !full:
		case op.Readable(m):
			op.Read(m, b, w.Base+w.Lo)
			reads = true
		default:
			b = b[:0]
			missing = missing || idx < l.dk
		}
		shards[idx] = b
	}
	if reads && op.Run() != 0 {
		return errRetry
	}
	if missing {
		if err := l.reconstruct(shards, true); err != nil {
			return err
		}
	}
	// With the previous record's partial parities (rl.Cached), P' and Q'
	// need only the old bytes of Fold, when the buffers hold them (read or
	// rebuilt, not yet overlaid): one pass over the write's own bytes
	// instead of one over every span of W.
	cur := shards[:l.dk]
	if rl.Need && rl.Cached && !rl.Zero && l.foldable(w, rl, full) {
		l.fold(op, w, rl, shards, true)
		cur = nil
	}
	// Overlay the new data on the buffers that were read or rebuilt.
	for i := 0; i < l.dk; i++ {
		if w.Touched(i) && (full || !w.Covers(i)) {
			copy(shards[i][w.A[i]-w.Lo:], w.Data[i])
		}
	}
	pbuf, qbuf := shards[l.dk][:width], shards[l.dk+1][:width]
	l.encode(op, shards[:l.dk], pbuf, qbuf)
	l.queueData(op, w)
	l.queueParity(op, w, pbuf, qbuf)
	if err := l.logRow(op, w, rl, pbuf, qbuf, cur); err != nil {
		return err
	}
	if reads {
		op.Run()
	}
	return nil
}

// foldable reports whether rcw's buffers hold the old bytes of every span
// of rl.Fold: with full every data chunk of the range was read or rebuilt,
// else those the write does not cover.
func (l *Layout) foldable(w *rowWrite, rl *raid.RowLog, full bool) bool {
	if full {
		return true
	}
	for _, s := range rl.Fold {
		if w.Covers(s.Index) {
			return false
		}
	}
	return true
}

// fold sets rl.P and rl.Q, which hold the row's previous record's partial
// parities (rl.Cached), to this record's: it adds the old bytes of each
// span of rl.Fold, old[i] holding data index i's (over [Lo, Hi) when
// whole is set, else over [A[i], B[i])). A parity that is not logged goes
// to scratch.
func (l *Layout) fold(op *raid.Op, w *rowWrite, rl *raid.RowLog, old [][]byte, whole bool) {
	width := w.Hi - w.Lo
	pp, pq := rl.P, rl.Q
	if pp == nil {
		pp = op.Buf(width)
	}
	if pq == nil {
		pq = op.Buf(width)
	}
	for _, s := range rl.Fold {
		at := w.A[s.Index]
		if whole {
			at = w.Lo
		}
		l.accumulate(op, old[s.Index][s.A-at:s.B-at], s.Index, pp[s.A-w.Lo:s.B-w.Lo], pq[s.A-w.Lo:s.B-w.Lo])
	}
}

// rmw is read-modify-write on a healthy row: for each written range,
// P ^= old ^ new and Q ^= 2^i·(old ^ new).
func (l *Layout) rmw(op *raid.Op, w *rowWrite, rl *raid.RowLog) error {
	width := w.Hi - w.Lo
	old := op.Shards // by data index
	for i := 0; i < l.dk; i++ {
		old[i] = nil
		if w.Touched(i) {
			old[i] = op.Buf(w.B[i] - w.A[i])
			op.Read(l.g.DataMember(w.Row, i), old[i], w.Base+w.A[i])
		}
	}
	pbuf, qbuf := op.Buf(width), op.Buf(width)
	op.Read(l.g.ParityMember(w.Row), pbuf, w.Base+w.Lo)
	op.Read(l.g.QMember(w.Row), qbuf, w.Base+w.Lo)
	if op.Run() != 0 {
		return errRetry
	}
	if rl.Need && rl.Cached {
		// P' and Q' = the previous record's + the (weighted) old bytes
		// of Fold.
		l.fold(op, w, rl, old, false)
	}
	for i := 0; i < l.dk; i++ {
		if w.Touched(i) {
			p, q := pbuf[w.A[i]-w.Lo:w.B[i]-w.Lo], qbuf[w.A[i]-w.Lo:w.B[i]-w.Lo]
			l.accumulate(op, old[i], i, p, q)
			l.accumulate(op, w.Data[i], i, p, q)
			old[i] = nil
		}
	}
	// Every write overwrites bytes just read (raid.Op.WriteHot), after
	// the row's record.
	if err := l.logRow(op, w, rl, pbuf, qbuf, nil); err != nil {
		return err
	}
	for i := 0; i < l.dk; i++ {
		if m := l.g.DataMember(w.Row, i); w.Touched(i) && op.Writable(m) {
			op.WriteHot(m, w.Data[i], w.Base+w.A[i])
		}
	}
	if pm := l.g.ParityMember(w.Row); op.Writable(pm) {
		op.WriteHot(pm, pbuf, w.Base+w.Lo)
	}
	if qm := l.g.QMember(w.Row); op.Writable(qm) {
		op.WriteHot(qm, qbuf, w.Base+w.Lo)
	}
	op.Run()
	return nil
}

// Discard discards whole rows on every member and writes zeroes to partial
// rows. A row of zeroes has zero P and zero Q, so it stays consistent.
func (l *Layout) Discard(op *raid.Op, off, n int64) error {
	width := l.g.StripeWidth()
	end := off + n
	if r := off % width; r != 0 {
		k := min(n, width-r)
		if err := l.write(op, nil, off, k); err != nil {
			return err
		}
		off += k
	}
	if full := (end - off) / width; full > 0 {
		row := off / width
		op.BeginDiscard(row, row+full)
		for m := 0; m < l.n; m++ {
			if op.Writable(m) {
				op.Discard(m, row*l.chunk, full*l.chunk)
			}
		}
		op.Run()
		op.EndRow()
		if l.unreadable(op) > 2 {
			return raid.ErrTooManyFailures
		}
		off += full * width
	}
	if off < end {
		return l.write(op, nil, off, end-off)
	}
	return nil
}

// readRow reads shard idx of the row into op.Shards[idx] for every
// readable member, leaving unreadable ones zero-length (with capacity).
// It reports the number of shards missing and whether the reads succeeded.
func (l *Layout) readRow(op *raid.Op, row int64) (missing int, ok bool) {
	shards := op.Shards[:l.dk+2]
	for idx := range shards {
		m := l.member(row, idx)
		shards[idx] = op.Buf(l.chunk)
		if op.Readable(m) {
			op.Read(m, shards[idx], row*l.chunk)
		} else {
			shards[idx] = shards[idx][:0]
			missing++
		}
	}
	return missing, op.Run() == 0
}

// Resync recomputes the row's P and Q from its data and rewrites whichever
// differs. With one member missing the row still has a parity to spare,
// and P and Q must agree: a missing data chunk is what its degraded reads
// serve, rebuilt from the data present and P, and Q is recomputed with it
// (a missing parity leaves the other to recompute from the data). A torn
// full-stripe write, which the write-hole log does not record, otherwise
// left P and Q disagreeing: the missing chunk read one value through P and
// another once a second member failed. With two missing there is nothing
// to spare and the row is left alone.
func (l *Layout) Resync(op *raid.Op, row int64) error {
	if l.unreadable(op) > 1 {
		return nil
	}
	missing, ok := l.readRow(op, row)
	if !ok {
		return nil // the failed member is recorded; the row is now degraded
	}
	shards := op.Shards[:l.dk+2]
	if missing > 0 && !(len(shards[l.dk]) == 0 || len(shards[l.dk+1]) == 0) {
		// A data chunk is missing: rebuilt from the first dk shards
		// present (data, then P), as a degraded read rebuilds it.
		if err := l.reconstruct(shards, true); err != nil {
			return fmt.Errorf("raid6: resync row %d: %w", row, err)
		}
	}
	p, q := op.Buf(l.chunk), op.Buf(l.chunk)
	l.encode(op, shards[:l.dk], p, q)
	if pm := l.g.ParityMember(row); len(shards[l.dk]) != 0 && op.Writable(pm) && !bytes.Equal(p, shards[l.dk]) {
		op.Write(pm, p, row*l.chunk)
	}
	if qm := l.g.QMember(row); len(shards[l.dk+1]) != 0 && op.Writable(qm) && !bytes.Equal(q, shards[l.dk+1]) {
		op.Write(qm, q, row*l.chunk)
	}
	op.Run()
	return nil
}

// Rebuild writes target's chunk of the row, reconstructed from the
// readable members (at most one other may be missing). The encoder may
// allocate here; this is background work, not the I/O path.
func (l *Layout) Rebuild(op *raid.Op, row int64, target int) error {
	cnt := l.unreadable(op)
	if op.Readable(target) {
		cnt++
	}
	if cnt > 2 {
		return raid.ErrTooManyFailures
	}
	shards := op.Shards[:l.dk+2]
	idx := -1
	for i := range shards {
		m := l.member(row, i)
		shards[i] = op.Buf(l.chunk)
		if m == target {
			idx = i
		}
		if m == target || !op.Readable(m) {
			shards[i] = shards[i][:0]
			continue
		}
		op.Read(m, shards[i], row*l.chunk)
	}
	if op.Run() != 0 {
		return raid.ErrTooManyFailures
	}
	if err := l.reconstruct(shards, idx < l.dk); err != nil {
		return fmt.Errorf("raid6: rebuild row %d: %w", row, err)
	}
	op.Write(target, shards[idx], row*l.chunk)
	op.Run()
	return nil
}

// RebuildMany writes the chunks of the row on both targets (two members
// missing: data+data, data+P, data+Q or P+Q), reconstructed together from
// one read of the others: a rebuild of two members is one pass over the
// array, not two.
func (l *Layout) RebuildMany(op *raid.Op, row int64, targets []int) error {
	if len(targets) == 1 {
		return l.Rebuild(op, row, targets[0])
	}
	if len(targets) > 2 {
		return raid.ErrTooManyFailures
	}
	shards := op.Shards[:l.dk+2]
	idx := [2]int{-1, -1}
	for i := range shards {
		m := l.member(row, i)
		shards[i] = op.Buf(l.chunk)
		for k, t := range targets {
			if m == t {
				idx[k] = i
			}
		}
		if m == targets[0] || m == targets[1] {
			shards[i] = shards[i][:0]
			continue
		}
		if !op.Readable(m) {
			return raid.ErrTooManyFailures
		}
		op.Read(m, shards[i], row*l.chunk)
	}
	if op.Run() != 0 {
		return raid.ErrTooManyFailures
	}
	if err := l.reconstruct(shards, false); err != nil {
		return fmt.Errorf("raid6: rebuild row %d: %w", row, err)
	}
	for k, t := range targets {
		op.Write(t, shards[idx[k]], row*l.chunk)
	}
	op.Run()
	return nil
}

// Check verifies the row's P and Q against its data. On a whole row a
// mismatch is located through the syndromes (locate): the one wrong chunk,
// data, P or Q, is reported as a located Mismatch and, when the Op is
// repairing, rewritten with its correct contents (wrong data is corrected
// by dp, wrong parity recomputed). When no single chunk explains the
// differences, the row is reported unlocated and a repair recomputes P and
// Q from the data, as md's repair does.
//
// With one member missing the row is still verified: a missing data chunk
// is reconstructed from the others and P, and Q is compared; a missing P or
// Q leaves the other to compare. One syndrome cannot locate a wrong chunk:
// a repair recomputes the parity left when every data chunk was read, and
// leaves a row missing data alone. With two missing, or a member failing
// its read, nothing is left to compare and Check returns ErrUnverifiable.
func (l *Layout) Check(op *raid.Op, row int64) error {
	if c := l.unreadable(op); c > 1 {
		return fmt.Errorf("%w: row %d: %d members are missing", raid.ErrUnverifiable, row, c)
	}
	missing, ok := l.readRow(op, row)
	if !ok {
		return fmt.Errorf("%w: row %d: a member failed to read", raid.ErrUnverifiable, row)
	}
	shards := op.Shards[:l.dk+2]
	if missing > 0 {
		return l.checkDegraded(op, row, shards)
	}
	p, q := op.Buf(l.chunk), op.Buf(l.chunk)
	l.encode(op, shards[:l.dk], p, q)
	if bytes.Equal(p, shards[l.dk]) && bytes.Equal(q, shards[l.dk+1]) {
		return nil
	}
	dp, dq := op.Buf(l.chunk), op.Buf(l.chunk)
	for i := range dp {
		dp[i] = p[i] ^ shards[l.dk][i]
		dq[i] = q[i] ^ shards[l.dk+1][i]
	}
	target, first := locate(dp, dq, l.dk)
	base := row * l.chunk
	mm := raid.Mismatch{Row: row, Role: -1, Shard: "row", Offset: base + int64(first)}
	repair := op.Repairing()
	switch target {
	case locUnlocatable:
		mm.Detail = "P and Q both mismatch in a way no single chunk explains: more than one chunk is wrong"
		if repair {
			mm.Detail += "; P and Q recomputed from the data"
			pm, qm := l.g.ParityMember(row), l.g.QMember(row)
			if op.Writable(pm) && op.Writable(qm) {
				op.Write(pm, p, base)
				op.Write(qm, q, base)
				mm.Repaired = op.Run() == 0
			}
		}
	default:
		m := l.member(row, target)
		mm.Role, mm.Located = m, true
		fix := p
		switch {
		case target == l.dk:
			mm.Shard = "P"
			mm.Detail = "located by the syndromes: only P mismatches"
		case target == l.dk+1:
			mm.Shard, fix = "Q", q
			mm.Detail = "located by the syndromes: only Q mismatches"
		default:
			mm.Shard = fmt.Sprintf("data %d", target)
			mm.Detail = fmt.Sprintf("located by the syndromes: Q xor Q' = 2^%d (P xor P') at every differing byte", target)
			fix = shards[target]
			for i := range fix {
				fix[i] ^= dp[i]
			}
		}
		if repair && op.Writable(m) {
			op.Write(m, fix, base)
			mm.Repaired = op.Run() == 0
			mm.Detail += "; rewritten"
		}
	}
	op.Mismatch(mm)
	return fmt.Errorf("%w: row %d: %s", raid.ErrInconsistent, row, mm)
}

// checkDegraded checks a row with one chunk missing (zero-length in
// shards): the data is completed from P when a data chunk is missing, and
// the parity left is compared with the data.
func (l *Layout) checkDegraded(op *raid.Op, row int64, shards [][]byte) error {
	gone := -1
	for i, s := range shards {
		if len(s) == 0 {
			gone = i
		}
	}
	if gone < l.dk {
		// Data is rebuilt from the first dk shards present (data, then
		// P), so Q, left over, still verifies the row.
		if err := l.reconstruct(shards, true); err != nil {
			return fmt.Errorf("%w: row %d: %w", raid.ErrUnverifiable, row, err)
		}
	}
	p, q := op.Buf(l.chunk), op.Buf(l.chunk)
	l.encode(op, shards[:l.dk], p, q)
	for k, want := range [][]byte{p, q} {
		have := shards[l.dk+k]
		if len(have) == 0 {
			continue
		}
		i := mismatch(want, have)
		if i < 0 {
			continue
		}
		name := [...]string{"P", "Q"}[k]
		mm := raid.Mismatch{Row: row, Role: -1, Shard: "row", Offset: row*l.chunk + int64(i)}
		// One syndrome detects but cannot locate: the wrong chunk may be
		// any data chunk as well as the parity left. Recomputing that
		// parity from the data would make a wrong data chunk permanent.
		// Both syndromes locate it only if the missing member comes back
		// with this row's chunk as it was: a rebuild, or a re-add whose
		// resync covers the row, computes that chunk from the others, the
		// wrong one included, and the row then agrees with it.
		const back = "not repaired. If the missing member's device is intact, re-add it and repair: both syndromes then locate the wrong chunk, in rows the re-add does not resync (rows of regions written while it was out are recomputed from the others, the wrong chunk included)"
		if gone < l.dk {
			mm.Detail = fmt.Sprintf("%s mismatches with data chunk %d missing: one syndrome cannot locate the wrong chunk; %s", name, gone, back)
		} else {
			mm.Detail = fmt.Sprintf("%s mismatches with the other parity missing: one syndrome cannot tell whether %s or a data chunk is wrong; %s", name, name, back)
		}
		op.Mismatch(mm)
		return fmt.Errorf("%w: row %d %s mismatch at chunk offset %d", raid.ErrInconsistent, row, name, i)
	}
	return nil
}

// mismatch returns the first offset where a and b differ, or -1.
func mismatch(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

// FillRow sets a whole row's P and Q, par[0] and par[1], from its data
// chunks, in the members' memory (raid.RowFiller: a full-stripe write
// received in place).
func (l *Layout) FillRow(op *raid.Op, data, par [][]byte) { l.encode(op, data, par[0], par[1]) }
