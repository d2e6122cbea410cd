package raid

import (
	"errors"
	"fmt"
	"strings"
)

// CheckResult counts what Check or a scrub found, row by row (a row is one chunk on
// every member; see stripe.Geometry.Rows).
type CheckResult struct {
	// Rows is the number of rows the check examined; it is the array's row
	// count unless the check was stopped by Close.
	Rows int64 `json:"rows"`
	// Verified rows had their copies or parity compared, and they agree.
	Verified int64 `json:"verified"`
	// Inconsistent rows had copies that differ or parity that does not
	// match the data.
	Inconsistent int64 `json:"inconsistent"`
	// Unverifiable rows could not be compared: too few of their copies or
	// members were readable (a degraded array), or the level keeps no
	// redundancy (RAID0).
	Unverifiable int64 `json:"unverifiable"`
	// ChecksumUnverifiable counts the unverifiable rows that could not be
	// compared because blocks failed their checksums and no copy or
	// parity could rebuild them (a checksum-lost event names them), not
	// because a member is missing.
	ChecksumUnverifiable int64 `json:"checksum_unverifiable,omitempty"`
	// NoRedundancy says the level keeps no redundancy at all (RAID0), so
	// rows are unverifiable whether or not the array is degraded.
	NoRedundancy bool `json:"no_redundancy,omitempty"`
	// Skipped rows are holes on every member: they read as zeroes
	// everywhere, agree by construction and count as verified unread.
	Skipped int64 `json:"skipped_rows,omitempty"`
	// Mismatches counts the chunks found wrong (md's mismatch_cnt, in
	// chunks rather than sectors): each differing mirror copy, each
	// parity that does not match, each RAID6 chunk the syndrome locates,
	// and one per RAID6 row where no single chunk can be located.
	Mismatches int64 `json:"mismatches"`
	// Repaired counts the mismatches a repair rewrote, and RepairedRows
	// the inconsistent rows all of whose mismatches it rewrote.
	Repaired     int64 `json:"repaired,omitempty"`
	RepairedRows int64 `json:"repaired_rows,omitempty"`
	// Findings lists the first mismatches (at most 64), with the member,
	// offset and how the wrong chunk was chosen.
	Findings []Mismatch `json:"findings,omitempty"`
	// ChecksumRepaired counts the blocks that failed their checksums and
	// were rewritten from a copy or the parity while the check ran (arrays
	// with checksums): by the check, which heals them as a read does, with
	// or without a repair, and by any client read that met one meanwhile.
	ChecksumRepaired int64 `json:"checksum_repaired,omitempty"`
}

// String says what the check found, for operators: "all 512 rows verified
// consistent", or the counts of inconsistent and unverifiable rows with the
// reason the latter could not be verified.
func (r CheckResult) String() string {
	var healed string
	if r.ChecksumRepaired > 0 {
		healed = fmt.Sprintf("; %d blocks that failed their checksums were rewritten from a copy or the parity (see the checksum-repaired events)", r.ChecksumRepaired)
	}
	if r.Consistent() {
		return fmt.Sprintf("all %d rows verified consistent", r.Rows) + healed
	}
	var parts []string
	if r.Inconsistent > 0 {
		s := fmt.Sprintf("%d of %d rows inconsistent", r.Inconsistent, r.Rows)
		if c := r.scrubCounts(); c != "" {
			s += " (" + c + ")"
		}
		parts = append(parts, s)
	}
	if n := r.Unverifiable - r.ChecksumUnverifiable; n > 0 {
		why := "the array is degraded"
		if r.NoRedundancy {
			why = "the level keeps no redundancy"
		}
		parts = append(parts, fmt.Sprintf("%d rows could not be verified because %s", n, why))
	}
	if r.ChecksumUnverifiable > 0 {
		parts = append(parts, fmt.Sprintf("%d rows could not be verified because blocks failed their checksums and no copy or parity could rebuild them (see the checksum-lost events)", r.ChecksumUnverifiable))
	}
	parts = append(parts, fmt.Sprintf("%d of %d rows verified consistent", r.Verified, r.Rows))
	return strings.Join(parts, "; ") + healed
}

// Consistent reports whether every row was verified and agrees. A degraded
// array with unverifiable rows is never consistent.
func (r CheckResult) Consistent() bool {
	return r.Rows > 0 && r.Verified == r.Rows
}

// Check reads every row under its stripe locks and compares mirrors and
// parity, while I/O goes on, synchronously and without the rate limits of
// a scrub (StartScrub). It returns the counts of rows verified,
// inconsistent and unverifiable, and an error that is nil only when every
// row was verified consistent: it wraps ErrInconsistent (naming the first
// bad rows) when rows disagree, and ErrUnverifiable when rows could not be
// compared, so a degraded array never passes as consistent. A member that
// fails a read during the check is failed as on any read. It also returns
// ErrClosed (with the counts so far) if the array closes, and ErrFailed on
// a failed array.
func (a *Array) Check() (res CheckResult, err error) {
	res.NoRedundancy = a.geo.Tolerance() == 0
	if err := a.enter(); err != nil {
		return res, err
	}
	defer a.leave()
	healed := a.csumRepairedTotal()
	defer func() { res.ChecksumRepaired = a.csumRepairedTotal() - healed }()
	var bad []error
	var other error
	for row := int64(0); row < a.geo.Rows(); row++ {
		if a.ctx.Err() != nil { // Close has begun
			return res, errors.Join(a.checkError(res, bad), ErrClosed)
		}
		r, found, _, err := a.checkRow(row, false)
		if errors.Is(err, ErrClosed) {
			return res, errors.Join(a.checkError(res, bad), ErrClosed)
		}
		a.tally(&res, &bad, &other, row, r, found, err)
	}
	if a.view.Load().failed {
		return res, errors.Join(a.checkError(res, bad), ErrFailed)
	}
	return res, errors.Join(a.checkError(res, bad), other)
}

// checkError describes what a check found wrong, or returns nil.
func (a *Array) checkError(res CheckResult, bad []error) error {
	var errs []error
	if res.Inconsistent > res.RepairedRows {
		errs = append(errs, fmt.Errorf("%d of %d rows inconsistent (first ones listed): %w", res.Inconsistent-res.RepairedRows, res.Rows, errors.Join(bad...)))
	}
	if n := res.Unverifiable - res.ChecksumUnverifiable; n > 0 {
		why := "the array is degraded: no redundancy left to compare"
		if res.NoRedundancy {
			why = a.geo.Level().String() + " keeps no redundancy to compare"
		}
		errs = append(errs, fmt.Errorf("%w: %d of %d rows (%s)", ErrUnverifiable, n, res.Rows, why))
	}
	if res.ChecksumUnverifiable > 0 {
		errs = append(errs, fmt.Errorf("%w: %d of %d rows (blocks failed their checksums and could not be rebuilt)", ErrUnverifiable, res.ChecksumUnverifiable, res.Rows))
	}
	return errors.Join(errs...)
}
