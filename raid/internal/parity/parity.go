// Package parity holds what the parity levels (raid5, raid6) share: the
// description of the part of one row a write touches, and the walk that
// cuts a write into such rows. The plans that turn a row into member I/O
// (read-modify-write or reconstruct-write, one or two parities) stay in
// each level's package.
package parity

import (
	"errors"
	"sync"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// RowWrite describes the part of one row a write touches. Data holds slices
// of the caller's buffer (or op.Zeroes), valid until the Op ends.
type RowWrite struct {
	Row    int64
	Base   int64 // member offset of the row
	Lo, Hi int64 // union of the written chunk-relative ranges
	// Per data index: the written range [A, B) and its data; len(Data) == 0
	// if the index is untouched.
	A, B [stripe.MaxMembers]int64
	Data [stripe.MaxMembers][]byte

	spans [stripe.MaxMembers]raid.Span
}

// Spans returns the written range of each touched data index of the
// dataMembers, in index order, for raid.Op.PlanRowLog. The slice is w's and
// valid until the next call.
func (w *RowWrite) Spans(dataMembers int) []raid.Span {
	s := w.spans[:0]
	for i := 0; i < dataMembers; i++ {
		if w.Touched(i) {
			s = append(s, raid.Span{Index: i, A: w.A[i], B: w.B[i]})
		}
	}
	return s
}

// Touched reports whether data index i is written.
func (w *RowWrite) Touched(i int) bool { return len(w.Data[i]) != 0 }

// Covers reports whether data index i is written over all of [Lo, Hi).
func (w *RowWrite) Covers(i int) bool {
	return w.Touched(i) && w.A[i] <= w.Lo && w.B[i] >= w.Hi
}

// ErrReplan tells a row's write plan that a member failed while the plan
// read: the row must be planned again against the new member set.
var ErrReplan = errors.New("parity: a member failed while reading: plan the row again")

// PlanRow runs plan for one row between op.BeginRow and op.EndRow, and runs
// it again for as long as it returns ErrReplan.
func PlanRow(op *raid.Op, plan func() error) error {
	for {
		op.BeginRow()
		err := plan()
		op.EndRow()
		if err != ErrReplan {
			return err
		}
	}
}

// rowWrites pools the RowWrite each EachRow call walks with: it is several
// KiB (arrays sized for stripe.MaxMembers), and handed to writeRow through
// a function value it would escape, so a RowWrite per call was a heap
// allocation per array write, which cost a parity full-stripe write about
// 40% of its CPU time (zeroing and typing 4.8 KiB of fresh heap per write;
// TestEachRowAllocs).
var rowWrites = sync.Pool{New: func() any { return new(RowWrite) }}

// EachRow cuts the write of p (or of zeroes when p is nil) to array bytes
// [off, off+n) into rows and calls writeRow for each, in order, with w
// describing it; w is reused between calls and must not be kept after
// writeRow returns. chunk is the chunk size and dataMembers the number of
// data chunks in a row. It stops at the first error. writeRow must not
// call op.Extents: the extents EachRow walks are the Op's scratch.
func EachRow(op *raid.Op, p []byte, off, n, chunk int64, dataMembers int, writeRow func(*RowWrite) error) error {
	w := rowWrites.Get().(*RowWrite)
	defer func() {
		// Drop the references to the caller's buffer before pooling.
		clear(w.Data[:dataMembers])
		rowWrites.Put(w)
	}()
	exts := op.Extents(off, n)
	for i := 0; i < len(exts); {
		j := i
		row := exts[i].Row
		w.Row, w.Base, w.Lo, w.Hi = row, row*chunk, chunk, 0
		clear(w.Data[:dataMembers])
		for ; j < len(exts) && exts[j].Row == row; j++ {
			e := exts[j]
			in := e.Off - w.Base
			w.A[e.Index], w.B[e.Index] = in, in+e.Len
			if p == nil {
				w.Data[e.Index] = op.Zeroes(e.Len)
			} else {
				w.Data[e.Index] = p[e.BufOff : e.BufOff+e.Len]
			}
			w.Lo, w.Hi = min(w.Lo, in), max(w.Hi, in+e.Len)
		}
		if err := writeRow(w); err != nil {
			return err
		}
		i = j
	}
	return nil
}
