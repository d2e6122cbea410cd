package nbd

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// memDev is an in-memory Device implementing every optional interface but
// BlockStatuser (statusDev in blockstatus_test.go adds that). It
// counts calls so tests can check what the server did.
type memDev struct {
	mu   sync.RWMutex
	data []byte

	fastZero  atomic.Bool
	multiConn bool
	bsMin     uint32
	bsPref    uint32
	bsMax     uint32

	// latency, if set, is slept before each ReadAt/WriteAt.
	latency func(off int64) time.Duration
	// gate, if set, blocks ReadAt until it is closed; entered receives one
	// value per ReadAt that reached the gate.
	gate    chan struct{}
	entered chan struct{}

	syncs, fuaWrites, writes, reads atomic.Int64
	discards, zeroes, caches        atomic.Int64
	lastNoHole                      atomic.Bool
	// zeroNotSup makes WriteZeroes fail with ENOTSUP (to exercise the
	// fallback).
	zeroNotSup bool
	// fastZeroAlign, if set, makes FastZeroAt true only for ranges that
	// cover a whole aligned block of that many bytes (as a parity array's
	// stripes).
	fastZeroAlign int64
}

func newMemDev(size int) *memDev { return &memDev{data: make([]byte, size)} }

func (m *memDev) Size() int64 { return int64(len(m.data)) }

func (m *memDev) ReadAt(p []byte, off int64) (int, error) {
	m.reads.Add(1)
	if m.latency != nil {
		time.Sleep(m.latency(off))
	}
	if m.gate != nil {
		if m.entered != nil {
			m.entered <- struct{}{}
		}
		<-m.gate
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return copy(p, m.data[off:]), nil
}

func (m *memDev) WriteAt(p []byte, off int64) (int, error) {
	m.writes.Add(1)
	if m.latency != nil {
		time.Sleep(m.latency(off))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return copy(m.data[off:], p), nil
}

func (m *memDev) WriteAtFUA(p []byte, off int64) (int, error) {
	m.fuaWrites.Add(1)
	n, err := m.WriteAt(p, off)
	m.syncs.Add(1)
	return n, err
}

func (m *memDev) Sync() error { m.syncs.Add(1); return nil }

func (m *memDev) Discard(off, n int64) error {
	m.discards.Add(1)
	m.fill(off, n, 0)
	return nil
}

func (m *memDev) WriteZeroes(off, n int64, noHole bool) error {
	m.zeroes.Add(1)
	m.lastNoHole.Store(noHole)
	if m.zeroNotSup {
		return syscall.EOPNOTSUPP
	}
	m.fill(off, n, 0)
	return nil
}

func (m *memDev) CanFastZero() bool { return m.fastZero.Load() }
func (m *memDev) FastZeroAt(off, n int64) bool {
	a := m.fastZeroAlign
	return a == 0 || (off+a-1)/a*a+a <= off+n
}
func (m *memDev) CanMultiConn() bool { return m.multiConn }
func (m *memDev) Cache(off, n int64) error {
	m.caches.Add(1)
	return nil
}

func (m *memDev) BlockSizes() (uint32, uint32, uint32) { return m.bsMin, m.bsPref, m.bsMax }

func (m *memDev) fill(off, n int64, v byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := off; i < off+n; i++ {
		m.data[i] = v
	}
}

func (m *memDev) snapshot(off, n int64) []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return append([]byte(nil), m.data[off:off+n]...)
}

// plainDev implements only Device: no optional capability may be advertised.
type plainDev struct{ m *memDev }

func (p plainDev) ReadAt(b []byte, off int64) (int, error)  { return p.m.ReadAt(b, off) }
func (p plainDev) WriteAt(b []byte, off int64) (int, error) { return p.m.WriteAt(b, off) }
func (p plainDev) Size() int64                              { return p.m.Size() }

// syncDev adds only Sync to a plain device (FUA via WriteAt + Sync).
type syncDev struct{ plainDev }

func (s syncDev) Sync() error { return s.m.Sync() }

// failDev returns errors from a "bad" region [badFrom, size): reads there
// return the bytes before badFrom and err; writes there fail with err.
type failDev struct {
	m       *memDev
	badFrom int64
	err     error
}

func (f failDev) Size() int64 { return f.m.Size() }

func (f failDev) ReadAt(p []byte, off int64) (int, error) {
	end := off + int64(len(p))
	if end <= f.badFrom {
		return f.m.ReadAt(p, off)
	}
	good := max(0, f.badFrom-off)
	n, _ := f.m.ReadAt(p[:good], off)
	return n, f.err
}

func (f failDev) WriteAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > f.badFrom {
		return 0, f.err
	}
	return f.m.WriteAt(p, off)
}

func (f failDev) Sync() error { return f.err }
