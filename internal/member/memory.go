package member

import (
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// Memory is a member held in a byte slice, for tests and benchmarks. It is
// "durable" by definition: Sync is a no-op. ReadAt and WriteAt take no lock
// and allocate nothing, so concurrent calls on disjoint ranges scale;
// overlapping concurrent access is the caller's bug (and the race detector
// will say so).
type Memory struct {
	buf    []byte
	closed atomic.Bool
}

var (
	errMemoryClosed = fmt.Errorf("member: memory: %w", os.ErrClosed)
)

// NewMemory returns a zero-filled memory member of size bytes. It panics if
// size is negative, like make.
func NewMemory(size int64) *Memory {
	if size < 0 {
		panic(fmt.Sprintf("member: NewMemory with negative size %d", size))
	}
	return &Memory{buf: make([]byte, size)}
}

// InMemory reports true: writes and syncs never wait for a device.
func (m *Memory) InMemory() bool { return true }

// CanDiscard reports true: discarding memory is clearing it.
func (m *Memory) CanDiscard() bool { return true }

// Bytes returns the member's backing slice, not a copy: writes to it change
// the member, and later WriteAt calls show through it. It stays valid after
// Close. Do not use it concurrently with WriteAt or Discard.
func (m *Memory) Bytes() []byte { return m.buf }

// Size returns the member's size in bytes.
func (m *Memory) Size() int64 { return int64(len(m.buf)) }

// ReadAt copies len(p) bytes at off into p. It returns io.EOF when the read
// reaches Size, ErrOutOfRange for a negative off, and os.ErrClosed after
// Close. p is not retained. Safe for concurrent use.
func (m *Memory) ReadAt(p []byte, off int64) (int, error) {
	if m.closed.Load() {
		return 0, errMemoryClosed
	}
	if off < 0 {
		return 0, m.rangeErr("read", off, int64(len(p)))
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= int64(len(m.buf)) {
		return 0, io.EOF
	}
	n := copy(p, m.buf[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt copies p into the member at off. A write reaching past Size copies
// the part that fits and returns an error wrapping ErrOutOfRange. p is not
// retained. Safe for concurrent use on non-overlapping ranges.
func (m *Memory) WriteAt(p []byte, off int64) (int, error) {
	if m.closed.Load() {
		return 0, errMemoryClosed
	}
	if off < 0 || off > int64(len(m.buf)) {
		return 0, m.rangeErr("write", off, int64(len(p)))
	}
	n := copy(m.buf[off:], p)
	if n < len(p) {
		return n, m.rangeErr("write", off, int64(len(p)))
	}
	return n, nil
}

// Sync returns nil (os.ErrClosed after Close): memory is durable at once.
func (m *Memory) Sync() error {
	if m.closed.Load() {
		return errMemoryClosed
	}
	return nil
}

// Discard zeroes [off, off+n). It returns ErrOutOfRange unless the range lies
// within the member, and os.ErrClosed after Close. Safe for concurrent use
// on non-overlapping ranges.
func (m *Memory) Discard(off, n int64) error {
	if m.closed.Load() {
		return errMemoryClosed
	}
	if off < 0 || n < 0 || off > int64(len(m.buf)) || n > int64(len(m.buf))-off {
		return m.rangeErr("discard", off, n)
	}
	clear(m.buf[off : off+n])
	return nil
}

// Close marks the member closed; every later call but Size and Bytes fails
// with os.ErrClosed, including a second Close. The bytes are kept.
func (m *Memory) Close() error {
	if m.closed.Swap(true) {
		return errMemoryClosed
	}
	return nil
}

func (m *Memory) rangeErr(op string, off, n int64) error {
	return fmt.Errorf("member: memory %s [%d, +%d) with size %d: %w", op, off, n, len(m.buf), ErrOutOfRange)
}
