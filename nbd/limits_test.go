package nbd

import (
	"context"
	"encoding/binary"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// queued returns the number of acquirers queued on s.
func (s *byteSem) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiters)
}

// waitQueued waits until n acquirers are queued on s. Waiting for the queue,
// not for time to pass, is what makes "the rest are blocked" a fact.
func waitQueued(t *testing.T, s *byteSem, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return s.queued() == n }, 10*time.Second, time.Millisecond,
		"want %d waiters, have %d", n, s.queued())
}

func TestByteSemFIFOAndAbort(t *testing.T) {
	var s byteSem
	s.init(10)
	require.True(t, s.acquire(6, nil))
	assert.Equal(t, int64(6), s.inUse())

	aDone, bDone := make(chan struct{}), make(chan struct{})
	go func() { require.True(t, s.acquire(6, nil)); close(aDone) }()
	waitQueued(t, &s, 1)
	// 4 bytes are free, but a waiter is queued: nobody overtakes it.
	assert.False(t, s.tryAcquire(2))
	go func() { require.True(t, s.acquire(2, nil)); close(bDone) }()
	waitQueued(t, &s, 2)

	abort := make(chan struct{})
	aborted := make(chan bool)
	go func() { aborted <- s.acquire(1, abort) }()
	waitQueued(t, &s, 3)
	close(abort)
	assert.False(t, <-aborted)
	waitQueued(t, &s, 2)
	assert.Equal(t, int64(6), s.inUse(), "an aborted acquire takes nothing")

	s.release(2) // 6 free: the head (6) is granted, and nothing is left for b
	<-aDone
	assert.Equal(t, 1, s.queued())
	assert.Equal(t, int64(10), s.inUse())
	s.release(2)
	<-bDone
	assert.Equal(t, int64(10), s.inUse())
	s.release(10)
	assert.Zero(t, s.inUse())
	assert.True(t, s.tryAcquire(10))
	s.release(10)
	assert.Panics(t, func() { s.release(1) }, "releasing more than was acquired is a broken invariant")
}

func TestByteSemAbortedHeadUnblocksFollowers(t *testing.T) {
	var s byteSem
	s.init(10)
	require.True(t, s.acquire(8, nil))
	abort := make(chan struct{})
	headDone := make(chan bool)
	go func() { headDone <- s.acquire(9, abort) }() // cannot fit until 8 return
	waitQueued(t, &s, 1)
	small := make(chan struct{})
	go func() { require.True(t, s.acquire(2, nil)); close(small) }() // fits, but queued behind the head
	waitQueued(t, &s, 2)
	close(abort)
	assert.False(t, <-headDone)
	<-small // the head's departure lets the follower through
	assert.Equal(t, int64(10), s.inUse())
}

// budgetOpts returns options for an export of dev in which two 256 KiB
// requests (larger than a connection's reserve) exhaust the server budget,
// while each connection alone could hold both.
func budgetOpts(dev *memDev) Options {
	opts := oneExport(dev)
	opts.MaxPayload = 256 << 10
	opts.MaxTotalInFlightBytes = 512 << 10
	opts.MaxInFlightBytes = 512 << 10
	opts.Workers = 4
	return opts
}

func gatedDev(size int) *memDev {
	dev := newMemDev(size)
	dev.gate = make(chan struct{})
	dev.entered = make(chan struct{}, 64)
	return dev
}

func TestTotalInFlightBudgetAcrossConnections(t *testing.T) {
	// Issue 7: each connection could hold MaxInFlightBytes, with no bound
	// across connections. Three connections each send two 256 KiB READs
	// against a device that holds every read: only the budget's worth (two)
	// may have buffers; the other readers must block before allocating.
	const blk = 256 << 10
	dev := gatedDev(2 << 20)
	ts := startServer(t, budgetOpts(dev))
	var cls []*client
	for range 3 {
		cls = append(cls, connect(t, ts, "disk", false))
	}
	send := func(i int) {
		cls[i].send(cmdRead, 0, uint64(2*i*blk), blk, nil)
		cls[i].send(cmdRead, 0, uint64((2*i+1)*blk), blk, nil)
	}
	// The first connection's two reads take the whole budget.
	send(0)
	<-dev.entered
	<-dev.entered
	// The other two connections' readers wait for it, before allocating.
	send(1)
	send(2)
	waitQueued(t, &ts.s.budget, 2)
	assert.Len(t, dev.entered, 0, "a read beyond the budget reached the device")
	assert.Equal(t, int64(2), dev.reads.Load())
	assert.Equal(t, int64(512<<10), ts.s.Stats().InFlightBytes)

	close(dev.gate)
	for _, cl := range cls {
		for range 2 {
			assert.Zero(t, cl.readReply().errno)
		}
	}
	assert.Equal(t, int64(6), dev.reads.Load())
	assert.Eventually(t, func() bool { return ts.s.Stats().InFlightBytes == 0 }, 5*time.Second, time.Millisecond)
}

