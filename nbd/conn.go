package nbd

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	connReadBufSize  = 128 << 10
	connWriteBufSize = 128 << 10
)

// conn is one client connection. Its lifecycle is: handshake (one goroutine,
// deadline HandshakeTimeout), then transmission: the serving goroutine becomes
// the request reader, Options.Workers worker goroutines execute requests (the
// reader runs a WRITE itself when the device says so: InlineWriter), and
// replies are written by whichever goroutine produced them under wmu.
type conn struct {
	s  *Server
	nc net.Conn // the accepted connection: deadlines and abrupt close
	// dc carries the protocol: nc, or the tls.Conn over it after
	// NBD_OPT_STARTTLS. Set only by the handshake goroutine, before
	// transmission starts.
	dc  net.Conn
	tls bool // NBD_OPT_STARTTLS succeeded
	// noTLS: the client did not set NBD_FLAG_C_FIXED_NEWSTYLE on a server
	// with TLS, so the connection is in the spec's NOTLS mode.
	noTLS bool
	log   *slog.Logger
	br    *bufio.Reader
	// raw, once set (initSockRead), is the socket the reader's reads go to
	// (sockread.go), with readFn bound once and rd the read in progress.
	raw    syscall.RawConn
	readFn func(fd uintptr) bool
	rd     sockRead
	held   int // replies held since the last send (reader only)
	// exactHeader: the last request was a large streamed WRITE, so the
	// next header is read alone (readCap), leaving a payload that follows
	// it in the socket for the device to receive where it goes.
	exactHeader bool
	readCap     int // when > 0, reads through br take at most this much (reader only)
	// sending: the reader sends held replies from inside a socket read.
	sending atomic.Bool

	// Reply writer. wpending counts goroutines that hold or wait for wmu;
	// the last one out flushes, so replies produced together share a
	// syscall and a lone reply is never left in the buffer.
	wmu      sync.Mutex
	bw       *bufio.Writer
	werr     error // first write error; guarded by wmu
	wpending atomic.Int32
	// hold, set only by the reader, says the last one out leaves the
	// buffer unflushed: the reader has more requests in hand and flushes
	// before it can block (holdReplies, releaseReplies).
	hold atomic.Bool
	// wdeadline is the write deadline last set (see armWrite); guarded by
	// wmu.
	wdeadline time.Time
	// Large READ replies skip the buffer: header and data go out in one
	// writev. Guarded by wmu.
	rhdr [structuredHeaderLen + 8]byte
	rvec net.Buffers
	// Large READ replies spliced from the device's files (splice.go):
	// sock reaches the socket's descriptor (nil: no splicing), pipes are
	// the staging pipes.
	sock  syscall.RawConn
	pipes pipes
	// stream writes large inline WRITEs as their payload arrives
	// (payload.go); nil on TLS and non-socket connections.
	stream *streamer

	// Negotiated state, fixed once transmission starts.
	noZeroes   bool
	structured bool
	meta       metaSelection // last NBD_OPT_SET_META_CONTEXT
	metaID     uint32        // base:allocation context ID in transmission; 0: none
	exp        *export
	pol        policy

	// Transmission.
	work    chan *request
	workers sync.WaitGroup
	sem     byteSem                // Options.MaxInFlightBytes of this connection
	reserve byteSem                // connReserveBytes outside the server budget
	hdr     [requestHeaderLen]byte // reader-owned request header buffer

	// Reader control (see limits.go). stop is closed by halt; rdMu guards
	// stopped, readerIdle and inflight, and every read deadline set after
	// the handshake, so that nothing undoes a halt.
	stop       chan struct{}
	rdMu       sync.Mutex
	stopped    bool
	readerIdle bool // the reader waits for a request header
	inflight   int  // requests handed to workers and not yet answered (counted only with IdleTimeout)
	// payloadDeadline: the reader left a payload deadline set. Reader-owned.
	payloadDeadline bool
	// transmitting: the handshake is over; draining: shutdown began
	// since, and the reader is halted shutdownDrain later (see drain).
	// Both guarded by rdMu.
	transmitting, draining bool

	// Handshake scratch.
	optBuf   []byte
	lastInfo struct {
		exp        *export
		structured bool
		info       exportInfo
	}
}

