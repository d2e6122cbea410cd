package member

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// DirectAlignment is the alignment, in bytes, of buffers, offsets and
// lengths handed to the kernel when a File is opened with Options.Direct. It
// is a multiple of every logical block size in common use.
const DirectAlignment = 4096

// Options configure Open. The zero value opens read-write through the page
// cache.
type Options struct {
	// ReadOnly opens the member with O_RDONLY; writes and discards then fail
	// with ErrReadOnly.
	ReadOnly bool
	// Direct opens the member with O_DIRECT. See the package documentation
	// for the alignment rules and their cost.
	Direct bool
	// Exclusive opens a block device with O_EXCL, so that Open fails with
	// EBUSY while the device is mounted or claimed by another exclusive
	// opener (md, another raidd). It has no effect on regular files.
	Exclusive bool
}

// File is a member backed by a regular file or a block device. All methods
// are safe for concurrent use; ReadAt, WriteAt, Discard, Trim and ZeroRange
// calls must not overlap each other concurrently (see the package
// documentation).
type File struct {
	f      *os.File
	path   string
	size   int64
	block  bool  // a block device rather than a regular file
	lbs    int64 // logical block size for block-device commands
	direct bool
	// align is what O_DIRECT requires of every buffer address, length and
	// offset (a power of two, at most DirectAlignment): the kernel's
	// STATX_DIOALIGN answer, or DirectAlignment when it gives none. Only
	// meaningful in direct mode.
	align    int64
	readOnly bool
	// canDiscard: Discard frees space cheaply (probed at Open).
	canDiscard bool
	// inMemory: a regular file on tmpfs or ramfs (probed at Open).
	inMemory bool
	// rc reaches the descriptor under the os.File's reference count, so
	// that a concurrent Close cannot recycle it (control, vectored).
	rc     syscall.RawConn
	closed atomic.Bool
	// shrunk is set once the device was found shorter than size; every
	// later call but Sync and Close then fails with ErrShrunk.
	shrunk atomic.Bool
	// noDSync is set once the kernel refused pwritev2's RWF_DSYNC, and at
	// Open for a block device without FUA (see WritevAtDSync): then
	// WritevAtDSync writes and syncs.
	noDSync atomic.Bool
	// edges serializes the read-modify-write of partially written
	// alignment blocks in direct mode (writeBounce), striped by block.
	edges [edgeLocks]sync.Mutex
	// tail is the mapping of the last page that checks the size after a
	// write without a system call (tail.go).
	tail tailProbe
	// mapped is the mapping of a file held in memory, whose reads and
	// writes are copies (mapped.go).
	mapped mapping
	// maxIO is the largest request the device takes whole: its
	// max_sectors_kb (probed at Open).
	maxIO int64
	// rq merges adjacent direct reads that wait at the same time
	// (readq.go). Used only in direct mode.
	rq readQueue
	// wstart and wend count the writes of a direct member that started
	// and ended, and ra holds its read-ahead (readahead.go).
	wstart, wend atomic.Uint64
	ra           readAhead
}

// Open opens the regular file or block device at path. The member's Size is
// the file's size (st_size) or the device's size (BLKGETSIZE64) at the time
// of the call, rounded down to DirectAlignment when opts.Direct is set.
//
// Open never blocks on what path names: it checks the file type before
// opening (a FIFO or a terminal would block open(2) forever), opens with
// O_NONBLOCK in case the path changed in between, checks the type again on
// the open descriptor, and only then switches the descriptor to blocking
// mode.
//
// Errors: those of open(2) (wrapped in *os.PathError; with opts.Direct a file
// system without O_DIRECT support fails with EINVAL), ErrFileType for
// anything but a regular file or block device, ioctl errors from probing a
// block device, and errors.ErrUnsupported for Direct on a device whose
// logical block size exceeds DirectAlignment.
func Open(path string, opts Options) (*File, error) {
	flags := unix.O_RDWR
	if opts.ReadOnly {
		flags = unix.O_RDONLY
	}
	if opts.Direct {
		flags |= unix.O_DIRECT
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkType(path, fi.Mode()); err != nil {
		return nil, err
	}
	// O_EXCL without O_CREAT means "exclusive claim" only for block
	// devices; never pass it for anything else.
	if opts.Exclusive && fi.Mode().Type() == os.ModeDevice {
		flags |= unix.O_EXCL
	}
	f, err := openChecked(path, flags)
	if err != nil {
		return nil, err
	}
	m := &File{f: f, path: path, direct: opts.Direct, readOnly: opts.ReadOnly, lbs: 512}
	if m.rc, err = f.SyscallConn(); err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := m.probe(); err != nil {
		_ = f.Close()
		return nil, err
	}
	memFS := !m.block && onMemoryFS(m.rc)
	m.tail.holeFaults = memFS
	m.initTail()
	m.inMemory = memFS && !m.direct
	m.initMapping()
	m.rq.max = min(m.maxIO, maxBounce)
	return m, nil
}

// onMemoryFS reports whether the file behind rc lives on a file system
// held in memory (tmpfs, ramfs). An fstatfs error counts as no.
func onMemoryFS(rc syscall.RawConn) bool {
	var st unix.Statfs_t
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), &st) }); err != nil || serr != nil {
		return false
	}
	return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
}

