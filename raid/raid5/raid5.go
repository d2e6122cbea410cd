package raid5

import (
	"bytes"
	"crypto/subtle"
	"fmt"

	"github.com/klauspost/reedsolomon"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/parity"
	"github.com/raidd/raidd/stripe"
)

func init() { raid.Register(stripe.RAID5, New) }

// Layout is the RAID5 personality. It is safe for concurrent use: the
// encoder is shared and stateless per call.
type Layout struct {
	g     stripe.Geometry
	enc   reedsolomon.Encoder
	n, dk int
	chunk int64
}

// New returns the RAID5 personality for a geometry.
func New(g stripe.Geometry) (raid.Layout, error) {
	if g.Level() != stripe.RAID5 {
		return nil, fmt.Errorf("raid5: geometry is %s", g.Level())
	}
	dk := g.Members() - 1
	enc, err := reedsolomon.New(dk, 1, reedsolomon.WithFastOneParityMatrix(), reedsolomon.WithMaxGoroutines(1))
	if err != nil {
		return nil, fmt.Errorf("raid5: encoder: %w", err)
	}
	return &Layout{g: g, enc: enc, n: g.Members(), dk: dk, chunk: g.Chunk()}, nil
}

// Traits: writes are locked (data and parity change together); degraded
// reads lock up front because most of them reconstruct from the rest of
// the row; partial-stripe writes are coalesced to save parity updates; and
// a degraded array is not resynced; partial-stripe rows are journaled
// (the write hole: see the package doc).
func (l *Layout) Traits() raid.Traits {
	return raid.Traits{LockWrites: true, LockDegradedReads: true, Coalesce: true, Journal: true}
}

// xor sets dst ^= src with the encoder's SIMD XOR (parity coefficient 1).
func (l *Layout) xor(op *raid.Op, dst, src []byte) {
	par := op.Scratch[:1]
	par[0] = dst
	if err := l.enc.EncodeIdx(src, 0, par); err != nil {
		panic("raid5: xor: " + err.Error()) // lengths are equal by construction
	}
	par[0] = nil
}

// encode computes shards[dk] from shards[:dk]: parity.XOR's one pass (AVX2)
// over the longest prefix that is a multiple of its block, and a copy and
// dk-1 SIMD XOR passes of the library over the rest (all of it where there
// is no kernel). (Encoder.Encode does one pass but allocates per call on
// CPUs with GFNI, and the hot path must not allocate.)
func (l *Layout) encode(op *raid.Op, shards [][]byte) {
	l.Fill(op, shards[l.dk], shards[:l.dk])
}

// Fill sets dst to the parity (the XOR) of the data in src, as encode
// does.
func (l *Layout) Fill(op *raid.Op, dst []byte, src [][]byte) { l.fill(op, dst, src, false) }

// FillStream is Fill with non-temporal stores (parity.XORStream): the
// raid.StreamFiller that computes a row's parity straight into the parity
// member (raid.Op.WriteFill) where the row's old parity was not read, so
// that its lines are out of the cache: a full stripe, a reconstruct-write.
func (l *Layout) FillStream(op *raid.Op, dst []byte, src [][]byte) { l.fill(op, dst, src, true) }

func (l *Layout) fill(op *raid.Op, dst []byte, src [][]byte, stream bool) {
	var k int
	if stream {
		k = parity.XORStream(dst, src)
	} else {
		k = parity.XOR(dst, src)
	}
	if k == len(dst) {
		return
	}
	copy(dst[k:], src[0][k:])
	for i := 1; i < len(src); i++ {
		l.xor(op, dst[k:], src[i][k:])
	}
}

// unreadableInRow returns how many members are unreadable and one of them.
func (l *Layout) unreadable(op *raid.Op) (count, which int) {
	which = -1
	for m := 0; m < l.n; m++ {
		if !op.Readable(m) {
			count++
			which = m
		}
	}
	return count, which
}