// request is one transmission request travelling from the reader to a
// worker. buf holds the WRITE payload or the READ destination.
type request struct {
	h    requestHeader
	buf  *[]byte
	from uint8 // where its payload bytes were taken from (fromNone, ...)
	// streamed: the payload was written to the device as it arrived
	// (payload.go), with the device's error streamErr.
	streamed  bool
	streamErr error
	received  int // the bytes of a streamed payload the device received in place
}

var requestPool = sync.Pool{New: func() any { return new(request) }}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		s:    s,
		nc:   nc,
		dc:   nc,
		bw:   bufio.NewWriterSize(nc, connWriteBufSize),
		stop: make(chan struct{}),
	}
	c.br = bufio.NewReaderSize(connReader{c}, connReadBufSize)
	c.log = s.log
	if a := nc.RemoteAddr(); a != nil {
		c.log = s.log.With("remote", a.String())
	}
	return c
}

// interrupt makes the connection stop reading (at shutdown): a handshake in
// progress fails at once; in transmission the reader drains (see drain).
func (c *conn) interrupt() {
	if !c.drain() {
		c.halt()
	}
}

func (c *conn) serve() {
	defer c.s.unregister(c)
	defer func() { _ = c.dc.Close() }() // a tls.Conn sends close_notify first
	c.log.Debug("nbd: connection opened")
	e, info, ok := c.handshake()
	if !ok {
		return
	}
	c.s.stats.handshakes.Add(1)
	c.log.Debug("nbd: transmission started", "export", e.Name, "size", info.size,
		"flags", info.tflags, "structured", c.structured)
	c.transmit(e, info)
	c.log.Debug("nbd: connection closed")
}

// transmit runs the transmission phase until the client disconnects (DISC or
// EOF), a protocol violation, a write failure, or shutdown. It returns after
// every request read has been executed and answered (or its reply failed).
func (c *conn) transmit(e *export, info exportInfo) {
	s := c.s
	c.exp = e
	c.pol = policy{size: info.size, tflags: info.tflags, minBlock: e.minBlock, maxLen: e.maxBlock,
		blockStatus: c.metaID != 0}
	tuneSocket(c.nc)
	if s.opts.Hold != nil {
		defer s.opts.Hold()()
	}
	c.sem.init(s.opts.MaxInFlightBytes)
	c.reserve.init(connReserveBytes)
	c.initSplice()
	c.initSockRead()
	if !c.tls && !s.opts.NoStreamWrites {
		c.stream = newStreamer(c)
	}
	c.work = make(chan *request, s.opts.Workers)
	for range s.opts.Workers {
		c.workers.Add(1)
		go c.worker()
	}
	c.readLoop()
	c.hold.Store(false)
	close(c.work)
	c.workers.Wait()
	defer c.pipes.closeAll()
	c.lockWriter()
	c.unlockWriter() // flushes what is left
}

