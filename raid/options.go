package raid

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/raidd/raidd/raid/internal/clock"
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
	// KeepZeroes disables zero-block elision: by default every aligned
	// all-zero 4 KiB block of a member write becomes a discard (a hole)
	// instead of data.
	KeepZeroes bool
	// IOWorkers is the number of goroutines issuing member I/O. 0 means
	// 16 per member, at most 256.
	IOWorkers int
	// NoCoalesce disables gathering concurrent partial-stripe writes to the
	// same RAID5 stripe into one write (see coalesce.go).
	NoCoalesce bool
	// StripeCache is the memory, in bytes, of the stripe cache of parity
	// levels (RAID5, RAID6; see stripecache.go): partial-stripe pieces of
	// writes are held there, acknowledged, until their stripe is complete
	// (then written as a full stripe, with no reads), StripeCacheDelay
	// passes, the cache fills, or a FLUSH or FUA arrives. 0 disables the
	// cache: every write is on the members before it is acknowledged, and
	// concurrent partial writes of one stripe are gathered instead (see
	// NoCoalesce). raidd serve uses DefaultStripeCache. A cache smaller
	// than one stripe width is disabled.
	StripeCache int64
	// StripeCacheDelay is how long a partial stripe may stay cached. 0
	// means DefaultStripeCacheDelay.
	StripeCacheDelay time.Duration
	// RandomWriteBack says whether the stripe cache also holds random
	// partial-stripe writes, which it otherwise sends to the members at
	// once (see holdsRandom in stripecache.go). The zero value,
	// WriteBackAuto, holds them when the array keeps a write-hole log on
	// members that are not held in memory.
	RandomWriteBack WriteBack
	// ForceAssemble lets Assemble start an array that has lost more members
	// than its level tolerates, by trusting the freshest left-out members
	// whose data is intact (mdadm --assemble --force); see Assemble.
	ForceAssemble bool
	// AcceptLoss lets a forced assembly trust left-out members although a
	// member that was in sync at the newest event (and so holds writes
	// they missed) is absent: only for a member lost for good, whose
	// writes are then lost. Without it Assemble refuses and says so.
	AcceptLoss bool
	// NoResync skips the background resync after an unclean shutdown (tests).
	NoResync bool
	// OnEvent, if set, receives every state transition (member failed,
	// spare claimed, rebuild progress, ...) from a goroutine of its own.
	OnEvent func(Event)
	// RebuildMinRate and RebuildMaxRate bound rebuild, replace and resync
	// speed in bytes per second per member, like md's speed_limit_min and
	// speed_limit_max: while clients are doing I/O the job runs at the
	// minimum, otherwise as fast as the maximum allows. The bytes counted
	// are those actually read or written on the busiest member of each
	// step, so rows rebuilt as holes cost nothing. 0 means 16 MiB/s for the
	// minimum and no limit for the maximum.
	RebuildMinRate, RebuildMaxRate int64
	// ChecksumCache bounds the memory holding checksum pages of an array
	// with checksums, in bytes over all members (split evenly between
	// them). 0 means DefaultChecksumCache (64 MiB: the checksums of about
	// 64 GiB of data); requests in flight may exceed it by the pages they
	// touch.
	ChecksumCache int64
	// ProgressInterval is how often rebuild progress is checkpointed in the
	// superblocks and reported as an event. 0 means 5s.
	ProgressInterval time.Duration
	// ScrubInterval starts a scrub (StartScrub) this long after the last
	// one finished, or after creation for an array never scrubbed; the
	// time is kept in the superblocks, so restarts do not scrub again at
	// once. 0 disables the schedule. ScrubRepair makes the scheduled
	// scrubs repair what they find.
	ScrubInterval time.Duration
	ScrubRepair   bool

	// clock is the time source of the rebuild rate limiter, the clean
	// marking and the rebuild checkpoints; nil means the wall clock. Tests
	// set a fake one (export_test.go) and move time themselves.
	clock clock.Clock
}

