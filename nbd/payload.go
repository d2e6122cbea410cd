package nbd

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Large WRITE payloads written while they arrive.
//
// A WRITE the reader runs itself (InlineWriter: a device whose writes are
// copies into memory) used to be received whole and only then written.
// The client, meanwhile, waits: its socket holds a fraction of a 1 MiB
// payload at a time (a unix socket's sender blocks at its send buffer, 208
// KiB by default), so once the reader stops reading to copy the payload
// into the device, the client stops sending. Receive and copy ran one after
// the other, and one connection's sequential 1 MiB writes onto a RAID0 of
// tmpfs files reached 0.7 of nbdkit's, whose second thread copies one
// request while the first receives the next (bench/nbd.sh on a quiet
// machine: the reader spent 230 µs per MiB receiving and 157 µs writing).
// Handing the write to a worker instead cost the same throughput and 25%
// more CPU per byte.
//
// So the reader writes a large inline WRITE's payload piece by piece: it
// reads the socket without blocking (from its descriptor), and whenever
// the socket is empty and at least streamPiece bytes have arrived that are
// not yet written, it writes them to the device (whole pieces, at their
// offsets) before it waits for more. The copy then fills the time the
// reader would have waited for the client anyway: 2.55-2.62 -> 3.53-3.54
// GB/s, at less CPU per byte (0.305 -> 0.264 s/GiB), since the pieces are copied out of the
// cache they were just received into. Only when no piece is due does it
// wait in the runtime's poller, under the connection's read deadline as any
// read (IOTimeout, the halt of a connection).
//
// Semantics. A WRITE is acknowledged, as before, only once every piece is
// written. The pieces are ordinary device writes: a READ that overlaps
// the WRITE while it is in flight may see some of them, as the protocol
// allows for overlapping requests. A device error stops the writing, the
// rest of the payload is still read (the stream stays in sync), and the
// WRITE gets the error reply. If the connection ends in the middle of a
// payload, the pieces already written stay written: the WRITE was never
// acknowledged, and an unacknowledged WRITE's range may hold old or new
// data, as after a crash. Only plain unix and TCP connections stream (TLS
// decrypts in user space), and only payloads of at least streamMin bytes
// that are not already buffered whole.

const (
	// streamMin is the smallest WRITE payload written while it arrives.
	streamMin = 256 << 10
	// streamPiece is the unit of the pieces written: 4 KiB to 64 KiB
	// measured the same, 256 KiB about 10% slower (fewer chances to
	// write while waiting).
	streamPiece = 64 << 10
)

// streamer reads the payload of a streamed WRITE and writes it to the
// device. Owned by the connection's reader goroutine; its callback is
// bound once, so that a WRITE allocates nothing.
type streamer struct {
	c      *conn
	rc     syscall.RawConn
	fn     func(fd uintptr) bool
	p      []byte // the payload buffer
	off    int64  // its offset on the device
	got    int    // bytes of p received
	done   int    // bytes of p written to the device (or skipped after an error)
	err    error  // what ended the receive (nil: p is full)
	devErr error  // the first device error

	// A payload received in place (Receiver): recvFn is recv bound once,
	// dsts the device's memory being filled (its unfilled part, which
	// recvRaw advances), placed the bytes received, and fault says the
	// kernel could not write there (EFAULT).
	recvFn  func(dsts [][]byte, atLeast int) (int, error)
	rawFn   func(fd uintptr) bool
	dsts    [][]byte
	iov     [][]byte // dsts' backing array
	placed  int
	atLeast int // the bytes recv waits for
	inPlace int // bytes received into the device's memory, not into p
	fault   bool
	receive bool // the device receives in place (Receiver, not Options.NoReceive)
}

// newStreamer returns a streamer for c's socket, or nil when it is not a
// plain unix or TCP socket.
func newStreamer(c *conn) *streamer {
	switch c.nc.(type) {
	case *net.UnixConn, *net.TCPConn:
	default:
		return nil
	}
	rc, err := c.nc.(syscall.Conn).SyscallConn()
	if err != nil {
		return nil
	}
	s := &streamer{c: c, rc: rc}
	s.fn, s.recvFn, s.rawFn = s.read, s.recv, s.recvRaw
	s.receive = c.exp.receiver != nil && !c.s.opts.NoReceive
	return s
}

// streams reports whether WRITE h, which the reader runs itself, is read
// by the streamer.
func (c *conn) streams(h *requestHeader) bool {
	return c.stream != nil && h.length >= streamMin && c.br.Buffered() < int(h.length)
}

// readStreamed reads r's payload into its buffer and writes it to the
// device as it arrives; a device that receives in place (Receiver) takes
// what it can of it first. It returns the error that ended the receive
// (the connection is then done); a device error is returned as devErr, to
// be the WRITE's reply.
func (s *streamer) readStreamed(r *request) (devErr, err error) {
	p := *r.buf
	s.p, s.off, s.got, s.done, s.err, s.devErr = p, int64(r.h.offset), 0, 0, nil, nil
	if !s.receive {
		s.got, _ = s.c.br.Read(p[:s.c.br.Buffered()]) // what the buffered reader holds first
	} else {
		r.received = s.receiveRest()
		if s.err != nil {
			err = s.err
			s.p, s.err, s.devErr = nil, nil, nil
			return nil, err
		}
	}
	if s.got == len(p) {
		err = nil
	} else if rerr := s.rc.Read(s.fn); rerr != nil {
		err = rerr
	} else {
		err = s.err
	}
	if err == nil {
		s.write(len(p))
	}
	devErr = s.devErr
	s.p, s.err, s.devErr = nil, nil, nil
	return devErr, err
}

