package raid

import "io"

// Member is one backing device: a regular file, a block device or, in tests,
// memory. ReadAt and WriteAt follow io.ReaderAt and io.WriterAt exactly
// (n < len(p) implies err != nil; p is never retained). Concurrent calls on
// non-overlapping ranges are allowed. Offsets are absolute on the device: the
// superblock header lives at the start and the data region follows it.
//
// A read that ends early inside the data region, with an error wrapping
// io.EOF or io.ErrUnexpectedEOF, means the device has become shorter than
// its superblock records. The member is then failed at once, like a write
// error, and is never repaired by rewriting (which would extend a file and
// leave zero-reading holes below the rewrite).
type Member interface {
	io.ReaderAt
	io.WriterAt
	// Sync returns once every WriteAt and Discard that returned before it
	// was called is durable (fdatasync for files and block devices).
	Sync() error
	// Discard makes [off, off+n) read as zeroes afterwards, releasing space
	// where the device can, or returns an error wrapping
	// errors.ErrUnsupported when it cannot guarantee zeroes.
	Discard(off, n int64) error
	// Size is the device's size in bytes, fixed for the member's lifetime.
	Size() int64
	io.Closer
}

// reserveTail tells a file member that the array keeps nothing past its
// data region (member.File.ReserveTail), so that a member whose last page
// the array never writes checks its size after each write without an
// fstat. A failure costs only that: the member keeps the fstat.
func (a *Array) reserveTail(s *slot) {
	t, ok := unwrapped(s.dev).(interface{ ReserveTail(from int64) error })
	if !ok {
		return
	}
	if err := t.ReserveTail(int64(a.meta.DataOffset + a.meta.DataSize)); err != nil {
		a.log.Warn("raid: could not write the unused last page of a member; its writes check its size with an fstat each", "member", s.path, "err", err)
	}
}
