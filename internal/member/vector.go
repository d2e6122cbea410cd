package member

import (
	"errors"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// maxIovecs is the most buffers one vectored call takes (the kernel's IOV_MAX).
const maxIovecs = 1024

func total(bufs [][]byte) int64 {
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	return n
}

// ReadvAt fills bufs, in order, from the consecutive bytes starting at off,
// with one preadv(2): the engine gathers a request's chunks that lie back to
// back on a member into one system call. It returns the total read; less
// than the total only with an error, as io.ReaderAt. bufs are not retained.
// Safe for concurrent use.
//
// With O_DIRECT the preadv goes straight to the buffers when off and every
// buffer's address and length are aligned for direct I/O (see the package
// documentation); otherwise the whole run is read into one aligned bounce
// buffer with one read and copied out. Either way the run costs one system
// call, not one per buffer. More than maxIovecs buffers (the kernel's
// IOV_MAX) take one call per maxIovecs; ranges past the end and closed or
// shrunk members take the one-buffer-at-a-time path, which reports them as
// ReadAt does.
func (m *File) ReadvAt(bufs [][]byte, off int64) (int, error) {
	want := total(bufs)
	if m.closed.Load() || m.shrunk.Load() || off < 0 || off+want > m.size {
		return readEach(m, bufs, off)
	}
	done := 0
	for len(bufs) > maxIovecs {
		n, err := m.readv(bufs[:maxIovecs], off+int64(done))
		done += n
		if err != nil {
			return done, err
		}
		bufs = bufs[maxIovecs:]
	}
	n, err := m.readv(bufs, off+int64(done))
	return done + n, err
}

// readv serves ReadvAt for at most maxIovecs buffers inside the member:
// from a read-ahead that covers them (readahead.go), else from the device.
func (m *File) readv(bufs [][]byte, off int64) (int, error) {
	if m.direct {
		if n, ok := m.raServe(bufs, off, total(bufs)); ok {
			return n, nil
		}
	}
	return m.readvDevice(bufs, off)
}

// readvDevice is readv without the read-ahead.
func (m *File) readvDevice(bufs [][]byte, off int64) (int, error) {
	want := total(bufs)
	if m.direct && !m.alignedVec(bufs, off) {
		n, err := m.readBounce(bufs, off, want)
		if err == io.EOF { // the range lies inside Size: the device shrank
			m.shrunk.Store(true)
			return n, m.shrunkErr("read", -1)
		}
		return n, err
	}
	var n int
	var err error
	if m.direct {
		n, err = m.readQueued(bufs, off) // may merge with adjacent waiting reads (readq.go)
	} else {
		n, err = m.vectored(bufs, off, sysPreadv)
	}
	if err != nil {
		return 0, m.wrap("preadv", err)
	}
	if int64(n) < want { // short read (end of file below Size): the rest one by one reports it
		k, err := readEach(m, skip(bufs, int64(n)), off+int64(n))
		return n + k, err
	}
	return n, nil
}

// WritevAt writes bufs, in order, as consecutive bytes starting at off, with
// one pwritev(2), or with O_DIRECT and buffers not aligned for it, one
// write from one aligned bounce buffer (see ReadvAt). Durability, errors,
// concurrency and the size check are as WriteAt's.
func (m *File) WritevAt(bufs [][]byte, off int64) (int, error) {
	want := total(bufs)
	if m.readOnly || m.closed.Load() || m.shrunk.Load() || off < 0 || off+want > m.size {
		return writeEach(m, bufs, off)
	}
	done := 0
	for len(bufs) > maxIovecs {
		n, err := m.writev(bufs[:maxIovecs], off+int64(done))
		done += n
		if err != nil {
			return done, err
		}
		bufs = bufs[maxIovecs:]
	}
	n, err := m.writev(bufs, off+int64(done))
	return done + n, err
}

// WritevAtDSync is WritevAt that returns once the bytes are durable: one
// pwritev2(2) with RWF_DSYNC, which a block device with FUA serves as a
// write with FUA. The engine writes its write-hole log records so. A block
// device without FUA (sysfs queue/fua 0: most loop devices, disks behind
// some controllers) writes and then syncs instead: there the kernel serves
// RWF_DSYNC as a write, the flush that stands in for its FUA, and the
// flush of the sync it adds after every dsync write, one flush more than
// a write and fdatasync(2) cost (on a loop device: 2 flushes per call
// against 1, /sys/block/loopN/stat; TestDSyncWithoutFUA), and a disk that
// counts its operations pays for each. Where the kernel refuses the flag
// (EOPNOTSUPP; ENOSYS before Linux 4.7) it writes and then syncs, then and
// from then on; so do ranges WritevAt would serve one buffer at a time.
func (m *File) WritevAtDSync(bufs [][]byte, off int64) (int, error) {
	want := total(bufs)
	if m.noDSync.Load() || m.readOnly || m.closed.Load() || m.shrunk.Load() || off < 0 || off+want > m.size || len(bufs) > maxIovecs {
		return m.writeThenSync(bufs, off)
	}
	n, err := m.writevFlags(bufs, off, true)
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) {
		m.noDSync.Store(true)
		return m.writeThenSync(bufs, off)
	}
	return n, err
}

