package nbd

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ---- test server ----

type testServer struct {
	s    *Server
	addr net.Addr
}

// startServer runs a Server on a loopback TCP listener (or a unix socket if
// unix is set) and shuts it down at test end.
func startServer(t testing.TB, opts Options, unix ...bool) *testServer {
	t.Helper()
	s, err := NewServer(opts)
	require.NoError(t, err)
	var l net.Listener
	if len(unix) > 0 && unix[0] {
		l, err = net.Listen("unix", filepath.Join(t.TempDir(), "nbd.sock"))
	} else {
		l, err = net.Listen("tcp", "127.0.0.1:0")
	}
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return &testServer{s: s, addr: l.Addr()}
}

func oneExport(d Device) Options {
	return Options{Exports: []Export{{Name: "disk", Description: "test disk", Device: d}}}
}

// ---- raw protocol client ----

type client struct {
	t          testing.TB
	c          net.Conn
	br         *bufio.Reader
	size       uint64
	tflags     uint16
	structured bool
	pendingMu  sync.Mutex
	pending    map[uint64]pendingReq
	nextHandle uint64
}

func (cl *client) addPending(h uint64, p pendingReq) {
	cl.pendingMu.Lock()
	defer cl.pendingMu.Unlock()
	cl.pending[h] = p
}

func (cl *client) getPending(h uint64) (pendingReq, bool) {
	cl.pendingMu.Lock()
	defer cl.pendingMu.Unlock()
	p, ok := cl.pending[h]
	return p, ok
}

func (cl *client) dropPending(h uint64) {
	cl.pendingMu.Lock()
	defer cl.pendingMu.Unlock()
	delete(cl.pending, h)
}

type pendingReq struct {
	typ    uint16
	offset uint64
	length uint32
}

func dial(t testing.TB, ts *testServer) *client {
	t.Helper()
	c, err := net.Dial(ts.addr.Network(), ts.addr.String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	return &client{t: t, c: c, br: bufio.NewReader(c), pending: map[uint64]pendingReq{}}
}

func (cl *client) readFull(n int) []byte {
	cl.t.Helper()
	b := make([]byte, n)
	_, err := io.ReadFull(cl.br, b)
	require.NoError(cl.t, err)
	return b
}

func (cl *client) write(b []byte) {
	cl.t.Helper()
	_, err := cl.c.Write(b)
	require.NoError(cl.t, err)
}

// hello reads the server greeting and sends client flags.
func (cl *client) hello(clientFlags uint32) {
	cl.t.Helper()
	b := cl.readFull(18)
	require.Equal(cl.t, magicInitPasswd, binary.BigEndian.Uint64(b[0:]))
	require.Equal(cl.t, magicIHaveOpt, binary.BigEndian.Uint64(b[8:]))
	require.Equal(cl.t, flagFixedNewstyle|flagNoZeroes, binary.BigEndian.Uint16(b[16:]))
	cl.write(binary.BigEndian.AppendUint32(nil, clientFlags))
}

func (cl *client) sendOpt(opt uint32, data []byte) {
	cl.t.Helper()
	b := binary.BigEndian.AppendUint64(nil, magicIHaveOpt)
	b = binary.BigEndian.AppendUint32(b, opt)
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	cl.write(append(b, data...))
}

type optReply struct {
	opt, typ uint32
	data     []byte
}

func (cl *client) readOptReply() optReply {
	cl.t.Helper()
	h := cl.readFull(20)
	require.Equal(cl.t, magicOptReply, binary.BigEndian.Uint64(h[0:]))
	r := optReply{opt: binary.BigEndian.Uint32(h[8:]), typ: binary.BigEndian.Uint32(h[12:])}
	r.data = cl.readFull(int(binary.BigEndian.Uint32(h[16:])))
	return r
}

func infoData(name string, reqs ...uint16) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(reqs)))
	for _, r := range reqs {
		b = binary.BigEndian.AppendUint16(b, r)
	}
	return b
}

// infoResult is the decoded answer to NBD_OPT_INFO/GO.
type infoResult struct {
	final       uint32 // repAck or an error
	size        uint64
	tflags      uint16
	name        string
	description string
	minB, prefB uint32
	maxB        uint32
	infos       []uint16 // info types in order received
}

