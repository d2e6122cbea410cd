package nbd

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inlineDev is a memDev that says whether its writes may run on the
// request reader (InlineWriter) and records how many WriteAt and
// WriteAtFUA calls ran at once.
type inlineDev struct {
	*memDev
	inline atomic.Bool
	overlap
}

func (d *inlineDev) WritesInline() bool { return d.inline.Load() }

// overlap records how many calls of a test device ran at once (most).
type overlap struct{ running, most atomic.Int64 }

// enter counts a call in and holds it for 2 ms, so that calls that may run
// side by side do; the call's defer counts it out (running.Add(-1)).
func (o *overlap) enter() {
	n := o.running.Add(1)
	for m := o.most.Load(); n > m && !o.most.CompareAndSwap(m, n); m = o.most.Load() {
	}
	time.Sleep(2 * time.Millisecond)
}

func (d *inlineDev) WriteAt(p []byte, off int64) (int, error) {
	d.enter()
	defer d.running.Add(-1)
	return d.memDev.WriteAt(p, off)
}

func (d *inlineDev) WriteAtFUA(p []byte, off int64) (int, error) {
	d.enter()
	defer d.running.Add(-1)
	return d.memDev.WriteAtFUA(p, off)
}

// TestInlineWrites: a device that says its writes do not wait has the
// connection's WRITEs run by the reader, one at a time, answered in order,
// with the data where it belongs; FUA WRITEs still go to the workers side
// by side, and so does every WRITE once the device says no.
func TestInlineWrites(t *testing.T) {
	const n, blk = 16, 4096
	for _, tc := range []struct {
		inline bool
		flags  uint16
		serial bool
	}{
		{true, 0, true},
		{true, cmdFlagFUA, false},
		{false, 0, false},
	} {
		t.Run(fmt.Sprintf("inline=%v/flags=%d", tc.inline, tc.flags), func(t *testing.T) {
			dev := &inlineDev{memDev: newMemDev(n * blk)}
			dev.inline.Store(tc.inline)
			ts := startServer(t, oneExport(dev))
			cl := connect(t, ts, "disk", true)
			var sent []uint64
			for i := range n {
				sent = append(sent, cl.send(cmdWrite, tc.flags, uint64(i*blk), blk, pattern(blk, byte(i+1))))
			}
			var got []uint64
			for range n {
				r := cl.readReply()
				require.Zero(t, r.errno)
				got = append(got, r.handle)
			}
			for i := range n {
				assert.Equal(t, pattern(blk, byte(i+1)), dev.snapshot(int64(i*blk), blk), "block %d", i)
			}
			if tc.flags&cmdFlagFUA != 0 {
				assert.Equal(t, int64(n), dev.fuaWrites.Load())
			} else {
				assert.Equal(t, int64(n), dev.writes.Load())
			}
			if tc.serial {
				assert.Equal(t, int64(1), dev.most.Load(), "writes run one at a time")
				assert.Equal(t, sent, got, "replies in request order")
			} else {
				assert.Greater(t, dev.most.Load(), int64(1), "writes run side by side")
			}
		})
	}
}

// inlineAtDev is an inlineDev (whose WritesInline says no) that also says,
// per write, that writes of at least min bytes may run on the request
// reader (InlineWriterAt), and records what it was asked.
type inlineAtDev struct {
	*inlineDev
	min   int
	mu    sync.Mutex
	asked [][2]int64
}

func (d *inlineAtDev) WritesInlineAt(off int64, n int) bool {
	d.mu.Lock()
	d.asked = append(d.asked, [2]int64{off, int64(n)})
	d.mu.Unlock()
	return n >= d.min
}

