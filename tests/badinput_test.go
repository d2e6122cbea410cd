package tests

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reference data the bad-input tests write first and expect to read back,
// unchanged, after every bad request.
const (
	refOff = 1<<20 - 4096 // spans a 64K chunk boundary
	refLen = 256 << 10
	tailLn = 64 << 10 // the last bytes of the export
)

// fixture is a served RAID5 with known content at refOff and at the tail.
type fixture struct {
	srv  *server
	name string
	size uint64
	ref  []byte
	tail []byte
}

func newFixture(t *testing.T, readOnly bool) *fixture {
	t.Helper()
	arr := createArray(t, "5", 4, "64K")
	f := &fixture{name: arr.name}
	srv := serve(t, arr.members...)
	rc := openRaw(t, srv.sock, f.name, false)
	f.size = rc.size
	require.GreaterOrEqual(t, f.size, uint64(128<<20), "the array must be large enough for an in-range 64 MiB read")
	_, f.ref = writeRandomFile(t, t.TempDir(), refLen, 1)
	_, f.tail = writeRandomFile(t, t.TempDir(), tailLn, 2)
	rc.write(t, refOff, f.ref, 0)
	rc.write(t, f.size-tailLn, f.tail, nbdCmdFlagFUA)
	rc.flush(t)
	rc.disconnect()
	if readOnly {
		srv.stopOK(t)
		srv = serve(t, append([]string{"--read-only"}, arr.members...)...)
	}
	f.srv = srv
	return f
}

// verify reads the reference ranges on rc and requires the known content.
func (f *fixture) verify(t *testing.T, rc *rawConn, where string) {
	t.Helper()
	assertSameBytes(t, f.ref, rc.read(t, refOff, refLen), where+": reference range")
	assertSameBytes(t, f.tail, rc.read(t, f.size-tailLn, tailLn), where+": tail of the export")
}

// assertErrno checks a reply's error against the allowed values.
func assertErrno(t *testing.T, r reply, what string, allowed ...uint32) {
	t.Helper()
	var names []string
	for _, a := range allowed {
		if r.errno == a {
			return
		}
		names = append(names, nbdErrName(a))
	}
	assert.Failf(t, "wrong error", "%s: got %s, want one of %v", what, nbdErrName(r.errno), names)
}

