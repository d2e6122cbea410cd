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

// byteSem is a weighted semaphore counting payload bytes in flight on one
// connection. Only the connection's reader acquires; workers release.
type byteSem struct {
	mu    sync.Mutex
	cond  sync.Cond
	avail int64
}

func (s *byteSem) init(n int64) {
	s.avail = n
	s.cond.L = &s.mu
}

// acquire blocks until n bytes are available and takes them. n must not
// exceed the semaphore's capacity (Options.Validate guarantees that
// MaxInFlightBytes >= MaxPayload).
func (s *byteSem) acquire(n int64) {
	s.mu.Lock()
	for s.avail < n {
		s.cond.Wait()
	}
	s.avail -= n
	s.mu.Unlock()
}

func (s *byteSem) release(n int64) {
	s.mu.Lock()
	s.avail += n
	s.mu.Unlock()
	s.cond.Signal()
}

// zeroBuf is a read-only buffer of zeroes used to emulate WRITE_ZEROES with
// WriteAt. io.WriterAt implementations must not modify p, so sharing it is
// safe.
var zeroBuf = sync.OnceValue(func() []byte { return make([]byte, 1<<20) })