// TestInlineWritesAt: a device that answers per write (InlineWriterAt) is
// asked with each WRITE's offset and length, in place of WritesInline:
// the writes it says yes to run on the reader, one at a time, answered in
// order; the others, and FUA writes, which it is not asked about, go to
// the workers side by side.
func TestInlineWritesAt(t *testing.T) {
	const n, blk = 16, 4096
	for _, tc := range []struct {
		size   int
		flags  uint16
		serial bool
	}{
		{2 * blk, 0, true},
		{blk, 0, false},
		{2 * blk, cmdFlagFUA, false},
	} {
		t.Run(fmt.Sprintf("size=%d/flags=%d", tc.size, tc.flags), func(t *testing.T) {
			dev := &inlineAtDev{inlineDev: &inlineDev{memDev: newMemDev(n * 2 * blk)}, min: 2 * blk}
			ts := startServer(t, oneExport(dev))
			cl := connect(t, ts, "disk", true)
			var sent []uint64
			var want [][2]int64
			for i := range n {
				off := i * tc.size
				sent = append(sent, cl.send(cmdWrite, tc.flags, uint64(off), uint32(tc.size), pattern(tc.size, byte(i+1))))
				want = append(want, [2]int64{int64(off), int64(tc.size)})
			}
			var got []uint64
			for range n {
				r := cl.readReply()
				require.Zero(t, r.errno)
				got = append(got, r.handle)
			}
			for i := range n {
				assert.Equal(t, pattern(tc.size, byte(i+1)), dev.snapshot(int64(i*tc.size), int64(tc.size)), "write %d", i)
			}
			dev.mu.Lock()
			defer dev.mu.Unlock()
			if tc.flags&cmdFlagFUA != 0 {
				assert.Empty(t, dev.asked, "FUA writes are not asked about")
			} else {
				assert.Equal(t, want, dev.asked, "asked with each write's offset and length")
			}
			if tc.serial {
				assert.Equal(t, int64(1), dev.most.Load(), "writes run one at a time")
				assert.Equal(t, sent, got, "replies in request order")
			} else {
				assert.Greater(t, dev.most.Load(), int64(1), "writes run side by side")
			}
		})
	}
}

// TestHoldPerConnection: Options.Hold is called when a connection enters
// transmission, and its release when the connection ends.
func TestHoldPerConnection(t *testing.T) {
	var held atomic.Int64
	opts := oneExport(newMemDev(1 << 16))
	opts.Hold = func() func() {
		held.Add(1)
		return func() { held.Add(-1) }
	}
	ts := startServer(t, opts)
	cl := connect(t, ts, "disk", true)
	require.Zero(t, cl.writeAt(0, pattern(4096, 7), 0))
	assert.Equal(t, int64(1), held.Load())
	cl.send(cmdDisc, 0, 0, 0, nil)
	cl.expectEOF()
	require.Eventually(t, func() bool { return held.Load() == 0 }, 5*time.Second, time.Millisecond)
}

// inlineReadDev is a memDev that says which READs may run on the request
// reader (InlineReader: those of at most max bytes) and records how many
// ReadAt calls ran at once.
type inlineReadDev struct {
	*memDev
	max int
	overlap
}

func (d *inlineReadDev) ReadsInline(n int) bool { return n <= d.max }

func (d *inlineReadDev) ReadAt(p []byte, off int64) (int, error) {
	d.enter()
	defer d.running.Add(-1)
	return d.memDev.ReadAt(p, off)
}

// TestInlineReads: READs the device says are a copy out of memory
// (InlineReader) are run by the reader, one at a time, answered in
// request order with the right data; larger ones still go to the workers
// side by side.
func TestInlineReads(t *testing.T) {
	const n, blk = 16, 4096
	for _, tc := range []struct {
		max    int
		serial bool
	}{
		{blk, true},
		{blk - 1, false},
	} {
		t.Run(fmt.Sprintf("max=%d", tc.max), func(t *testing.T) {
			dev := &inlineReadDev{memDev: newMemDev(n * blk), max: tc.max}
			for i := range n {
				copy(dev.data[i*blk:], pattern(blk, byte(i+1)))
			}
			ts := startServer(t, oneExport(dev))
			cl := connect(t, ts, "disk", false)
			var sent, got []uint64
			block := map[uint64]int{}
			for i := range n {
				h := cl.send(cmdRead, 0, uint64(i*blk), blk, nil)
				sent = append(sent, h)
				block[h] = i
			}
			for range n {
				r := cl.readReply()
				require.Zero(t, r.errno)
				i := block[r.handle]
				assert.Equal(t, pattern(blk, byte(i+1)), r.data, "block %d", i)
				got = append(got, r.handle)
			}
			if tc.serial {
				assert.Equal(t, int64(1), dev.most.Load(), "reads run one at a time")
				assert.Equal(t, sent, got, "replies in request order")
			} else {
				assert.Greater(t, dev.most.Load(), int64(1), "reads run side by side")
			}
		})
	}
}