// readLoop parses requests and hands valid ones to the workers. Invalid
// requests are answered here; a rejected WRITE's payload is discarded in
// place (never buffered) so the stream stays in sync. Before allocating a
// READ or WRITE buffer it takes the request's bytes (see acquire), waiting
// while they are not available.
func (c *conn) readLoop() {
	s := c.s
	for {
		if c.br.Buffered() < requestHeaderLen && c.raw == nil {
			c.releaseReplies() // the header read may block (readSock sends before it blocks)
		}
		if !c.armHeaderRead() {
			return
		}
		if c.exactHeader && c.raw != nil && c.br.Buffered() < requestHeaderLen {
			c.readCap = requestHeaderLen - c.br.Buffered()
		}
		_, err := io.ReadFull(c.br, c.hdr[:])
		c.readCap = 0
		if err != nil {
			if c.readTimedOut(err) {
				s.stats.idleTimeouts.Add(1)
				c.log.Debug("nbd: idle timeout; closing connection", "idle", s.opts.IdleTimeout)
				return
			}
			c.logReadEnd(err)
			return
		}
		c.headerRead()
		h, ok := parseRequestHeader(c.hdr[:])
		if !ok {
			c.log.Debug("nbd: bad request magic; disconnecting", "err", ErrProtocol)
			return
		}
		s.stats.countCommand(h.typ)
		if h.typ == cmdDisc {
			return
		}
		errno, reason := c.pol.validate(&h)
		if errno == 0 && s.shutting.Load() {
			errno, reason = errnoShutdown, reasonShutdown
		}
		if errno != 0 {
			if h.typ == cmdWrite && h.length > 0 {
				c.releaseReplies() // the payload's discard may block
				if err := c.readPayload(nil, h.length); err != nil {
					c.logPayloadEnd(err)
					return
				}
			}
			c.replyError(&h, errno, reason)
			continue
		}
		r := requestPool.Get().(*request)
		r.h, r.streamed, r.streamErr, r.received = h, false, nil, 0
		inline := c.inlineWrite(&h) || c.inlineRead(&h) // the reader runs it itself
		streamed := inline && h.typ == cmdWrite && c.streams(&h)
		c.exactHeader = streamed && h.length >= exactHeaderMin
		if !inline || streamed || (h.typ == cmdWrite && c.br.Buffered() < int(h.length) && c.raw == nil) {
			c.releaseReplies() // it may wait: for a worker, a budget, or its payload
		}
		if !inline && h.typ == cmdWrite && c.exp.prefetcher != nil {
			c.exp.prefetcher.Prefetch(int64(h.offset), int(h.length))
		}
		if (h.typ == cmdRead || h.typ == cmdWrite) && h.length > 0 {
			if !c.acquire(r) {
				// Halted while waiting: shutdown or a failed reply write.
				requestPool.Put(r)
				if s.shutting.Load() {
					c.replyError(&h, errnoShutdown, reasonShutdown)
				}
				return
			}
			r.buf = s.bufs.get(int(h.length))
			if h.typ == cmdWrite {
				var err error
				if streamed {
					c.armPayload()
					r.streamErr, err = c.stream.readStreamed(r)
					r.streamed = err == nil
				} else {
					err = c.readPayload(*r.buf, h.length)
				}
				if err != nil {
					c.logPayloadEnd(err)
					c.finish(r)
					return
				}
			}
		}
		c.beginRequest()
		if inline {
			c.holdReplies()
			c.execute(r)
			c.finish(r)
			c.endRequest()
			continue
		}
		c.work <- r
	}
}

// inlineWrite reports whether the reader runs request h itself: a WRITE
// without FUA to a device that says its writes do not wait (InlineWriterAt
// for this write, else InlineWriter).
func (c *conn) inlineWrite(h *requestHeader) bool {
	if h.typ != cmdWrite || h.flags&cmdFlagFUA != 0 {
		return false
	}
	if c.exp.inlineAt != nil {
		return c.exp.inlineAt.WritesInlineAt(int64(h.offset), int(h.length))
	}
	return c.exp.inline != nil && c.exp.inline.WritesInline()
}

// inlineRead reports whether the reader runs request h itself: a READ that
// the device says is a copy out of memory (InlineReader).
func (c *conn) inlineRead(h *requestHeader) bool {
	return h.typ == cmdRead && c.exp.inlineRead != nil && c.exp.inlineRead.ReadsInline(int(h.length))
}

// logPayloadEnd logs why reading a WRITE payload failed.
func (c *conn) logPayloadEnd(err error) {
	if c.readTimedOut(err) {
		c.s.stats.ioTimeouts.Add(1)
		c.log.Debug("nbd: WRITE payload not received in time; closing connection", "timeout", c.s.opts.IOTimeout)
		return
	}
	c.logReadEnd(err)
}

// discard drops n payload bytes from the stream in bounded pieces (n may
// be up to 4 GiB - 1; int may be 32 bits).
func (c *conn) discard(n uint32) error {
	for n > 0 {
		step := min(n, 1<<30)
		if _, err := c.br.Discard(int(step)); err != nil {
			return err
		}
		n -= step
	}
	return nil
}

func (c *conn) logReadEnd(err error) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	case errors.Is(err, os.ErrDeadlineExceeded) && c.s.shutting.Load():
	default:
		c.log.Debug("nbd: reading requests ended", "err", err)
	}
}

func (c *conn) worker() {
	defer c.workers.Done()
	for r := range c.work {
		c.execute(r)
		c.finish(r)
		c.endRequest()
	}
}

