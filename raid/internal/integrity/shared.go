package integrity

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Shared holds the checksums of data that is written unchanged to several
// devices (the copies of a mirrored chunk, a role and its replacement), so
// that they are computed once instead of once per copy. The writers that
// use it (Dev.WriteShared) split the work: each claims pieces of
// sharePiece blocks until none is left, then waits for the pieces the
// others claimed. No writer waits for one that has not started: a piece is
// claimed only by a writer that then computes it at once. A writer whose
// device checksums as it copies claims every piece if none is claimed yet
// (claimAll) and computes them in its copy; a writer that finds pieces
// claimed writes first and waits afterwards.
//
// A Shared is prepared by Reset before the writes are started, and
// Released once every write using it has returned (then it may be Reset
// again). The buffers must not change in between (they are being
// written).
type Shared struct {
	bufs   [][]byte
	es     []uint32
	pieces []sharedPiece
	next   atomic.Int64
	left   sync.WaitGroup
}

// sharePiece is the number of blocks one writer checksums at a time.
const sharePiece = 16

type sharedPiece struct {
	buf, off int // bufs[buf][off:], whole blocks
	n        int // blocks
	e        int // index of the first block's entry in es
}

// Reset prepares s for the buffers bufs, written back to back from a
// block-aligned offset. It reports false, and s is unusable, unless every
// buffer is a whole number of blocks.
func (s *Shared) Reset(bufs [][]byte) bool {
	s.bufs = append(s.bufs[:0], bufs...)
	s.pieces = s.pieces[:0]
	s.es = s.es[:0]
	s.next.Store(0)
	for i, b := range bufs {
		if len(b)%BlockSize != 0 || len(b) == 0 {
			s.bufs, s.pieces = s.bufs[:0], s.pieces[:0]
			return false
		}
		nb := len(b) / BlockSize
		for o := 0; o < nb; o += sharePiece {
			s.pieces = append(s.pieces, sharedPiece{buf: i, off: o * BlockSize, n: min(sharePiece, nb-o), e: len(s.es) + o})
		}
		s.es = slices.Grow(s.es, nb)[:len(s.es)+nb]
	}
	s.left.Add(len(s.pieces))
	return true
}

// Release ends a use of s: the pieces no write claimed (writes that did
// not use s, or failed first) are given up and the buffers forgotten.
func (s *Shared) Release() {
	for s.next.Add(1)-1 < int64(len(s.pieces)) {
		s.left.Done()
	}
	clear(s.bufs)
	s.bufs = s.bufs[:0]
}

// claimAll claims every piece if no writer has claimed one yet: the
// caller then computes all the checksums (a Dev whose device sums as it
// copies, see Dev.WriteShared) into s.es and calls doneAll. It reports
// whether it claimed them.
func (s *Shared) claimAll() bool {
	return len(s.pieces) > 0 && s.next.CompareAndSwap(0, int64(len(s.pieces)))
}

// doneAll ends a claimAll: every checksum in s.es is set.
func (s *Shared) doneAll() { s.left.Add(-len(s.pieces)) }

// sums computes the pieces no writer has claimed yet, waits for the others
// and returns the checksums of every block, in order, and how many of them
// this call computed.
func (s *Shared) sums() ([]uint32, int) {
	n := 0
	for {
		k := s.next.Add(1) - 1
		if k >= int64(len(s.pieces)) {
			break
		}
		pc := s.pieces[k]
		b := s.bufs[pc.buf][pc.off:]
		for j := 0; j < pc.n; j++ {
			s.es[pc.e+j] = Sum(b[j*BlockSize : (j+1)*BlockSize])
		}
		n += pc.n
		s.left.Done()
	}
	s.left.Wait()
	return s.es, n
}