// countingListener counts the Write calls on the connections it accepts.
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, &l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

// SyscallConn lets the server read the socket itself (sockread.go).
func (c countingConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestInlineRepliesShareWrites: the replies of inline WRITEs whose
// successors are already buffered wait for the run to end (holdReplies),
// so a pipelined run is answered with a few write calls, in order; a lone
// request is answered at once (its successor's header is not buffered),
// and so are inline replies held when a request for the workers (FUA)
// follows them. A long pipelined run is answered in several writes: a
// reply waits for at most maxHeld others.
func TestInlineRepliesShareWrites(t *testing.T) {
	const n, blk = 16, 4096
	dev := &inlineDev{memDev: newMemDev(4 * maxHeld * blk)}
	dev.inline.Store(true)
	s, err := NewServer(oneExport(dev))
	require.NoError(t, err)
	inner, err := net.Listen("unix", filepath.Join(t.TempDir(), "nbd.sock"))
	require.NoError(t, err)
	l := &countingListener{Listener: inner}
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, s.Shutdown(ctx))
		assert.ErrorIs(t, <-served, ErrServerClosed)
	})
	cl := connect(t, &testServer{s: s, addr: inner.Addr()}, "disk", true)

	run := func(flags []uint16) []uint64 {
		var batch []byte
		for i, f := range flags {
			_, b := cl.request(cmdWrite, f, uint64(i*blk), blk, pattern(blk, byte(i+1)))
			batch = append(batch, b...)
		}
		cl.write(batch) // the whole run in one write: the server reads it at once
		var got []uint64
		for range flags {
			r := cl.readReply()
			require.Zero(t, r.errno)
			got = append(got, r.handle)
		}
		return got
	}

	before := l.writes.Load()
	order := run(make([]uint16, n))
	want := make([]uint64, n)
	for i := range want {
		want[i] = cl.nextHandle - uint64(n-1-i)
	}
	assert.Equal(t, want, order, "inline replies in request order")
	runWrites := l.writes.Load() - before
	assert.Less(t, runWrites, int64(n/2), "%d pipelined inline WRITEs answered with %d write calls", n, runWrites)
	for i := range n {
		assert.Equal(t, pattern(blk, byte(i+1)), dev.snapshot(int64(i*blk), blk), "block %d", i)
	}

	// A lone WRITE: answered at once, with a write call of its own.
	before = l.writes.Load()
	h := cl.send(cmdWrite, 0, 0, blk, pattern(blk, 9))
	r := cl.readReply()
	require.Zero(t, r.errno)
	assert.Equal(t, h, r.handle)
	assert.EqualValues(t, 1, l.writes.Load()-before)

	// Inline WRITEs, then a FUA WRITE for the workers, then more inline
	// ones: every reply arrives (the held ones are flushed before the hand-off).
	flags := make([]uint16, n)
	flags[n/2] = cmdFlagFUA
	got := run(flags)
	assert.Len(t, got, n)

	// A long pipelined run: the reader never waits, yet a reply waits for
	// at most maxHeld others (the run is sent in more than one write).
	const long = 4 * maxHeld
	before = l.writes.Load()
	got = run(make([]uint16, long))
	assert.Len(t, got, long)
	runWrites = l.writes.Load() - before
	assert.GreaterOrEqual(t, runWrites, int64(long/maxHeld), "%d pipelined WRITEs answered with %d write calls", long, runWrites)
	assert.Less(t, runWrites, int64(long/2))
}
