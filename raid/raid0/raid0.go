package raid0

import (
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

func init() { raid.Register(stripe.RAID0, New) }

// Layout is the RAID0 personality.
type Layout struct{}

// New returns the RAID0 personality.
func New(stripe.Geometry) (raid.Layout, error) { return Layout{}, nil }

// Traits: each byte has one home, so nothing needs a lock, there is no
// parity to coalesce for and nothing to resync.
func (Layout) Traits() raid.Traits { return raid.Traits{} }

func (Layout) each(op *raid.Op, off, n int64, read bool, fn func(e stripe.Extent)) error {
	for _, e := range op.Extents(off, n) {
		if (read && !op.Readable(e.Member)) || (!read && !op.Writable(e.Member)) {
			return raid.ErrTooManyFailures
		}
		fn(e)
	}
	if op.Run() != 0 {
		return raid.ErrTooManyFailures
	}
	return nil
}

// ReadAt reads each extent from its member.
func (l Layout) ReadAt(op *raid.Op, p []byte, off int64) error {
	return l.each(op, off, int64(len(p)), true, func(e stripe.Extent) { op.Read(e.Member, p[e.BufOff:e.BufOff+e.Len], e.Off) })
}

// WriteAt writes each extent to its member.
func (l Layout) WriteAt(op *raid.Op, p []byte, off int64) error {
	return l.each(op, off, int64(len(p)), false, func(e stripe.Extent) { op.Write(e.Member, p[e.BufOff:e.BufOff+e.Len], e.Off) })
}

// Discard discards each extent on its member.
func (l Layout) Discard(op *raid.Op, off, n int64) error {
	return l.each(op, off, n, false, func(e stripe.Extent) { op.Discard(e.Member, e.Off, e.Len) })
}

// Resync has nothing to make consistent.
func (Layout) Resync(*raid.Op, int64) error { return nil }

// Rebuild is impossible without redundancy.
func (Layout) Rebuild(*raid.Op, int64, int) error { return raid.ErrTooManyFailures }

// Check has nothing to compare: RAID0 keeps no redundancy, so no row can
// be verified.
func (Layout) Check(*raid.Op, int64) error { return raid.ErrUnverifiable }