// finish releases r's buffer and in-flight bytes and recycles r.
func (c *conn) finish(r *request) {
	if r.buf != nil {
		c.s.bufs.put(r.buf)
		r.buf = nil
	}
	c.release(r)
	requestPool.Put(r)
}

// execute runs one validated request against the device and sends its reply.
func (c *conn) execute(r *request) {
	h := &r.h
	if c.s.shutting.Load() {
		c.replyError(h, errnoShutdown, reasonShutdown)
		return
	}
	e := c.exp
	off, n := int64(h.offset), int64(h.length)
	fua := h.flags&cmdFlagFUA != 0
	var err error
	switch h.typ {
	case cmdRead:
		c.executeRead(r)
		return
	case cmdBlockStatus:
		c.executeBlockStatus(h)
		return
	case cmdWrite:
		if r.streamed {
			err = r.streamErr
			if err == nil {
				c.s.stats.bytesWritten.Add(n)
				c.s.stats.bytesStreamed.Add(n)
				c.s.stats.bytesReceived.Add(int64(r.received))
			}
		} else if n > 0 {
			err = c.writeData(*r.buf, off, fua)
			if err == nil {
				c.s.stats.bytesWritten.Add(n)
			}
		}
	case cmdFlush:
		err = e.syncer.Sync()
	case cmdTrim:
		if n > 0 {
			err = e.discarder.Discard(off, n)
			if isNotSupported(err) {
				err = nil // trim is advisory: nothing discarded is a valid outcome
			}
			if err == nil && fua {
				err = e.syncer.Sync()
			}
		}
	case cmdCache:
		if n > 0 && e.cacher != nil {
			err = e.cacher.Cache(off, n)
			if isNotSupported(err) {
				err = nil // a hint nobody acted on
			}
		}
	case cmdWriteZeroes:
		if h.flags&cmdFlagFastZero != 0 && !fastZeroNow(e, h) {
			c.replyError(h, errnoNotSup, reasonNoFastZero)
			return
		}
		if n > 0 {
			err = c.writeZeroes(off, n, h.flags)
			if err != nil && h.flags&cmdFlagFastZero != 0 && isNotSupported(err) {
				c.replyError(h, errnoNotSup, reasonNoFastZero)
				return
			}
		}
	}
	if err != nil {
		c.replyDeviceError(h, err)
		return
	}
	c.replyOK(h)
}

// fastZeroNow reports whether FAST_ZERO request h can be honoured now.
// With NO_HOLE the space must stay allocated, which is fast only for a
// device that says so (FastNoHoleZeroer); others would write zeroes. A
// device may also refuse the request's range (FastZeroerAt).
func fastZeroNow(e *export, h *requestHeader) bool {
	if e.fastZeroer == nil || !e.fastZeroer.CanFastZero() {
		return false
	}
	if e.fastZeroAt != nil && !e.fastZeroAt.FastZeroAt(int64(h.offset), int64(h.length)) {
		return false
	}
	if h.flags&cmdFlagNoHole == 0 {
		return true
	}
	f, ok := e.Device.(FastNoHoleZeroer)
	return ok && f.CanFastZeroNoHole()
}

func isNotSupported(err error) bool {
	return err != nil && mapDeviceError(err) == errnoNotSup
}

// replyDeviceError maps err and answers h with it. ENOTSUP is only legal for
// fast-zero requests (handled by the caller), so here it becomes EINVAL.
func (c *conn) replyDeviceError(h *requestHeader, err error) {
	errno := mapDeviceError(err)
	if errno == errnoNotSup {
		errno = errnoInval
	}
	c.log.Debug("nbd: device error", "cmd", cmdName(h.typ), "offset", h.offset,
		"length", h.length, "errno", errnoName(errno), "err", err)
	c.replyError(h, errno, reasonDeviceError)
}

// writeData writes p at off, durably before returning if fua is set.
func (c *conn) writeData(p []byte, off int64, fua bool) error {
	e := c.exp
	var n int
	var err error
	switch {
	case fua && e.fuaWriter != nil:
		n, err = e.fuaWriter.WriteAtFUA(p, off)
	default:
		n, err = e.Device.WriteAt(p, off)
		if err == nil && n == len(p) && fua {
			err = e.syncer.Sync()
		}
	}
	if err == nil && n != len(p) {
		err = io.ErrShortWrite
	}
	return err
}