func (m *File) writeThenSync(bufs [][]byte, off int64) (int, error) {
	n, err := m.WritevAt(bufs, off)
	if err == nil {
		err = m.Sync()
	}
	return n, err
}

// writev serves WritevAt for at most maxIovecs buffers inside the member.
func (m *File) writev(bufs [][]byte, off int64) (int, error) {
	return m.writevFlags(bufs, off, false)
}

// writevFlags is writev, with RWF_DSYNC when dsync is set.
func (m *File) writevFlags(bufs [][]byte, off int64, dsync bool) (int, error) {
	want := total(bufs)
	if off+want == m.size {
		if err := m.checkSize("write"); err != nil {
			return 0, err
		}
	}
	var n int
	if m.direct && !m.alignedVec(bufs, off) {
		var err error
		if n, err = m.writeBounce(bufs, off, want, dsync); err != nil {
			if serr := m.checkSize("write"); serr != nil {
				return n, serr
			}
			return n, err
		}
	} else {
		var err error
		kind := sysPwritev
		if dsync {
			kind = sysPwritevDSync
		}
		if n, err = m.vectored(bufs, off, kind); err != nil {
			return 0, m.wrap("pwritev", err)
		}
	}
	if err := m.checkWrite("write", off+want, int64(n) == want); err != nil {
		return n, err
	}
	if int64(n) < want {
		k, err := writeEach(m, skip(bufs, int64(n)), off+int64(n))
		return n + k, err
	}
	return n, nil
}

// testHookFault, when set by a test, is asked before every vectored call
// (after testHookIO) whether it fails: a non-nil error is returned as the
// call's, and no system call is made.
var testHookFault func(m *File, write bool, off int64, n int) error

// testHookStat, when set by a test, runs before each fstat of statSize.
var testHookStat func()

// testHookSync, when set by a test, runs before every fdatasync of Sync.
var testHookSync func(m *File)

// testHookVector, when set by a test, runs after a vectored call has
// checked the member and before it takes the descriptor: the window in
// which a concurrent Close can happen.
var testHookVector func()

// sysKind is the system call a sysReq makes.
type sysKind uint8

const (
	sysPreadv sysKind = iota
	sysPwritev
	sysPwritevDSync // pwritev2 with RWF_DSYNC
	sysFstat
)

// sysReq is one guarded system call on the hot path (preadv, pwritev, or
// the fstat of the size check after a write). Its run method value is bound
// once, when the pool makes it, so that passing it to RawConn.Control
// allocates nothing per call.
type sysReq struct {
	kind sysKind
	bufs [][]byte
	off  int64
	n    int
	st   unix.Stat_t
	err  error
	run  func(fd uintptr)
}

var sysReqPool = sync.Pool{New: func() any {
	c := new(sysReq)
	c.run = c.do
	return c
}}