// Validate reports every problem at once.
func (o Options) Validate() error {
	var errs []error
	if o.IOWorkers < 0 {
		errs = append(errs, fmt.Errorf("%w: IOWorkers is %d, want >= 0", ErrConfig, o.IOWorkers))
	}
	if o.ChecksumCache < 0 {
		errs = append(errs, fmt.Errorf("%w: ChecksumCache is %d, want >= 0", ErrConfig, o.ChecksumCache))
	}
	if o.StripeCache < 0 {
		errs = append(errs, fmt.Errorf("%w: StripeCache is %d, want >= 0 (0 disables it)", ErrConfig, o.StripeCache))
	}
	if o.RandomWriteBack < WriteBackAuto || o.RandomWriteBack > WriteBackOff {
		errs = append(errs, fmt.Errorf("%w: RandomWriteBack is %d, want WriteBackAuto, WriteBackOn or WriteBackOff", ErrConfig, o.RandomWriteBack))
	}
	if o.StripeCacheDelay < 0 {
		errs = append(errs, fmt.Errorf("%w: StripeCacheDelay is %v, want >= 0", ErrConfig, o.StripeCacheDelay))
	}
	if o.RebuildMinRate < 0 || o.RebuildMaxRate < 0 {
		errs = append(errs, fmt.Errorf("%w: rebuild rates must be >= 0 (min %d, max %d)", ErrConfig, o.RebuildMinRate, o.RebuildMaxRate))
	}
	if o.ScrubInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: ScrubInterval is %s, want >= 0 (0 disables the schedule)", ErrConfig, o.ScrubInterval))
	}
	if o.RebuildMaxRate > 0 && o.RebuildMinRate > o.RebuildMaxRate {
		errs = append(errs, fmt.Errorf("%w: RebuildMinRate %d is above RebuildMaxRate %d", ErrConfig, o.RebuildMinRate, o.RebuildMaxRate))
	}
	return errors.Join(errs...)
}

// WriteBack is a choice of Options.RandomWriteBack.
type WriteBack int8

// Choices of Options.RandomWriteBack.
const (
	WriteBackAuto WriteBack = iota // with a write-hole log on members not in memory
	WriteBackOn                    // always (with a stripe cache)
	WriteBackOff                   // never
)

// String returns the name ParseWriteBack takes: auto, on or off.
func (w WriteBack) String() string {
	switch w {
	case WriteBackAuto:
		return "auto"
	case WriteBackOn:
		return "on"
	case WriteBackOff:
		return "off"
	}
	return fmt.Sprintf("WriteBack(%d)", int8(w))
}

// ParseWriteBack returns the choice of Options.RandomWriteBack named s
// (auto, on or off; empty means auto).
func ParseWriteBack(s string) (WriteBack, error) {
	switch s {
	case "", "auto":
		return WriteBackAuto, nil
	case "on":
		return WriteBackOn, nil
	case "off":
		return WriteBackOff, nil
	}
	return 0, fmt.Errorf("%w: %q is not auto, on or off", ErrConfig, s)
}

// Stripe cache defaults: the size raidd serve uses unless configured
// (Options.StripeCache), and the delay when Options.StripeCacheDelay is 0.
const (
	DefaultStripeCache      = 64 << 20
	DefaultStripeCacheDelay = 5 * time.Millisecond
)

