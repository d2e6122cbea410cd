package raid

import (
	"fmt"
	"log/slog"

	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// OpConfig describes the member set of an Op built by NewOp.
type OpConfig struct {
	// Members holds the devices by role (len == the geometry's member
	// count); nil for a missing role, which is neither readable nor
	// writable.
	Members []Member
	// DataOffset is where each member's data region starts; the offsets a
	// Layout passes to Read, Write and Discard are relative to it.
	DataOffset int64
	// Unreadable marks roles (bit m for role m) that receive writes but serve
	// no reads, like a member being rebuilt.
	Unreadable uint64
	// Locked is what Op.Locked reports: whether the caller holds the stripe
	// locks of the request.
	Locked bool
	// ElideZeroes turns aligned all-zero member writes into discards, as a
	// running array does unless Options.KeepZeroes is set.
	ElideZeroes bool
}

// NewOp returns an Op over a member set without an Array, so that a Layout
// can be tested on its own: member I/O runs synchronously in Run, member
// failures are recorded on the Op (Failed, ReadFailed) and nothing is
// persisted. Each call of a Layout method should get an Op of its own, as
// it does in an Array; an Op from NewOp is not pooled.
func NewOp(g stripe.Geometry, c OpConfig) (*Op, error) {
	n := g.Members()
	if n == 0 {
		return nil, fmt.Errorf("%w: NewOp needs a geometry built by stripe.New", ErrConfig)
	}
	if len(c.Members) != n {
		return nil, fmt.Errorf("%w: %d members for a %d-member geometry", ErrConfig, len(c.Members), n)
	}
	if c.DataOffset < 0 {
		return nil, fmt.Errorf("%w: NewOp: negative DataOffset %d", ErrConfig, c.DataOffset)
	}
	a := &Array{
		geo:         g,
		log:         slog.New(slog.DiscardHandler),
		zeroElide:   c.ElideZeroes,
		zero:        make([]byte, g.Chunk()),
		inlineAbove: -1, // every Run does its I/O inline: no workers
		meta:        &superblock.Meta{},
	}
	chunk := g.Chunk()
	a.bufPool.New = func() any { b := make([]byte, chunk); return &b }
	v := &View{geo: g, dataOff: c.DataOffset, devs: append([]Member(nil), c.Members...), repl: make([]Member, n)}
	for m, d := range c.Members {
		if d == nil {
			continue
		}
		bit := uint64(1) << uint(m)
		v.writable |= bit
		if c.Unreadable&bit == 0 {
			v.readable |= bit
		}
	}
	v.failed = !g.Survives(^v.readable)
	v.inMemory = heldInMemory(v)
	return &Op{a: a, v: v, geo: g, locked: c.Locked, Shards: make([][]byte, n), Scratch: make([][]byte, n)}, nil
}
