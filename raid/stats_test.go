package raid_test

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/clock"
	"github.com/raidd/raidd/stripe"
)

// newRAID5 creates a RAID5 array of n memory members (plus spares) with
// rows rows of chunk bytes.
func newRAID5(t *testing.T, n, spares int, chunk, rows int64, o raid.Options) (*rig, *raid.Array) {
	t.Helper()
	r := newRig(n+spares, memberSizeFor(chunk, rows))
	return r, createArray(t, r.devs[:n], raid.CreateOptions{Name: "acct", Level: stripe.RAID5, Chunk: chunk, Spares: r.devs[n:]}, o)
}

// TestWriteAmplification checks the client-side counters of small
// deterministic workloads on a 4-member RAID5: member bytes are 4/3 of the
// client's for full stripes whatever the data, and elided zero blocks count
// as written in the amplification but as holes in the member counters.
func TestWriteAmplification(t *testing.T) {
	const chunk = 16 << 10
	_, a := newRAID5(t, 4, 0, chunk, 16, raid.Options{CleanDelay: -1})
	width := a.Geometry().StripeWidth()
	w := 4 * width

	data := make([]byte, w)
	rand.New(rand.NewSource(1)).Read(data)
	_, err := a.WriteAt(data, 0)
	require.NoError(t, err)
	st := a.Status().Stats
	assert.Equal(t, w, st.ClientBytesWritten)
	assert.Equal(t, w*4/3, st.MemberBytesWritten, "full stripes: data plus one parity chunk in three")
	assert.Zero(t, st.MemberBytesElided)
	assert.InDelta(t, 4.0/3.0, st.WriteAmplification, 1e-9)

	// All-zero full stripes: every member block, parity included, is
	// punched; the amplification stays what the layout costs.
	_, err = a.WriteAt(make([]byte, w), 4*width)
	require.NoError(t, err)
	st = a.Status().Stats
	assert.Equal(t, 2*w, st.ClientBytesWritten)
	assert.Equal(t, w*4/3, st.MemberBytesWritten, "zero stripes write nothing")
	assert.Equal(t, w*4/3, st.MemberBytesElided, "zero stripes are punched, parity included")
	assert.InDelta(t, 4.0/3.0, st.WriteAmplification, 1e-9, "elided zeroes must not lower write amplification")

	assert.Zero(t, st.MemberBytesDiscarded+st.MemberBytesZeroWritten, "no client zeroing yet")
	assert.Zero(t, st.RebuildBytesWritten+st.ResyncBytesWritten+st.RepairBytesWritten)

	got := make([]byte, 8*width)
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, append(append([]byte{}, data...), make([]byte, w)...), got)
}

// TestBackgroundWritesAreNotClientWrites rebuilds and resyncs with no
// client I/O: the client counters and the amplification do not move; the
// background counters say what was written.
func TestBackgroundWritesAreNotClientWrites(t *testing.T) {
	const chunk, rows = 16 << 10, 12
	r, a := newRAID5(t, 4, 1, chunk, rows, raid.Options{CleanDelay: -1})
	want := fill(t, a, 4)
	before := a.Status().Stats
	require.NoError(t, a.FailMember(r.devs[1].Path))
	st := waitIdle(t, a)
	require.False(t, st.Degraded)
	assert.True(t, hasEvent(st, raid.EventRebuildFinished))
	requireContent(t, a, want, "after the rebuild")
	after := a.Status().Stats
	assert.Equal(t, before.MemberBytesWritten, after.MemberBytesWritten, "a rebuild writes no client bytes")
	assert.Equal(t, before.WriteAmplification, after.WriteAmplification)
	assert.Equal(t, int64(rows*chunk), after.RebuildBytesWritten, "every row is rebuilt (memory members cannot tell holes)")
	assert.Zero(t, after.ResyncBytesWritten)
	checkConsistent(t, a)

	// A crash, a stale parity chunk in row 0, reassembly: the resync
	// rewrites that chunk, and only that.
	_, err := a.WriteAt(want[:4096], 0) // the bitmap marks row 0's region
	require.NoError(t, err)
	a.Abandon()
	// Role 1 is on the spare now; the failed member's device stays out.
	devs := []raid.Device{r.devs[0], r.devs[4], r.devs[2], r.devs[3]}
	// (Past the written 4 KiB, whose parity the write-hole journal's
	// replay rewrites before the resync looks.)
	pm := a.Geometry().ParityMember(0)
	_, err = devs[pm].Member.WriteAt(make([]byte, 512), dataOffsetOf(stripe.RAID5, 4, chunk)+8192)
	require.NoError(t, err)
	b := assembleArray(t, devs, raid.Options{CleanDelay: -1})
	st = waitIdle(t, b)
	require.NotNil(t, st.LastResync, "the crash must cause a resync")
	requireContent(t, b, want, "after the resync")
	assert.Equal(t, int64(chunk), st.Stats.ResyncBytesWritten, "one parity chunk was stale")
	assert.Zero(t, st.Stats.MemberBytesWritten, "a resync writes no client bytes")
	assert.Zero(t, st.Stats.WriteAmplification)
}