func TestSmallRequestsProceedWhileBudgetExhausted(t *testing.T) {
	// Large requests of one client exhaust the budget; another client's
	// small requests use its connection reserve and are served, and its
	// large request waits its turn instead of failing.
	const blk = 256 << 10
	dev := gatedDev(2 << 20)
	ts := startServer(t, budgetOpts(dev))
	hog := connect(t, ts, "disk", false)
	hog.send(cmdRead, 0, 0, blk, nil)
	hog.send(cmdRead, 0, blk, blk, nil)
	<-dev.entered
	<-dev.entered
	require.Equal(t, int64(512<<10), ts.s.Stats().InFlightBytes)

	cl := connect(t, ts, "disk", false)
	for i := range 8 {
		require.Zero(t, cl.writeAt(uint64(1<<20+i*4096), pattern(4096, byte(i)), 0))
	}
	big := pattern(blk, 9)
	cl.send(cmdWrite, 0, 1<<20, blk, big)
	waitQueued(t, &ts.s.budget, 1)

	close(dev.gate)
	assert.Zero(t, cl.readReply().errno)
	assert.Equal(t, big, dev.snapshot(1<<20, blk))
	for range 2 {
		assert.Zero(t, hog.readReply().errno)
	}
}

func TestIOTimeoutDropsTricklingWriter(t *testing.T) {
	// A WRITE whose payload never finishes arriving holds budget; after
	// IOTimeout the connection is closed and the budget serves others.
	const blk = 256 << 10
	dev := newMemDev(2 << 20)
	opts := budgetOpts(dev)
	opts.MaxTotalInFlightBytes = blk
	opts.MaxInFlightBytes = blk
	opts.IOTimeout = 200 * time.Millisecond
	ts := startServer(t, opts)

	slow := connect(t, ts, "disk", false)
	slow.sendWithHandle(1, cmdWrite, 0, 0, blk, pattern(1000, 1)) // header and 1000 payload bytes
	require.Eventually(t, func() bool { return ts.s.Stats().InFlightBytes == blk }, 10*time.Second, time.Millisecond)

	other := connect(t, ts, "disk", false)
	data := pattern(blk, 2)
	require.Zero(t, other.writeAt(blk, data, 0), "the budget returned when the trickler was dropped")
	assert.Equal(t, data, dev.snapshot(blk, blk))
	slow.expectClosedNow()
	assert.Equal(t, make([]byte, 1000), dev.snapshot(0, 1000), "the partial payload was not written")
	assert.Equal(t, int64(1), ts.s.Stats().IOTimeouts)
	// The reply may overtake the release of the bytes.
	assert.Eventually(t, func() bool { return ts.s.Stats().InFlightBytes == 0 }, 5*time.Second, time.Millisecond)
}

func TestIOTimeoutDropsClientThatDoesNotReadReplies(t *testing.T) {
	// net.Pipe has no buffer: a reply write blocks until the client reads,
	// so a client that never reads holds its READ buffers until IOTimeout.
	dev := newMemDev(1 << 20)
	opts := oneExport(dev)
	opts.IOTimeout = 200 * time.Millisecond
	s, err := NewServer(opts)
	require.NoError(t, err)
	a, b := net.Pipe()
	served := make(chan struct{})
	go func() { s.ServeConn(a); close(served) }()
	cl := &client{t: t, c: b, br: bufioReader(b), pending: map[uint64]pendingReq{}}
	_ = b.SetDeadline(time.Now().Add(20 * time.Second))
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	require.Equal(t, repAck, cl.info(optGo, "disk").final)
	for i := range 4 {
		cl.send(cmdRead, 0, uint64(i)<<18, 256<<10, nil)
	}
	select {
	case <-served:
	case <-time.After(20 * time.Second):
		t.Fatal("the connection was not dropped")
	}
	st := s.Stats()
	assert.Equal(t, int64(1), st.IOTimeouts)
	// The reader, waiting for the next request, is stopped by the reply
	// writer's timeout: that is no idle timeout (none is set).
	assert.Zero(t, st.IdleTimeouts)
	assert.Zero(t, st.InFlightBytes)
	require.NoError(t, s.Close())
}

