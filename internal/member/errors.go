package member

import (
	"errors"
	"fmt"
	"io"
)

var (
	// ErrOutOfRange is returned (wrapped) when an offset is negative, when a
	// WriteAt reaches past Size (after writing the part that fits), and when a
	// Discard, Trim or ZeroRange range does not lie within [0, Size). Reads
	// past Size return io.EOF instead, as io.ReaderAt requires.
	ErrOutOfRange = errors.New("member: offset out of range")

	// ErrReadOnly is returned (wrapped) by WriteAt, Discard, Trim and
	// ZeroRange on a File opened with Options.ReadOnly.
	ErrReadOnly = errors.New("member: read-only member")

	// ErrFileType is returned (wrapped) by Open and CreateSparse when the path
	// names something other than a regular file or a block device (or, for
	// CreateSparse, other than a regular file).
	ErrFileType = errors.New("member: not a regular file or block device")

	// ErrSizeMismatch is returned (wrapped) by CreateSparse when the file
	// already exists with a size other than the one requested. CreateSparse
	// never shrinks or grows an existing file.
	ErrSizeMismatch = errors.New("member: existing file has a different size")
	// ErrShrunk is returned (wrapped) when a File's regular file or block
	// device has become shorter than the Size it had at Open: by a read
	// that meets end-of-file below Size, by the size check after every
	// write to a regular file, and by every call after that but Sync and
	// Close. It wraps io.ErrUnexpectedEOF. The member's contents can no
	// longer be trusted: a write past the new end would extend the file
	// and leave holes that read as zeroes without any error, so no write
	// is issued once the shrink is known.
	ErrShrunk = fmt.Errorf("member: device shrank below its size at open: %w", io.ErrUnexpectedEOF)
)
