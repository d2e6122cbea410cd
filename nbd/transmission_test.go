package nbd

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAdvertisedFlags(t *testing.T) {
	full := func() *memDev { d := newMemDev(4096); d.fastZero.Store(true); d.multiConn = true; return d }
	base := tflagHasFlags | tflagSendCache
	for _, tc := range []struct {
		name       string
		exp        Export
		structured bool
		want       uint16
	}{
		{"all-capabilities", Export{Device: full()}, false,
			base | tflagSendFlush | tflagSendFUA | tflagSendTrim | tflagSendWriteZeroes | tflagSendFastZero | tflagCanMultiConn},
		{"all-capabilities-structured", Export{Device: full()}, true,
			base | tflagSendFlush | tflagSendFUA | tflagSendTrim | tflagSendWriteZeroes | tflagSendFastZero | tflagCanMultiConn | tflagSendDF},
		{"no-fast-zero-no-multiconn", Export{Device: newMemDev(4096)}, false,
			base | tflagSendFlush | tflagSendFUA | tflagSendTrim | tflagSendWriteZeroes},
		{"plain-device", Export{Device: plainDev{newMemDev(4096)}}, false, base},
		{"sync-only", Export{Device: syncDev{plainDev{newMemDev(4096)}}}, false, base | tflagSendFlush | tflagSendFUA},
		{"read-only", Export{Device: full(), ReadOnly: true}, false,
			base | tflagReadOnly | tflagSendFlush | tflagSendFUA | tflagCanMultiConn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.exp.Name = "disk"
			ts := startServer(t, Options{Exports: []Export{tc.exp}})
			cl := connect(t, ts, "disk", tc.structured)
			assert.Equal(t, fmt.Sprintf("%#x", tc.want), fmt.Sprintf("%#x", cl.tflags))
		})
	}
}

func TestReadWriteRoundTrip(t *testing.T) {
	for _, structured := range []bool{false, true} {
		t.Run(fmt.Sprintf("structured=%v", structured), func(t *testing.T) {
			dev := newMemDev(1 << 20)
			ts := startServer(t, oneExport(dev))
			cl := connect(t, ts, "disk", structured)
			data := pattern(70000, 3)
			require.Zero(t, cl.writeAt(12345, data, 0))
			assert.Equal(t, data, dev.snapshot(12345, int64(len(data))))
			assert.Equal(t, data, cl.read(12345, uint32(len(data))))
			// Whole device, last byte.
			assert.Len(t, cl.read(0, 1<<20), 1<<20)
			assert.Equal(t, data[len(data)-1:], cl.read(12345+uint64(len(data))-1, 1))
			st := ts.s.Stats()
			assert.Equal(t, int64(len(data)), st.BytesWritten)
			assert.Equal(t, int64(len(data)+1<<20+1), st.BytesRead)
			assert.Equal(t, int64(3), st.Reads)
			assert.Equal(t, int64(1), st.Writes)
		})
	}
}

func TestZeroLengthRequests(t *testing.T) {
	dev := newMemDev(4096)
	ts := startServer(t, oneExport(dev))
	for _, structured := range []bool{false, true} {
		cl := connect(t, ts, "disk", structured)
		for _, typ := range []uint16{cmdRead, cmdWrite, cmdTrim, cmdWriteZeroes, cmdCache} {
			for _, off := range []uint64{0, 4096} {
				r := cl.do(typ, 0, off, 0, nil)
				assert.Zero(t, r.errno, "%s at %d", cmdName(typ), off)
			}
			r := cl.do(typ, 0, 4097, 0, nil)
			assert.NotZero(t, r.errno, "%s past end", cmdName(typ))
		}
	}
	assert.Zero(t, dev.reads.Load()+dev.writes.Load()+dev.discards.Load()+dev.zeroes.Load()+dev.caches.Load(),
		"zero-length requests must not reach the device")
}