func TestStalledClientLeavesBudgetForOthers(t *testing.T) {
	// A client that sends large READs and never reads the replies holds
	// their buffers until IOTimeout. With the default per-connection
	// bound (half the server-wide budget) it cannot hold the whole budget,
	// so another client's large READ is served at once instead of waiting
	// for the stalled one to be dropped (it used to wait IOTimeout).
	const blk = 1 << 20
	dev := newMemDev(8 << 20)
	for i := range dev.data {
		dev.data[i] = byte(i / 4096)
	}
	opts := oneExport(dev)
	opts.MaxPayload = blk
	opts.MaxTotalInFlightBytes = 4 * blk
	opts.IOTimeout = time.Minute
	s, err := NewServer(opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	pipeClient := func() *client {
		a, b := net.Pipe() // no buffer: a reply write blocks until the client reads
		go s.ServeConn(a)
		cl := &client{t: t, c: b, br: bufioReader(b), pending: map[uint64]pendingReq{}}
		_ = b.SetDeadline(time.Now().Add(time.Minute))
		cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
		require.Equal(t, repAck, cl.info(optGo, "disk").final)
		return cl
	}
	stalled := pipeClient()
	var reqs []byte
	for i := range 6 {
		_, b := stalled.request(cmdRead, 0, uint64(i)*blk, blk, nil)
		reqs = append(reqs, b...)
	}
	go func() { _, _ = stalled.c.Write(reqs) }() // blocks once its reader stops reading
	require.Eventually(t, func() bool { return s.Stats().InFlightBytes == 2*blk }, 10*time.Second, time.Millisecond,
		"the stalled client holds its connection's bound, half the budget")
	time.Sleep(50 * time.Millisecond)
	assert.Equal(t, int64(2*blk), s.Stats().InFlightBytes, "a connection held more than its bound")

	other := pipeClient()
	start := time.Now()
	got := other.read(6*blk, blk)
	assert.Less(t, time.Since(start), 10*time.Second, "the other client's READ waited for the stalled one")
	assert.Equal(t, dev.snapshot(6*blk, blk), got)
	assert.Zero(t, s.Stats().IOTimeouts)
}

func TestIdleTimeout(t *testing.T) {
	dev := gatedDev(1 << 20)
	opts := oneExport(dev)
	opts.IdleTimeout = 100 * time.Millisecond
	ts := startServer(t, opts)
	cl := connect(t, ts, "disk", false)

	// A request in flight is not idleness, however long it takes.
	cl.send(cmdRead, 0, 0, 4096, nil)
	<-dev.entered
	time.Sleep(5 * opts.IdleTimeout)
	assert.Zero(t, ts.s.Stats().IdleTimeouts)
	close(dev.gate)
	assert.Zero(t, cl.readReply().errno)

	// With nothing in flight and no new request, the connection is closed.
	cl.expectClosedNow()
	st := ts.s.Stats()
	assert.Equal(t, int64(1), st.IdleTimeouts)
	assert.Zero(t, st.IOTimeouts)
}

// dialRefused connects, reads the greeting connection's greeting and sends client flags.
func dialRefused(t *testing.T, ts *testServer) *client {
	t.Helper()
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	return cl
}

func TestMaxConnectionsRefusesPolitely(t *testing.T) {
	opts := oneExport(newMemDev(1 << 20))
	opts.MaxConnections = 2
	ts := startServer(t, opts)
	first := connect(t, ts, "disk", false)
	inHandshake := dial(t, ts) // a connection in the handshake counts too
	inHandshake.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	require.Eventually(t, func() bool { return ts.s.Stats().ActiveConnections == 2 }, 10*time.Second, time.Millisecond)

	// The third is greeted; every option is answered with a policy error
	// naming the limit; ABORT is acknowledged.
	cl := dialRefused(t, ts)
	cl.sendOpt(optStructuredReply, nil)
	r := cl.readOptReply()
	assert.Equal(t, repErrPolicy, r.typ)
	assert.Contains(t, string(r.data), "at most 2")
	res := cl.info(optGo, "disk")
	assert.Equal(t, repErrPolicy, res.final)
	cl.sendOpt(optAbort, nil)
	assert.Equal(t, repAck, cl.readOptReply().typ)
	cl.expectEOF()

	// EXPORT_NAME has no error reply: the connection is closed.
	cl = dialRefused(t, ts)
	cl.sendOpt(optExportName, []byte("disk"))
	cl.expectClosedNow()
	assert.Equal(t, int64(2), ts.s.Stats().RefusedConnections)

	// The served connections are unaffected, and a freed slot is reused.
	assert.Len(t, first.read(0, 4096), 4096)
	require.NoError(t, inHandshake.c.Close())
	require.Eventually(t, func() bool { return ts.s.Stats().ActiveConnections == 1 }, 10*time.Second, time.Millisecond)
	again := connect(t, ts, "disk", false)
	assert.Len(t, again.read(0, 4096), 4096)
}

func TestMaxConnectionsBoundsRefusals(t *testing.T) {
	// Refusals are themselves bounded: beyond maxRefusing at once, extra
	// connections are closed at accept, before any greeting.
	opts := oneExport(newMemDev(1 << 20))
	opts.MaxConnections = 1
	ts := startServer(t, opts)
	connect(t, ts, "disk", false)
	for range maxRefusing {
		dialRefused(t, ts) // greeted, then stalls
	}
	cl := dial(t, ts)
	cl.expectClosedNow()
	assert.Equal(t, int64(maxRefusing+1), ts.s.Stats().RefusedConnections)
}

func TestServeConnRefusedOverLimit(t *testing.T) {
	opts := oneExport(newMemDev(1 << 20))
	opts.MaxConnections = 1
	s, err := NewServer(opts)
	require.NoError(t, err)
	defer s.Close()
	a, b := net.Pipe()
	go s.ServeConn(a)
	held := &client{t: t, c: b, br: bufioReader(b), pending: map[uint64]pendingReq{}}
	held.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)

	a2, b2 := net.Pipe()
	done := make(chan struct{})
	go func() { s.ServeConn(a2); close(done) }()
	cl := &client{t: t, c: b2, br: bufioReader(b2), pending: map[uint64]pendingReq{}}
	_ = b2.SetDeadline(time.Now().Add(20 * time.Second))
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	assert.Equal(t, repErrPolicy, cl.info(optGo, "disk").final)
	cl.sendOpt(optAbort, nil)
	assert.Equal(t, repAck, cl.readOptReply().typ)
	<-done
}