// writeZeroes zeroes [off, off+n). Without FAST_ZERO a device that reports
// ENOTSUP is served by writing zero buffers instead, since the protocol
// forbids ENOTSUP there.
func (c *conn) writeZeroes(off, n int64, flags uint16) error {
	e := c.exp
	err := e.zeroer.WriteZeroes(off, n, flags&cmdFlagNoHole != 0)
	if isNotSupported(err) && flags&cmdFlagFastZero == 0 {
		err = nil
		z := zeroBuf()
		for done := int64(0); done < n && err == nil; {
			chunk := z[:min(int64(len(z)), n-done)]
			var w int
			w, err = e.Device.WriteAt(chunk, off+done)
			if err == nil && w != len(chunk) {
				err = io.ErrShortWrite
			}
			done += int64(len(chunk))
		}
	}
	if err == nil && flags&cmdFlagFUA != 0 {
		err = e.syncer.Sync()
	}
	return err
}

// executeRead reads into r.buf and replies. The read completes before any
// byte of the reply is sent, so a failed read is always an error reply.
func (c *conn) executeRead(r *request) {
	h := &r.h
	if h.length == 0 {
		c.replyRead(h, nil)
		return
	}
	buf := *r.buf
	if c.spliceRead(h, buf) {
		return
	}
	n, err := c.exp.Device.ReadAt(buf, int64(h.offset))
	if n < 0 || n > len(buf) {
		n = 0
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
	}
	if n == len(buf) {
		err = nil // io.ReaderAt may return io.EOF with a full read
	} else if err == nil {
		err = io.ErrUnexpectedEOF
	}
	if err == nil {
		c.s.stats.bytesRead.Add(int64(n))
		c.replyRead(h, buf)
		return
	}
	errno := mapDeviceError(err)
	if errno == errnoNotSup {
		errno = errnoInval
	}
	c.log.Debug("nbd: device error", "cmd", "READ", "offset", h.offset,
		"length", h.length, "done", n, "errno", errnoName(errno), "err", err)
	c.replyReadError(h, buf[:n], errno)
}

// Limits of one BLOCK_STATUS reply. The spec lets the server describe less
// than the requested range (at least one extent), and clients continue from
// the first byte not described.
const (
	maxStatusExtents = 1024                 // descriptors per reply
	maxStatusCalls   = 4 * maxStatusExtents // BlockStatus calls per request
)

// extent is one block status descriptor of the base:allocation context.
type extent struct {
	length uint32
	flags  uint32 // 0 (data) or stateHole|stateZero
}

// executeBlockStatus answers a validated BLOCK_STATUS request (a context was
// selected, so structured replies are in use). Every device call completes
// before the reply is written, so a device error is always an error reply.
func (c *conn) executeBlockStatus(h *requestHeader) {
	ext, err := blockExtents(c.exp.statuser, int64(h.offset), int64(h.length),
		int64(c.exp.minBlock), h.flags&cmdFlagReqOne != 0)
	if err != nil {
		c.replyDeviceError(h, err)
		return
	}
	c.replyBlockStatus(h, ext)
}

