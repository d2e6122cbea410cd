package nbd

import (
	"io"
	"syscall"
)

// The request reader's reads, and the replies it holds.
//
// The reader answers the requests it serves itself (inline) into the reply
// buffer and holds them there (holdReplies) as long as it has more to do
// without waiting for the client, so that a run of them goes out with one
// write system call and wakes the client once. On a plain unix or TCP
// connection it learns that it would wait only when it tries: its reads
// are non-blocking reads of the socket (readSock), and one that finds the
// socket empty sends the held replies before it waits in the runtime's
// poller. So a read that finds the next request already arrived (the usual
// case under a pipelining client, whose header and payload come in two
// sends) costs no reply write, where "flush unless the next header is
// already in the buffer" wrote once per request. A reply waits at most for
// the reader to serve maxHeld requests without blocking.
//
// On a TLS connection (the bytes are decrypted by crypto/tls, which does
// its own reads) the reader keeps the rule of the buffer: it sends the held
// replies before any read that is not served from its buffer.

// maxHeld bounds the replies the reader holds before it sends them.
const maxHeld = 16

// exactHeaderMin: after a streamed WRITE of at least this many bytes the
// reader reads the next request's header alone (conn.exactHeader), not a
// buffer's worth. In a stream of large writes the socket holds the next
// header and its payload; a buffer fill would take up to connReadBufSize of
// that payload into the buffer, and the device would copy it from there
// (the Receiver's pre, the streamer's buffered bytes). Read alone, the
// header costs the same one system call, and the payload goes from the
// socket straight to where it belongs. A request that is not such a write
// ends it, so small requests keep sharing buffer fills.
const exactHeaderMin = connReadBufSize

// connReader is what the reader's bufio.Reader reads from: the socket,
// through readSock once transmission starts on a plain connection, else
// the connection itself.
type connReader struct{ c *conn }

func (r connReader) Read(p []byte) (int, error) {
	if r.c.raw != nil {
		if k := r.c.readCap; k > 0 && len(p) > k {
			p = p[:k]
		}
		return r.c.readSock(p)
	}
	return r.c.dc.Read(p)
}

// initSockRead makes the reader read a plain connection's socket itself
// (readSock) when it reaches the descriptor (syscall.Conn: unix and TCP
// sockets). Called as transmission starts.
func (c *conn) initSockRead() {
	sc, ok := c.nc.(syscall.Conn)
	if c.tls || !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	c.readFn = c.tryRead
	c.raw = rc
}

// readSock reads what the socket has into p (at least a byte), waiting in
// the runtime's poller under the read deadline when it has nothing; before
// it waits it sends the replies the reader holds. Reader only.
func (c *conn) readSock(p []byte) (int, error) {
	c.rd = sockRead{p: p}
	err := c.raw.Read(c.readFn)
	n := c.rd.n
	if err == nil {
		err = c.rd.err
	}
	c.rd = sockRead{}
	return n, err
}

// sockRead is the state of one readSock.
type sockRead struct {
	p   []byte
	n   int
	err error
}

// tryRead is readSock's RawConn.Read callback: false waits for the socket
// to be readable. When the socket is empty it sends the held replies
// first, from here: sent after the read returned, they would cost another
// read before the wait, since a new RawConn.Read must try before it waits
// (the poller forgets a readiness it saw before). A reply write that fails
// then halts the connection without closing it (failWrite), which would
// wait for this read to end. It reads with syscall.Read, which, like the
// net package's reads, tells the race detector that what the peer wrote
// before sending happened before.
func (c *conn) tryRead(fd uintptr) bool {
	for {
		n, err := syscall.Read(int(fd), c.rd.p)
		switch {
		case n > 0:
			c.rd.n = n
			return true
		case err == syscall.EINTR:
		case err == syscall.EAGAIN:
			if c.hold.Load() {
				c.sending.Store(true)
				c.releaseReplies()
				c.sending.Store(false)
			}
			return false
		case err == nil:
			c.rd.err = io.EOF
			return true
		default:
			c.rd.err = err
			return true
		}
	}
}
