package raid

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// Device is one member handed to Create or Assemble: an open Member and
// the path it was opened from (used in messages and status).
type Device struct {
	Path   string
	Member Member
	// WriteMostly marks a slow mirror member: reads go to it only when no
	// other copy can serve them (md's --write-mostly). It is a runtime
	// setting, not stored in the superblock.
	WriteMostly bool
}

// Options configure a running array. The zero value means defaults.
type Options struct {
	// ReadOnly rejects every write-type call with ErrReadOnly and never
	// writes superblocks.
	ReadOnly bool
	// Logger receives state transitions at Info; nil discards.
	Logger *slog.Logger
	// CleanDelay is the quiet interval after the last write before the
	// array is marked clean on disk. 0 means 2s; negative means only on Close.
	CleanDelay time.Duration
	// KeepZeroes disables zero-block elision: by default an aligned member
	// write of all zeroes becomes a discard (a hole) instead of data.
	KeepZeroes bool
	// IOWorkers is the number of goroutines issuing member I/O. 0 means
	// 16 per member, at most 256.
	IOWorkers int
	// NoResync skips the background resync after an unclean shutdown (tests).
	NoResync bool
}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	if o.IOWorkers < 0 {
		errs = append(errs, fmt.Errorf("%w: IOWorkers is %d, want >= 0", ErrConfig, o.IOWorkers))
	}
	return errors.Join(errs...)
}

// CreateOptions describe a new array.
type CreateOptions struct {
	Name  string
	Level stripe.Level
	// Chunk is the chunk size in bytes; 0 means stripe.DefaultChunk (512 KiB).
	Chunk int64
	// Force overwrites members that already carry a raidd superblock.
	Force bool
}

// Validate reports every problem at once.
func (c CreateOptions) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, fmt.Errorf("%w: Name is empty", ErrConfig))
	}
	if len(c.Name) > superblock.NameMax {
		errs = append(errs, fmt.Errorf("%w: Name %q is longer than %d bytes", ErrConfig, c.Name, superblock.NameMax))
	}
	if !c.Level.Valid() {
		errs = append(errs, fmt.Errorf("%w: Level %d is not 0, 1, 5 or 10", ErrConfig, int(c.Level)))
	}
	if ch := c.Chunk; ch != 0 && (ch < stripe.MinChunk || ch > stripe.MaxChunk || ch&(ch-1) != 0) {
		errs = append(errs, fmt.Errorf("%w: Chunk %d is not a power of two from %d to %d", ErrConfig, ch, stripe.MinChunk, stripe.MaxChunk))
	}
	return errors.Join(errs...)
}