func TestShutdownAbortsReaderWaitingForBudget(t *testing.T) {
	// A reader blocked on the server budget must not hold up Shutdown: its
	// request is answered with ESHUTDOWN, while the requests that hold the
	// budget finish normally.
	const blk = 256 << 10
	dev := gatedDev(2 << 20)
	s, err := NewServer(budgetOpts(dev))
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = s.Serve(l) }()
	ts := &testServer{s: s, addr: l.Addr()}
	hog := connect(t, ts, "disk", false)
	hog.send(cmdRead, 0, 0, blk, nil)
	hog.send(cmdRead, 0, blk, blk, nil)
	<-dev.entered
	<-dev.entered
	waiter := connect(t, ts, "disk", false)
	waiter.send(cmdRead, 0, 2*blk, blk, nil)
	waitQueued(t, &s.budget, 1)

	var shutDone atomic.Bool
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(context.Background()); shutDone.Store(true) }()
	r := waiter.readReply()
	assert.Equal(t, errnoShutdown, r.errno)
	waiter.expectEOF()
	assert.False(t, shutDone.Load(), "Shutdown returned while reads were executing")
	close(dev.gate)
	require.NoError(t, <-done)
	for range 2 {
		assert.Zero(t, hog.readReply().errno)
	}
	assert.Zero(t, s.Stats().InFlightBytes)
}

func TestRefusedClientWithBadFlagsIsClosed(t *testing.T) {
	opts := oneExport(newMemDev(1 << 20))
	opts.MaxConnections = 1
	ts := startServer(t, opts)
	connect(t, ts, "disk", false)
	cl := dial(t, ts)
	cl.readFull(18)
	cl.write(binary.BigEndian.AppendUint32(nil, 1<<31))
	cl.expectClosedNow()
}