// expectClosed requires the server to close the connection (EOF or reset),
// not to leave it hanging.
func expectClosed(t *testing.T, rc *rawConn) {
	t.Helper()
	_ = rc.c.SetReadDeadline(time.Now().Add(ioTimeout))
	_, err := io.Copy(io.Discard, rc.c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		assert.Fail(t, "the server kept the connection open", "no EOF within %v", ioTimeout)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	f := newFixture(t, false)
	filler := bytes.Repeat([]byte{0xee}, 8192)

	cases := []struct {
		name string
		// run performs the bad request(s) on rc and reports whether rc is
		// expected to be still usable.
		run func(t *testing.T, rc *rawConn) (open bool)
	}{
		{"read-past-end", func(t *testing.T, rc *rawConn) bool {
			assertErrno(t, rc.do(t, nbdCmdRead, 0, f.size-4096, 8192, nil), "READ straddling the end", nbdEINVAL)
			assertErrno(t, rc.do(t, nbdCmdRead, 0, f.size, 512, nil), "READ at the end", nbdEINVAL)
			return true
		}},
		{"write-past-end", func(t *testing.T, rc *rawConn) bool {
			// Rejected as a whole: the in-range part (the tail) must not change.
			assertErrno(t, rc.do(t, nbdCmdWrite, 0, f.size-4096, 8192, filler), "WRITE straddling the end", nbdENOSPC)
			assertErrno(t, rc.do(t, nbdCmdWrite, 0, f.size, 4096, filler[:4096]), "WRITE at the end", nbdENOSPC)
			return true
		}},
		{"offset+length-wraps", func(t *testing.T, rc *rawConn) bool {
			off := uint64(math.MaxUint64 - 4095)
			assertErrno(t, rc.do(t, nbdCmdRead, 0, off, 8192, nil), "READ wrapping 2^64", nbdEINVAL)
			assertErrno(t, rc.do(t, nbdCmdWrite, 0, off, 8192, filler), "WRITE wrapping 2^64", nbdENOSPC, nbdEINVAL)
			return true
		}},
		{"offset>=2^63", func(t *testing.T, rc *rawConn) bool {
			for _, off := range []uint64{1 << 63, 1<<63 + uint64(refOff)} {
				assertErrno(t, rc.do(t, nbdCmdRead, 0, off, 4096, nil), "READ at 2^63+", nbdEINVAL)
				assertErrno(t, rc.do(t, nbdCmdWrite, 0, off, 4096, filler[:4096]), "WRITE at 2^63+", nbdENOSPC, nbdEINVAL)
			}
			return true
		}},
		{"oversized-read=64MiB", func(t *testing.T, rc *rawConn) bool {
			assertErrno(t, rc.do(t, nbdCmdRead, 0, 0, 64<<20, nil), "READ of 64 MiB", nbdEOVERFLOW, nbdEINVAL)
			return true
		}},
		{"unknown-command=99", func(t *testing.T, rc *rawConn) bool {
			assertErrno(t, rc.do(t, 99, 0, 0, 4096, nil), "command type 99", nbdEINVAL)
			return true
		}},
		{"unknown-command-flag", func(t *testing.T, rc *rawConn) bool {
			assertErrno(t, rc.do(t, nbdCmdRead, 1<<14, refOff, 4096, nil), "READ with flag bit 14", nbdEINVAL)
			return true
		}},
		{"pipelined-mixed", func(t *testing.T, rc *rawConn) bool {
			// Bad and good requests in flight together: rejected WRITE
			// payloads must be consumed or the stream desynchronises.
			want := map[uint64][]uint32{}
			var readHandle uint64
			h, err := rc.send(nbdCmdWrite, 0, f.size-4096, 8192, filler)
			require.NoError(t, err)
			want[h] = []uint32{nbdENOSPC}
			h, err = rc.send(nbdCmdRead, 0, f.size, 4096, nil)
			require.NoError(t, err)
			want[h] = []uint32{nbdEINVAL}
			h, err = rc.send(nbdCmdWrite, 0, 1<<63, 4096, filler[:4096])
			require.NoError(t, err)
			want[h] = []uint32{nbdENOSPC, nbdEINVAL}
			readHandle, err = rc.send(nbdCmdRead, 0, refOff, refLen, nil)
			require.NoError(t, err)
			want[readHandle] = []uint32{0}
			h, err = rc.send(nbdCmdFlush, 0, 0, 0, nil)
			require.NoError(t, err)
			want[h] = []uint32{0}
			for range want {
				r, err := rc.recv()
				require.NoError(t, err)
				allowed, ok := want[r.handle]
				require.True(t, ok, "reply for unexpected handle %d", r.handle)
				assertErrno(t, r, "pipelined request", allowed...)
				if r.handle == readHandle {
					assertSameBytes(t, f.ref, r.data, "pipelined READ")
				}
			}
			return true
		}},
		{"oversized-write=33MiB", func(t *testing.T, rc *rawConn) bool {
			// Above the 32 MiB maximum the server may reply with an error
			// (after discarding the payload) or drop the connection; it must
			// never write the data.
			p := bytes.Repeat([]byte{0xee}, 33<<20)
			h, err := rc.send(nbdCmdWrite, 0, refOff-4096, uint32(len(p)), p)
			if err != nil {
				t.Logf("server closed the connection during the oversized payload: %v", err)
				return false
			}
			r, err := rc.recv()
			if err != nil {
				t.Logf("server closed the connection after the oversized payload: %v", err)
				return false
			}
			require.Equal(t, h, r.handle)
			assertErrno(t, r, "WRITE of 33 MiB", nbdEOVERFLOW, nbdEINVAL)
			return true
		}},
		{"disconnect-mid-write-payload", func(t *testing.T, rc *rawConn) bool {
			// Another client sends half a WRITE over the reference range and
			// vanishes: nothing of it may reach the array.
			other := openRaw(t, f.srv.sock, f.name, false)
			_, err := other.send(nbdCmdWrite, 0, refOff, refLen, bytes.Repeat([]byte{0xee}, refLen/2))
			require.NoError(t, err)
			other.c.Close()
			time.Sleep(100 * time.Millisecond)
			return true
		}},
		{"disconnect-before-read-reply", func(t *testing.T, rc *rawConn) bool {
			other := openRaw(t, f.srv.sock, f.name, false)
			_, err := other.send(nbdCmdRead, 0, 0, 32<<20, nil)
			require.NoError(t, err)
			other.c.Close()
			time.Sleep(100 * time.Millisecond)
			return true
		}},
		{"fast-zero-inside-a-stripe", func(t *testing.T, rc *rawConn) bool {
			// A RAID5 zero inside one stripe is a read-modify-write, no
			// faster than a WRITE: the protocol asks for ENOTSUP, with
			// the data untouched (verify checks the reference range).
			require.NotZero(t, rc.tflags&nbdFlagSendFastZero, "members on a filesystem that punches holes: FAST_ZERO is advertised")
			assertErrno(t, rc.do(t, nbdCmdWriteZeroes, nbdCmdFlagFastZero, refOff+512, 4096, nil), "FAST_ZERO of 4 KiB inside a stripe", nbdENOTSUP)
			assertErrno(t, rc.do(t, nbdCmdWriteZeroes, nbdCmdFlagFastZero, refOff, refLen, nil), "FAST_ZERO of a range with no whole stripe", nbdENOTSUP)
			// One covering a whole 192 KiB stripe is fast, partial ends
			// included (below the reference range).
			r := rc.do(t, nbdCmdWriteZeroes, nbdCmdFlagFastZero, 4096, 400<<10, nil)
			assertErrno(t, r, "FAST_ZERO covering a whole stripe", 0)
			assertSameBytes(t, make([]byte, 400<<10), rc.read(t, 4096, 400<<10), "zeroed by FAST_ZERO")
			return true
		}},
		{"bad-request-magic", func(t *testing.T, rc *rawConn) bool {
			// The stream cannot be resynchronised: the server must close it.
			require.NoError(t, rc.writeAll(bytes.Repeat([]byte{0x42}, 28)))
			expectClosed(t, rc)
			return false
		}},
	}
	for _, mode := range []struct {
		name       string
		structured bool
	}{{"replies=simple", false}, {"replies=structured", true}} {
		for _, tc := range cases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				rc := openRaw(t, f.srv.sock, f.name, mode.structured)
				if tc.run(t, rc) {
					f.verify(t, rc, "same connection")
					rc.disconnect()
				}
				fresh := openRaw(t, f.srv.sock, f.name, false)
				f.verify(t, fresh, "new connection")
				fresh.disconnect()
			})
		}
	}
	st := f.srv.status(t, f.name)
	assert.Equal(t, "raid5", normLevel(st.Level))
	assert.False(t, st.Degraded || st.Failed, "bad input must not degrade the array: %+v", st)
}