// blockExtents describes [off, off+n) (n > 0; off and n multiples of minB, a
// power of two; the range inside the export) with base:allocation extents by
// calling d.BlockStatus from off onwards:
//
//   - Consecutive runs with the same state are merged, so descriptors
//     alternate between data and holes.
//   - Every length is a multiple of minB: a run ending inside a minimum
//     block is cut back to the block boundary, or, if it is shorter than
//     one block, that whole block gets the state all its runs share (a
//     hole only if every byte of it is one; data otherwise).
//   - The extents never extend past off+n (the spec would allow the last
//     one to, but REQ_ONE forbids it and nothing is gained), so they sum to
//     at most n < 2^32 and every length fits in 32 bits.
//   - With reqOne there is exactly one extent; otherwise at most
//     maxStatusExtents. The device is called at most maxStatusCalls times;
//     when a limit is reached the reply describes a prefix of the range
//     (never less than one extent), which the spec allows.
//
// A device ENOTSUP means "unknown": the rest of the range is reported as
// data (status 0 is always truthful). Any other error is returned, as is a
// device answer of a non-positive length.
func blockExtents(d BlockStatuser, off, n, minB int64, reqOne bool) ([]extent, error) {
	maxExt := maxStatusExtents
	if reqOne {
		maxExt = 1
	}
	calls := 0
	// status returns the length (1 <= l <= end-at) and flags of the run at at.
	status := func(at, end int64) (int64, uint32, error) {
		calls++
		l, zero, err := d.BlockStatus(at, end-at)
		switch {
		case isNotSupported(err):
			return end - at, 0, nil
		case err != nil:
			return 0, 0, err
		case l <= 0:
			return 0, 0, fmt.Errorf("nbd: BlockStatus(%d, %d) returned length %d", at, end-at, l)
		}
		var flags uint32
		if zero {
			flags = stateHole | stateZero
		}
		return min(l, end-at), flags, nil
	}
	var out []extent
	for cur, end := off, off+n; cur < end && calls < maxStatusCalls; {
		l, flags, err := status(cur, end)
		if err != nil {
			return nil, err
		}
		if r := l % minB; r != 0 {
			if l > minB {
				l -= r // the rest is looked at again in the next round
			} else {
				// The run ends inside the block [cur, cur+minB) (cur is
				// aligned, and end too, so the block is inside the range).
				blockEnd := cur + minB
				for p := cur + l; p < blockEnd && flags != 0; {
					if calls >= maxStatusCalls {
						flags = 0 // undetermined: data is always truthful
						break
					}
					l2, f2, err := status(p, blockEnd)
					if err != nil {
						return nil, err
					}
					flags &= f2
					p += l2
				}
				l = minB
			}
		}
		if k := len(out); k > 0 && out[k-1].flags == flags {
			out[k-1].length += uint32(l)
		} else if k == maxExt {
			break
		} else {
			out = append(out, extent{length: uint32(l), flags: flags})
		}
		cur += l
	}
	return out, nil
}

// ---- reply writing ----

func (c *conn) lockWriter() {
	c.wpending.Add(1)
	c.wmu.Lock()
	if c.werr == nil {
		c.armWrite()
	}
}

// holdReplies lets the replies of the requests the reader serves itself
// (inline: copies into and out of members held in memory) wait in the
// buffer while the reader has more to do without waiting for the client,
// and the replies of the run go out with one write instead of one each,
// and wake the client once. They wait only while the reader cannot block:
// on a connection whose socket it reads itself (sockread.go) it sends them
// when a read finds the socket empty, before it waits, and after maxHeld
// of them; elsewhere (TLS) it holds them only while the next request's
// header is already buffered, and sends them before any read that is not
// served from its buffer. Either way it sends them before a request it
// hands to the workers, before a streamed payload, and before it discards
// a rejected WRITE's payload. A worker that is the last out meanwhile
// leaves its reply to that send too. Reader only.
//
// On 4 tmpfs members (bench/nbd-ab.sh-like runs, random 4 KiB, iodepth
// 32): RAID0 writes 482-519 -> 494-604 MB/s at 5.5-6.2 against 6.8-7.0
// µs of CPU per request, and reads on RAID0 and RAID5 +22-33%, with 0.07-0.2
// write system calls per request against 1.0 (holding while the next
// header is buffered). Sending only when a read finds the socket empty
// (fio's libnbd sends a header and its payload with two calls, so the
// reader often had to read for the next header) cut the reply writes of
// RAID0 random 4 KiB writes from 0.83 to 0.36 per request, and raised
// their throughput in 8 of 9 same-run pairs (median +6%). Holding across
// requests handed to the workers too (releasing before a wait for a busy
// worker or for in-flight bytes) changed nothing on RAID5 random writes:
// the reader has released by the time the workers finish.
func (c *conn) holdReplies() {
	if c.raw != nil {
		// Reads send before they would block (sockread.go).
		if c.held >= maxHeld {
			c.releaseReplies()
		}
		c.held++
		c.hold.Store(true)
		return
	}
	if c.br.Buffered() >= requestHeaderLen && !c.hold.Load() {
		c.hold.Store(true)
	}
}

