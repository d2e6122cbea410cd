package nbd

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pieceDev is a memDev whose writes may run on the request reader
// (InlineWriter) and that records every WriteAt (offset, length); WriteAt
// number failAt (1-based) and those after it fail.
type pieceDev struct {
	*memDev
	inline bool
	mu     sync.Mutex
	calls  [][2]int64
	failAt int
}

func (d *pieceDev) WritesInline() bool { return d.inline }

var errPiece = errors.New("injected write failure")

func (d *pieceDev) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	d.calls = append(d.calls, [2]int64{off, int64(len(p))})
	k := len(d.calls)
	d.mu.Unlock()
	if d.failAt > 0 && k >= d.failAt {
		return 0, errPiece
	}
	return d.memDev.WriteAt(p, off)
}

func (d *pieceDev) writes() [][2]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][2]int64(nil), d.calls...)
}

// sendTrickled sends a WRITE of payload at off in pieces of step bytes,
// pausing between them; before the last piece it waits (up to a few
// seconds) until the device has seen a write, if wait is set.
func sendTrickled(t *testing.T, cl *client, dev *pieceDev, off uint64, payload []byte, step int, wait bool) uint64 {
	t.Helper()
	cl.nextHandle++
	h := cl.nextHandle
	cl.sendWithHandle(h, cmdWrite, 0, off, uint32(len(payload)), nil) // the header alone
	for i := 0; i < len(payload); i += step {
		end := min(i+step, len(payload))
		if end == len(payload) && wait {
			require.Eventually(t, func() bool { return len(dev.writes()) > 0 }, 5*time.Second, time.Millisecond,
				"no piece was written while the payload was still arriving")
		}
		cl.write(payload[i:end])
		time.Sleep(2 * time.Millisecond)
	}
	return h
}

// TestStreamedWrite: a large WRITE that the reader runs itself is written
// to the device piece by piece while its payload arrives (the first piece
// before the last bytes are sent), in whole streamPiece pieces that tile
// the request in order, on unix and TCP sockets; it is acknowledged once,
// after all of it, and the data is where it belongs.
func TestStreamedWrite(t *testing.T) {
	for _, unix := range []bool{false, true} {
		t.Run(fmt.Sprintf("unix=%v", unix), func(t *testing.T) {
			const size = 1 << 20
			dev := &pieceDev{memDev: newMemDev(4 << 20), inline: true}
			ts := startServer(t, oneExport(dev), unix)
			cl := connect(t, ts, "disk", true)
			payload := pattern(size, 7)
			off := uint64(4096 * 3) // not piece-aligned on the device
			h := sendTrickled(t, cl, dev, off, payload, 100<<10, true)
			r := cl.readReply()
			require.Equal(t, h, r.handle)
			require.Zero(t, r.errno)
			assert.Equal(t, payload, dev.snapshot(int64(off), size))

			calls := dev.writes()
			require.Greater(t, len(calls), 1, "the payload was written in pieces")
			next := int64(off)
			for i, c := range calls {
				assert.Equal(t, next, c[0], "piece %d starts where the last ended", i)
				if i < len(calls)-1 {
					assert.Zero(t, c[1]%streamPiece, "piece %d is whole pieces: %d bytes", i, c[1])
				}
				next += c[1]
			}
			assert.Equal(t, int64(off)+size, next, "the pieces tile the request")
			assert.Equal(t, int64(size), ts.s.Stats().BytesWritten)
			assert.Equal(t, int64(size), ts.s.Stats().BytesStreamed)

			// The connection goes on: a small write and a read.
			require.Zero(t, cl.writeAt(0, pattern(4096, 9), 0))
			assert.Equal(t, pattern(4096, 9), cl.read(0, 4096))
		})
	}
}