// ReadAt reads data chunks directly; chunks on unreadable members are
// reconstructed from the rest of their row, under the stripe locks. All
// reads of one attempt go out in one Run, so back-to-back rows of a member
// merge into one system call; a member that fails to read makes the next
// attempt reconstruct around it.
func (l *Layout) ReadAt(op *raid.Op, p []byte, off int64) error {
	var exts []stripe.Extent
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
			first := true
			for m := 0; m < l.n; m++ {
				switch {
				case m == e.Member:
				case !op.Readable(m):
					return raid.ErrTooManyFailures
				case first:
					op.Read(m, dst, e.Off)
					first = false
				default:
					b := op.Buf(e.Len)
					list = append(list, b)
					op.Read(m, b, e.Off)
				}
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
			dst := p[e.BufOff : e.BufOff+e.Len]
			for i := 0; i < l.n-2; i++ {
				l.xor(op, dst, list[k])
				k++
			}
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
	if c, _ := l.unreadable(op); c > 1 {
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
// partial parity P' = P - (the current data of W), where cur[i] is data
// index i's current bytes over [Lo, Hi) (nil: W holds only the write's own
// spans, whose bytes are w.Data). pbuf is the new parity over [Lo, Hi).
func (l *Layout) logRow(op *raid.Op, w *rowWrite, rl *raid.RowLog, pbuf []byte, cur [][]byte) error {
	if !rl.Need {
		return nil
	}
	if rl.Zero || (rl.Cached && cur == nil) {
		// Zero: nothing to compute; Cached, from rmw: P holds P' already.
		if op.LogRow(rl) != nil {
			return errRetry
		}
		return nil
	}
	if rl.P != nil {
		cut := func(s raid.Span) []byte {
			if cur != nil {
				return cur[s.Index][s.A-w.Lo : s.B-w.Lo]
			}
			return w.Data[s.Index][s.A-w.A[s.Index] : s.B-w.A[s.Index]]
		}
		if len(rl.W) == 1 {
			// One span (most partial writes): P' in one pass, the new
			// parity XOR the span's bytes, copied around it.
			s := rl.W[0]
			a, b := s.A-w.Lo, s.B-w.Lo
			copy(rl.P[:a], pbuf[:a])
			subtle.XORBytes(rl.P[a:b], pbuf[a:b], cut(s))
			copy(rl.P[b:], pbuf[b:])
		} else {
			copy(rl.P, pbuf)
			for _, s := range rl.W {
				l.xor(op, rl.P[s.A-w.Lo:s.B-w.Lo], cut(s))
			}
		}
	}
	if op.LogRow(rl) != nil {
		return errRetry
	}
	return nil
}

// planRow plans and performs (or queues) one row's write once.
func (l *Layout) planRow(op *raid.Op, w *rowWrite) error {
	pm := l.g.ParityMember(w.Row)
	rl := op.PlanRowLog(w.Row, w.Lo, w.Hi, w.Spans(l.dk))
	cnt, x := l.unreadable(op)
	if cnt > 1 {
		return raid.ErrTooManyFailures
	}
	switch {
	case x == pm && !op.Writable(pm):
		l.queueData(op, w) // no parity: no hole, no record (rl.Need is false)
		return nil
	case x >= 0 && x != pm:
		xi := l.g.DataIndex(w.Row, x)
		switch {
		case w.Touched(xi):
			return l.rcw(op, w, rl, pm, x, !w.Covers(xi))
		case rl.Extra && !rl.Cached:
			return l.rcw(op, w, rl, pm, x, true)
		}
		return l.rmw(op, w, rl, pm)
	}
	// Healthy row, or parity being rebuilt (writable, unreadable). Fewest
	// member reads wins; on a tie, fewest bytes read; on a tie of both,
	// the read-modify-write. It writes the very bytes it read (the old
	// data and parity), where a reconstruct-write reads the row's other
	// chunks and writes elsewhere: the same member operations, but on
	// members held in memory half the cache misses. Random 4 KiB writes
	// on RAID5×4 over tmpfs (bench/nbd-ab.sh, 3 rounds) went from 341-356
	// to 392-417 MB/s, at 2.85-3.03 against 3.52-3.64 CPU s/GiB. A record whose W
	// holds bytes of earlier writes needs their current value: a
	// reconstruct-write reads it, unless the record starts from the
	// previous one's (rl.Cached), which a read-modify-write can.
	width := w.Hi - w.Lo
	rmwReads, rcwReads := 1, 0
	rmwBytes, rcwBytes := width, int64(0)
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
	if x == pm || (rl.Extra && !rl.Cached) || rcwReads < rmwReads || (rcwReads == rmwReads && rcwBytes < rmwBytes) {
		return l.rcw(op, w, rl, pm, -1, false)
	}
	return l.rmw(op, w, rl, pm)
}

// queueData queues the writes of the new data chunks.
func (l *Layout) queueData(op *raid.Op, w *rowWrite) {
	for i := 0; i < l.dk; i++ {
		if m := l.g.DataMember(w.Row, i); w.Touched(i) && op.Writable(m) {
			op.Write(m, w.Data[i], w.Base+w.A[i])
		}
	}
}

// rcw is reconstruct-write. x is the unreadable data member (or -1); with
// reconstructX, x's old bytes in [lo, hi) are rebuilt from parity first.
func (l *Layout) rcw(op *raid.Op, w *rowWrite, rl *raid.RowLog, pm, x int, reconstructX bool) error {
	width := w.Hi - w.Lo
	shards := op.Shards[:l.dk+1]
	reads := false
	for i := 0; i < l.dk; i++ {
		m := l.g.DataMember(w.Row, i)
		if w.Covers(i) && !reconstructX {
			shards[i] = w.Data[i][w.Lo-w.A[i] : w.Hi-w.A[i]]
			continue
		}
		shards[i] = op.Buf(width)
		if m != x {
			op.Read(m, shards[i], w.Base+w.Lo)
			reads = true
		}
	}
	var pbuf []byte
	if reconstructX {
		pbuf = op.Buf(width)
		op.Read(pm, pbuf, w.Base+w.Lo)
		reads = true
	}
	if reads && op.Run() != 0 {
		return errRetry
	}
	if reconstructX {
		xi := l.g.DataIndex(w.Row, x)
		copy(shards[xi], pbuf)
		for i := 0; i < l.dk; i++ {
			if i != xi {
				l.xor(op, shards[xi], shards[i])
			}
		}
	}
	// Overlay the new data on the buffers that were read.
	for i := 0; i < l.dk; i++ {
		if w.Touched(i) && (reconstructX || !w.Covers(i)) {
			copy(shards[i][w.A[i]-w.Lo:], w.Data[i])
		}
	}
	l.queueData(op, w)
	switch {
	case !rl.Need && op.Writable(pm):
		// No record must precede the row's writes (a full stripe, or
		// no write-hole log): the parity may go straight into a parity
		// member held in memory, without a buffer and its copy.
		op.WriteFill(pm, w.Base+w.Lo, width, l, shards[:l.dk])
	default:
		if pbuf == nil {
			pbuf = op.Buf(width)
		}
		shards[l.dk] = pbuf
		l.encode(op, shards)
		if op.Writable(pm) {
			op.Write(pm, pbuf, w.Base+w.Lo)
		}
		if err := l.logRow(op, w, rl, pbuf, shards); err != nil {
			return err
		}
	}
	if reads {
		op.Run()
	}
	return nil
}

// rmw is read-modify-write: P ^= old ^ new for each written range.
//
// When every written chunk covers the same range [Lo, Hi) (a write within
// one chunk: every random write smaller than a chunk), the new parity is
// one multi-source XOR pass, P' = P ^ old ^ new (parity.XOR); with a
// record, its partial parity P ^ old is computed first, in one pass, and
// P' = that ^ new. Otherwise (written ranges that differ) the parity is
// computed in the read buffer, one XOR pass per source.
// Either way the writes go out after the record, with raid.Op.WriteHot:
// they overwrite the bytes just read, whose lines are in the cache.
func (l *Layout) rmw(op *raid.Op, w *rowWrite, rl *raid.RowLog, pm int) error {
	width := w.Hi - w.Lo
	old := op.Shards // by data index
	same := true
	for i := 0; i < l.dk; i++ {
		old[i] = nil
		if w.Touched(i) {
			old[i] = op.Buf(w.B[i] - w.A[i])
			op.Read(l.g.DataMember(w.Row, i), old[i], w.Base+w.A[i])
			same = same && w.A[i] == w.Lo && w.B[i] == w.Hi
		}
	}
	pbuf := op.Buf(width)
	op.Read(pm, pbuf, w.Base+w.Lo)
	if op.Run() != 0 {
		return errRetry
	}
	if rl.Need && rl.Cached {
		// P' = the previous record's + the old bytes of Fold.
		for _, s := range rl.Fold {
			d := old[s.Index][s.A-w.A[s.Index] : s.B-w.A[s.Index]]
			subtle.XORBytes(rl.P[s.A-w.Lo:s.B-w.Lo], rl.P[s.A-w.Lo:s.B-w.Lo], d)
		}
	}
	if same {
		return l.rmwSame(op, w, rl, pm, pbuf)
	}
	for i := 0; i < l.dk; i++ {
		if w.Touched(i) {
			d := old[i]
			old[i] = nil
			l.xor(op, d, w.Data[i])
			l.xor(op, pbuf[w.A[i]-w.Lo:w.B[i]-w.Lo], d)
		}
	}
	if err := l.logRow(op, w, rl, pbuf, nil); err != nil {
		return err
	}
	l.writeHot(op, w, pm, pbuf)
	return nil
}

// writeHot writes and runs the new data chunks and the new parity pbuf of
// a read-modify-write, whose old bytes it has just read
// (raid.Op.WriteHot), once the row's record is written.
func (l *Layout) writeHot(op *raid.Op, w *rowWrite, pm int, pbuf []byte) {
	for i := 0; i < l.dk; i++ {
		if m := l.g.DataMember(w.Row, i); w.Touched(i) && op.Writable(m) {
			op.WriteHot(m, w.Data[i], w.Base+w.A[i])
		}
	}
	if op.Writable(pm) {
		op.WriteHot(pm, pbuf, w.Base+w.Lo)
	}
	op.Run()
}

// rmwSame ends rmw's write of a row whose written chunks all cover
// [Lo, Hi): pbuf holds the old parity and op.Shards the old data of the
// written chunks (by data index). The new parity is computed in pbuf,
// which the op owns: not straight into the member from rl.P after the
// record is written, because LogRow hands rl.P's buffer to the journal
// (the row's kept partial parity), where another op may take it.
func (l *Layout) rmwSame(op *raid.Op, w *rowWrite, rl *raid.RowLog, pm int, pbuf []byte) error {
	src := append(op.List[:0], pbuf) // the sources of P'
	for i := 0; i < l.dk; i++ {
		if w.Touched(i) {
			src = append(src, op.Shards[i])
		}
	}
	if rl.Need && !rl.Cached && !rl.Zero {
		// The record's partial parity: P ^ old (the parity of the
		// row's unwritten bytes), and P' = that ^ new. (A Zero record
		// has none: earlier writes of the epoch cover the rest.)
		l.Fill(op, rl.P, src)
		src = append(src[:0], rl.P)
	}
	for i := 0; i < l.dk; i++ {
		if w.Touched(i) {
			src = append(src, w.Data[i])
		}
	}
	op.List = src
	l.Fill(op, pbuf, src) // pbuf is src[0] itself or no source
	if rl.Need && op.LogRow(rl) != nil {
		return errRetry
	}
	l.writeHot(op, w, pm, pbuf)
	return nil
}

// Discard discards whole rows on every member and writes zeroes to partial rows.
func (l *Layout) Discard(op *raid.Op, off, n int64) error {
	width := l.g.StripeWidth()
	end := off + n
	// Leading partial row.
	if r := off % width; r != 0 {
		k := min(n, width-r)
		if err := l.write(op, nil, off, k); err != nil {
			return err
		}
		off += k
	}
	// Whole rows: one discard per member.
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
		if c, _ := l.unreadable(op); c > 1 {
			return raid.ErrTooManyFailures
		}
		off += full * width
	}
	if off < end {
		return l.write(op, nil, off, end-off)
	}
	return nil
}

// readRow reads the whole row of every member except skip into op.Shards.
func (l *Layout) readRow(op *raid.Op, row int64, skip int) bool {
	for m := 0; m < l.n; m++ {
		if m == skip {
			continue
		}
		op.Shards[m] = op.Buf(l.chunk)
		op.Read(m, op.Shards[m], row*l.chunk)
	}
	return op.Run() == 0
}

// Resync recomputes the row's parity and rewrites it where it differs.
// A row with an unreadable member cannot be verified and is left alone.
func (l *Layout) Resync(op *raid.Op, row int64) error {
	if c, _ := l.unreadable(op); c > 0 {
		return nil
	}
	if !l.readRow(op, row, -1) {
		return nil // the failed member is recorded; the row is now degraded
	}
	pm := l.g.ParityMember(row)
	want := op.Buf(l.chunk)
	copy(want, op.Shards[(pm+1)%l.n])
	for m := 0; m < l.n; m++ {
		if m != pm && m != (pm+1)%l.n {
			l.xor(op, want, op.Shards[m])
		}
	}
	if !bytes.Equal(want, op.Shards[pm]) {
		op.Write(pm, want, row*l.chunk)
		op.Run()
	}
	return nil
}

// Rebuild writes target's chunk of the row, the XOR of all the others.
func (l *Layout) Rebuild(op *raid.Op, row int64, target int) error {
	for m := 0; m < l.n; m++ {
		if m != target && !op.Readable(m) {
			return raid.ErrTooManyFailures
		}
	}
	// Read the other members' chunks, then compute the missing one in a
	// single pass over them: it is the "parity" of the n-1 others. (The
	// encoder may allocate here; this is background work, not the I/O path.)
	shards := op.Shards[:l.n]
	k := 0
	for m := 0; m < l.n; m++ {
		if m == target {
			continue
		}
		shards[k] = op.Buf(l.chunk)
		op.Read(m, shards[k], row*l.chunk)
		k++
	}
	if op.Run() != 0 {
		return raid.ErrTooManyFailures
	}
	dst := op.Buf(l.chunk)
	shards[l.dk] = dst
	if err := l.enc.Encode(shards); err != nil {
		return fmt.Errorf("raid5: rebuild row %d: %w", row, err)
	}
	op.Write(target, dst, row*l.chunk)
	op.Run()
	return nil
}

// Check verifies that the XOR of the row's chunks on all members is zero.
// A row where it is not is a Mismatch of its parity: RAID5 cannot tell
// which chunk is wrong, so, as md's repair does, a repairing Op rewrites
// the parity recomputed from the data. With a member missing, or failing
// its read, the row has no redundancy left to compare and Check returns
// ErrUnverifiable.
func (l *Layout) Check(op *raid.Op, row int64) error {
	if c, m := l.unreadable(op); c > 0 {
		return fmt.Errorf("%w: row %d: member %d is missing", raid.ErrUnverifiable, row, m)
	}
	if !l.readRow(op, row, -1) {
		return fmt.Errorf("%w: row %d: a member failed to read", raid.ErrUnverifiable, row)
	}
	acc := op.Buf(l.chunk)
	copy(acc, op.Shards[0])
	for m := 1; m < l.n; m++ {
		l.xor(op, acc, op.Shards[m])
	}
	i := 0
	for i < len(acc) && acc[i] == 0 {
		i++
	}
	if i == len(acc) {
		return nil
	}
	pm := l.g.ParityMember(row)
	mm := raid.Mismatch{Row: row, Role: pm, Shard: "parity", Offset: row*l.chunk + int64(i),
		Detail: "parity does not match the data; RAID5 cannot tell which chunk is wrong"}
	if op.Repairing() && op.Writable(pm) {
		// acc is the XOR of every chunk: XORed with the stored parity it
		// is the parity of the data.
		l.xor(op, acc, op.Shards[pm])
		op.Write(pm, acc, row*l.chunk)
		mm.Repaired = op.Run() == 0
		mm.Detail += "; parity recomputed from the data"
	}
	op.Mismatch(mm)
	return fmt.Errorf("%w: row %d parity mismatch at chunk offset %d", raid.ErrInconsistent, row, i)
}

// FillRow sets a whole row's parity par[0] from its data chunks, in the
// members' memory (raid.RowFiller: a full-stripe write received in
// place). Non-temporal stores: the parity is not read again soon.
func (l *Layout) FillRow(op *raid.Op, data, par [][]byte) { l.fill(op, par[0], data, true) }
