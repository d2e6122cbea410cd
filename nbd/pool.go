package nbd

import (
	"math/bits"
	"sync"
)

// bufPool hands out payload buffers in power-of-two size classes from 512
// bytes up, so a steady stream of requests reuses buffers instead of
// allocating. Buffers are passed as *[]byte so Put does not allocate.
type bufPool struct {
	classes [31]sync.Pool
}

const minBufClassShift = 9

func bufClass(n int) int {
	if n <= 1<<minBufClassShift {
		return minBufClassShift
	}
	return bits.Len(uint(n - 1))
}

// get returns a buffer of length n (1 <= n <= 1 GiB). Its content is
// arbitrary.
func (p *bufPool) get(n int) *[]byte {
	c := bufClass(n)
	if v := p.classes[c].Get(); v != nil {
		b := v.(*[]byte)
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<c)
	return &b
}

// put returns b to the pool; b must come from get and not be used afterwards.
func (p *bufPool) put(b *[]byte) {
	p.classes[bufClass(cap(*b))].Put(b)
}

// byteSem is a weighted semaphore of payload bytes, granted in FIFO order
// so that a large request is not starved by a stream of small ones. The
// server-wide budget (Options.MaxTotalInFlightBytes) is one, shared by
// every connection's reader; each connection's own bound
// (Options.MaxInFlightBytes) is another, acquired by that connection's
// reader only. Holders release from any goroutine.
type byteSem struct {
	mu      sync.Mutex
	size    int64
	avail   int64
	waiters []*semWaiter // FIFO
}

type semWaiter struct {
	n     int64
	ready chan struct{} // closed when the bytes have been granted
}

func (s *byteSem) init(n int64) {
	s.size, s.avail = n, n
}

// acquire takes n bytes (0 < n <= size), blocking while they are not
// available or earlier waiters are still queued. It returns false, having
// taken nothing, if abort is closed first.
func (s *byteSem) acquire(n int64, abort <-chan struct{}) bool {
	s.mu.Lock()
	if len(s.waiters) == 0 && s.avail >= n {
		s.avail -= n
		s.mu.Unlock()
		return true
	}
	w := &semWaiter{n: n, ready: make(chan struct{})}
	s.waiters = append(s.waiters, w)
	s.mu.Unlock()
	select {
	case <-w.ready:
		return true
	case <-abort:
	}
	s.mu.Lock()
	select {
	case <-w.ready:
		// Granted meanwhile: give the bytes back.
		s.avail += n
	default:
		for i, x := range s.waiters {
			if x == w {
				s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
				break
			}
		}
	}
	// Either way the head of the queue may now fit.
	s.grantLocked()
	s.mu.Unlock()
	return false
}

// tryAcquire takes n bytes if that is possible at once without overtaking
// a waiter.
func (s *byteSem) tryAcquire(n int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.waiters) == 0 && s.avail >= n {
		s.avail -= n
		return true
	}
	return false
}

// release returns n bytes and wakes the waiters that now fit, in order.
func (s *byteSem) release(n int64) {
	s.mu.Lock()
	s.avail += n
	if s.avail > s.size {
		s.mu.Unlock()
		panic("nbd: byteSem released more than acquired")
	}
	s.grantLocked()
	s.mu.Unlock()
}

func (s *byteSem) grantLocked() {
	for len(s.waiters) > 0 && s.avail >= s.waiters[0].n {
		w := s.waiters[0]
		s.waiters[0] = nil
		s.waiters = s.waiters[1:]
		s.avail -= w.n
		close(w.ready)
	}
}

// inUse returns the bytes currently held.
func (s *byteSem) inUse() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.size - s.avail
}

// zeroBuf is a read-only buffer of zeroes used to emulate WRITE_ZEROES with
// WriteAt. io.WriterAt implementations must not modify p, so sharing it is
// safe.
var zeroBuf = sync.OnceValue(func() []byte { return make([]byte, 1<<20) })
