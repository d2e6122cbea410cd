package membertest

import (
	"fmt"
	"io"
	"math/rand"
	"os"
	"sync"

	"github.com/raidd/raidd/internal/member"
)

// SectorSize is the granularity at which Crash keeps or loses unsynced
// writes: a sector is written entirely or not at all, as on a disk with
// 512-byte atomic sectors.
const SectorSize = 512

// Crashable is an in-memory member that keeps durable bytes and unsynced
// operations apart, to simulate power loss. WriteAt and Discard update the
// volatile view that ReadAt returns and record a pending operation; Sync
// makes every pending operation durable; Crash throws away the volatile view
// and keeps the durable bytes plus a seeded random subset of the pending
// sectors. After Crash the same Crashable is open again and holds the
// post-crash state, so it can be handed to a restarted array.
//
// All methods are safe for concurrent use (a mutex serializes them; this is
// a test double, not a fast path).
type Crashable struct {
	mu       sync.RWMutex
	durable  []byte
	volatile []byte
	pending  []pendingOp
	closed   bool
}

// pendingOp is an unsynced write (data != nil) or discard (data == nil).
type pendingOp struct {
	off  int64
	n    int64
	data []byte
}

// CrashResult describes what a crash did to the pending operations.
type CrashResult struct {
	Ops         int // pending operations at the time of the crash
	SectorsKept int // pending sector writes that reached the durable bytes
	SectorsLost int // pending sector writes that were lost
}

// NewCrashable returns a zero-filled Crashable of size bytes, all durable.
// It panics if size is negative.
func NewCrashable(size int64) *Crashable {
	if size < 0 {
		panic(fmt.Sprintf("membertest: NewCrashable with negative size %d", size))
	}
	return &Crashable{durable: make([]byte, size), volatile: make([]byte, size)}
}

// Size returns the member's size in bytes.
func (c *Crashable) Size() int64 { return int64(len(c.durable)) }

// ReadAt reads the volatile view (every write that returned, synced or not).
// It returns io.EOF when the read reaches Size, an error wrapping
// member.ErrOutOfRange for a negative off, and os.ErrClosed after Close.
func (c *Crashable) ReadAt(p []byte, off int64) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return 0, c.closedErr()
	}
	if off < 0 {
		return 0, c.rangeErr("read", off, int64(len(p)))
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= int64(len(c.volatile)) {
		return 0, io.EOF
	}
	n := copy(p, c.volatile[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt updates the volatile view and records a pending write holding a
// copy of p. A write reaching past Size writes the part that fits and
// returns an error wrapping member.ErrOutOfRange. p is not retained.
func (c *Crashable) WriteAt(p []byte, off int64) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, c.closedErr()
	}
	size := int64(len(c.volatile))
	if off < 0 || off > size {
		return 0, c.rangeErr("write", off, int64(len(p)))
	}
	n := copy(c.volatile[off:], p)
	if n > 0 {
		c.pending = append(c.pending, pendingOp{off: off, n: int64(n), data: append([]byte(nil), p[:n]...)})
	}
	if n < len(p) {
		return n, c.rangeErr("write", off, int64(len(p)))
	}
	return n, nil
}

// Discard zeroes [off, off+n) in the volatile view and records a pending
// discard. It returns an error wrapping member.ErrOutOfRange unless the
// range lies within the member.
func (c *Crashable) Discard(off, n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.closedErr()
	}
	size := int64(len(c.volatile))
	if off < 0 || n < 0 || off > size || n > size-off {
		return c.rangeErr("discard", off, n)
	}
	if n > 0 {
		clear(c.volatile[off : off+n])
		c.pending = append(c.pending, pendingOp{off: off, n: n})
	}
	return nil
}

// Sync makes every pending operation durable, in order.
func (c *Crashable) Sync() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.closedErr()
	}
	for _, op := range c.pending {
		if op.data == nil {
			clear(c.durable[op.off : op.off+op.n])
		} else {
			copy(c.durable[op.off:], op.data)
		}
	}
	c.dropPending()
	return nil
}

// Close marks the member closed; later calls fail with os.ErrClosed until
// Crash reopens it. Close does not sync.
func (c *Crashable) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.closedErr()
	}
	c.closed = true
	return nil
}

// Crash simulates a power cut and reboot, keeping each pending sector write
// with probability 1/2. See CrashKeep.
func (c *Crashable) Crash(seed int64) CrashResult { return c.CrashKeep(seed, 0.5) }

// CrashKeep simulates a power cut and reboot. Every pending operation is cut
// at SectorSize boundaries; going through the operations in the order they
// were issued, each piece is independently applied to the durable bytes with
// probability keep (drawn from a source seeded with seed) or lost. The
// volatile view then becomes the durable bytes, the pending list is
// emptied, and the member is open again even if it was closed. The same seed
// and the same pending operations give the same result.
func (c *Crashable) CrashKeep(seed int64, keep float64) CrashResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	rng := rand.New(rand.NewSource(seed))
	res := CrashResult{Ops: len(c.pending)}
	for _, op := range c.pending {
		for pos := op.off; pos < op.off+op.n; {
			end := min((pos/SectorSize+1)*SectorSize, op.off+op.n)
			if rng.Float64() >= keep {
				res.SectorsLost++
				pos = end
				continue
			}
			res.SectorsKept++
			if op.data == nil {
				clear(c.durable[pos:end])
			} else {
				copy(c.durable[pos:end], op.data[pos-op.off:end-op.off])
			}
			pos = end
		}
	}
	c.dropPending()
	copy(c.volatile, c.durable)
	c.closed = false
	return res
}

// Durable returns a copy of the durable bytes: what a crash with no pending
// sector kept would leave.
func (c *Crashable) Durable() []byte {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]byte(nil), c.durable...)
}

// Pending returns the number of operations not yet made durable by Sync.
func (c *Crashable) Pending() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.pending)
}

// dropPending empties the pending list, releasing the copied data.
func (c *Crashable) dropPending() {
	clear(c.pending)
	c.pending = c.pending[:0]
}

func (c *Crashable) closedErr() error {
	return fmt.Errorf("membertest: crashable: %w", os.ErrClosed)
}

func (c *Crashable) rangeErr(op string, off, n int64) error {
	return fmt.Errorf("membertest: crashable %s [%d, +%d) with size %d: %w", op, off, n, len(c.durable), member.ErrOutOfRange)
}