// sparseMembers creates n sparse files of rows rows of chunk bytes.
func sparseMembers(t *testing.T, n int, chunk, rows int64) []raid.Device {
	t.Helper()
	dir := t.TempDir()
	var devs []raid.Device
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprint("m", i))
		require.NoError(t, member.CreateSparse(p, memberSizeFor(chunk, rows)))
		f, err := member.Open(p, member.Options{})
		require.NoError(t, err)
		if !f.CanDiscard() {
			t.Skipf("the file system of %s cannot punch holes", dir)
		}
		devs = append(devs, raid.Device{Path: p, Member: f})
	}
	return devs
}

// TestRateLimitChargesBytesMoved rebuilds a 10%-full RAID5 under a rate
// limit, on a fake clock: the limiter is charged for the rows that hold
// data, not for the rows rebuilt as holes, so the rebuild takes the time of
// its data rows at the limit: a tenth of what a full array's would.
func TestRateLimitChargesBytesMoved(t *testing.T) {
	const chunk, rows, full = 64 << 10, 40, 4
	const rate = 16 << 20
	rowTime := time.Duration(chunk) * time.Second / rate
	devs := sparseMembers(t, 4, chunk, rows)
	clk := clock.NewFake(time.Unix(1e9, 0))
	// No checkpoint during the test: the clock only moves to the workers'
	// deadlines.
	o := raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate, RebuildMaxRate: rate, ProgressInterval: time.Hour}, clk)
	a := createArray(t, devs[:3], raid.CreateOptions{Name: "rate", Level: stripe.RAID5, Chunk: chunk, Spares: devs[3:]}, o)
	width := a.Geometry().StripeWidth()
	data := make([]byte, full*width)
	rand.New(rand.NewSource(5)).Read(data)
	_, err := a.WriteAt(data, 0)
	require.NoError(t, err)
	require.Zero(t, a.Charged())
	start := clk.Now()
	require.NoError(t, a.FailMember(devs[0].Path))
	deadline := time.Now().Add(30 * time.Second)
	for a.Status().Recovery != nil {
		require.True(t, time.Now().Before(deadline), "the rebuild does not finish")
		// The checkpointer and at least one worker wait on the clock: move
		// it to the earliest worker's deadline.
		if clk.WaitSleepers(2, time.Millisecond) {
			clk.AdvanceToNext()
		}
	}
	st := a.Status()
	require.False(t, st.Degraded)
	assert.True(t, hasEvent(st, raid.EventRebuildFinished))
	requireContent(t, a, append(data, make([]byte, a.Size()-int64(len(data)))...), "after the rebuild")
	// Each data row reads a chunk from every source and writes one to the
	// new member: a chunk on the busiest member.
	assert.Equal(t, int64(full*chunk), a.Charged(), "only rows with data are charged")
	assert.Equal(t, full*rowTime, clk.Now().Sub(start), "the rebuild takes the time of its data rows at the limit")
	assert.Equal(t, int64(full*chunk), st.Stats.RebuildBytesWritten)
	assert.Equal(t, int64((rows-full)*chunk), st.Stats.RebuildBytesDiscarded)
}