// TestStreamedWriteError: a piece that fails stops the writing; the rest
// of the payload is still read, the WRITE gets EIO, and the connection
// serves the next request.
func TestStreamedWriteError(t *testing.T) {
	const size = 1 << 20
	dev := &pieceDev{memDev: newMemDev(4 << 20), inline: true, failAt: 2}
	ts := startServer(t, oneExport(dev), true)
	cl := connect(t, ts, "disk", true)
	h := sendTrickled(t, cl, dev, 0, pattern(size, 3), 100<<10, true)
	r := cl.readReply()
	require.Equal(t, h, r.handle)
	assert.Equal(t, errnoIO, r.errno)
	calls := dev.writes()
	assert.Len(t, calls, 2, "no piece is written after the one that failed")
	assert.Equal(t, pattern(int(calls[0][1]), 3), dev.snapshot(0, calls[0][1]), "the piece before the failure was written")
	assert.Zero(t, ts.s.Stats().BytesWritten)

	dev.mu.Lock()
	dev.failAt = 0
	dev.mu.Unlock()
	assert.Equal(t, dev.snapshot(2<<20, 4096), cl.read(2<<20, 4096), "the stream is in sync")
}

// TestStreamedWriteOff: with NoStreamWrites, for a device whose writes go
// to the workers, and for a payload below streamMin, a WRITE is received
// whole and written once.
func TestStreamedWriteOff(t *testing.T) {
	for _, tc := range []struct {
		name     string
		inline   bool
		noStream bool
		size     int
	}{
		{"NoStreamWrites", true, true, 1 << 20},
		{"workers", false, false, 1 << 20},
		{"below streamMin", true, false, streamMin - 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := &pieceDev{memDev: newMemDev(4 << 20), inline: tc.inline}
			opts := oneExport(dev)
			opts.NoStreamWrites = tc.noStream
			ts := startServer(t, opts, true)
			cl := connect(t, ts, "disk", true)
			payload := pattern(tc.size, 5)
			h := sendTrickled(t, cl, dev, 0, payload, 32<<10, false)
			r := cl.readReply()
			require.Equal(t, h, r.handle)
			require.Zero(t, r.errno)
			assert.Equal(t, [][2]int64{{0, int64(tc.size)}}, dev.writes())
			assert.Equal(t, payload, dev.snapshot(0, int64(tc.size)))
			assert.Zero(t, ts.s.Stats().BytesStreamed)
		})
	}
}

// TestStreamedWriteDisconnect: a client that goes away in the middle of a
// streamed payload ends its connection only; the pieces already written
// stay (the WRITE was never acknowledged), and the server serves the next
// client.
func TestStreamedWriteDisconnect(t *testing.T) {
	dev := &pieceDev{memDev: newMemDev(4 << 20), inline: true}
	ts := startServer(t, oneExport(dev), true)
	cl := connect(t, ts, "disk", true)
	payload := pattern(1<<20, 4)
	cl.sendWithHandle(1, cmdWrite, 0, 0, 1<<20, nil)
	cl.write(payload[:300<<10])
	require.Eventually(t, func() bool { return len(dev.writes()) > 0 }, 5*time.Second, time.Millisecond)
	require.NoError(t, cl.c.Close())
	require.Eventually(t, func() bool { return ts.s.Stats().ActiveConnections == 0 }, 5*time.Second, time.Millisecond)
	w := dev.writes()[0]
	assert.Equal(t, payload[:w[1]], dev.snapshot(0, w[1]))

	cl2 := connect(t, ts, "disk", true)
	require.Zero(t, cl2.writeAt(0, pattern(4096, 1), 0))
	assert.Equal(t, pattern(4096, 1), cl2.read(0, 4096))
}

// TestStreamedWriteIOTimeout: a streamed payload that stops arriving is
// bounded by IOTimeout as any payload: the connection is closed and
// counted, and the server serves the next client.
func TestStreamedWriteIOTimeout(t *testing.T) {
	dev := &pieceDev{memDev: newMemDev(4 << 20), inline: true}
	opts := oneExport(dev)
	opts.IOTimeout = 200 * time.Millisecond
	ts := startServer(t, opts, true)
	slow := connect(t, ts, "disk", true)
	slow.sendWithHandle(1, cmdWrite, 0, 0, 1<<20, pattern(100<<10, 6)) // header and 100 KiB of payload
	slow.expectClosedNow()
	assert.Equal(t, int64(1), ts.s.Stats().IOTimeouts)
	assert.Zero(t, ts.s.Stats().BytesWritten, "the WRITE was not acknowledged")

	cl := connect(t, ts, "disk", true)
	require.Zero(t, cl.writeAt(2<<20, pattern(4096, 8), 0))
	assert.Equal(t, pattern(4096, 8), cl.read(2<<20, 4096))
}