func (cl *client) info(opt uint32, name string, reqs ...uint16) infoResult {
	cl.t.Helper()
	cl.sendOpt(opt, infoData(name, reqs...))
	var res infoResult
	for {
		r := cl.readOptReply()
		require.Equal(cl.t, opt, r.opt)
		if r.typ != repInfo {
			res.final = r.typ
			if opt == optGo && r.typ == repAck {
				cl.size, cl.tflags = res.size, res.tflags
			}
			return res
		}
		require.GreaterOrEqual(cl.t, len(r.data), 2)
		it := binary.BigEndian.Uint16(r.data)
		res.infos = append(res.infos, it)
		switch it {
		case infoExport:
			require.Len(cl.t, r.data, 12)
			res.size = binary.BigEndian.Uint64(r.data[2:])
			res.tflags = binary.BigEndian.Uint16(r.data[10:])
		case infoName:
			res.name = string(r.data[2:])
		case infoDescription:
			res.description = string(r.data[2:])
		case infoBlockSize:
			require.Len(cl.t, r.data, 14)
			res.minB = binary.BigEndian.Uint32(r.data[2:])
			res.prefB = binary.BigEndian.Uint32(r.data[6:])
			res.maxB = binary.BigEndian.Uint32(r.data[10:])
		}
	}
}

// connect performs hello, optional STRUCTURED_REPLY and GO for name.
func connect(t testing.TB, ts *testServer, name string, structured bool) *client {
	t.Helper()
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	if structured {
		cl.sendOpt(optStructuredReply, nil)
		r := cl.readOptReply()
		require.Equal(t, repAck, r.typ)
		cl.structured = true
	}
	res := cl.info(optGo, name, infoBlockSize)
	require.Equal(t, repAck, res.final, "GO failed")
	return cl
}

// ---- transmission ----

func (cl *client) send(typ, flags uint16, offset uint64, length uint32, payload []byte) uint64 {
	cl.t.Helper()
	h, b := cl.request(typ, flags, offset, length, payload)
	cl.write(b)
	return h
}

func (cl *client) sendWithHandle(h uint64, typ, flags uint16, offset uint64, length uint32, payload []byte) {
	cl.t.Helper()
	cl.write(cl.requestWithHandle(h, typ, flags, offset, length, payload))
}

// request is send without the write: it registers the request under a new
// handle and returns its bytes (header and payload), for a caller that
// sends several at once.
func (cl *client) request(typ, flags uint16, offset uint64, length uint32, payload []byte) (uint64, []byte) {
	cl.nextHandle++
	h := cl.nextHandle
	return h, cl.requestWithHandle(h, typ, flags, offset, length, payload)
}

func (cl *client) requestWithHandle(h uint64, typ, flags uint16, offset uint64, length uint32, payload []byte) []byte {
	b := make([]byte, 28, 28+len(payload))
	binary.BigEndian.PutUint32(b[0:], magicRequest)
	binary.BigEndian.PutUint16(b[4:], flags)
	binary.BigEndian.PutUint16(b[6:], typ)
	binary.BigEndian.PutUint64(b[8:], h)
	binary.BigEndian.PutUint64(b[16:], offset)
	binary.BigEndian.PutUint32(b[24:], length)
	cl.addPending(h, pendingReq{typ: typ, offset: offset, length: length})
	return append(b, payload...)
}

// reply is a complete (possibly multi-chunk) reply to one request.
type reply struct {
	handle      uint64
	errno       uint32
	data        []byte // READ data (assembled from chunks)
	chunks      []uint16
	errOffset   uint64 // from ERROR_OFFSET
	hasErrOff   bool
	message     string
	dataCovered int // bytes covered by OFFSET_DATA chunks
	simple      bool
	metaID      uint32   // from a BLOCK_STATUS chunk
	extents     []extent // from a BLOCK_STATUS chunk
}