// releaseReplies ends holdReplies and flushes what waits in the buffer (a
// goroutine holding or waiting for the writer lock flushes when it is the
// last out). Reader only.
func (c *conn) releaseReplies() {
	c.held = 0
	if !c.hold.Load() {
		return
	}
	c.hold.Store(false)
	c.lockWriter()
	c.unlockWriter()
}

func (c *conn) unlockWriter() {
	if c.wpending.Add(-1) == 0 && c.werr == nil && !c.hold.Load() {
		if err := c.bw.Flush(); err != nil {
			c.failWrite(err)
		}
	}
	c.wmu.Unlock()
}

// failWrite records the first write error and closes the connection, which
// also stops the reader. Called with wmu held.
func (c *conn) failWrite(err error) {
	if c.werr != nil {
		return
	}
	c.werr = err
	switch {
	case c.timedOut(err):
		c.s.stats.ioTimeouts.Add(1)
		c.log.Debug("nbd: client did not take its reply in time; closing connection", "timeout", c.s.opts.IOTimeout)
	case !errors.Is(err, net.ErrClosed):
		c.log.Debug("nbd: writing reply failed; closing connection", "err", err)
	}
	c.halt()
	if !c.sending.Load() {
		// Not while the reader sends from inside a socket read
		// (sockread.go): Close would wait for that read to end. The
		// halt ends it, and the connection is closed as it ends.
		_ = c.nc.Close()
	}
}

// scratch returns an empty slice of the writer's buffer with room for n
// bytes, flushing first if needed (the bufio.Writer.AvailableBuffer idiom,
// which encodes headers without allocating). Called with wmu held.
func (c *conn) scratch(n int) []byte {
	if c.bw.Available() < n {
		if err := c.bw.Flush(); err != nil {
			c.failWrite(err)
		}
	}
	return c.bw.AvailableBuffer()
}

func (c *conn) write(b []byte) {
	if c.werr != nil {
		return
	}
	if _, err := c.bw.Write(b); err != nil {
		c.failWrite(err)
	}
}

func (c *conn) writeString(str string) {
	if c.werr != nil {
		return
	}
	if _, err := c.bw.WriteString(str); err != nil {
		c.failWrite(err)
	}
}

func appendSimple(b []byte, errno uint32, handle uint64) []byte {
	b = binary.BigEndian.AppendUint32(b, magicSimpleReply)
	b = binary.BigEndian.AppendUint32(b, errno)
	return binary.BigEndian.AppendUint64(b, handle)
}

func appendChunk(b []byte, flags, typ uint16, handle uint64, length uint32) []byte {
	b = binary.BigEndian.AppendUint32(b, magicStructuredReply)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint64(b, handle)
	return binary.BigEndian.AppendUint32(b, length)
}

// replyOK sends a successful reply without payload (any command but READ).
// A simple reply is valid here even after structured replies were negotiated.
func (c *conn) replyOK(h *requestHeader) {
	c.lockWriter()
	if c.werr == nil {
		c.write(appendSimple(c.scratch(simpleReplyLen), 0, h.handle))
	}
	c.unlockWriter()
}

// replyError sends an error reply. With structured replies negotiated it is
// an NBD_REPLY_TYPE_ERROR chunk carrying reason (mandatory for READ,
// preferred by the spec for the rest); otherwise a simple reply.
func (c *conn) replyError(h *requestHeader, errno uint32, reason string) {
	c.s.stats.errorReplies.Add(1)
	c.lockWriter()
	if c.werr == nil {
		if c.structured {
			b := c.scratch(structuredHeaderLen + 6)
			b = appendChunk(b, replyFlagDone, replyTypeError, h.handle, uint32(6+len(reason)))
			b = binary.BigEndian.AppendUint32(b, errno)
			b = binary.BigEndian.AppendUint16(b, uint16(len(reason)))
			c.write(b)
			c.writeString(reason)
		} else {
			c.write(appendSimple(c.scratch(simpleReplyLen), errno, h.handle))
		}
	}
	c.unlockWriter()
}

