package raid

import (
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"github.com/raidd/raidd/raid/internal/integrity"
)

var (
	// ErrFailed is returned by I/O on an array that has lost more members
	// than its level tolerates. It wraps syscall.EIO so that servers map it
	// to an I/O error.
	ErrFailed = fmt.Errorf("raid: array failed: %w", syscall.EIO)
	// ErrRange is returned for a request outside the array. Reads wrap
	// EINVAL and writes wrap ENOSPC, as the NBD protocol wants.
	ErrRange = errors.New("raid: request outside the array")
	// ErrReadOnly is returned by every write-type call on a read-only array. It wraps EPERM.
	ErrReadOnly = fmt.Errorf("raid: array is read-only: %w", syscall.EPERM)
	// ErrClosed is returned by calls on a closed array.
	ErrClosed = fmt.Errorf("raid: array closed: %w", syscall.ESHUTDOWN)
	// ErrInconsistent is wrapped by Check when mirrors differ or parity does not match data.
	ErrInconsistent = errors.New("raid: inconsistent stripe")
	// ErrUnverifiable is wrapped by Check when some rows could not be
	// verified: the array is degraded and those rows have no redundancy
	// left to compare (a RAID5 row missing a member, a mirror chunk with
	// one readable copy), or the level keeps none (RAID0). A Layout's Check
	// returns it for such a row.
	ErrUnverifiable = errors.New("raid: rows could not be verified")
	// ErrInUse is returned by Create for a member that already carries a raidd superblock, unless forced.
	ErrInUse = errors.New("raid: member already belongs to an array")
	// ErrNotMember is returned by Assemble for a device without a raidd superblock.
	ErrNotMember = errors.New("raid: not a raidd member")
	// ErrForeign is returned by Assemble for a member of another array.
	ErrForeign = errors.New("raid: member of another array")
	// ErrCorrupt is returned by Assemble for a member whose superblock cannot be trusted.
	ErrCorrupt = errors.New("raid: corrupt superblock")
	// ErrCannotStart is returned by Assemble when too many members are missing or stale.
	ErrCannotStart = errors.New("raid: array cannot start")
	// ErrConfig is wrapped by Options and CreateOptions validation errors.
	ErrConfig = errors.New("raid: invalid configuration")
	// ErrIO is returned by a request on an array without redundancy (RAID0)
	// when a member fails it, and by a read of blocks that fail their
	// checksum when no copy or parity can rebuild them (joined with the
	// mismatches, which wrap ErrChecksum). It wraps EIO. The member is not marked failed:
	// like md, the array keeps running and only the affected range errs.
	ErrIO = fmt.Errorf("raid: member I/O error: %w", syscall.EIO)
	// ErrChecksum is wrapped by the member error of a block that failed its
	// checksum (arrays with checksums); it wraps EIO. A read returns it,
	// joined with ErrIO, only when no copy or parity could rebuild the block.
	ErrChecksum = integrity.ErrMismatch
	// ErrWouldFail is returned by FailMemberChecked when failing the member
	// would leave the array with more members missing than its level
	// tolerates, and force was not given.
	ErrWouldFail = errors.New("raid: failing this member would fail the array")
	// ErrDiverged is returned by a forced Assemble when the members needed
	// to start have histories that diverged, so no choice of members is safe.
	ErrDiverged = errors.New("raid: member histories diverged")
	// ErrNoMember is returned by the member management calls when the named
	// member is not part of the array.
	ErrNoMember = errors.New("raid: no such member")
	// ErrBusy is returned when a member change conflicts with the array's
	// state (an active member cannot be removed; a replace needs no other
	// rebuild running).
	ErrBusy = errors.New("raid: member change not possible now")
	// ErrUnregistered is returned when no personality is registered for a level.
	ErrUnregistered = errors.New("raid: level not registered")

	// ErrJournal is returned by Create and Assemble when the write-hole
	// journal cannot be read, replayed or started on a member: the error
	// names the member and wraps the cause. Leaving that member out
	// (it counts as missing) lets the others start.
	ErrJournal = errors.New("raid: write-hole journal")

	// ErrTooManyFailures is returned by a Layout when the members that are
	// unusable for an operation exceed what the level can work around.
	ErrTooManyFailures = errors.New("raid: too many member failures")

	// ErrScrubRunning is returned by StartScrub while a scrub (a check or a
	// repair, started by hand or by the schedule) runs on the array.
	ErrScrubRunning = errors.New("raid: a scrub is already running")
)

// errNeedLock is the internal retry signal behind Op.NeedLock: a Layout's
// ReadAt needs reconstruction and the caller did not hold the stripe
// locks; the Array retries the read under the locks. It never reaches a
// caller of the Array.
var errNeedLock = errors.New("raid: read needs the stripe locks")

// errBadRecord is wrapped by the journal's decoders for bytes that are not
// a valid log header or record: the end of a log, a torn record, or a log
// of another array or epoch. A scan stops there; it never reaches a
// caller of the Array.
var errBadRecord = errors.New("raid: journal: not a valid record")

// errLogVersion is wrapped by decodeLogHeader for a log header of a
// format version this build does not know (written by a newer raidd).
var errLogVersion = errors.New("raid: journal: unknown log format version")

// errRetryRow is what Op.LogRow returns when the row's record could
// not be written (a log member failed, or a log is full): the Layout plans
// the row again. It never reaches a caller of the Array.
var errRetryRow = errors.New("raid: journal: plan the row again")

// errJobChanged is the internal signal of a recovery step whose job was
// replaced, ended or turned from replace into rebuild meanwhile: the worker
// redoes the row or stops. It never reaches a caller of the Array.
var errJobChanged = errors.New("raid: recovery job changed")

// MemberError records a failed operation on one member, shaped like
// fs.PathError. Several are combined with errors.Join.
type MemberError struct {
	Op     string // "read", "write", "sync", "discard", "superblock"
	Member int    // role index, or -1
	Path   string
	Offset int64 // data-region offset, or -1
	Err    error
}

func (e *MemberError) Error() string {
	s := "raid: " + e.Op + " member " + strconv.Itoa(e.Member)
	if e.Path != "" {
		s += " (" + e.Path + ")"
	}
	if e.Offset >= 0 {
		s += " at " + strconv.FormatInt(e.Offset, 10)
	}
	return s + ": " + e.Err.Error()
}

func (e *MemberError) Unwrap() error { return e.Err }

func rangeError(write bool, off, n, size int64) error {
	errno := syscall.EINVAL
	if write {
		errno = syscall.ENOSPC
	}
	return fmt.Errorf("%w: [%d, %d) of %d bytes: %w", ErrRange, off, off+n, size, errno)
}