// TestRequestErrors covers every validation error; after each, a normal read
// on the same connection must work.
func TestRequestErrors(t *testing.T) {
	const size = 1 << 20
	type tc struct {
		name    string
		typ     uint16
		flags   uint16
		offset  uint64
		length  uint32
		payload []byte // sent after the header (WRITE only)
		want    uint32
	}
	cases := []tc{
		{"read-past-end", cmdRead, 0, size - 10, 11, nil, errnoInval},
		{"read-offset-at-end", cmdRead, 0, size, 1, nil, errnoInval},
		{"write-past-end", cmdWrite, 0, size - 10, 4096, pattern(4096, 1), errnoNoSpc},
		{"trim-past-end", cmdTrim, 0, size - 10, 11, nil, errnoInval},
		{"cache-past-end", cmdCache, 0, size, 1, nil, errnoInval},
		{"write-zeroes-past-end", cmdWriteZeroes, 0, size - 1, 2, nil, errnoNoSpc},
		{"read-wrapping", cmdRead, 0, 1<<64 - 10, 100, nil, errnoInval},
		{"write-wrapping", cmdWrite, 0, 1<<64 - 10, 100, pattern(100, 2), errnoNoSpc},
		{"read-offset-2^63", cmdRead, 0, 1 << 63, 1, nil, errnoInval},
		{"write-offset-2^63", cmdWrite, 0, 1 << 63, 8, pattern(8, 3), errnoNoSpc},
		{"write-zeroes-offset-2^63", cmdWriteZeroes, 0, 1<<63 + 5, 8, nil, errnoNoSpc},
		{"read-oversized", cmdRead, 0, 0, 64<<10 + 1, nil, errnoOverflow},
		{"write-oversized", cmdWrite, 0, 0, 64<<10 + 512, pattern(64<<10+512, 4), errnoOverflow},
		{"write-absurd-payload", cmdWrite, 0, 0, 40 << 20, make([]byte, 40<<20), errnoNoSpc}, // bounds are checked first
		{"unknown-command", 99, 0, 0, 0, nil, errnoInval},
		{"unknown-command-with-offset", 0x7fff, 0, 10, 10, nil, errnoInval},
		{"block-status", cmdBlockStatus, 0, 0, 512, nil, errnoInval},
		{"unknown-flag", cmdRead, 1 << 7, 0, 512, nil, errnoInval},
		{"no-hole-on-write", cmdWrite, cmdFlagNoHole, 0, 4, pattern(4, 5), errnoInval},
		{"df-without-structured", cmdRead, cmdFlagDF, 0, 4, nil, errnoInval},
		{"req-one-on-read", cmdRead, cmdFlagReqOne, 0, 4, nil, errnoInval},
		{"fast-zero-on-trim", cmdTrim, cmdFlagFastZero, 0, 4, nil, errnoInval},
		{"flush-with-offset", cmdFlush, 0, 4096, 0, nil, errnoInval},
		{"flush-with-length", cmdFlush, 0, 0, 10, nil, errnoInval},
	}
	dev := newMemDev(size)
	opts := oneExport(dev)
	opts.MaxPayload = 64 << 10
	ts := startServer(t, opts)
	for _, structured := range []bool{false, true} {
		cl := connect(t, ts, "disk", structured)
		copy(dev.data, "sentinel")
		for _, c := range cases {
			if structured && c.flags == cmdFlagDF {
				continue // DF is valid once structured replies are negotiated
			}
			t.Run(fmt.Sprintf("%s/structured=%v", c.name, structured), func(t *testing.T) {
				cl.t = t
				before := dev.snapshot(0, size)
				r := cl.do(c.typ, c.flags, c.offset, c.length, c.payload)
				assert.Equal(t, errnoName(c.want), errnoName(r.errno))
				if structured {
					assert.Equal(t, []uint16{replyTypeError}, r.chunks)
					assert.NotEmpty(t, r.message)
				}
				assert.True(t, bytes.Equal(before, dev.snapshot(0, size)), "rejected request changed data")
				assert.Equal(t, []byte("sentinel"), cl.read(0, 8), "connection unusable after error")
			})
		}
		cl.t = t
	}
	assert.Equal(t, int64(2*len(cases)-1), ts.s.Stats().ErrorReplies)
}

func TestMinimumBlockSizeEnforced(t *testing.T) {
	dev := newMemDev(1 << 20)
	dev.bsMin = 512
	ts := startServer(t, oneExport(dev))
	cl := connect(t, ts, "disk", false)
	assert.Equal(t, errnoInval, cl.do(cmdRead, 0, 100, 512, nil).errno)
	assert.Equal(t, errnoInval, cl.do(cmdRead, 0, 512, 100, nil).errno)
	assert.Equal(t, errnoInval, cl.do(cmdWrite, 0, 512, 100, make([]byte, 100)).errno)
	assert.Equal(t, errnoInval, cl.do(cmdWriteZeroes, 0, 1, 512, nil).errno)
	assert.Len(t, cl.read(512, 1024), 1024)
}

