package member

import "errors"

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
)
