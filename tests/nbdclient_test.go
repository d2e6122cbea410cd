package tests

// A minimal raw-socket NBD client for protocol-level tests of the real
// binary: fixed newstyle handshake, NBD_OPT_GO, optional structured replies,
// pipelined requests matched by handle. It deliberately trusts nothing the
// server sends: every magic and length is checked, and every socket
// operation has a deadline so that a misbehaving server fails a test
// instead of hanging it. Wire constants follow doc/proto.md of
// NetworkBlockDevice/nbd.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const (
	nbdMagic            uint64 = 0x4e42444d41474943 // "NBDMAGIC"
	nbdIHaveOpt         uint64 = 0x49484156454f5054 // "IHAVEOPT"
	nbdOptReplyMagic    uint64 = 0x0003e889045565a9
	nbdRequestMagic     uint32 = 0x25609513
	nbdSimpleReplyMagic uint32 = 0x67446698
	nbdStructReplyMagic uint32 = 0x668e33ef

	nbdFlagFixedNewstyle uint16 = 1 << 0
	nbdFlagNoZeroes      uint16 = 1 << 1
	nbdFlagCFixed        uint32 = 1 << 0
	nbdFlagCNoZeroes     uint32 = 1 << 1

	// Transmission flags.
	nbdFlagHasFlags     uint16 = 1 << 0
	nbdFlagReadOnly     uint16 = 1 << 1
	nbdFlagSendFlush    uint16 = 1 << 2
	nbdFlagSendFUA      uint16 = 1 << 3
	nbdFlagSendTrim     uint16 = 1 << 5
	nbdFlagSendZeroes   uint16 = 1 << 6
	nbdFlagCanMultiConn uint16 = 1 << 8
	nbdFlagSendFastZero uint16 = 1 << 11

	nbdOptExportName      uint32 = 1
	nbdOptAbort           uint32 = 2
	nbdOptList            uint32 = 3
	nbdOptInfo            uint32 = 6
	nbdOptGo              uint32 = 7
	nbdOptStructuredReply uint32 = 8

	nbdRepAck        uint32 = 1
	nbdRepServer     uint32 = 2
	nbdRepInfo       uint32 = 3
	nbdRepErrUnsup   uint32 = 1<<31 + 1
	nbdRepErrInvalid uint32 = 1<<31 + 3
	nbdRepErrUnknown uint32 = 1<<31 + 6

	nbdInfoExport uint16 = 0

	nbdCmdRead        uint16 = 0
	nbdCmdWrite       uint16 = 1
	nbdCmdDisc        uint16 = 2
	nbdCmdFlush       uint16 = 3
	nbdCmdTrim        uint16 = 4
	nbdCmdWriteZeroes uint16 = 6

	nbdCmdFlagFUA      uint16 = 1 << 0
	nbdCmdFlagFastZero uint16 = 1 << 4

	nbdReplyFlagDone       uint16 = 1 << 0
	nbdReplyTypeNone       uint16 = 0
	nbdReplyTypeOffsetData uint16 = 1
	nbdReplyTypeOffsetHole uint16 = 2

	// NBD error values (fixed by the protocol, not the host's errno).
	nbdEPERM     uint32 = 1
	nbdEIO       uint32 = 5
	nbdEINVAL    uint32 = 22
	nbdENOSPC    uint32 = 28
	nbdEOVERFLOW uint32 = 75
	nbdENOTSUP   uint32 = 95
)

// ioTimeout bounds every socket operation of the raw client.
const ioTimeout = 15 * time.Second

func nbdErrName(e uint32) string {
	switch e {
	case 0:
		return "OK"
	case nbdEPERM:
		return "EPERM"
	case nbdEIO:
		return "EIO"
	case nbdEINVAL:
		return "EINVAL"
	case nbdENOSPC:
		return "ENOSPC"
	case nbdEOVERFLOW:
		return "EOVERFLOW"
	case nbdENOTSUP:
		return "ENOTSUP"
	}
	return fmt.Sprintf("errno(%d)", e)
}

// rawConn is a connection in the handshake or transmission phase.
type rawConn struct {
	c          net.Conn
	structured bool   // structured replies negotiated
	size       uint64 // export size from NBD_INFO_EXPORT
	tflags     uint16 // transmission flags
	handle     uint64
	pending    map[uint64]pendingReq
}

type pendingReq struct {
	typ    uint16
	offset uint64
	length uint32
}

