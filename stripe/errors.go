package stripe

import "errors"

var (
	// ErrLevel is returned by New and ParseLevel for a RAID level raidd does not implement.
	ErrLevel = errors.New("stripe: unsupported RAID level")
	// ErrChunk is returned by New when the chunk size is not a power of two between MinChunk and MaxChunk.
	ErrChunk = errors.New("stripe: invalid chunk size")
	// ErrMembers is returned by New when the member count is too small or too large for the level.
	ErrMembers = errors.New("stripe: invalid member count")
	// ErrTooLarge is returned by New when the array size would not fit in an int64.
	ErrTooLarge = errors.New("stripe: array too large")
	// ErrTooSmall is returned by New when a member's data region cannot hold one chunk.
	ErrTooSmall = errors.New("stripe: member too small")
)