func TestReadOnlyExport(t *testing.T) {
	dev := newMemDev(1 << 16)
	copy(dev.data, "ro")
	ts := startServer(t, Options{Exports: []Export{{Name: "disk", Device: dev, ReadOnly: true}}})
	cl := connect(t, ts, "disk", false)
	require.NotZero(t, cl.tflags&tflagReadOnly)
	assert.Equal(t, errnoPerm, cl.writeAt(0, pattern(5000, 1), 0))
	assert.Equal(t, errnoPerm, cl.do(cmdTrim, 0, 0, 4096, nil).errno)
	assert.Equal(t, errnoPerm, cl.do(cmdWriteZeroes, 0, 0, 4096, nil).errno)
	assert.Zero(t, cl.do(cmdFlush, 0, 0, 0, nil).errno, "FLUSH on a read-only export is harmless")
	assert.Equal(t, []byte("ro"), cl.read(0, 2))
	assert.Zero(t, dev.writes.Load()+dev.discards.Load()+dev.zeroes.Load())
}

func TestWriteZeroes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		zeroNotSup bool
		flags      uint16
	}{
		{"device", false, 0},
		{"device-no-hole-fua", false, cmdFlagNoHole | cmdFlagFUA},
		{"fallback-on-enotsup", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := newMemDev(3 << 20)
			dev.zeroNotSup = tc.zeroNotSup
			for i := range dev.data {
				dev.data[i] = 0xaa
			}
			ts := startServer(t, oneExport(dev))
			cl := connect(t, ts, "disk", false)
			const off, n = 1000, 2<<20 + 3 // unaligned at both ends, spans fallback chunks
			syncs := dev.syncs.Load()
			r := cl.do(cmdWriteZeroes, tc.flags, off, n, nil)
			require.Zero(t, r.errno)
			got := cl.read(0, 3<<20)
			assert.Equal(t, bytes.Repeat([]byte{0xaa}, off), got[:off])
			assert.Equal(t, make([]byte, n), got[off:off+n])
			assert.Equal(t, bytes.Repeat([]byte{0xaa}, 3<<20-off-n), got[off+n:])
			assert.Equal(t, tc.flags&cmdFlagNoHole != 0, dev.lastNoHole.Load())
			if tc.flags&cmdFlagFUA != 0 {
				assert.Greater(t, dev.syncs.Load(), syncs, "FUA must sync before the reply")
			}
		})
	}
}

// filledDev returns a memory device whose bytes are all b.
func filledDev(size int, b byte) *memDev {
	dev := newMemDev(size)
	for i := range dev.data {
		dev.data[i] = b
	}
	return dev
}

