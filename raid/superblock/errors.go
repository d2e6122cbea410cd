package superblock

import (
	"errors"
	"strings"
)

// ErrNoMagic is returned by Decode when the slot does not start with Magic,
// and by Read when neither slot does: the device is not a raidd member (or has
// been erased). It is the only error that means "not a member" rather than
// "a damaged member".
var ErrNoMagic = errors.New("superblock: no superblock magic")

// ErrVersion is returned by Decode (and so by Read) when a slot carries the
// magic but a format version other than Version, or feature flags this
// package does not know: the member was written by another raidd version.
var ErrVersion = errors.New("superblock: unsupported format version")

// ErrChecksum is returned by Decode (and so by Read) when a slot carries the
// magic and a known version but its CRC32C does not match: a torn write or
// media corruption.
var ErrChecksum = errors.New("superblock: checksum mismatch")

// ErrCorrupt is returned by Decode (and so by Read) when a slot's checksum
// matches but its contents are not a valid, canonical superblock: a field
// fails Validate (the *FieldError problems are wrapped too), a reserved byte
// or padding byte is not zero, or the member count is out of range. Read also
// returns it for a slot truncated by the end of the device.
var ErrCorrupt = errors.New("superblock: corrupt superblock")

// ErrInvalid is returned by Validate, Encode and Write when a Meta breaks a
// rule of the format. The error also wraps one *FieldError per problem.
var ErrInvalid = errors.New("superblock: invalid metadata")

// ErrBufferSize is returned by Encode and Decode when the buffer is not
// exactly SlotSize bytes long.
var ErrBufferSize = errors.New("superblock: buffer is not SlotSize bytes")

// ErrSlotMismatch is returned by Read when both slots hold valid superblocks
// that name a different ArrayUUID or MemberUUID. That never happens through
// Write alone; it means the device was re-created without Erase, and neither
// copy can be trusted to describe the member.
var ErrSlotMismatch = errors.New("superblock: slots describe different arrays or members")

// ErrUUID is returned by ParseUUID when the text is not a UUID.
var ErrUUID = errors.New("superblock: malformed UUID")

// FieldError is one problem Validate found, naming the Meta field
// ("ChunkSize", "Members[3].Role", ...) and saying what is wrong with it.
// Errors from Validate, Encode, Write and Decode wrap every FieldError they
// report; find them with errors.As or by walking Unwrap() []error.
type FieldError struct {
	Field   string // Meta field, with an index for member table entries
	Problem string // what is wrong, including the offending value
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// problemList joins several errors on one line, separated by "; ", and
// exposes them to errors.Is and errors.As.
type problemList []error

func (p problemList) Error() string {
	s := make([]string, len(p))
	for i, e := range p {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

func (p problemList) Unwrap() []error { return p }