// reply is one complete reply to a request.
type reply struct {
	handle uint64
	errno  uint32
	data   []byte // READ data (nil unless a successful READ)
}

// dialRaw connects to a unix socket and completes the initial greeting (the
// server's magics and handshake flags, the client flags FIXED_NEWSTYLE and
// NO_ZEROES). It leaves the connection at the start of option haggling.
func dialRaw(t testing.TB, sock string) *rawConn {
	t.Helper()
	rc, hflags := dialGreeting(t, sock)
	cflags := nbdFlagCFixed
	if hflags&nbdFlagNoZeroes != 0 {
		cflags |= nbdFlagCNoZeroes
	}
	require.NoError(t, rc.writeAll(binary.BigEndian.AppendUint32(nil, cflags)))
	return rc
}

// dialGreeting connects and reads the server greeting, returning the
// handshake flags; the client flags are not sent yet.
func dialGreeting(t testing.TB, sock string) (*rawConn, uint16) {
	t.Helper()
	c, err := net.DialTimeout("unix", sock, ioTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	rc := &rawConn{c: c, pending: map[uint64]pendingReq{}}
	var hdr [18]byte
	rc.deadline()
	_, err = io.ReadFull(c, hdr[:])
	require.NoError(t, err, "reading the server greeting")
	require.Equal(t, nbdMagic, binary.BigEndian.Uint64(hdr[0:8]), "NBDMAGIC")
	require.Equal(t, nbdIHaveOpt, binary.BigEndian.Uint64(hdr[8:16]), "IHAVEOPT (newstyle)")
	hflags := binary.BigEndian.Uint16(hdr[16:18])
	require.NotZero(t, hflags&nbdFlagFixedNewstyle, "server must offer fixed newstyle")
	return rc, hflags
}

func (rc *rawConn) deadline() { _ = rc.c.SetDeadline(time.Now().Add(ioTimeout)) }

func (rc *rawConn) writeAll(b []byte) error {
	rc.deadline()
	_, err := rc.c.Write(b)
	return err
}

func (rc *rawConn) readFull(b []byte) error {
	rc.deadline()
	_, err := io.ReadFull(rc.c, b)
	return err
}

// sendOpt sends one option with its data.
func (rc *rawConn) sendOpt(opt uint32, data []byte) error {
	b := binary.BigEndian.AppendUint64(nil, nbdIHaveOpt)
	b = binary.BigEndian.AppendUint32(b, opt)
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	return rc.writeAll(append(b, data...))
}

// optReply is one option reply.
type optReply struct {
	opt, typ uint32
	data     []byte
}

// readOptReply reads one option reply, refusing absurd lengths.
func (rc *rawConn) readOptReply() (optReply, error) {
	var h [20]byte
	if err := rc.readFull(h[:]); err != nil {
		return optReply{}, err
	}
	if m := binary.BigEndian.Uint64(h[0:8]); m != nbdOptReplyMagic {
		return optReply{}, fmt.Errorf("option reply magic %#x", m)
	}
	r := optReply{opt: binary.BigEndian.Uint32(h[8:12]), typ: binary.BigEndian.Uint32(h[12:16])}
	n := binary.BigEndian.Uint32(h[16:20])
	if n > 64<<10 {
		return r, fmt.Errorf("option reply length %d too large", n)
	}
	r.data = make([]byte, n)
	return r, rc.readFull(r.data)
}

// structuredReply negotiates NBD_OPT_STRUCTURED_REPLY and requires an ACK.
func (rc *rawConn) structuredReply(t testing.TB) {
	t.Helper()
	require.NoError(t, rc.sendOpt(nbdOptStructuredReply, nil))
	r, err := rc.readOptReply()
	require.NoError(t, err)
	require.Equal(t, nbdOptStructuredReply, r.opt, "reply names the option")
	require.Equal(t, nbdRepAck, r.typ, "NBD_OPT_STRUCTURED_REPLY must be acknowledged")
	rc.structured = true
}

// optGo sends NBD_OPT_GO for name and reads replies up to the final one. It
// returns the final reply type (NBD_REP_ACK on success) and, on success,
// records the export size and flags from NBD_INFO_EXPORT.
func (rc *rawConn) optGo(name string) (uint32, error) {
	d := binary.BigEndian.AppendUint32(nil, uint32(len(name)))
	d = append(d, name...)
	d = binary.BigEndian.AppendUint16(d, 0) // no specific info requests
	if err := rc.sendOpt(nbdOptGo, d); err != nil {
		return 0, err
	}
	gotExport := false
	for {
		r, err := rc.readOptReply()
		if err != nil {
			return 0, err
		}
		if r.opt != nbdOptGo {
			return 0, fmt.Errorf("reply to option %d while waiting for GO", r.opt)
		}
		switch {
		case r.typ == nbdRepInfo:
			if len(r.data) < 2 {
				return 0, fmt.Errorf("short NBD_REP_INFO (%d bytes)", len(r.data))
			}
			if binary.BigEndian.Uint16(r.data[0:2]) == nbdInfoExport {
				if len(r.data) != 12 {
					return 0, fmt.Errorf("NBD_INFO_EXPORT of %d bytes, want 12", len(r.data))
				}
				rc.size = binary.BigEndian.Uint64(r.data[2:10])
				rc.tflags = binary.BigEndian.Uint16(r.data[10:12])
				gotExport = true
			}
		case r.typ == nbdRepAck:
			if !gotExport {
				return r.typ, errors.New("NBD_OPT_GO acknowledged without NBD_INFO_EXPORT")
			}
			return r.typ, nil
		case r.typ&(1<<31) != 0:
			return r.typ, nil // an error reply ends this option
		default:
			return r.typ, fmt.Errorf("unexpected reply type %#x to GO", r.typ)
		}
	}
}

// openRaw connects and enters transmission on export name, with structured
// replies when structured is true.
func openRaw(t testing.TB, sock, name string, structured bool) *rawConn {
	t.Helper()
	rc := dialRaw(t, sock)
	if structured {
		rc.structuredReply(t)
	}
	typ, err := rc.optGo(name)
	require.NoError(t, err)
	require.Equal(t, nbdRepAck, typ, "NBD_OPT_GO %q", name)
	require.NotZero(t, rc.tflags&nbdFlagHasFlags, "HAS_FLAGS must be set")
	return rc
}

// send writes one request (and the payload, for writes) without waiting for
// the reply, and returns its handle.
func (rc *rawConn) send(typ, flags uint16, off uint64, length uint32, payload []byte) (uint64, error) {
	rc.handle++
	h := rc.handle
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 28+len(payload)), nbdRequestMagic)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint64(b, h)
	b = binary.BigEndian.AppendUint64(b, off)
	b = binary.BigEndian.AppendUint32(b, length)
	b = append(b, payload...)
	if typ != nbdCmdDisc {
		rc.pending[h] = pendingReq{typ: typ, offset: off, length: length}
	}
	return h, rc.writeAll(b)
}