func TestFastZero(t *testing.T) {
	t.Run("capability-lost-after-negotiation", func(t *testing.T) {
		dev := filledDev(8192, 0x55)
		dev.fastZero.Store(true)
		ts := startServer(t, oneExport(dev))
		cl := connect(t, ts, "disk", false)
		require.NotZero(t, cl.tflags&tflagSendFastZero)
		dev.fastZero.Store(false)
		r := cl.do(cmdWriteZeroes, cmdFlagFastZero, 0, 4096, nil)
		assert.Equal(t, errnoName(errnoNotSup), errnoName(r.errno))
		assert.Equal(t, bytes.Repeat([]byte{0x55}, 4096), cl.read(0, 4096), "data changed by failed fast zero")
		assert.Zero(t, dev.zeroes.Load())
		// Without the flag the same request succeeds (never ENOTSUP).
		require.Zero(t, cl.do(cmdWriteZeroes, 0, 0, 4096, nil).errno)
		assert.Equal(t, make([]byte, 4096), cl.read(0, 4096))
		// Fast again: succeeds.
		dev.fastZero.Store(true)
		require.Zero(t, cl.do(cmdWriteZeroes, cmdFlagFastZero, 4096, 4096, nil).errno)
		assert.Equal(t, make([]byte, 4096), cl.read(4096, 4096))
	})
	t.Run("not-advertised", func(t *testing.T) {
		dev := filledDev(8192, 0x55)
		ts := startServer(t, oneExport(dev))
		cl := connect(t, ts, "disk", false)
		require.Zero(t, cl.tflags&tflagSendFastZero)
		r := cl.do(cmdWriteZeroes, cmdFlagFastZero, 0, 4096, nil)
		assert.Equal(t, errnoName(errnoInval), errnoName(r.errno))
		assert.Equal(t, bytes.Repeat([]byte{0x55}, 4096), cl.read(0, 4096))
	})
	t.Run("no-hole-is-not-fast", func(t *testing.T) {
		dev := filledDev(8192, 0x55)
		dev.fastZero.Store(true)
		ts := startServer(t, oneExport(dev))
		cl := connect(t, ts, "disk", false)
		r := cl.do(cmdWriteZeroes, cmdFlagFastZero|cmdFlagNoHole, 0, 4096, nil)
		assert.Equal(t, errnoName(errnoNotSup), errnoName(r.errno), "zeroing with NO_HOLE writes, so it is not fast")
		assert.Equal(t, bytes.Repeat([]byte{0x55}, 4096), cl.read(0, 4096), "data changed by failed fast zero")
		require.Zero(t, cl.do(cmdWriteZeroes, cmdFlagNoHole, 0, 4096, nil).errno, "without FAST_ZERO it succeeds")
		assert.Equal(t, make([]byte, 4096), cl.read(0, 4096))
	})
	t.Run("range-not-fast", func(t *testing.T) {
		// A device whose zeroing is fast only for whole 4 KiB blocks
		// (FastZeroerAt): FAST_ZERO elsewhere gets ENOTSUP untouched.
		dev := filledDev(16384, 0x55)
		dev.fastZero.Store(true)
		dev.fastZeroAlign = 4096
		ts := startServer(t, oneExport(dev))
		cl := connect(t, ts, "disk", false)
		for _, r := range []struct{ off, n uint32 }{{0, 4095}, {1, 4096}, {512, 7000}, {4097, 8190}} {
			rep := cl.do(cmdWriteZeroes, cmdFlagFastZero, uint64(r.off), r.n, nil)
			assert.Equal(t, errnoName(errnoNotSup), errnoName(rep.errno), "FAST_ZERO of %d at %d", r.n, r.off)
		}
		assert.Zero(t, dev.zeroes.Load(), "a refused fast zero must not reach the device")
		assert.Equal(t, bytes.Repeat([]byte{0x55}, 16384), cl.read(0, 16384), "data changed by a refused fast zero")
		require.Zero(t, cl.do(cmdWriteZeroes, 0, 512, 7000, nil).errno, "without FAST_ZERO the same range succeeds")
		require.Zero(t, cl.do(cmdWriteZeroes, cmdFlagFastZero, 4000, 4196, nil).errno, "a range covering a whole block is fast")
		want := bytes.Repeat([]byte{0x55}, 16384)
		clear(want[512:8196])
		assert.Equal(t, want, cl.read(0, 16384))
	})
	t.Run("device-refuses-fast", func(t *testing.T) {
		dev := newMemDev(8192)
		dev.fastZero.Store(true)
		dev.zeroNotSup = true
		ts := startServer(t, oneExport(dev))
		cl := connect(t, ts, "disk", false)
		r := cl.do(cmdWriteZeroes, cmdFlagFastZero, 0, 4096, nil)
		assert.Equal(t, errnoName(errnoNotSup), errnoName(r.errno))
		assert.Zero(t, dev.writes.Load(), "no fallback for fast zero")
	})
}

func TestTrimFlushFUACache(t *testing.T) {
	dev := newMemDev(1 << 20)
	for i := range dev.data {
		dev.data[i] = 0xff
	}
	ts := startServer(t, oneExport(dev))
	cl := connect(t, ts, "disk", false)

	require.Zero(t, cl.do(cmdTrim, 0, 4096, 8192, nil).errno)
	assert.Equal(t, int64(1), dev.discards.Load())
	assert.Equal(t, bytes.Repeat([]byte{0xff}, 4096), cl.read(0, 4096), "trim touched bytes before the range")
	assert.Equal(t, bytes.Repeat([]byte{0xff}, 100), cl.read(12288, 100), "trim touched bytes after the range")

	s0 := dev.syncs.Load()
	require.Zero(t, cl.do(cmdFlush, 0, 0, 0, nil).errno)
	assert.Equal(t, s0+1, dev.syncs.Load(), "FLUSH must call Sync before replying")

	s0 = dev.syncs.Load()
	require.Zero(t, cl.do(cmdTrim, cmdFlagFUA, 0, 512, nil).errno)
	assert.Equal(t, s0+1, dev.syncs.Load(), "TRIM+FUA must sync before replying")

	s0 = dev.syncs.Load()
	require.Zero(t, cl.writeAt(0, []byte("fua"), cmdFlagFUA))
	assert.Equal(t, int64(1), dev.fuaWrites.Load(), "FUAWriter used")
	assert.Equal(t, s0+1, dev.syncs.Load())

	// FUA on READ and CACHE is accepted and ignored.
	assert.Equal(t, []byte("fua"), cl.do(cmdRead, cmdFlagFUA, 0, 3, nil).data)
	require.Zero(t, cl.do(cmdCache, cmdFlagFUA, 0, 1<<20, nil).errno)
	assert.Equal(t, int64(1), dev.caches.Load())
	st := ts.s.Stats()
	assert.Equal(t, int64(2), st.Trims)
	assert.Equal(t, int64(1), st.Flushes)
	assert.Equal(t, int64(1), st.Caches)
}

