package nbd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// Resource bounds: how a connection's memory and time are limited. See the
// package documentation ("Resource bounds") for the whole picture.

// connReserveBytes is the payload a connection may hold outside the
// server-wide budget, in requests of at most this size: small I/O always
// proceeds, however many large requests of other clients wait for budget.
const connReserveBytes = 128 << 10

// Where a request's payload bytes came from (besides the connection's own
// MaxInFlightBytes bound, which every payload request takes).
const (
	fromNone    uint8 = iota // no payload bytes held
	fromReserve              // the connection's reserve
	fromBudget               // the server-wide budget
)

// acquire takes r's payload bytes: from the connection's bound, then from
// its reserve or the server budget. Small requests try the reserve, then the
// budget, without waiting, and otherwise wait for the reserve, which only
// this connection's own requests hold. It returns false, having taken
// nothing, if the connection is halted while it waits.
func (c *conn) acquire(r *request) bool {
	n := int64(r.h.length)
	if !c.sem.acquire(n, c.stop) {
		return false
	}
	switch {
	case n <= connReserveBytes && c.reserve.tryAcquire(n):
		r.from = fromReserve
	case n <= connReserveBytes && c.s.budget.tryAcquire(n):
		r.from = fromBudget
	case n <= connReserveBytes && c.reserve.acquire(n, c.stop):
		r.from = fromReserve
	case n > connReserveBytes && c.s.budget.acquire(n, c.stop):
		r.from = fromBudget
	default:
		c.sem.release(n)
		return false
	}
	c.s.stats.inFlight.Add(n)
	return true
}

// release returns what acquire took for r.
func (c *conn) release(r *request) {
	n := int64(r.h.length)
	switch r.from {
	case fromReserve:
		c.reserve.release(n)
	case fromBudget:
		c.s.budget.release(n)
	default:
		return
	}
	r.from = fromNone
	c.sem.release(n)
	c.s.stats.inFlight.Add(-n)
}

// halt makes the reader stop: a handshake or request read in progress
// fails at once, and a reader waiting for budget gives up. Deadlines set
// afterwards by the reader or the idle logic are suppressed, so the halt
// cannot be undone.
func (c *conn) halt() {
	c.rdMu.Lock()
	defer c.rdMu.Unlock()
	if !c.stopped {
		c.stopped = true
		close(c.stop)
	}
	_ = c.nc.SetReadDeadline(time.Now())
}

// shutdownDrain is how long a connection in transmission goes on reading
// once shutdown began. The protocol asks a server shutting down to answer
// the requests it receives with ESHUTDOWN, and a client that gets one to
// disconnect (NBD_CMD_DISC): so the requests a client sent before it
// learnt of the shutdown, still in the socket, are read and answered
// (WRITE payloads discarded) rather than left unanswered under a reset
// connection, and a client that answers with DISC ends the connection at
// once. A client that sends nothing holds the shutdown this long at most.
const shutdownDrain = 250 * time.Millisecond

// drain starts the reader's shutdown drain, if the connection is in
// transmission: the reader goes on reading for shutdownDrain, answering
// each request header it reads with ESHUTDOWN (readLoop), and is then
// halted; requests already read run and are answered. It returns false
// (nothing done) during the handshake.
func (c *conn) drain() bool {
	c.rdMu.Lock()
	defer c.rdMu.Unlock()
	if !c.transmitting || c.stopped {
		return false
	}
	if !c.draining {
		c.draining = true
		time.AfterFunc(shutdownDrain, c.halt)
	}
	return true
}

// armHeaderRead sets the read deadline for the next request header:
// IdleTimeout from now if it is enabled and no request is in flight, none
// otherwise. It returns false if the connection was halted.
func (c *conn) armHeaderRead() bool {
	idle := c.s.opts.IdleTimeout
	if idle == 0 && !c.payloadDeadline {
		return true // no deadline is set, none is wanted
	}
	c.rdMu.Lock()
	defer c.rdMu.Unlock()
	if c.stopped {
		return false
	}
	c.payloadDeadline = false
	var d time.Time
	if idle > 0 {
		c.readerIdle = true
		if c.inflight == 0 {
			d = time.Now().Add(idle)
		}
	}
	_ = c.nc.SetReadDeadline(d)
	return true
}

// headerRead records that the reader is no longer waiting for a header.
func (c *conn) headerRead() {
	if c.s.opts.IdleTimeout == 0 {
		return
	}
	c.rdMu.Lock()
	c.readerIdle = false
	c.rdMu.Unlock()
}

// beginRequest and endRequest count the requests handed to the workers, so
// that the idle timeout only runs while none is in flight. endRequest arms
// it when the last one is answered while the reader waits for a header.
func (c *conn) beginRequest() {
	if c.s.opts.IdleTimeout == 0 {
		return
	}
	c.rdMu.Lock()
	c.inflight++
	c.rdMu.Unlock()
}