// CreateOptions describe a new array.
type CreateOptions struct {
	Name  string
	Level stripe.Level
	// Chunk is the chunk size in bytes; 0 means stripe.DefaultChunk (512 KiB).
	Chunk int64
	// Force overwrites members that already carry a raidd superblock.
	Force bool
	// Spares are extra members that wait, idle, to replace a member that fails.
	Spares []Device
	// BitmapRegion is the bytes of each member covered by one bit of the
	// write-intent bitmap. 0 means 64 MiB; negative disables the bitmap
	// (then a crash means a full resync).
	BitmapRegion int64
	// Checksums keeps a CRC32C of every 4 KiB block of every member's data
	// region in a checksum area reserved on each member (see checksums.go):
	// every read is verified, and a block that fails is served and
	// rewritten from redundancy. It cannot be changed later.
	Checksums bool
	// ConsistencyPolicy chooses how a crash is made safe: the zero value
	// is "ppl" for RAID5 and RAID6 and "bitmap" for the other levels.
	ConsistencyPolicy ConsistencyPolicy
}

// ConsistencyPolicy says, in md's words, what keeps an array's redundancy
// right across a crash.
type ConsistencyPolicy uint8

const (
	// PolicyDefault is PolicyJournal for the levels that have a write
	// hole (RAID5, RAID6) and PolicyBitmap for the others.
	PolicyDefault ConsistencyPolicy = iota
	// PolicyBitmap: the write-intent bitmap's dirty regions (or the whole
	// array, without a bitmap) are resynced after a crash. On RAID5 and
	// RAID6 this leaves the write hole open: a crash while a member is
	// missing (or that leaves one missing) can corrupt data the crashed
	// writes did not touch.
	PolicyBitmap
	// PolicyJournal ("ppl", md's partial parity log; "journal" is the name
	// an earlier raidd gave it) adds the write-hole log to the bitmap:
	// before a row write that can open the write hole reaches data or
	// parity, the row's partial parity is recorded on its parity members'
	// log areas, and assembly recomputes the parity from it (journal.go).
	PolicyJournal
)

func (p ConsistencyPolicy) String() string {
	switch p {
	case PolicyDefault:
		return "default"
	case PolicyBitmap:
		return "bitmap"
	case PolicyJournal:
		return "ppl"
	}
	return fmt.Sprintf("ConsistencyPolicy(%d)", uint8(p))
}

// CanonicalConsistencyPolicy returns the name Status and examine use for
// a consistency policy named s: "ppl" for "journal" (what an earlier
// raidd called the write-hole log), s otherwise.
func CanonicalConsistencyPolicy(s string) string {
	if s == "journal" {
		return "ppl"
	}
	return s
}

// ParseConsistencyPolicy parses "bitmap" or "ppl" ("journal", its name in
// an earlier raidd, too), and "" as PolicyDefault; any other word wraps
// ErrConfig.
func ParseConsistencyPolicy(s string) (ConsistencyPolicy, error) {
	switch s {
	case "":
		return PolicyDefault, nil
	case "bitmap":
		return PolicyBitmap, nil
	case "ppl", "journal":
		return PolicyJournal, nil
	}
	return 0, fmt.Errorf("%w: consistency policy %q is not ppl (the partial parity log that closes the RAID5/RAID6 write hole, their default) or bitmap (no write-hole protection)", ErrConfig, s)
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
		errs = append(errs, fmt.Errorf("%w: Level %d is not 0, 1, 5, 6 or 10", ErrConfig, int(c.Level)))
	}
	if ch := c.Chunk; ch != 0 && (ch < stripe.MinChunk || ch > stripe.MaxChunk || ch&(ch-1) != 0) {
		errs = append(errs, fmt.Errorf("%w: Chunk %d is not a power of two from %d to %d", ErrConfig, ch, stripe.MinChunk, stripe.MaxChunk))
	}
	if c.ConsistencyPolicy > PolicyJournal {
		errs = append(errs, fmt.Errorf("%w: ConsistencyPolicy %d is not default, bitmap or journal", ErrConfig, c.ConsistencyPolicy))
	}
	if r := c.BitmapRegion; r > 0 && (r < stripe.MinChunk || r&(r-1) != 0) {
		errs = append(errs, fmt.Errorf("%w: BitmapRegion %d is not a power of two of at least %d", ErrConfig, r, stripe.MinChunk))
	}
	return errors.Join(errs...)
}