// recv reads one complete reply (all chunks, for structured replies).
func (rc *rawConn) recv() (reply, error) {
	var m [4]byte
	if err := rc.readFull(m[:]); err != nil {
		return reply{}, err
	}
	switch magic := binary.BigEndian.Uint32(m[:]); magic {
	case nbdSimpleReplyMagic:
		var h [12]byte
		if err := rc.readFull(h[:]); err != nil {
			return reply{}, err
		}
		r := reply{errno: binary.BigEndian.Uint32(h[0:4]), handle: binary.BigEndian.Uint64(h[4:12])}
		p, ok := rc.pending[r.handle]
		if !ok {
			return r, fmt.Errorf("simple reply for unknown handle %d", r.handle)
		}
		delete(rc.pending, r.handle)
		if p.typ == nbdCmdRead && r.errno == 0 {
			r.data = make([]byte, p.length)
			if err := rc.readFull(r.data); err != nil {
				return r, err
			}
		}
		return r, nil
	case nbdStructReplyMagic:
		return rc.recvStructured()
	default:
		return reply{}, fmt.Errorf("reply magic %#x", magic)
	}
}

// recvStructured reads structured chunks of one request until DONE. The
// first chunk's magic has already been consumed.
func (rc *rawConn) recvStructured() (reply, error) {
	var r reply
	var p pendingReq
	first := true
	for {
		if !first {
			var m [4]byte
			if err := rc.readFull(m[:]); err != nil {
				return r, err
			}
			if magic := binary.BigEndian.Uint32(m[:]); magic != nbdStructReplyMagic {
				return r, fmt.Errorf("chunk magic %#x inside a structured reply", magic)
			}
		}
		var h [16]byte
		if err := rc.readFull(h[:]); err != nil {
			return r, err
		}
		flags := binary.BigEndian.Uint16(h[0:2])
		typ := binary.BigEndian.Uint16(h[2:4])
		handle := binary.BigEndian.Uint64(h[4:12])
		n := binary.BigEndian.Uint32(h[12:16])
		if first {
			var ok bool
			if p, ok = rc.pending[handle]; !ok {
				return r, fmt.Errorf("structured reply for unknown handle %d", handle)
			}
			r.handle = handle
			if p.typ == nbdCmdRead {
				r.data = make([]byte, p.length)
			}
			first = false
		} else if handle != r.handle {
			// This client never has two structured replies interleaved
			// in a test that uses this path with reads in flight.
			return r, fmt.Errorf("interleaved chunk for handle %d inside reply %d", handle, r.handle)
		}
		if n > 64<<20+64 {
			return r, fmt.Errorf("chunk length %d too large", n)
		}
		payload := make([]byte, n)
		if err := rc.readFull(payload); err != nil {
			return r, err
		}
		switch {
		case typ == nbdReplyTypeNone:
		case typ == nbdReplyTypeOffsetData:
			if n < 9 || p.typ != nbdCmdRead {
				return r, fmt.Errorf("bad OFFSET_DATA chunk of %d bytes", n)
			}
			off := binary.BigEndian.Uint64(payload[0:8])
			if off < p.offset || off-p.offset+uint64(n-8) > uint64(p.length) {
				return r, fmt.Errorf("OFFSET_DATA [%d,+%d) outside request [%d,+%d)", off, n-8, p.offset, p.length)
			}
			copy(r.data[off-p.offset:], payload[8:])
		case typ == nbdReplyTypeOffsetHole:
			if n != 12 || p.typ != nbdCmdRead {
				return r, fmt.Errorf("bad OFFSET_HOLE chunk of %d bytes", n)
			}
			off := binary.BigEndian.Uint64(payload[0:8])
			hl := binary.BigEndian.Uint32(payload[8:12])
			if off < p.offset || off-p.offset+uint64(hl) > uint64(p.length) {
				return r, fmt.Errorf("OFFSET_HOLE outside the request")
			}
			clear(r.data[off-p.offset : off-p.offset+uint64(hl)])
		case typ&(1<<15) != 0:
			if n < 6 {
				return r, fmt.Errorf("error chunk of %d bytes", n)
			}
			if r.errno == 0 {
				r.errno = binary.BigEndian.Uint32(payload[0:4])
			}
		default:
			return r, fmt.Errorf("unexpected chunk type %d", typ)
		}
		if flags&nbdReplyFlagDone != 0 {
			delete(rc.pending, r.handle)
			if r.errno != 0 {
				r.data = nil
			}
			return r, nil
		}
	}
}