// readReply reads one complete reply (all chunks of one handle; the test
// client never interleaves because it reads a structured reply to DONE, and
// the server never interleaves chunks of different replies).
func (cl *client) readReply() reply {
	cl.t.Helper()
	t := cl.t
	var r reply
	for {
		m := binary.BigEndian.Uint32(cl.readFull(4))
		switch m {
		case magicSimpleReply:
			b := cl.readFull(12)
			r.simple = true
			r.errno = binary.BigEndian.Uint32(b[0:])
			r.handle = binary.BigEndian.Uint64(b[4:])
			p, ok := cl.getPending(r.handle)
			require.True(t, ok, "reply for unknown handle %d", r.handle)
			cl.dropPending(r.handle)
			if p.typ == cmdRead {
				require.False(t, cl.structured, "simple reply to READ after structured replies were negotiated")
				if r.errno == 0 {
					r.data = cl.readFull(int(p.length))
				}
			}
			return r
		case magicStructuredReply:
			require.True(t, cl.structured, "structured reply without negotiation")
			b := cl.readFull(16)
			flags := binary.BigEndian.Uint16(b[0:])
			typ := binary.BigEndian.Uint16(b[2:])
			h := binary.BigEndian.Uint64(b[4:])
			length := binary.BigEndian.Uint32(b[12:])
			if r.chunks != nil {
				require.Equal(t, r.handle, h, "chunks of different replies interleaved")
			}
			r.handle = h
			p, ok := cl.getPending(h)
			require.True(t, ok, "reply for unknown handle %d", h)
			if r.data == nil && p.typ == cmdRead {
				r.data = make([]byte, p.length)
			}
			r.chunks = append(r.chunks, typ)
			payload := cl.readFull(int(length))
			switch typ {
			case replyTypeNone:
				require.Zero(t, length)
				require.NotZero(t, flags&replyFlagDone)
			case replyTypeOffsetData:
				require.GreaterOrEqual(t, int(length), 9)
				off := binary.BigEndian.Uint64(payload)
				d := payload[8:]
				require.GreaterOrEqual(t, off, p.offset)
				require.LessOrEqual(t, off+uint64(len(d)), p.offset+uint64(p.length))
				copy(r.data[off-p.offset:], d)
				r.dataCovered += len(d)
			case replyTypeBlockStatus:
				require.Equal(t, cmdBlockStatus, p.typ, "BLOCK_STATUS chunk for another command")
				require.Nil(t, r.extents, "more than one BLOCK_STATUS chunk for one context")
				require.GreaterOrEqual(t, int(length), 12)
				require.Zero(t, (length-4)%8, "BLOCK_STATUS payload is not 4 + 8k bytes")
				r.metaID = binary.BigEndian.Uint32(payload)
				for d := payload[4:]; len(d) > 0; d = d[8:] {
					e := extent{length: binary.BigEndian.Uint32(d), flags: binary.BigEndian.Uint32(d[4:])}
					require.NotZero(t, e.length, "zero-length extent")
					r.extents = append(r.extents, e)
				}
			case replyTypeError, replyTypeErrorOffset:
				require.GreaterOrEqual(t, len(payload), 6)
				r.errno = binary.BigEndian.Uint32(payload)
				require.NotZero(t, r.errno)
				ml := int(binary.BigEndian.Uint16(payload[4:]))
				require.LessOrEqual(t, 6+ml, len(payload))
				r.message = string(payload[6 : 6+ml])
				if typ == replyTypeErrorOffset {
					require.Len(t, payload, 6+ml+8)
					r.errOffset = binary.BigEndian.Uint64(payload[6+ml:])
					r.hasErrOff = true
				} else {
					require.Len(t, payload, 6+ml)
				}
			default:
				t.Fatalf("unexpected chunk type %d", typ)
			}
			if flags&replyFlagDone != 0 {
				cl.dropPending(h)
				if r.errno == 0 && p.typ == cmdRead {
					require.Equal(t, int(p.length), r.dataCovered, "successful read did not cover the request")
				}
				if r.errno == 0 && p.typ == cmdBlockStatus {
					require.NotEmpty(t, r.extents, "successful BLOCK_STATUS without extents")
				}
				return r
			}
		default:
			t.Fatalf("bad reply magic %#x", m)
		}
	}
}

// do sends one request and waits for its reply.
func (cl *client) do(typ, flags uint16, offset uint64, length uint32, payload []byte) reply {
	cl.t.Helper()
	// Each request/reply gets its own 20 s, not the connection as a whole:
	// TestRequestErrors sends 80 MiB of rejected payloads on one
	// connection, which took longer than 20 s under -race at load 30.
	_ = cl.c.SetDeadline(time.Now().Add(20 * time.Second))
	h := cl.send(typ, flags, offset, length, payload)
	r := cl.readReply()
	require.Equal(cl.t, h, r.handle)
	return r
}

func (cl *client) read(offset uint64, length uint32) []byte {
	cl.t.Helper()
	r := cl.do(cmdRead, 0, offset, length, nil)
	require.Zero(cl.t, r.errno, "read failed: %s", errnoName(r.errno))
	return r.data
}

func (cl *client) writeAt(offset uint64, p []byte, flags uint16) uint32 {
	cl.t.Helper()
	return cl.do(cmdWrite, flags, offset, uint32(len(p)), p).errno
}

// expectEOF asserts the server closed the connection (possibly after
// unread bytes).
func (cl *client) expectEOF() {
	cl.t.Helper()
	_ = cl.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := io.Copy(io.Discard, cl.br)
	require.NoError(cl.t, err, "connection not closed cleanly by server")
}

// expectClosedNow asserts the server closes the connection without sending
// anything more.
func (cl *client) expectClosedNow() {
	cl.t.Helper()
	_ = cl.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := cl.br.ReadByte()
	require.Error(cl.t, err, fmt.Sprintf("server sent %#x instead of closing", b))
	require.False(cl.t, isTimeout(err), "server did not close the connection")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