// OpenPlain opens path as Open would, read-only or read-write, with the
// same type checks and without ever blocking on a FIFO or a terminal, and
// returns the plain *os.File (for example to hold an advisory lock on a
// member). Errors: as Open's.
func OpenPlain(path string, readOnly bool) (*os.File, error) {
	flags := unix.O_RDWR
	if readOnly {
		flags = unix.O_RDONLY
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := checkType(path, fi.Mode()); err != nil {
		return nil, err
	}
	return openChecked(path, flags)
}

// openChecked opens path with O_NONBLOCK, verifies on the descriptor that
// it is a regular file or block device, and clears O_NONBLOCK.
func openChecked(path string, flags int) (*os.File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(path, flags|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFBLK {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("member: %s is %s, not a regular file or block device: %w", path, typeName(t), ErrFileType)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return nil, &os.PathError{Op: "fcntl", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// checkType returns an error wrapping ErrFileType, naming the path and its
// type, unless mode is a regular file or a block device.
func checkType(path string, mode os.FileMode) error {
	switch mode.Type() {
	case 0, os.ModeDevice:
		return nil
	}
	var t uint32
	switch mode.Type() {
	case os.ModeNamedPipe:
		t = unix.S_IFIFO
	case os.ModeDevice | os.ModeCharDevice:
		t = unix.S_IFCHR
	case os.ModeDir:
		t = unix.S_IFDIR
	case os.ModeSocket:
		t = unix.S_IFSOCK
	}
	return fmt.Errorf("member: %s is %s, not a regular file or block device: %w", path, typeName(t), ErrFileType)
}

// typeName describes a file type (S_IFMT bits) for messages.
func typeName(t uint32) string {
	switch t {
	case unix.S_IFIFO:
		return "a FIFO (named pipe)"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFLNK:
		return "a symbolic link"
	}
	return "of an unknown file type"
}

// probe fills in size, block and lbs from fstat and the block-device ioctls.
func (m *File) probe() error {
	var st unix.Stat_t
	err := m.control(func(fd int) error { return unix.Fstat(fd, &st) })
	if err != nil {
		return &os.PathError{Op: "fstat", Path: m.path, Err: err}
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		m.size = st.Size
		m.maxIO = maxSectors(st.Dev)
		m.rq.depth = readDepthOf(st.Dev)
		if !m.readOnly {
			// Punching a hole past the end with KEEP_SIZE changes nothing
			// and tells whether the file system can punch holes at all.
			end := (st.Size + 4095) &^ 4095
			m.canDiscard = m.control(func(fd int) error {
				return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, end, 4096)
			}) == nil
		}
	case unix.S_IFBLK:
		m.block = true
		var size uint64
		var lbs int
		err := m.control(func(fd int) error {
			var err error
			if size, err = unix.IoctlGetUint64(fd, unix.BLKGETSIZE64); err != nil {
				return err
			}
			lbs, err = unix.IoctlGetInt(fd, unix.BLKSSZGET)
			return err
		})
		if err != nil {
			return &os.PathError{Op: "ioctl BLKGETSIZE64", Path: m.path, Err: err}
		}
		if lbs <= 0 || lbs&(lbs-1) != 0 {
			return fmt.Errorf("member: %s: implausible logical block size %d", m.path, lbs)
		}
		m.size, m.lbs = int64(size), int64(lbs)
		m.maxIO = maxSectors(st.Rdev)
		m.rq.depth = readDepthOf(st.Rdev)
		m.canDiscard = !m.readOnly && discardMaxBytes(uint64(st.Rdev)) > 0
		if fua, ok := queueLimit(st.Rdev, "fua"); ok && fua == 0 {
			m.noDSync.Store(true)
		}
	default:
		return fmt.Errorf("member: %s is %s, not a regular file or block device: %w", m.path, typeName(st.Mode&unix.S_IFMT), ErrFileType)
	}
	if m.direct {
		if m.lbs > DirectAlignment {
			return fmt.Errorf("member: %s: logical block size %d exceeds the O_DIRECT alignment %d: %w",
				m.path, m.lbs, DirectAlignment, errors.ErrUnsupported)
		}
		m.size &^= DirectAlignment - 1
		m.align = m.dioAlign()
	}
	return nil
}

// dioAlign asks the kernel (statx STATX_DIOALIGN, Linux 6.1 and later)
// what O_DIRECT requires of this file: buffer addresses aligned to
// dio_mem_align, offsets and lengths to dio_offset_align. It returns the
// larger of the two, applied to addresses, offsets and every iovec's
// length alike, or DirectAlignment when the kernel does not say or says
// something outside (0, DirectAlignment].
func (m *File) dioAlign() int64 {
	var stx unix.Statx_t
	err := m.control(func(fd int) error {
		return unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_DIOALIGN, &stx)
	})
	if err != nil || stx.Mask&unix.STATX_DIOALIGN == 0 {
		return DirectAlignment
	}
	a := int64(max(stx.Dio_mem_align, stx.Dio_offset_align))
	if a <= 0 || a > DirectAlignment || a&(a-1) != 0 {
		return DirectAlignment
	}
	return a
}

// discardMaxBytes reads the block device's discard limit from sysfs (0 when
// it cannot discard or the value is unavailable).
func discardMaxBytes(rdev uint64) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/queue/discard_max_bytes", unix.Major(rdev), unix.Minor(rdev)))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// defaultMaxIO is the largest request assumed for a device whose queue
// limits are not in sysfs (a file on a network or virtual file system).
const defaultMaxIO = 1 << 20

// sysfsRoot is where queueLimit looks for sysfs (a test's fake tree).
var sysfsRoot = "/sys"

// queueLimit returns the number in the queue attribute name of the block
// device dev, or of the disk holding it for a partition, and whether sysfs
// had it.
func queueLimit(dev uint64, name string) (int64, bool) {
	base := fmt.Sprintf("%s/dev/block/%d:%d/", sysfsRoot, unix.Major(dev), unix.Minor(dev))
	for _, p := range []string{"queue/", "../queue/"} {
		b, err := os.ReadFile(base + p + name)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			return v, true
		}
	}
	return 0, false
}

// maxSectors returns the largest request, in bytes, the block device dev
// (or the disk holding it, for a partition) takes whole: its
// queue/max_sectors_kb in sysfs (the kernel splits larger ones), or
// defaultMaxIO when sysfs does not say.
func maxSectors(dev uint64) int64 {
	if kb, ok := queueLimit(dev, "max_sectors_kb"); ok && kb >= 4 {
		return kb << 10
	}
	return defaultMaxIO
}

// readDepthOf returns the read queue depth for a member on the block
// device dev (see readDepth): readDepthSolid where sysfs says the device
// does not rotate, readDepth otherwise (a disk, or a device sysfs does not
// describe).
func readDepthOf(dev uint64) int {
	if rot, ok := queueLimit(dev, "rotational"); ok && rot == 0 {
		return readDepthSolid
	}
	return readDepth
}

// MaxIO returns the largest request, in bytes, the member's device takes
// whole (its queue/max_sectors_kb, or that of the device holding the
// file; 1 MiB when sysfs does not say): the limit of the reads a direct
// member merges.
func (m *File) MaxIO() int64 { return m.maxIO }

// CanDiscard reports whether Discard releases space cheaply (a file system
// that punches holes, or a block device that discards), so that zeroing
// by discard is faster than writing zeroes.
func (m *File) CanDiscard() bool { return m.canDiscard }

// Path returns the path the member was opened with.
func (m *File) Path() string { return m.path }

// IsBlockDevice reports whether the member is a block device rather than a
// regular file.
func (m *File) IsBlockDevice() bool { return m.block }

// Direct reports whether the member was opened with O_DIRECT (its I/O
// bypasses the page cache and waits for the device); without it a write
// is a copy into the page cache.
func (m *File) Direct() bool { return m.direct }

// InMemory reports whether the member is a file on a file system held in
// memory (tmpfs, ramfs) opened without O_DIRECT: its writes and syncs are
// memory copies that never wait for a device.
func (m *File) InMemory() bool { return m.inMemory }

// SpliceSource returns the file's descriptor, reached under the os.File's
// reference (so a concurrent Close cannot recycle it), for a caller that
// moves the file's bytes with splice(2) instead of reading them: ok is
// false for a member opened with O_DIRECT (its bytes are not in the page
// cache), and after Close or a detected shrink. A caller that splices must
// treat a short or failed splice as "read it with ReadAt", which reports
// the error as the member's reads do. Offsets are the file's, as ReadAt's.
func (m *File) SpliceSource() (syscall.RawConn, bool) {
	if m.direct || m.closed.Load() || m.shrunk.Load() {
		return nil, false
	}
	return m.rc, true
}

// Size returns the member's size in bytes, fixed at Open.
func (m *File) Size() int64 { return m.size }

// ReadAt reads len(p) bytes at off with pread(2). It follows io.ReaderAt: it
// returns io.EOF when the read reaches Size, and n < len(p) only with a
// non-nil error. p is not retained. Safe for concurrent use.
//
// End-of-file below Size means the device shrank behind the member's back:
// that returns an error wrapping ErrShrunk, never io.EOF, and marks the
// member shrunk for good.
//
// Errors: io.EOF, ErrShrunk, ErrOutOfRange for a negative off, os.ErrClosed
// after Close, and I/O errors from the kernel wrapped in *os.PathError.
func (m *File) ReadAt(p []byte, off int64) (int, error) {
	if m.closed.Load() {
		return 0, m.closedErr("read")
	}
	if m.shrunk.Load() {
		return 0, m.shrunkErr("read", -1)
	}
	if off < 0 {
		return 0, m.rangeErr("read", off, int64(len(p)))
	}
	if len(p) == 0 {
		return 0, nil
	}
	if off >= m.size {
		return 0, io.EOF
	}
	short := false
	if rem := m.size - off; int64(len(p)) > rem {
		p, short = p[:rem], true
	}
	if m.direct {
		one := [1][]byte{p}
		if n, ok := m.raServe(one[:], off, int64(len(p))); ok {
			if short {
				return n, io.EOF
			}
			return n, nil
		}
	}
	var n int
	var err error
	switch {
	case m.direct && !m.aligned(p, off):
		one := [1][]byte{p}
		n, err = m.readBounce(one[:], off, int64(len(p)))
	case m.direct:
		// Through the read queue, which may merge it with adjacent
		// reads waiting on the member (readq.go); pread finishes a
		// short read, and reports end-of-file as io.EOF.
		one := [1][]byte{p}
		if n, err = m.readQueued(one[:], off); err != nil {
			n, err = 0, m.wrap("read", err)
		} else if n < len(p) {
			var k int
			k, err = m.pread(p[n:], off+int64(n))
			n += k
		}
	default:
		n, err = m.pread(p, off)
	}
	if err == io.EOF {
		// p was clamped to Size, so the device ended below it.
		m.shrunk.Store(true)
		return n, m.shrunkErr("read", -1)
	}
	if err == nil && short {
		err = io.EOF
	}
	return n, err
}

// WriteAt writes p at off with pwrite(2). A write reaching past Size writes
// the part that fits and returns an error wrapping ErrOutOfRange: the member
// never grows. p is not retained. The data is durable only after a later
// Sync returns. Safe for concurrent use on non-overlapping ranges.
//
// On a regular file every write is followed by a size check: a file that
// has become shorter than Size (truncated behind the member's back, then
// possibly re-extended by this very write, leaving holes) makes the write
// fail with ErrShrunk, and so does every later call. The check is a load
// from a mapping of the file's last page, which faults once that page is
// beyond end-of-file, and an fstat(2) for writes into the last page or
// when there is no mapping (see tail.go). A write ending at Size is also
// checked before it is issued, since it would restore the full size and
// hide the shrink.
//
// Errors: ErrOutOfRange, ErrReadOnly, ErrShrunk, os.ErrClosed after Close,
// and I/O errors from the kernel wrapped in *os.PathError.
func (m *File) WriteAt(p []byte, off int64) (int, error) {
	if m.closed.Load() {
		return 0, m.closedErr("write")
	}
	if m.readOnly {
		return 0, fmt.Errorf("member: write %s: %w", m.path, ErrReadOnly)
	}
	if m.shrunk.Load() {
		return 0, m.shrunkErr("write", -1)
	}
	if off < 0 || off > m.size {
		return 0, m.rangeErr("write", off, int64(len(p)))
	}
	short := false
	if rem := m.size - off; int64(len(p)) > rem {
		p, short = p[:rem], true
	}
	if len(p) == 0 {
		if short {
			return 0, m.rangeErr("write", off, int64(len(p)))
		}
		return 0, nil
	}
	if off+int64(len(p)) == m.size {
		if err := m.checkSize("write"); err != nil {
			return 0, err
		}
	}
	var n int
	var err error
	if m.direct && !m.aligned(p, off) {
		one := [1][]byte{p}
		n, err = m.writeBounce(one[:], off, int64(len(p)), false)
	} else {
		n, err = m.pwrite(p, off)
	}
	if serr := m.checkWrite("write", off+int64(len(p)), err == nil); serr != nil {
		return n, serr
	}
	if err == nil && short {
		err = m.rangeErr("write", m.size, 1)
	}
	return n, err
}

// checkSize verifies, on a regular file, that the file is still at least
// Size bytes long (one fstat, no allocation). If not, it marks the member
// shrunk and returns an error wrapping ErrShrunk. Block devices cannot be
// extended by a write, and report their shrinking through reads and write
// errors, so they are not checked.
func (m *File) checkSize(op string) error {
	if m.block {
		return nil
	}
	size, err := m.statSize()
	if err != nil || size >= m.size {
		return nil // a failing fstat is not a shrink; the I/O itself reports errors
	}
	m.shrunk.Store(true)
	return m.shrunkErr(op, size)
}

// shrunkErr describes a shrink. size is the current size, or -1 to look it
// up.
func (m *File) shrunkErr(op string, size int64) error {
	if size < 0 {
		size = m.currentSize()
	}
	return fmt.Errorf("member: %s %s: now %d bytes, %d at open: %w", op, m.path, size, m.size, ErrShrunk)
}

// currentSize returns the device's size now (-1 when it cannot be read).
func (m *File) currentSize() int64 {
	if !m.block {
		size, err := m.statSize()
		if err != nil {
			return -1
		}
		return size
	}
	var size uint64
	err := m.control(func(fd int) error {
		var err error
		size, err = unix.IoctlGetUint64(fd, unix.BLKGETSIZE64)
		return err
	})
	if err != nil {
		return -1
	}
	return int64(size)
}

// Sync makes every WriteAt, Discard, Trim and ZeroRange that returned before
// it was called durable, using fdatasync(2). Safe for concurrent use.
//
// Errors: os.ErrClosed after Close, and the error of fdatasync(2) wrapped in
// *os.PathError (an EIO here means earlier writes may be lost).
func (m *File) Sync() error {
	if m.closed.Load() {
		return m.closedErr("sync")
	}
	if testHookSync != nil {
		testHookSync(m)
	}
	if err := m.control(unix.Fdatasync); err != nil {
		return m.wrap("fdatasync", err)
	}
	return nil
}

// Discard makes [off, off+n) read as zeroes and releases the space where the
// storage can. Bytes outside the range are untouched, at byte granularity.
// A regular file gets fallocate(PUNCH_HOLE|KEEP_SIZE); a block device gets
// the same fallocate on its aligned middle (a zeroing discard), falling back
// to BLKZEROOUT, with unaligned edges overwritten with zeroes. Durable after
// the next Sync. Safe for concurrent use on non-overlapping ranges.
//
// Errors: ErrOutOfRange, ErrReadOnly, os.ErrClosed, an error wrapping
// errors.ErrUnsupported when neither the file system nor the device can
// guarantee zeroes, and other kernel errors wrapped in *os.PathError.
func (m *File) Discard(off, n int64) error {
	if err := m.checkMutate("discard", off, n); err != nil || n == 0 {
		return err
	}
	m.beginWrite()
	defer m.endWrite()
	m.dropTailFor(off, n)
	m.clearPages(off, n)
	if !m.block {
		return m.fallocate("discard", unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	}
	return m.blockRange("discard", off, n, func(fd int, a, b int64) error {
		err := unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, a, b-a)
		if !isUnsupported(err) {
			return err
		}
		return blkRangeIoctl(fd, unix.BLKZEROOUT, a, b-a)
	})
}

// Trim tells the storage that [off, off+n) is no longer needed. On a regular
// file it punches a hole, exactly like Discard. On a block device it issues
// BLKDISCARD for the logical blocks wholly inside the range and leaves the
// edges alone: it is advisory, and the range's contents are unspecified
// afterwards. Safe for concurrent use on non-overlapping ranges.
//
// Errors: as for Discard; a device without discard support returns an error
// wrapping errors.ErrUnsupported.
func (m *File) Trim(off, n int64) error {
	if err := m.checkMutate("trim", off, n); err != nil || n == 0 {
		return err
	}
	m.beginWrite()
	defer m.endWrite()
	m.dropTailFor(off, n)
	m.clearPages(off, n)
	if !m.block {
		return m.fallocate("trim", unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	}
	a, b := alignIn(off, n, m.lbs)
	if a >= b {
		return nil
	}
	err := m.control(func(fd int) error { return blkRangeIoctl(fd, unix.BLKDISCARD, a, b-a) })
	return m.wrap("ioctl BLKDISCARD", err)
}

// ZeroRange makes [off, off+n) read as zeroes while keeping the space
// allocated: fallocate(ZERO_RANGE|KEEP_SIZE) on a regular file, BLKZEROOUT on
// a block device (unaligned edges are overwritten with zeroes). Durable after
// the next Sync. Safe for concurrent use on non-overlapping ranges.
//
// Errors: as for Discard; a file system without ZERO_RANGE returns an error
// wrapping errors.ErrUnsupported.
func (m *File) ZeroRange(off, n int64) error {
	if err := m.checkMutate("zero range", off, n); err != nil || n == 0 {
		return err
	}
	m.beginWrite()
	defer m.endWrite()
	m.dropTailFor(off, n)
	m.clearPages(off, n)
	if !m.block {
		return m.fallocate("zero range", unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	}
	return m.blockRange("zero range", off, n, func(fd int, a, b int64) error {
		return blkRangeIoctl(fd, unix.BLKZEROOUT, a, b-a)
	})
}

// Close closes the member. It does not sync: call Sync first for durability.
// Calls racing with Close either complete or fail with os.ErrClosed.
//
// Errors: os.ErrClosed on a second Close, or the error of close(2).
func (m *File) Close() error {
	if m.closed.Swap(true) {
		return m.closedErr("close")
	}
	m.unmapTail(true)
	m.unmap()
	m.raClose()
	return m.f.Close()
}

// checkMutate validates a range-mutating call.
func (m *File) checkMutate(op string, off, n int64) error {
	if m.closed.Load() {
		return m.closedErr(op)
	}
	if m.readOnly {
		return fmt.Errorf("member: %s %s: %w", op, m.path, ErrReadOnly)
	}
	if m.shrunk.Load() {
		return m.shrunkErr(op, -1)
	}
	if off < 0 || n < 0 || off > m.size || n > m.size-off {
		return m.rangeErr(op, off, n)
	}
	return nil
}

// fallocate runs fallocate(2) on a regular file.
func (m *File) fallocate(op string, mode uint32, off, n int64) error {
	err := m.control(func(fd int) error { return unix.Fallocate(fd, mode, off, n) })
	return m.wrap(op, err)
}

// blockRange applies fn to the logical-block-aligned middle of [off, off+n)
// and overwrites the unaligned edges with zeroes through WriteAt.
func (m *File) blockRange(op string, off, n int64, fn func(fd int, a, b int64) error) error {
	a, b := alignIn(off, n, m.lbs)
	if a >= b {
		return m.writeZeroes(off, n)
	}
	if err := m.writeZeroes(off, a-off); err != nil {
		return err
	}
	if err := m.writeZeroes(b, off+n-b); err != nil {
		return err
	}
	return m.wrap(op, m.control(func(fd int) error { return fn(fd, a, b) }))
}

// writeZeroes writes n (less than a few logical blocks) zero bytes at off.
func (m *File) writeZeroes(off, n int64) error {
	if n == 0 {
		return nil
	}
	_, err := m.WriteAt(make([]byte, n), off)
	return err
}

// control runs fn on the file descriptor while holding a reference to it, so
// that a concurrent Close cannot recycle the descriptor. EINTR is retried.
func (m *File) control(fn func(fd int) error) error {
	var ferr error
	cerr := m.rc.Control(func(fd uintptr) {
		for {
			ferr = fn(int(fd))
			if ferr != unix.EINTR {
				return
			}
		}
	})
	if cerr != nil {
		if m.closed.Load() {
			return os.ErrClosed
		}
		return cerr
	}
	return ferr
}

// wrap turns a syscall error into a *os.PathError, additionally wrapping
// errors.ErrUnsupported for EOPNOTSUPP and friends. nil stays nil.
func (m *File) wrap(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, os.ErrClosed):
		return m.closedErr(op)
	case isUnsupported(err):
		return &os.PathError{Op: op, Path: m.path, Err: fmt.Errorf("%w: %w", errors.ErrUnsupported, err)}
	default:
		return &os.PathError{Op: op, Path: m.path, Err: err}
	}
}

func (m *File) closedErr(op string) error {
	return &os.PathError{Op: op, Path: m.path, Err: os.ErrClosed}
}

func (m *File) rangeErr(op string, off, n int64) error {
	return fmt.Errorf("member: %s %s [%d, +%d) with size %d: %w", op, m.path, off, n, m.size, ErrOutOfRange)
}

// isUnsupported reports whether err means the operation is not supported by
// the file system or device.
func isUnsupported(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.ENOSYS)
}

// blkRangeIoctl issues a block-device ioctl taking a {start, length} pair
// (BLKDISCARD, BLKZEROOUT).
func blkRangeIoctl(fd int, req uint, off, n int64) error {
	r := [2]uint64{uint64(off), uint64(n)}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(unsafe.Pointer(&r)))
	if errno != 0 {
		return errno
	}
	return nil
}