func (c *sysReq) do(fd uintptr) {
	for {
		switch c.kind {
		case sysPwritev:
			c.n, c.err = unix.Pwritev(int(fd), c.bufs, c.off)
		case sysPwritevDSync:
			c.n, c.err = unix.Pwritev2(int(fd), c.bufs, c.off, unix.RWF_DSYNC)
		case sysPreadv:
			c.n, c.err = unix.Preadv(int(fd), c.bufs, c.off)
		case sysFstat:
			c.err = unix.Fstat(int(fd), &c.st)
		}
		if c.err != unix.EINTR {
			return
		}
	}
}

// guarded runs the system call c describes on the member's descriptor
// while holding the os.File's reference to it (RawConn.Control), exactly
// as control does: a concurrent Close then defers close(2) until the call
// returns, so the descriptor number cannot be reused by another file under
// the call. After Close it fails with os.ErrClosed and makes no system
// call.
func (m *File) guarded(c *sysReq) error {
	if cerr := m.rc.Control(c.run); cerr != nil {
		return os.ErrClosed // the only way Control fails on an open-mode file
	}
	return c.err
}

// vectored runs the vectored call kind (preadv, pwritev or pwritev2 with
// RWF_DSYNC) under the descriptor's reference.
func (m *File) vectored(bufs [][]byte, off int64, kind sysKind) (int, error) {
	if kind != sysPreadv {
		m.beginWrite() // before the hooks: a test's hook holds a write in flight
		defer m.endWrite()
	}
	if testHookVector != nil {
		testHookVector()
	}
	if testHookIO != nil {
		testHookIO(m, kind != sysPreadv, off, int(total(bufs)))
	}
	if testHookFault != nil {
		if err := testHookFault(m, kind != sysPreadv, off, int(total(bufs))); err != nil {
			return 0, err
		}
	}
	if m.mapped.data != nil {
		want := total(bufs)
		if kind == sysPreadv {
			if n, ok := m.readMapped(bufs, off, want, nil); ok {
				return n, nil
			}
		} else if n, ok := m.writeMapped(bufs, off, want, nil); ok {
			// A write held in memory is as durable as RWF_DSYNC makes it.
			return n, nil
		}
	}
	c := sysReqPool.Get().(*sysReq)
	c.kind, c.bufs, c.off = kind, bufs, off
	err := m.guarded(c)
	n := c.n
	c.bufs, c.n, c.err = nil, 0, nil
	sysReqPool.Put(c)
	if kind != sysPreadv {
		m.wrote(off, int64(n)) // a no-op unless mapped
	}
	return n, err
}

// statSize returns the file's current st_size with one fstat(2) and no
// allocation.
func (m *File) statSize() (int64, error) {
	if testHookStat != nil {
		testHookStat()
	}
	c := sysReqPool.Get().(*sysReq)
	c.kind = sysFstat
	err := m.guarded(c)
	size := c.st.Size
	c.err = nil
	sysReqPool.Put(c)
	return size, err
}

// skip drops the first n bytes of bufs. It allocates; it serves only the
// rare short transfer.
func skip(bufs [][]byte, n int64) [][]byte {
	var out [][]byte
	for _, b := range bufs {
		switch {
		case n >= int64(len(b)):
			n -= int64(len(b))
		case n > 0:
			out = append(out, b[n:])
			n = 0
		default:
			out = append(out, b)
		}
	}
	return out
}

func readEach(r io.ReaderAt, bufs [][]byte, off int64) (int, error) {
	done := 0
	for _, b := range bufs {
		n, err := r.ReadAt(b, off)
		done += n
		if err != nil {
			return done, err
		}
		off += int64(n)
	}
	return done, nil
}

func writeEach(w io.WriterAt, bufs [][]byte, off int64) (int, error) {
	done := 0
	for _, b := range bufs {
		n, err := w.WriteAt(b, off)
		done += n
		if err != nil {
			return done, err
		}
		off += int64(n)
	}
	return done, nil
}

// ReadvAt fills bufs from consecutive bytes at off (see File.ReadvAt).
func (m *Memory) ReadvAt(bufs [][]byte, off int64) (int, error) { return readEach(m, bufs, off) }

// WritevAt writes bufs as consecutive bytes at off (see File.WritevAt).
func (m *Memory) WritevAt(bufs [][]byte, off int64) (int, error) { return writeEach(m, bufs, off) }