// replyRead sends a successful READ reply carrying data (len(data) ==
// h.length). With structured replies it is a single OFFSET_DATA chunk marked
// DONE (the data is already read, so no error can follow), or a NONE chunk
// for a zero-length read; this satisfies NBD_CMD_FLAG_DF trivially.
func (c *conn) replyRead(h *requestHeader, data []byte) {
	c.lockWriter()
	if c.werr == nil {
		hdr := c.readHeader(h, len(data))
		if len(data) >= directReplyMin {
			c.writeDirect(hdr, data)
		} else {
			c.write(hdr)
			c.write(data)
		}
	}
	c.unlockWriter()
}

// readHeader encodes, into c.rhdr, the header of a successful READ reply
// carrying n bytes: a simple reply, or one OFFSET_DATA chunk marked DONE (a
// NONE chunk for n == 0). Called with wmu held.
func (c *conn) readHeader(h *requestHeader, n int) []byte {
	switch {
	case !c.structured:
		return appendSimple(c.rhdr[:0], 0, h.handle)
	case n == 0:
		return appendChunk(c.rhdr[:0], replyFlagDone, replyTypeNone, h.handle, 0)
	}
	hdr := appendChunk(c.rhdr[:0], replyFlagDone, replyTypeOffsetData, h.handle, uint32(8+n))
	return binary.BigEndian.AppendUint64(hdr, h.offset)
}

// directReplyMin is the READ payload size from which the reply bypasses the
// buffer (saving a copy of up to its size and a system call).
const directReplyMin = 64 << 10

// writeDirect flushes buffered replies, then sends hdr and data with one
// writev. Called with wmu held.
func (c *conn) writeDirect(hdr, data []byte) {
	if c.werr != nil {
		return
	}
	if err := c.bw.Flush(); err != nil {
		c.failWrite(err)
		return
	}
	c.rvec = append(c.rvec[:0], hdr, data)
	if _, err := c.rvec.WriteTo(c.dc); err != nil {
		c.failWrite(err)
	}
}

// replyBlockStatus sends the successful reply to a BLOCK_STATUS request: one
// NBD_REPLY_TYPE_BLOCK_STATUS chunk (DONE) for the base:allocation context,
// carrying the context ID and the extents.
func (c *conn) replyBlockStatus(h *requestHeader, ext []extent) {
	p := make([]byte, 0, 4+8*len(ext))
	p = binary.BigEndian.AppendUint32(p, c.metaID)
	for _, e := range ext {
		p = binary.BigEndian.AppendUint32(p, e.length)
		p = binary.BigEndian.AppendUint32(p, e.flags)
	}
	c.lockWriter()
	if c.werr == nil {
		b := c.scratch(structuredHeaderLen)
		c.write(appendChunk(b, replyFlagDone, replyTypeBlockStatus, h.handle, uint32(len(p))))
		c.write(p)
	}
	c.unlockWriter()
}

// replyReadError answers a READ that failed after the device returned the
// first len(partial) bytes. Simple replies carry only the error. Structured
// replies send the good prefix as an OFFSET_DATA chunk, then an ERROR_OFFSET
// chunk (DONE) at the first byte not read.
func (c *conn) replyReadError(h *requestHeader, partial []byte, errno uint32) {
	if !c.structured {
		c.replyError(h, errno, reasonDeviceError)
		return
	}
	c.s.stats.errorReplies.Add(1)
	msg := reasonDeviceError
	c.lockWriter()
	if c.werr == nil {
		if len(partial) > 0 {
			b := c.scratch(structuredHeaderLen + 8)
			b = appendChunk(b, 0, replyTypeOffsetData, h.handle, uint32(8+len(partial)))
			c.write(binary.BigEndian.AppendUint64(b, h.offset))
			c.write(partial)
		}
		b := c.scratch(structuredHeaderLen + 6)
		b = appendChunk(b, replyFlagDone, replyTypeErrorOffset, h.handle, uint32(14+len(msg)))
		b = binary.BigEndian.AppendUint32(b, errno)
		c.write(binary.BigEndian.AppendUint16(b, uint16(len(msg))))
		c.writeString(msg)
		c.write(binary.BigEndian.AppendUint64(c.scratch(8), h.offset+uint64(len(partial))))
	}
	c.unlockWriter()
}