func TestFUAWithoutFUAWriter(t *testing.T) {
	m := newMemDev(8192)
	ts := startServer(t, oneExport(syncDev{plainDev{m}}))
	cl := connect(t, ts, "disk", false)
	require.Zero(t, cl.writeAt(0, []byte("x"), cmdFlagFUA))
	assert.Equal(t, int64(1), m.syncs.Load(), "WriteAt then Sync before the reply")
	assert.Equal(t, int64(1), m.writes.Load())
	// CACHE without a Cacher is validated and acknowledged.
	require.Zero(t, cl.do(cmdCache, 0, 0, 8192, nil).errno)
	assert.Equal(t, errnoInval, cl.do(cmdCache, 0, 0, 8193, nil).errno)
}

func TestPlainDeviceRejectsUnadvertised(t *testing.T) {
	ts := startServer(t, oneExport(plainDev{newMemDev(8192)}))
	cl := connect(t, ts, "disk", false)
	for _, tc := range []struct {
		name  string
		typ   uint16
		flags uint16
	}{
		{"flush", cmdFlush, 0},
		{"trim", cmdTrim, 0},
		{"write-zeroes", cmdWriteZeroes, 0},
		{"fua-read", cmdRead, cmdFlagFUA},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl.t = t
			length := uint32(512)
			if tc.typ == cmdFlush {
				length = 0
			}
			assert.Equal(t, errnoInval, cl.do(tc.typ, tc.flags, 0, length, nil).errno)
			assert.Len(t, cl.read(0, 512), 512)
		})
	}
}

func TestDeviceErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want uint32
	}{
		{"eio", syscall.EIO, errnoIO},
		{"wrapped-enospc", fmt.Errorf("member 2: %w", syscall.ENOSPC), errnoNoSpc},
		{"opaque", errors.New("boom"), errnoIO},
		{"eshutdown", syscall.ESHUTDOWN, errnoShutdown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemDev(1 << 16)
			copy(m.data, "good")
			ts := startServer(t, oneExport(failDev{m: m, badFrom: 32768, err: tc.err}))
			for _, structured := range []bool{false, true} {
				cl := connect(t, ts, "disk", structured)
				assert.Equal(t, errnoName(tc.want), errnoName(cl.writeAt(32768, pattern(10, 1), 0)))
				assert.Equal(t, errnoName(tc.want), errnoName(cl.do(cmdFlush, 0, 0, 0, nil).errno))
				r := cl.do(cmdRead, 0, 32768-1000, 4000, nil)
				assert.Equal(t, errnoName(tc.want), errnoName(r.errno))
				if structured {
					// The good prefix is delivered, then the error at the
					// first failing byte.
					assert.Equal(t, []uint16{replyTypeOffsetData, replyTypeErrorOffset}, r.chunks)
					assert.Equal(t, 1000, r.dataCovered)
					assert.True(t, r.hasErrOff)
					assert.Equal(t, uint64(32768), r.errOffset)
					r = cl.do(cmdRead, 0, 40000, 10, nil)
					assert.Equal(t, []uint16{replyTypeErrorOffset}, r.chunks)
					assert.Equal(t, uint64(40000), r.errOffset)
				} else {
					assert.Nil(t, r.data, "no payload after a simple error reply")
				}
				assert.Equal(t, []byte("good"), cl.read(0, 4))
			}
		})
	}
}

func TestMapDeviceError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want uint32
	}{
		{nil, 0},
		{syscall.EPERM, errnoPerm},
		{syscall.EROFS, errnoPerm},
		{syscall.EIO, errnoIO},
		{syscall.ENOSPC, errnoNoSpc},
		{syscall.EDQUOT, errnoNoSpc},
		{syscall.EFBIG, errnoNoSpc},
		{syscall.EINVAL, errnoInval},
		{syscall.ENOTSUP, errnoNotSup},
		{syscall.EOPNOTSUPP, errnoNotSup},
		{syscall.EOVERFLOW, errnoOverflow},
		{syscall.ESHUTDOWN, errnoShutdown},
		{syscall.ENOMEM, errnoIO},
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", syscall.EINVAL)), errnoInval},
		{errors.Join(errors.New("x"), syscall.ENOSPC), errnoNoSpc},
		{io.ErrUnexpectedEOF, errnoIO},
	} {
		name := "nil"
		if tc.err != nil {
			name = tc.err.Error()
		}
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, errnoName(tc.want), errnoName(mapDeviceError(tc.err)))
		})
	}
}