// alignIn returns the largest range [a, b) inside [off, off+n) whose ends are
// multiples of align; a >= b when there is none.
func alignIn(off, n, align int64) (a, b int64) {
	a = (off + align - 1) &^ (align - 1)
	b = (off + n) &^ (align - 1)
	return a, b
}

// aligned reports whether p and off satisfy the member's O_DIRECT
// alignment rules.
func (m *File) aligned(p []byte, off int64) bool {
	mask := m.align - 1
	return off&mask == 0 && int64(len(p))&mask == 0 && int64(uintptr(unsafe.Pointer(unsafe.SliceData(p))))&mask == 0
}

// alignedVec reports whether a vectored call of bufs at off satisfies the
// member's O_DIRECT alignment rules: off, every buffer's address and every
// buffer's length are multiples of the member's alignment, as the kernel
// checks each iovec of a direct preadv or pwritev.
func (m *File) alignedVec(bufs [][]byte, off int64) bool {
	mask := m.align - 1
	if off&mask != 0 {
		return false
	}
	for _, b := range bufs {
		if int64(len(b))&mask != 0 || int64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))&mask != 0 {
			return false
		}
	}
	return true
}

// HasData reports whether [off, off+n) may hold data: false only when the
// file system reports the whole range as a hole (lseek SEEK_DATA), which
// then reads as zeroes. Block devices and errors answer true, the safe side.
func (m *File) HasData(off, n int64) bool {
	if m.block || m.closed.Load() || m.shrunk.Load() {
		return true
	}
	var next int64
	err := m.control(func(fd int) error {
		var err error
		next, err = unix.Seek(fd, off, unix.SEEK_DATA)
		return err
	})
	if errors.Is(err, unix.ENXIO) {
		return false // no data at or after off
	}
	return err != nil || next < off+n
}