// normLevel accepts "raid5" or "5" from the status JSON.
func normLevel(l string) string {
	if len(l) > 0 && l[0] >= '0' && l[0] <= '9' {
		return "raid" + l
	}
	return l
}

func TestHandshakeBadInput(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	f := newFixture(t, false)

	t.Run("unknown-option", func(t *testing.T) {
		rc := dialRaw(t, f.srv.sock)
		for _, opt := range []struct {
			typ  uint32
			data []byte
		}{{0x7777, bytes.Repeat([]byte{0x55}, 100)}, {0x1234, nil}, {12345678, []byte("IHAVEOPT")}} {
			require.NoError(t, rc.sendOpt(opt.typ, opt.data))
			r, err := rc.readOptReply()
			require.NoError(t, err)
			assert.Equal(t, opt.typ, r.opt, "reply names the option")
			assert.Equal(t, nbdRepErrUnsup, r.typ, "unknown option %d: NBD_REP_ERR_UNSUP", opt.typ)
		}
		// Negotiation continues: the option data was skipped exactly.
		typ, err := rc.optGo(f.name)
		require.NoError(t, err)
		require.Equal(t, nbdRepAck, typ)
		assert.Equal(t, f.size, rc.size)
		f.verify(t, rc, "after unknown options")
		rc.disconnect()
	})

	t.Run("go-unknown-export", func(t *testing.T) {
		rc := dialRaw(t, f.srv.sock)
		typ, err := rc.optGo("no-such-export")
		require.NoError(t, err)
		assert.NotZero(t, typ&(1<<31), "GO for an unknown export must fail, got %#x", typ)
		assert.Equal(t, nbdRepErrUnknown, typ, "NBD_REP_ERR_UNKNOWN")
		typ, err = rc.optGo(f.name)
		require.NoError(t, err)
		require.Equal(t, nbdRepAck, typ)
		f.verify(t, rc, "after a failed GO")
		rc.disconnect()
	})

	t.Run("list", func(t *testing.T) {
		rc := dialRaw(t, f.srv.sock)
		require.NoError(t, rc.sendOpt(nbdOptList, nil))
		var names []string
		for {
			r, err := rc.readOptReply()
			require.NoError(t, err)
			require.Equal(t, nbdOptList, r.opt)
			if r.typ == nbdRepAck {
				break
			}
			require.Equal(t, nbdRepServer, r.typ)
			require.GreaterOrEqual(t, len(r.data), 4)
			n := binary.BigEndian.Uint32(r.data[:4])
			require.LessOrEqual(t, int(n), len(r.data)-4)
			names = append(names, string(r.data[4:4+n]))
		}
		assert.Contains(t, names, f.name)
		require.NoError(t, rc.sendOpt(nbdOptAbort, nil))
	})

	t.Run("export-name", func(t *testing.T) {
		// Old clients: NBD_OPT_EXPORT_NAME, reply without zeroes (NO_ZEROES).
		rc := dialRaw(t, f.srv.sock)
		require.NoError(t, rc.sendOpt(nbdOptExportName, []byte(f.name)))
		var b [10]byte
		require.NoError(t, rc.readFull(b[:]))
		rc.size = binary.BigEndian.Uint64(b[0:8])
		rc.tflags = binary.BigEndian.Uint16(b[8:10])
		assert.Equal(t, f.size, rc.size)
		assert.NotZero(t, rc.tflags&nbdFlagHasFlags)
		f.verify(t, rc, "after EXPORT_NAME")
		rc.disconnect()
	})

	t.Run("unknown-client-flags", func(t *testing.T) {
		rc, _ := dialGreeting(t, f.srv.sock)
		require.NoError(t, rc.writeAll(binary.BigEndian.AppendUint32(nil, nbdFlagCFixed|1<<20)))
		expectClosed(t, rc)
	})

	t.Run("huge-option-length", func(t *testing.T) {
		// A 1 GiB option is refused (error reply or disconnect), never buffered.
		rc := dialRaw(t, f.srv.sock)
		b := binary.BigEndian.AppendUint64(nil, nbdIHaveOpt)
		b = binary.BigEndian.AppendUint32(b, 0x7777)
		b = binary.BigEndian.AppendUint32(b, 1<<30)
		require.NoError(t, rc.writeAll(b))
		r, err := rc.readOptReply()
		var ne net.Error
		switch {
		case err == nil:
			assert.NotZero(t, r.typ&(1<<31), "huge option must get an error reply, got %#x", r.typ)
		case errors.As(err, &ne) && ne.Timeout():
			assert.Fail(t, "the server neither refused the huge option nor disconnected", "waited %v", ioTimeout)
		default:
			t.Logf("server disconnected: %v", err)
		}
		rc.c.Close()
	})

	t.Run("server-still-serves", func(t *testing.T) {
		rc := openRaw(t, f.srv.sock, f.name, true)
		f.verify(t, rc, "after handshake abuse")
		rc.disconnect()
	})
}