// TestPipelinedOutOfOrder sends many requests before reading any reply; the
// device delays low offsets longer, so replies come back out of order.
func TestPipelinedOutOfOrder(t *testing.T) {
	const n, blk = 200, 4096
	dev := newMemDev(n * blk)
	dev.latency = func(off int64) time.Duration {
		return time.Duration(n-off/blk) * 20 * time.Microsecond
	}
	ts := startServer(t, oneExport(dev))
	for _, structured := range []bool{false, true} {
		t.Run(fmt.Sprintf("structured=%v", structured), func(t *testing.T) {
			cl := connect(t, ts, "disk", structured)
			writes := map[uint64]int{}
			for i := range n {
				h := cl.send(cmdWrite, 0, uint64(i*blk), blk, pattern(blk, byte(i)))
				writes[h] = i
			}
			var order []uint64
			for range n {
				r := cl.readReply()
				require.Zero(t, r.errno)
				order = append(order, r.handle)
			}
			assert.Len(t, writes, n)
			reads := map[uint64]int{}
			for i := range n {
				reads[cl.send(cmdRead, 0, uint64(i*blk), blk, nil)] = i
			}
			for range n {
				r := cl.readReply()
				require.Zero(t, r.errno)
				i, ok := reads[r.handle]
				require.True(t, ok)
				delete(reads, r.handle)
				assert.Equal(t, pattern(blk, byte(i)), r.data, "block %d", i)
				order = append(order, r.handle)
			}
			assert.Empty(t, reads)
			inOrder := true
			for i := 1; i < n; i++ {
				if order[i] < order[i-1] {
					inOrder = false
				}
			}
			assert.False(t, inOrder, "expected out-of-order replies")
		})
	}
}

func TestDuplicateHandlesAreOpaque(t *testing.T) {
	dev := newMemDev(8192)
	ts := startServer(t, oneExport(dev))
	cl := connect(t, ts, "disk", false)
	cl.sendWithHandle(0xffffffffffffffff, cmdWrite, 0, 0, 3, []byte("abc"))
	r := cl.readReply()
	assert.Equal(t, uint64(0xffffffffffffffff), r.handle)
	assert.Equal(t, []byte("abc"), cl.read(0, 3))
}

func TestDisconnectFinishesOutstanding(t *testing.T) {
	dev := newMemDev(1 << 20)
	dev.latency = func(int64) time.Duration { return 20 * time.Millisecond }
	ts := startServer(t, oneExport(dev))
	cl := connect(t, ts, "disk", false)
	for i := range 8 {
		cl.send(cmdWrite, 0, uint64(i*4096), 4096, pattern(4096, byte(i)))
	}
	cl.send(cmdDisc, 0, 0, 0, nil)
	cl.dropPending(cl.nextHandle) // no reply to DISC
	for range 8 {
		require.Zero(t, cl.readReply().errno)
	}
	cl.expectClosedNow()
	for i := range 8 {
		assert.Equal(t, pattern(4096, byte(i)), dev.snapshot(int64(i*4096), 4096))
	}
	assert.Equal(t, int64(1), ts.s.Stats().Disconnects)
}

func TestBadRequestMagicDisconnects(t *testing.T) {
	ts := startServer(t, oneExport(newMemDev(8192)))
	cl := connect(t, ts, "disk", false)
	cl.write(make([]byte, 28))
	cl.expectClosedNow()
}