func (c *conn) endRequest() {
	idle := c.s.opts.IdleTimeout
	if idle == 0 {
		return
	}
	c.rdMu.Lock()
	c.inflight--
	if c.inflight == 0 && c.readerIdle && !c.stopped {
		_ = c.nc.SetReadDeadline(time.Now().Add(idle))
	}
	c.rdMu.Unlock()
}

// readPayload reads a WRITE payload into p, or discards n bytes if p is
// nil, under the IOTimeout deadline unless the bytes are already buffered.
func (c *conn) readPayload(p []byte, n uint32) error {
	if c.br.Buffered() < int(n) {
		c.armPayload()
	}
	if p == nil {
		return c.discard(n)
	}
	_, err := io.ReadFull(c.br, p)
	return err
}

// armPayload sets the IOTimeout deadline for a payload not yet buffered.
func (c *conn) armPayload() {
	c.rdMu.Lock()
	if !c.stopped {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.s.opts.IOTimeout))
		c.payloadDeadline = true
	}
	c.rdMu.Unlock()
}

// armWrite makes sure the write deadline leaves at least 7/8 of IOTimeout
// for the reply about to be written; refreshing it only then keeps the
// system call off most replies. Called with wmu held.
func (c *conn) armWrite() {
	t := c.s.opts.IOTimeout
	now := time.Now()
	if c.wdeadline.Sub(now) >= t-t/8 {
		return
	}
	c.wdeadline = now.Add(t)
	_ = c.nc.SetWriteDeadline(c.wdeadline)
}

// timedOut reports whether err is the expiry of a deadline set by the
// resource bounds (not the one that halts a connection at shutdown).
func (c *conn) timedOut(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded) && !c.s.shutting.Load()
}

// readTimedOut is timedOut for the reader: a read deadline that halt set
// to stop it (a reply write that failed or timed out, counted there) is
// not a timeout of the read.
func (c *conn) readTimedOut(err error) bool {
	if !c.timedOut(err) {
		return false
	}
	c.rdMu.Lock()
	defer c.rdMu.Unlock()
	return !c.stopped
}

// refusedOptionLimit bounds the options a refused client may send.
const refusedOptionLimit = 16

// refuse answers a connection beyond MaxConnections the way the protocol
// asks of a server that will not serve a client: it greets it and answers
// every option with NBD_REP_ERR_POLICY and a message naming the limit, until
// the client sends NBD_OPT_ABORT (acknowledged), NBD_OPT_EXPORT_NAME (which
// has no error reply, so the connection is closed), a malformed or
// oversized option or refusedOptionLimit options, or until HandshakeTimeout
// passes. It reads and writes nc directly, without buffers of its own, and
// always closes nc.
func (s *Server) refuse(nc net.Conn) {
	defer func() {
		s.mu.Lock()
		delete(s.refusing, nc)
		s.mu.Unlock()
		_ = nc.Close()
	}()
	_ = nc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	var hello [18]byte
	binary.BigEndian.PutUint64(hello[0:], magicInitPasswd)
	binary.BigEndian.PutUint64(hello[8:], magicIHaveOpt)
	binary.BigEndian.PutUint16(hello[16:], flagFixedNewstyle|flagNoZeroes)
	if _, err := nc.Write(hello[:]); err != nil {
		return
	}
	var cf [4]byte
	if _, err := io.ReadFull(nc, cf[:]); err != nil || binary.BigEndian.Uint32(cf[:])&^clientFlagsKnown != 0 {
		return
	}
	msg := fmt.Sprintf("too many connections: this server serves at most %d at once; try again later", s.opts.MaxConnections)
	for range refusedOptionLimit {
		var oh [optHeaderLen]byte
		if _, err := io.ReadFull(nc, oh[:]); err != nil || binary.BigEndian.Uint64(oh[0:]) != magicIHaveOpt {
			return
		}
		opt := binary.BigEndian.Uint32(oh[8:])
		length := binary.BigEndian.Uint32(oh[12:])
		if length > maxOptionLen || opt == optExportName {
			return
		}
		if _, err := io.CopyN(io.Discard, nc, int64(length)); err != nil {
			return
		}
		typ, data := repErrPolicy, msg
		if opt == optAbort {
			typ, data = repAck, ""
		}
		b := make([]byte, optReplyHeaderLen, optReplyHeaderLen+len(data))
		binary.BigEndian.PutUint64(b[0:], magicOptReply)
		binary.BigEndian.PutUint32(b[8:], opt)
		binary.BigEndian.PutUint32(b[12:], typ)
		binary.BigEndian.PutUint32(b[16:], uint32(len(data)))
		if _, err := nc.Write(append(b, data...)); err != nil || opt == optAbort {
			return
		}
	}
}