// do sends one request and waits for its reply.
func (rc *rawConn) do(t testing.TB, typ, flags uint16, off uint64, length uint32, payload []byte) reply {
	t.Helper()
	h, err := rc.send(typ, flags, off, length, payload)
	require.NoError(t, err, "sending request")
	r, err := rc.recv()
	require.NoError(t, err, "reading reply")
	require.Equal(t, h, r.handle, "reply handle")
	return r
}

// read reads [off, off+n) and requires success.
func (rc *rawConn) read(t testing.TB, off uint64, n uint32) []byte {
	t.Helper()
	r := rc.do(t, nbdCmdRead, 0, off, n, nil)
	require.Equal(t, "OK", nbdErrName(r.errno), "READ at %d len %d", off, n)
	return r.data
}

// write writes p at off and requires success.
func (rc *rawConn) write(t testing.TB, off uint64, p []byte, flags uint16) {
	t.Helper()
	r := rc.do(t, nbdCmdWrite, flags, off, uint32(len(p)), p)
	require.Equal(t, "OK", nbdErrName(r.errno), "WRITE at %d len %d", off, len(p))
}

// flush sends NBD_CMD_FLUSH and requires success.
func (rc *rawConn) flush(t testing.TB) {
	t.Helper()
	r := rc.do(t, nbdCmdFlush, 0, 0, 0, nil)
	require.Equal(t, "OK", nbdErrName(r.errno), "FLUSH")
}

// disconnect sends NBD_CMD_DISC and waits for the server to close.
func (rc *rawConn) disconnect() {
	_, _ = rc.send(nbdCmdDisc, 0, 0, 0, nil)
	rc.deadline()
	_, _ = io.Copy(io.Discard, rc.c)
	rc.c.Close()
}