// receiveRest has the device take the payload in place: the bytes the
// reader's buffer holds first (pre, which the device copies where they
// go), then the rest from the socket (recv). It returns how many of the
// bytes went straight from the socket into the device's own memory (not
// into p: see recv). s.got and s.done move past what the device took; the
// buffered bytes it did not take are moved into p after them, and the
// rest is left for readStreamed's usual receive. A device that declines
// (takes nothing, having asked for nothing) leaves the request exactly as
// streaming finds it. A device error is kept in devErr, a failed
// connection in err.
func (s *streamer) receiveRest() int {
	s.fault, s.inPlace = false, 0
	pre, _ := s.c.br.Peek(min(s.c.br.Buffered(), len(s.p)))
	k, derr := s.c.exp.receiver.ReceiveAt(s.p, s.off, pre, s.recvFn)
	if k < 0 || k > len(s.p) {
		k, derr = 0, fmt.Errorf("nbd: Receiver took %d of %d bytes", k, len(s.p))
	}
	if derr != nil && s.err == nil && !s.fault {
		s.devErr = derr
	}
	buffered := len(pre)
	_, _ = s.c.br.Discard(min(k, buffered)) // pre is spent: no reads through br before this
	s.got, s.done = k, k
	if k < buffered {
		n, _ := s.c.br.Read(s.p[k:buffered])
		s.got += n
	}
	return min(s.inPlace, k)
}

// recv is the Receiver's recv: it reads the payload's next bytes into
// dsts, with vectored reads, until dsts are full or the socket is empty
// with at least atLeast bytes placed, waiting in the runtime's poller (as
// read does) for those.
func (s *streamer) recv(dsts [][]byte, atLeast int) (int, error) {
	if s.err != nil || s.fault {
		return 0, errRecvStopped
	}
	// Empty pieces are left out: a vectored read of nothing but them
	// returns 0, which reads as the peer's close.
	s.iov = s.iov[:0]
	for _, d := range dsts {
		if len(d) > 0 {
			s.iov = append(s.iov, d)
		}
	}
	s.dsts, s.placed, s.atLeast = s.iov, 0, max(atLeast, 1)
	if len(s.dsts) > 0 {
		if rerr := s.rc.Read(s.rawFn); rerr != nil && s.err == nil {
			s.err = rerr
		}
	}
	n := s.placed
	clear(s.iov)
	s.dsts, s.placed = nil, 0
	// The bytes placed outside the payload buffer went into the device's
	// memory (a device may receive some into the buffer: a parity array's
	// pieces of partial stripes).
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(s.p)))
	hi := lo + uintptr(len(s.p))
	for left, i := n, 0; left > 0 && i < len(dsts); i++ {
		k := min(left, len(dsts[i]))
		if at := uintptr(unsafe.Pointer(unsafe.SliceData(dsts[i]))); at < lo || at >= hi {
			s.inPlace += k
		}
		left -= k
	}
	switch {
	case s.err != nil:
		return n, s.err
	case s.fault:
		return n, errRecvFault
	}
	return n, nil
}

// recvRaw is recv's RawConn.Read callback.
func (s *streamer) recvRaw(fd uintptr) bool {
	for len(s.dsts) > 0 {
		n, err := unix.Readv(int(fd), s.dsts[:min(len(s.dsts), maxIOV)])
		switch {
		case n > 0:
			s.placed += n
			for n > 0 {
				k := min(n, len(s.dsts[0]))
				s.dsts[0] = s.dsts[0][k:]
				n -= k
				if len(s.dsts[0]) == 0 {
					s.dsts = s.dsts[1:]
				}
			}
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			// Return what has arrived once the device has what it
			// asked to wait for (it may work on it while the client
			// sends the rest).
			return s.placed >= s.atLeast
		case err == unix.EFAULT:
			s.fault = true
			return true
		case err == nil: // the peer closed the connection
			s.err = io.ErrUnexpectedEOF
			return true
		default:
			s.err = err
			return true
		}
	}
	return true
}

// maxIOV bounds the pieces of one vectored read (Linux's UIO_MAXIOV).
const maxIOV = 1024

// Errors recv returns besides the connection's own.
var (
	errRecvFault   = errors.New("nbd: the device's memory could not take the payload (EFAULT)")
	errRecvStopped = errors.New("nbd: recv called after it failed")
)

// read is the RawConn.Read callback: it returns false to wait in the
// runtime's poller for more of the payload.
func (s *streamer) read(fd uintptr) bool {
	for s.got < len(s.p) {
		n, err := unix.Read(int(fd), s.p[s.got:])
		switch {
		case n > 0:
			s.got += n
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			if s.got-s.done < streamPiece {
				return false
			}
			s.write(s.done + (s.got-s.done)/streamPiece*streamPiece)
		case err == nil: // the peer closed the connection
			s.err = io.ErrUnexpectedEOF
			return true
		default:
			s.err = err
			return true
		}
	}
	return true
}

// write writes the received bytes [done, upto) to the device, unless an
// earlier piece failed.
func (s *streamer) write(upto int) {
	if s.devErr == nil && upto > s.done {
		s.devErr = s.c.writeData(s.p[s.done:upto], s.off+int64(s.done), false)
	}
	s.done = upto
}
