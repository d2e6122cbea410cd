package integrity

import (
	"errors"
	"fmt"
	"syscall"
)

var (
	// ErrMismatch is wrapped by the error a read returns when a data block
	// does not match its stored checksum (bit rot, a misdirected or lost
	// write). It wraps EIO. The bytes read are not to be trusted; the
	// caller reconstructs them from redundancy and writes them back, which
	// stores a fresh checksum.
	ErrMismatch = fmt.Errorf("integrity: block checksum mismatch: %w", syscall.EIO)
	// ErrConfig is returned by New for a Config whose areas do not fit the
	// device or overlap.
	ErrConfig = errors.New("integrity: invalid configuration")
)

// MismatchError says which blocks of one read failed verification. Offset
// and Len are data-region byte offsets (from the start of the member's
// data region), block-aligned; Blocks is how many blocks in that range
// failed. It wraps ErrMismatch.
type MismatchError struct {
	Offset int64 // first bad block, data-region offset
	Len    int64 // from the first to the end of the last bad block
	Blocks int   // bad blocks in [Offset, Offset+Len)
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("integrity: %d block(s) fail their checksum in data bytes [%d, %d)", e.Blocks, e.Offset, e.Offset+e.Len)
}

// Unwrap returns ErrMismatch.
func (e *MismatchError) Unwrap() error { return ErrMismatch }