func TestAbruptDisconnectMidPayload(t *testing.T) {
	dev := newMemDev(1 << 20)
	ts := startServer(t, oneExport(dev))
	other := connect(t, ts, "disk", false)
	require.Zero(t, other.writeAt(0, []byte("other"), 0))

	for _, cut := range []int{3, 28 + 1000} {
		cl := connect(t, ts, "disk", false)
		b := make([]byte, 28+4096)
		binary.BigEndian.PutUint32(b[0:], magicRequest)
		binary.BigEndian.PutUint16(b[6:], cmdWrite)
		binary.BigEndian.PutUint64(b[16:], 8192)
		binary.BigEndian.PutUint32(b[24:], 4096)
		for i := 28; i < len(b); i++ {
			b[i] = 0xee
		}
		cl.write(b[:cut])
		require.NoError(t, cl.c.Close())
	}
	assert.Eventually(t, func() bool { return ts.s.Stats().ActiveConnections == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, make([]byte, 4096), dev.snapshot(8192, 4096), "partial payload must not be written")
	// The surviving connection and a new one both work.
	assert.Equal(t, []byte("other"), other.read(0, 5))
	fresh := connect(t, ts, "disk", true)
	assert.Equal(t, []byte("other"), fresh.read(0, 5))
}

func TestMultipleConnections(t *testing.T) {
	const conns, blocks, blk = 8, 32, 4096
	dev := newMemDev(conns * blocks * blk)
	dev.multiConn = true
	opts := oneExport(dev)
	tcp := startServer(t, opts)
	var wg sync.WaitGroup
	for c := range conns {
		wg.Go(func() {
			cl := connect(t, tcp, "disk", c%2 == 0)
			base := uint64(c * blocks * blk)
			for i := range blocks {
				cl.send(cmdWrite, 0, base+uint64(i*blk), blk, pattern(blk, byte(c*blocks+i)))
			}
			for range blocks {
				if r := cl.readReply(); r.errno != 0 {
					t.Errorf("conn %d: write failed: %s", c, errnoName(r.errno))
				}
			}
			if r := cl.do(cmdFlush, 0, 0, 0, nil); r.errno != 0 {
				t.Errorf("flush: %s", errnoName(r.errno))
			}
			for i := range blocks {
				if got := cl.read(base+uint64(i*blk), blk); !bytes.Equal(got, pattern(blk, byte(c*blocks+i))) {
					t.Errorf("conn %d block %d mismatch", c, i)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(conns), tcp.s.Stats().Handshakes)
}

func TestServeUnixAndTCPTogether(t *testing.T) {
	dev := newMemDev(8192)
	s, err := NewServer(oneExport(dev))
	require.NoError(t, err)
	lt, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	lu, err := net.Listen("unix", t.TempDir()+"/s")
	require.NoError(t, err)
	errs := make(chan error, 2)
	go func() { errs <- s.Serve(lt) }()
	go func() { errs <- s.Serve(lu) }()
	a := connect(t, &testServer{s: s, addr: lt.Addr()}, "disk", false)
	b := connect(t, &testServer{s: s, addr: lu.Addr()}, "disk", false)
	require.Zero(t, a.writeAt(0, []byte("tcp"), 0))
	assert.Equal(t, []byte("tcp"), b.read(0, 3))
	require.NoError(t, s.Shutdown(context.Background()))
	assert.ErrorIs(t, <-errs, ErrServerClosed)
	assert.ErrorIs(t, <-errs, ErrServerClosed)
	a.expectEOF()
	b.expectEOF()
	assert.ErrorIs(t, s.Serve(lt), ErrServerClosed)
}

// gatedShutdownServer serves, on TCP, a 1 MiB memDev whose reads wait for
// its gate, with the given number of workers, for the shutdown tests
// (which call Shutdown themselves).
func gatedShutdownServer(t *testing.T, workers int) (*Server, *memDev, *testServer, net.Listener) {
	dev := newMemDev(1 << 20)
	dev.gate = make(chan struct{})
	dev.entered = make(chan struct{}, 16)
	opts := oneExport(dev)
	opts.Workers = workers
	s, err := NewServer(opts)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.Serve(l) }()
	return s, dev, &testServer{s: s, addr: l.Addr()}, l
}

func TestShutdownWithRequestsInFlight(t *testing.T) {
	s, dev, ts, l := gatedShutdownServer(t, 2)

	cl := connect(t, ts, "disk", false)
	idle := connect(t, ts, "disk", true)
	const total = 5
	for i := range total {
		cl.send(cmdRead, 0, uint64(i*4096), 4096, nil)
	}
	<-dev.entered
	<-dev.entered // both workers are inside the device
	require.Eventually(t, func() bool { return s.Stats().Reads == total }, 5*time.Second, time.Millisecond)

	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with requests still executing", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(dev.gate)
	require.NoError(t, <-done)

	counts := map[uint32]int{}
	for range total {
		r := cl.readReply()
		counts[r.errno]++
		if r.errno == 0 {
			assert.Len(t, r.data, 4096)
		}
	}
	assert.Equal(t, map[uint32]int{0: 2, errnoShutdown: total - 2}, counts)
	cl.expectEOF()
	idle.expectEOF()
	assert.Zero(t, s.Stats().ActiveConnections)
	// New connections are refused.
	_, err := net.Dial("tcp", l.Addr().String())
	assert.Error(t, err)
}

// TestShutdownAnswersRequestsSentAfterIt: requests a client sends after
// shutdown began (it cannot know) are read and answered with ESHUTDOWN, a
// WRITE's payload discarded unwritten, as the protocol asks of a server
// shutting down; the request executing meanwhile finishes and is answered,
// and the client's NBD_CMD_DISC, the protocol's answer to ESHUTDOWN, ends
// the connection. Before, the reader stopped at once: the requests stayed
// in the socket unanswered, and the client saw the connection close under
// them.
func TestShutdownAnswersRequestsSentAfterIt(t *testing.T) {
	s, dev, ts, _ := gatedShutdownServer(t, 1)
	cl := connect(t, ts, "disk", false)
	cl.send(cmdRead, 0, 0, 4096, nil)
	<-dev.entered // executing

	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()) }()
	require.Eventually(t, s.shutting.Load, 5*time.Second, time.Millisecond)
	cl.send(cmdWrite, 0, 8192, 4096, pattern(4096, 7))
	cl.send(cmdRead, 0, 4096, 4096, nil)
	for range 2 {
		r := cl.readReply()
		assert.Equal(t, errnoShutdown, r.errno, "a request sent after shutdown began")
	}
	close(dev.gate)
	r := cl.readReply()
	assert.Zero(t, r.errno, "the request executing when shutdown began")
	assert.Len(t, r.data, 4096)
	cl.send(cmdDisc, 0, 0, 0, nil)
	cl.expectEOF()
	require.NoError(t, <-done)
	assert.Equal(t, make([]byte, 4096), dev.data[8192:8192+4096], "a WRITE answered ESHUTDOWN is not written")
}

func TestShutdownContextExpires(t *testing.T) {
	dev := newMemDev(1 << 16)
	dev.gate = make(chan struct{})
	s, err := NewServer(oneExport(dev))
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.Serve(l) }()
	cl := connect(t, &testServer{s: s, addr: l.Addr()}, "disk", false)
	cl.send(cmdRead, 0, 0, 4096, nil)
	require.Eventually(t, func() bool { return dev.reads.Load() == 1 }, 5*time.Second, time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, s.Shutdown(ctx), context.DeadlineExceeded)
	cl.expectEOF()
	close(dev.gate)
	require.Eventually(t, func() bool { return s.Stats().ActiveConnections == 0 }, 5*time.Second, time.Millisecond)
}

func TestServeConnPipe(t *testing.T) {
	dev := newMemDev(8192)
	s, err := NewServer(oneExport(dev))
	require.NoError(t, err)
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() { s.ServeConn(a); close(done) }()
	cl := &client{t: t, c: b, br: bufioReader(b), pending: map[uint64]pendingReq{}}
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	require.Equal(t, repAck, cl.info(optGo, "disk").final)
	require.Zero(t, cl.writeAt(10, []byte("pipe"), 0))
	assert.Equal(t, []byte("pipe"), cl.read(10, 4))
	cl.send(cmdDisc, 0, 0, 0, nil)
	<-done
	require.NoError(t, s.Close())
	// After Close, ServeConn closes the connection at once.
	a, b = net.Pipe()
	s.ServeConn(a)
	_, err = b.Read(make([]byte, 1))
	assert.Error(t, err)
}

func TestWriteBackpressureBoundsMemory(t *testing.T) {
	// A small in-flight bound with a slow device: the reader must block
	// rather than buffer everything, and all writes still complete.
	dev := newMemDev(4 << 20)
	dev.latency = func(int64) time.Duration { return time.Millisecond }
	opts := oneExport(dev)
	opts.MaxPayload = 64 << 10
	opts.MaxInFlightBytes = 128 << 10
	opts.Workers = 4
	ts := startServer(t, opts)
	cl := connect(t, ts, "disk", false)
	go func() {
		for i := range 64 {
			cl.send(cmdWrite, 0, uint64(i*(64<<10)), 64<<10, pattern(64<<10, byte(i)))
		}
	}()
	for range 64 {
		r := cl.readReply()
		require.Zero(t, r.errno)
	}
	for i := range 64 {
		require.Equal(t, pattern(64<<10, byte(i)), dev.snapshot(int64(i*(64<<10)), 64<<10))
	}
}
