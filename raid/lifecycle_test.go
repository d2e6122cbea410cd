package raid_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// gate is an injector that, once armed, holds the first operation of kind
// op (after skip more of them have passed) until it is released, and says
// when it has caught one. Failing is optional: with fail set, every write
// fails while armed (to make a member fail).
type gate struct {
	op      membertest.Op
	armed   atomic.Bool
	skip    atomic.Int64
	caught  chan struct{}
	release chan struct{}
	once    sync.Once
	fail    atomic.Bool
}

func newGate(op membertest.Op) *gate {
	return &gate{op: op, caught: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) MaybeError(op membertest.Op, off, n int64) error {
	if !g.armed.Load() {
		return nil
	}
	if g.fail.Load() && op == membertest.OpWrite {
		return fmt.Errorf("gate: write fails: %w", membertest.ErrInjected)
	}
	if op != g.op || g.skip.Add(-1) >= 0 {
		return nil
	}
	held := false
	g.once.Do(func() { held = true })
	if held {
		close(g.caught)
		<-g.release
	}
	return nil
}

// waitCaught waits until the gate holds an operation.
func (g *gate) waitCaught(t *testing.T) {
	t.Helper()
	select {
	case <-g.caught:
	case <-time.After(10 * time.Second):
		t.Fatal("the gated operation never happened")
	}
}

// gatedDevs returns n memory members, each behind its own gate.
func gatedDevs(n int, size int64, op membertest.Op) ([]raid.Device, []*gate) {
	var devs []raid.Device
	var gates []*gate
	for i := 0; i < n; i++ {
		g := newGate(op)
		gates = append(gates, g)
		devs = append(devs, raid.Device{Path: fmt.Sprintf("gate%d", i), Member: keep{membertest.Inject(member.NewMemory(size), g)}})
	}
	return devs, gates
}

// waitClosing waits until calls on a fail with ErrClosed (Close has begun).
func waitClosing(t *testing.T, a *raid.Array) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := a.ReadAt(make([]byte, 1), 0); err != nil {
			require.ErrorIs(t, err, raid.ErrClosed)
			return
		}
		require.True(t, time.Now().Before(deadline), "Close never began")
		time.Sleep(time.Millisecond)
	}
}

