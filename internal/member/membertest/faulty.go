package membertest

import (
	"errors"
	"sync/atomic"

	"github.com/raidd/raidd/raid"
)

// Faulty wraps a member and consults an Injector before every ReadAt,
// WriteAt, Sync and Discard. Size and Close always pass through. It counts
// every call it receives, whether or not the call failed, so Stats measures
// the I/O the caller issued. Safe for concurrent use whenever the wrapped
// member and the injector are.
type Faulty struct {
	m   raid.Member
	inj Injector

	reads, writes, syncs, discards          atomic.Int64
	bytesRead, bytesWritten, bytesDiscarded atomic.Int64
	injected, dropped, flipped              atomic.Int64
}

// Stats counts the calls a Faulty has received. Bytes are the lengths
// requested by the caller. Injected counts failures returned by the
// injector, Dropped the writes acknowledged without being performed, and
// Flipped the reads whose data was corrupted.
type Stats struct {
	Reads, Writes, Syncs, Discards          int64
	BytesRead, BytesWritten, BytesDiscarded int64
	Injected, Dropped, Flipped              int64
}

// Inject returns m wrapped so that inj can fail or alter its operations. A
// nil inj behaves like Never().
func Inject(m raid.Member, inj Injector) *Faulty {
	if inj == nil {
		inj = Never()
	}
	return &Faulty{m: m, inj: inj}
}

// Unwrap returns the wrapped member.
func (f *Faulty) Unwrap() raid.Member { return f.m }

// Stats returns a snapshot of the counters. Counters are read one by one, so
// a snapshot taken during concurrent I/O need not be consistent across
// fields.
func (f *Faulty) Stats() Stats {
	return Stats{
		Reads: f.reads.Load(), Writes: f.writes.Load(), Syncs: f.syncs.Load(), Discards: f.discards.Load(),
		BytesRead: f.bytesRead.Load(), BytesWritten: f.bytesWritten.Load(), BytesDiscarded: f.bytesDiscarded.Load(),
		Injected: f.injected.Load(), Dropped: f.dropped.Load(), Flipped: f.flipped.Load(),
	}
}

// ResetStats sets every counter to zero.
func (f *Faulty) ResetStats() {
	for _, c := range []*atomic.Int64{
		&f.reads, &f.writes, &f.syncs, &f.discards,
		&f.bytesRead, &f.bytesWritten, &f.bytesDiscarded,
		&f.injected, &f.dropped, &f.flipped,
	} {
		c.Store(0)
	}
}

// ReadAt reads from the wrapped member unless the injector fails the read.
// A BitFlipOnRead decision flips one bit of the bytes actually read. p is not
// retained.
func (f *Faulty) ReadAt(p []byte, off int64) (int, error) {
	f.reads.Add(1)
	f.bytesRead.Add(int64(len(p)))
	var flip flipDecision
	switch d := f.inj.MaybeError(OpRead, off, int64(len(p))); {
	case d == nil, isDrop(d):
	case errors.As(d, &flip):
		n, err := f.m.ReadAt(p, off)
		if n > 0 {
			bit := flip.bit % uint64(n*8)
			p[bit/8] ^= 1 << (bit % 8)
			f.flipped.Add(1)
		}
		return n, err
	default:
		f.injected.Add(1)
		return 0, d
	}
	return f.m.ReadAt(p, off)
}

// WriteAt writes to the wrapped member unless the injector fails the write
// (nothing is written) or drops it (nothing is written, success is
// reported). p is not retained.
func (f *Faulty) WriteAt(p []byte, off int64) (int, error) {
	f.writes.Add(1)
	f.bytesWritten.Add(int64(len(p)))
	switch d := f.inj.MaybeError(OpWrite, off, int64(len(p))); {
	case d == nil, isFlip(d):
	case isDrop(d):
		f.dropped.Add(1)
		return len(p), nil
	default:
		f.injected.Add(1)
		return 0, d
	}
	return f.m.WriteAt(p, off)
}

// Sync syncs the wrapped member unless the injector fails the sync.
func (f *Faulty) Sync() error {
	f.syncs.Add(1)
	if err := f.decide(OpSync, 0, 0); err != nil {
		return err
	}
	return f.m.Sync()
}

// Discard discards on the wrapped member unless the injector fails the call.
func (f *Faulty) Discard(off, n int64) error {
	f.discards.Add(1)
	f.bytesDiscarded.Add(n)
	if err := f.decide(OpDiscard, off, n); err != nil {
		return err
	}
	return f.m.Discard(off, n)
}

// decide consults the injector for an operation on which only failures are
// meaningful; other decisions are ignored.
func (f *Faulty) decide(op Op, off, n int64) error {
	d := f.inj.MaybeError(op, off, n)
	if d == nil || isDrop(d) || isFlip(d) {
		return nil
	}
	f.injected.Add(1)
	return d
}

// Size returns the wrapped member's size.
func (f *Faulty) Size() int64 { return f.m.Size() }

// Close closes the wrapped member; it is never intercepted.
func (f *Faulty) Close() error { return f.m.Close() }

func isDrop(err error) bool {
	var d dropDecision
	return errors.As(err, &d)
}

func isFlip(err error) bool {
	var d flipDecision
	return errors.As(err, &d)
}
