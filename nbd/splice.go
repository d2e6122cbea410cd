package nbd

import (
	"errors"
	"io"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// READ replies spliced from the device's files.
//
// A device that keeps its data in files in the page cache (raidd's arrays
// of files on tmpfs or opened without O_DIRECT) can have a large READ's
// reply sent without any copy by the server: the device names the file
// ranges that hold the request (Splicer), the worker moves them into a
// pipe with splice(2), which takes references to the files' pages, and the
// reply writer moves the pipe into the socket, again by reference (the
// kernel's MSG_SPLICE_PAGES path for unix and TCP sockets). ReadAt and a
// writev cost two copies of the payload instead: file to buffer, buffer to
// socket.
//
// The whole payload is staged in the pipe before the reply header is
// written. A range that cannot be staged (an error, a file that ends early,
// a pipe too small for unaligned pieces) therefore costs nothing visible:
// the pipe is discarded and the request is served with ReadAt, which meets
// and reports the error as a copied read would. Once the header is out,
// only the socket can fail, and that ends the connection anyway.
//
// Splicing needs the socket's descriptor: it is used on plain unix and TCP
// connections, not after STARTTLS (TLS encrypts in user space), and only
// for payloads of at least spliceMin bytes (below that the copy costs less
// than the extra system calls). Each connection keeps a pipe of spliceMax
// bytes per worker that spliced (at most maxPipes), made on first use and
// closed with the connection; a READ that finds none free is copied.

// Splicer is implemented by devices that can name the file ranges holding
// a read, so that the server sends them from the page cache without
// copying (see above).
//
// SpliceReadAt calls send for each file range of [off, off+len(p)), in
// order (src reaches the file's descriptor, srcOff is the offset in the
// file, n > 0 bytes), and returns true once all of them were sent. It
// returns false when it cannot serve the read that way, or when send
// returned an error; the server then serves the request with ReadAt. p is
// scratch of the read's length; the device must not retain it, and the
// server ignores its content. The server has checked the range, and calls
// SpliceReadAt only for reads it would otherwise pass to ReadAt.
//
// A device must name a range only if its bytes are what ReadAt would return
// at the time of the call: the server sends the pages, not a copy, so a
// device may name them only where later changes to those pages come from
// writes the protocol lets overlap the read (the client's own in-flight
// requests).
type Splicer interface {
	SpliceReadAt(p []byte, off int64, send func(src syscall.RawConn, srcOff int64, n int) error) bool
}

const (
	// spliceMin is the smallest READ payload that is spliced.
	spliceMin = 64 << 10
	// spliceMax is the size each pipe asks for; larger READs are copied.
	spliceMax = 1 << 20
	// maxPipes bounds the pipes of one connection (two descriptors each),
	// which has at most Options.Workers requests running at once.
	maxPipes = 64
)

// pipe is one staging pipe of a connection. A request's staging state
// lives in it, and stageFn and ctlFn are its methods bound once, so that
// staging allocates nothing.
type pipe struct {
	r, w int
	size int // capacity in bytes (F_GETPIPE_SZ)

	staged, limit int // bytes staged so far, of the request's limit
	// The range being staged, and the result of the last splice.
	off     int64
	n       int
	k       int64
	err     error
	stageFn func(src syscall.RawConn, off int64, n int) error
	ctlFn   func(fd uintptr)
	// The reply's move out of the pipe: bytes sent of want.
	sent, want int
	outFn      func(fd uintptr) bool
}

// stage is the send function of Splicer.SpliceReadAt: it moves n bytes at
// off of src's file into the pipe.
func (p *pipe) stage(src syscall.RawConn, off int64, n int) error {
	if n <= 0 || p.staged+n > p.limit {
		return errors.New("nbd: splice range outside the request")
	}
	p.off = off
	for n > 0 {
		p.n = n
		if err := src.Control(p.ctlFn); err != nil {
			return err
		}
		switch {
		case p.err != nil:
			return p.err // EAGAIN: the pipe is full (unaligned pieces)
		case p.k == 0:
			return io.ErrUnexpectedEOF // the file ends early
		}
		n -= int(p.k)
		p.staged += int(p.k)
	}
	return nil
}

// ctl is stage's splice, run on the file's descriptor.
func (p *pipe) ctl(fd uintptr) {
	for {
		p.k, p.err = unix.Splice(int(fd), &p.off, p.w, nil, p.n, unix.SPLICE_F_NONBLOCK)
		if p.err != unix.EINTR {
			return
		}
	}
}

func (p *pipe) close() {
	_ = unix.Close(p.r)
	_ = unix.Close(p.w)
}

// pipes is a connection's pool of staging pipes.
type pipes struct {
	mu     sync.Mutex
	free   []*pipe
	n      int  // pipes made and not closed
	max    int  // at most this many pipes: min(Options.Workers, maxPipes)
	failed bool // making a pipe failed: splice no more on this connection
}

func (ps *pipes) get() *pipe {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if k := len(ps.free); k > 0 {
		p := ps.free[k-1]
		ps.free = ps.free[:k-1]
		return p
	}
	if ps.failed || ps.n >= ps.max {
		return nil
	}
	p, err := newPipe()
	if err != nil {
		ps.failed = true
		return nil
	}
	ps.n++
	return p
}

// put returns an empty pipe to the pool, or closes one that may hold bytes.
func (ps *pipes) put(p *pipe, empty bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if !empty {
		p.close()
		ps.n--
		return
	}
	ps.free = append(ps.free, p)
}

// closeAll closes the pooled pipes (at the end of the connection, once no
// worker runs).
func (ps *pipes) closeAll() {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, p := range ps.free {
		p.close()
	}
	ps.free, ps.n = nil, 0
}

func newPipe() (*pipe, error) {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, err
	}
	p := &pipe{r: fds[0], w: fds[1]}
	// Without the capacity (an unprivileged user past
	// fs.pipe-user-pages-soft) every large read would fail to stage.
	if _, err := unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, spliceMax); err != nil {
		p.close()
		return nil, err
	}
	size, err := unix.FcntlInt(uintptr(p.w), unix.F_GETPIPE_SZ, 0)
	if err != nil || size < spliceMax {
		p.close()
		return nil, errors.New("nbd: pipe capacity too small")
	}
	p.size = size
	p.stageFn, p.ctlFn, p.outFn = p.stage, p.ctl, p.out
	return p, nil
}