// TestRebuildProgressSparse: on a sparse array the rebuild's progress
// reports the bytes it actually moved and their rate, and an ETA from the
// rows left at the rows-per-second pace (hole rows move no bytes), and the
// rebuild-finished event gives the bytes moved and their rate, not
// rows × chunk. The data sits in the last rows, so that the rebuild passes
// the holes at once and is then paced by the limiter on a fake clock.
func TestRebuildProgressSparse(t *testing.T) {
	const chunk, rows, full = 64 << 10, 256, 128 // data in 8 job windows of 16 rows at this rate
	const rate = 16 << 20
	rowTime := time.Duration(chunk) * time.Second / rate
	devs := sparseMembers(t, 4, chunk, rows)
	clk := clock.NewFake(time.Unix(1e9, 0))
	o := raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: rate, RebuildMaxRate: rate, ProgressInterval: time.Hour}, clk)
	a := createArray(t, devs[:3], raid.CreateOptions{Name: "prog", Level: stripe.RAID5, Chunk: chunk, Spares: devs[3:]}, o)
	width := a.Geometry().StripeWidth()
	data := make([]byte, full*width)
	rand.New(rand.NewSource(6)).Read(data)
	at := a.Size() - int64(len(data))
	_, err := a.WriteAt(data, at)
	require.NoError(t, err)
	start := clk.Now()
	require.NoError(t, a.FailMember(devs[0].Path))

	// A few data rows in, with both workers and the checkpointer asleep
	// on the clock, so the numbers hold still while they are read.
	for i := 0; i < 2; i++ {
		require.True(t, clk.WaitSleepers(jobSleepers, 10*time.Second), "the rebuild does not wait for the clock")
		clk.AdvanceToNext()
	}
	require.True(t, clk.WaitSleepers(jobSleepers, 10*time.Second), "the rebuild does not wait for the clock")
	p := a.Status().Recovery
	require.NotNil(t, p)
	el := clk.Now().Sub(start).Seconds()
	require.Positive(t, el)
	require.Positive(t, p.BytesMoved)
	assert.Less(t, p.BytesMoved, p.Done*chunk, "hole rows moved nothing: %+v", *p)
	assert.Zero(t, p.BytesMoved%chunk, "whole chunks of data rows: %+v", *p)
	assert.InDelta(t, float64(p.BytesMoved)/el, p.BytesPerSec, 1e-6, "bytes per second are the bytes moved: %+v", *p)
	assert.InDelta(t, float64(p.Done)/el, p.RowsPerSec, 1e-6, "rows per second: %+v", *p)
	assert.InDelta(t, float64(p.Total-p.Done)/p.RowsPerSec, p.ETASeconds, 1e-6, "ETA from the rows left: %+v", *p)

	deadline := time.Now().Add(30 * time.Second)
	for a.Status().Recovery != nil {
		require.True(t, time.Now().Before(deadline), "the rebuild does not finish")
		if clk.WaitSleepers(2, time.Millisecond) {
			clk.AdvanceToNext()
		}
	}
	st := a.Status()
	require.False(t, st.Degraded)
	elapsed := clk.Now().Sub(start)
	require.Positive(t, elapsed)
	require.LessOrEqual(t, elapsed, full*rowTime, "the rebuild takes at most the time of its data rows at the limit")
	moved := float64(full*chunk) / (1 << 20)
	want := fmt.Sprintf("%d rows in %s, %.1f MiB moved (%.1f MiB/s)", rows, elapsed.Round(time.Millisecond), moved, moved/elapsed.Seconds())
	var found bool
	for _, e := range st.History {
		if e.Kind == raid.EventRebuildFinished {
			found = true
			assert.Equal(t, want, e.Detail)
		}
	}
	assert.True(t, found, "no rebuild-finished event: %+v", st.History)
	requireContent(t, a, append(make([]byte, at), data...), "after the rebuild")
}