// TestMemberCallsAfterClose: every member command goes through the same
// gate as I/O. Before the fix ReplaceMember did not, and started a copy
// job on an array that Close had already stopped.
func TestMemberCallsAfterClose(t *testing.T) {
	const chunk = 64 << 10
	size := memberSizeFor(chunk, 8)
	r := newRig(3, size)
	a, err := raid.Create(r.devs[:2], raid.CreateOptions{Name: "closed", Level: stripe.RAID1, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	require.NoError(t, a.Close())

	err = a.ReplaceMember("0", r.devs[2], false)
	require.ErrorIs(t, err, raid.ErrClosed, "ReplaceMember after Close")
	assert.ErrorIs(t, a.AddMember(r.devs[2], false), raid.ErrClosed, "AddMember after Close")
	assert.ErrorIs(t, a.FailMember("0"), raid.ErrClosed, "FailMember after Close")
	assert.ErrorIs(t, a.RemoveMember("0"), raid.ErrClosed, "RemoveMember after Close")
	_, err = a.Check()
	assert.ErrorIs(t, err, raid.ErrClosed, "Check after Close")
	st := a.Status()
	assert.Nil(t, st.Recovery, "no job runs after Close")
	assert.False(t, hasEvent(st, raid.EventReplaceStarted), "no replace started after Close")
	assert.ErrorIs(t, a.Close(), raid.ErrClosed, "second Close")
}

// TestReplaceRacingClose runs ReplaceMember against Close: either the
// replace is refused with ErrClosed, or it started before Close, and then
// Close has stopped its job by the time it returns.
func TestReplaceRacingClose(t *testing.T) {
	const chunk = 64 << 10
	size := memberSizeFor(chunk, 16)
	for i := 0; i < 20; i++ {
		r := newRig(3, size)
		a, err := raid.Create(r.devs[:2], raid.CreateOptions{Name: "race", Level: stripe.RAID1, Chunk: chunk}, raid.Options{CleanDelay: -1, RebuildMaxRate: 1 << 20})
		require.NoError(t, err)
		var wg sync.WaitGroup
		var rerr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			rerr = a.ReplaceMember("0", r.devs[2], false)
		}()
		require.NoError(t, a.Close())
		wg.Wait()
		if rerr != nil {
			require.ErrorIs(t, rerr, raid.ErrClosed, "iteration %d", i)
		}
		assert.Nil(t, a.Status().Recovery, "iteration %d: a job still runs after Close", i)
	}
}

// TestCloseStopsJobsStartedByCallsInFlight: a write in flight when Close
// begins fails a member, and the spare it claims must not start a rebuild:
// Close waits for the calls in flight before it waits for the background
// jobs, and refuses new jobs from the moment it begins. Before the fix
// Close waited for the jobs first, so the rebuild started after that wait.
// The claim is held inside its superblock commit (the spare's sync) until
// Close has begun; the rebuild resumes at the next assembly instead.
func TestCloseStopsJobsStartedByCallsInFlight(t *testing.T) {
	const chunk = 64 << 10
	size := memberSizeFor(chunk, 8)
	devs, gates := gatedDevs(3, size, membertest.OpSync)
	a, err := raid.Create(devs[:2], raid.CreateOptions{Name: "inflight", Level: stripe.RAID1, Chunk: chunk, Spares: devs[2:]}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	buf := bytes.Repeat([]byte{0xa5}, chunk) // not zeroes: those become discards
	_, err = a.WriteAt(buf, 0)               // dirty now: the next write commits nothing
	require.NoError(t, err)

	// Member 0 fails the next write. The failure is committed (the spare's
	// first sync), then the spare is claimed (its second sync: held).
	gates[2].skip.Store(1)
	gates[2].armed.Store(true)
	gates[0].fail.Store(true)
	gates[0].skip.Store(1 << 40) // member 0 only fails writes
	gates[0].armed.Store(true)
	wrote := make(chan error, 1)
	go func() {
		_, err := a.WriteAt(buf, chunk)
		wrote <- err
	}()
	gates[2].waitCaught(t)
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	waitClosing(t, a)
	close(gates[2].release)
	require.NoError(t, <-wrote, "the write survives on member 1")
	require.NoError(t, <-closed)
	st := a.Status()
	assert.True(t, hasEvent(st, raid.EventSpareClaimed), "the spare was claimed before Close began")
	assert.False(t, hasEvent(st, raid.EventRebuildStarted), "a rebuild started after Close began")

	gates[0].armed.Store(false)
	a, err = raid.Assemble(devs, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	defer a.Close()
	assert.True(t, hasEvent(a.Status(), raid.EventRebuildStarted), "the claimed spare is rebuilt at the next assembly")
}

// TestCloseWaitsForCallsInFlight: Close waits for a call that is in
// flight, and returns as soon as it leaves.
func TestCloseWaitsForCallsInFlight(t *testing.T) {
	const chunk = 64 << 10
	size := memberSizeFor(chunk, 8)
	devs, gates := gatedDevs(2, size, membertest.OpRead)
	a, err := raid.Create(devs, raid.CreateOptions{Name: "wait", Level: stripe.RAID1, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	gates[0].armed.Store(true)
	gates[1].armed.Store(true)
	read := make(chan error, 1)
	go func() {
		_, err := a.ReadAt(make([]byte, 4096), 0)
		read <- err
	}()
	select {
	case <-gates[0].caught:
	case <-gates[1].caught:
	case <-time.After(10 * time.Second):
		t.Fatal("the read never reached a member")
	}
	closed := make(chan error, 1)
	go func() { closed <- a.Close() }()
	waitClosing(t, a)
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a read was in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	for _, g := range gates {
		close(g.release)
	}
	require.NoError(t, <-read)
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the last call left")
	}
}

// TestStatusDuringStalledCommit: a member whose superblock sync stalls
// holds up the commit (and the write that needs it), but not Status, which
// reads the member table without waiting for member I/O. Before the fix the
// commit held the table's lock across the superblock writes.
func TestStatusDuringStalledCommit(t *testing.T) {
	const chunk = 64 << 10
	size := memberSizeFor(chunk, 8)
	devs, gates := gatedDevs(2, size, membertest.OpSync)
	a, err := raid.Create(devs, raid.CreateOptions{Name: "stall", Level: stripe.RAID1, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	defer a.Close()
	require.False(t, a.Status().Dirty)
	gates[1].armed.Store(true) // the next superblock sync of member 1 stalls
	wrote := make(chan error, 1)
	go func() {
		_, err := a.WriteAt(make([]byte, 4096), 0) // marks the array dirty: a commit
		wrote <- err
	}()
	gates[1].waitCaught(t)
	status := make(chan raid.Status, 1)
	go func() { status <- a.Status() }()
	select {
	case st := <-status:
		assert.Equal(t, "raid1", st.Level)
	case <-time.After(5 * time.Second):
		close(gates[1].release)
		t.Fatal("Status waited for a stalled superblock write")
	}
	select {
	case err := <-wrote:
		t.Fatalf("the write returned (%v) before the dirty state was on every member", err)
	default:
	}
	close(gates[1].release)
	require.NoError(t, <-wrote)
	assert.True(t, a.Status().Dirty)
}