// initSplice sets up splicing for a connection entering transmission: the
// export's device is a Splicer, and the connection is a plain socket.
func (c *conn) initSplice() {
	if c.s.opts.NoSplice || c.tls {
		return
	}
	if _, ok := c.exp.Device.(Splicer); !ok {
		return
	}
	switch nc := c.nc.(type) {
	case *net.UnixConn, *net.TCPConn:
		rc, err := nc.(syscall.Conn).SyscallConn()
		if err == nil {
			c.sock = rc
			c.pipes.max = min(c.s.opts.Workers, maxPipes)
		}
	}
}

// spliceRead tries to serve a READ of buf's length by splicing: it returns
// false, having sent nothing, when the request must be served with ReadAt.
func (c *conn) spliceRead(h *requestHeader, buf []byte) bool {
	if c.sock == nil || len(buf) < spliceMin || len(buf) > spliceMax {
		return false
	}
	p := c.pipes.get()
	if p == nil {
		return false
	}
	p.staged, p.limit = 0, len(buf)
	ok := c.exp.Device.(Splicer).SpliceReadAt(buf, int64(h.offset), p.stageFn)
	staged := p.staged
	if !ok || staged != len(buf) {
		c.pipes.put(p, staged == 0)
		return false
	}
	// Counted before the reply goes out, as a copied read is, so that a
	// client that has its reply sees it in Stats (a test that read Stats
	// right after its reply found the bytes not yet counted).
	c.s.stats.bytesRead.Add(int64(len(buf)))
	c.s.stats.bytesSpliced.Add(int64(len(buf)))
	c.lockWriter()
	sent := 0
	if c.werr == nil {
		c.write(c.readHeader(h, len(buf)))
		if c.werr == nil {
			if err := c.bw.Flush(); err != nil {
				c.failWrite(err)
			}
		}
		if c.werr == nil {
			var err error
			sent, err = c.spliceOut(p, len(buf))
			if err != nil {
				c.failWrite(err)
			}
		}
	}
	c.unlockWriter()
	c.pipes.put(p, sent == len(buf))
	return true
}

// spliceOut moves n staged bytes from p into the socket, waiting (under the
// write deadline) while the socket is full. Called with wmu held.
func (c *conn) spliceOut(p *pipe, n int) (int, error) {
	p.sent, p.want, p.err = 0, n, nil
	err := c.sock.Write(p.outFn)
	if p.err != nil {
		err = p.err
	}
	return p.sent, err
}

// out is spliceOut's loop, run on the socket's descriptor: false asks the
// poller to wait until the socket can take more.
func (p *pipe) out(fd uintptr) bool {
	for p.sent < p.want {
		k, err := unix.Splice(p.r, nil, int(fd), nil, p.want-p.sent, unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return false // the socket is full: wait until it drains
		case err != nil:
			p.err = err
			return true
		case k == 0:
			p.err = io.ErrUnexpectedEOF
			return true
		}
		p.sent += int(k)
	}
	return true
}
