package raid

import (
	"fmt"
	"sync"

	"github.com/raidd/raidd/stripe"
)

// Layout is a RAID personality: how to read, write, discard, resync, rebuild
// and check around member states, and which engine policies its level wants
// (Traits). The Array validates requests and holds the stripe locks before
// it calls a Layout (except for reads that Traits allow to run unlocked; a
// Layout that finds it must reconstruct returns op.NeedLock() and is called
// again under the locks). A Layout never
// validates user input, never takes locks and never changes member states:
// member failures go through the Op, which records them, and the Array
// persists them before the request is acknowledged.
type Layout interface {
	// Traits describes the level's policy. It is asked once, when the array starts.
	Traits() Traits
	// ReadAt fills p with array bytes [off, off+len(p)).
	ReadAt(op *Op, p []byte, off int64) error
	// WriteAt stores p at array offset off on every writable member that
	// needs it. With op.Zero set, p is all zeroes and the Layout may use it
	// to release space.
	WriteAt(op *Op, p []byte, off int64) error
	// Discard makes [off, off+n) read as zeroes, keeping redundancy consistent.
	Discard(op *Op, off, n int64) error
	// Resync makes member row row consistent: parity recomputed from data,
	// or mirrors copied from one readable copy. Used after an unclean
	// shutdown and at creation.
	Resync(op *Op, row int64) error
	// Rebuild reconstructs member row row onto member target, which is
	// writable but not readable.
	Rebuild(op *Op, row int64, target int) error
	// Check compares row row's copies or parity: nil when they agree, an
	// error wrapping ErrInconsistent when they disagree, and one wrapping
	// ErrUnverifiable when too few copies or members could be read to
	// compare (or the level keeps no redundancy).
	Check(op *Op, row int64) error
}

// MultiRebuilder is implemented by Layouts that rebuild several members of
// a row from one read of the others (RAID6 with two members missing). A
// rebuild of several roles uses it; without it, Rebuild is called for each
// target in turn within the same row step.
type MultiRebuilder interface {
	// RebuildMany reconstructs member row row onto every member of
	// targets, which are writable but not readable.
	RebuildMany(op *Op, row int64, targets []int) error
}

// Traits are the level policies the engine applies around a Layout. The
// engine asks them instead of comparing levels: everything else it needs
// (how many members may be missing, where a byte's copies are, which rows
// a row's chunks span) comes from the stripe.Geometry.
type Traits struct {
	// LockWrites makes writes take the stripe locks of what they touch.
	// Every level with redundancy needs it: concurrent writes to one stripe
	// must reach every copy, or the data and its parity, in the same order.
	// Without redundancy each byte has one home and writes need no lock.
	LockWrites bool
	// LockDegradedReads makes a degraded array's reads take the stripe
	// locks up front, for levels whose degraded reads mostly reconstruct
	// from the rest of a row (parity), which must not change meanwhile.
	// Without it a read runs unlocked and the Layout asks for the locks
	// (op.NeedLock) only when it finds it must reconstruct.
	LockDegradedReads bool
	// Coalesce gathers concurrent partial-stripe writes to one stripe into
	// one write (see coalesce.go): worth it where a partial-stripe write
	// costs reads and a parity update.
	Coalesce bool
	// ResyncDegraded allows the resync after an unclean shutdown while the
	// array is degraded. Mirrors resync from any readable copy; a parity
	// level with a member missing cannot tell stale parity from the missing
	// member's data (the write hole), so it leaves the rows as they are and
	// warns.
	ResyncDegraded bool
	// ResyncRedundant allows that resync while the missing members leave
	// the array redundancy to spare (RAID6 missing one member): its rows'
	// parities must still agree with each other, and the write-hole log
	// does not record the full-stripe writes a crash may have torn. The
	// Layout's Resync then handles a row with members missing.
	ResyncRedundant bool
	// Journal says the level's partial-stripe writes can open the write
	// hole (parity computed from data that a crash may tear): its arrays
	// keep a write-hole log by default (consistency policy "ppl",
	// journal.go), and its Layout brackets each row write with
	// Op.BeginRow and Op.EndRow, plans its record with Op.PlanRowLog and
	// writes it with Op.LogRow.
	Journal bool
}

// NewLayout builds a personality for a validated geometry.
type NewLayout func(g stripe.Geometry) (Layout, error)

var (
	registryMu sync.RWMutex
	registry   = map[stripe.Level]NewLayout{}
)

// Register makes a personality available for a level. Each personality
// package calls it from init; import the package (raid/raid0, raid1, raid5,
// raid6, raid10) to enable its level. Registering a level twice panics.
func Register(level stripe.Level, f NewLayout) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[level]; dup {
		panic("raid: level registered twice: " + level.String())
	}
	registry[level] = f
}

func newLayout(g stripe.Geometry) (Layout, error) {
	registryMu.RLock()
	f := registry[g.Level()]
	registryMu.RUnlock()
	if f == nil {
		return nil, fmt.Errorf("%w: %s (import github.com/raidd/raidd/raid/%s)", ErrUnregistered, g.Level(), g.Level())
	}
	return f(g)
}