func TestReadOnlyExportRejectsWrites(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	f := newFixture(t, true)
	for _, structured := range []bool{false, true} {
		name := "replies=simple"
		if structured {
			name = "replies=structured"
		}
		t.Run(name, func(t *testing.T) {
			rc := openRaw(t, f.srv.sock, f.name, structured)
			assert.NotZero(t, rc.tflags&nbdFlagReadOnly, "READ_ONLY flag")
			p := bytes.Repeat([]byte{0xee}, 4096)
			assertErrno(t, rc.do(t, nbdCmdWrite, 0, refOff, 4096, p), "WRITE on a read-only export", nbdEPERM)
			assertErrno(t, rc.do(t, nbdCmdWrite, nbdCmdFlagFUA&flagIf(rc.tflags&nbdFlagSendFUA != 0), f.size-4096, 4096, p), "FUA WRITE on a read-only export", nbdEPERM)
			assertErrno(t, rc.do(t, nbdCmdWriteZeroes, 0, refOff, 4096, nil), "WRITE_ZEROES on a read-only export", nbdEPERM, nbdEINVAL)
			assertErrno(t, rc.do(t, nbdCmdTrim, 0, refOff, 4096, nil), "TRIM on a read-only export", nbdEPERM, nbdEINVAL)
			f.verify(t, rc, "same connection")
			rc.disconnect()
			fresh := openRaw(t, f.srv.sock, f.name, false)
			f.verify(t, fresh, "new connection")
			fresh.disconnect()
		})
	}
	st := f.srv.status(t, f.name)
	assert.True(t, st.ReadOnly, "status shows read_only")
}

// flagIf returns all ones when cond holds, for masking optional flags.
func flagIf(cond bool) uint16 {
	if cond {
		return math.MaxUint16
	}
	return 0
}
