package raid_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/clock"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// flip is one corruption a scrub test makes on disk: bytes of role's
// chunk in row, at offset in of the chunk, are inverted.
type flip struct {
	row  int64
	role int
	in   int64
	n    int
}

// flipBytes inverts the bytes of f in the member's data region, behind the
// array's back, as bit rot would.
func flipBytes(t *testing.T, r *rig, chunk int64, f flip) {
	t.Helper()
	m, err := superblock.Read(r.mem[f.role])
	require.NoError(t, err)
	off := int64(m.DataOffset) + f.row*chunk + f.in
	b := make([]byte, f.n)
	_, err = r.mem[f.role].ReadAt(b, off)
	require.NoError(t, err)
	for i := range b {
		b[i] ^= 0x5a
	}
	_, err = r.mem[f.role].WriteAt(b, off)
	require.NoError(t, err)
}

func scrub(t *testing.T, a *raid.Array, repair bool) (raid.CheckResult, error) {
	t.Helper()
	s, err := a.StartScrub(repair)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := s.Wait(ctx)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	return res, err
}

// TestScrubFindsAndRepairsFlips: bytes flipped on disk in mirror copies,
// RAID5 data and parity, and RAID6 data, P and Q are each found by a
// check (one mismatch per flip, on the right row), repaired by a check
// with repair, and a second check is clean. RAID6 locates the corrupted
// chunk itself; mirrors trust the first readable copy, as md does, and say
// so; RAID5 recomputes parity.
func TestScrubFindsAndRepairsFlips(t *testing.T) {
	const chunk = 16 << 10
	const rows = 12
	type tc struct {
		name  string
		level stripe.Level
		n     int
		flips func(g stripe.Geometry) []flip
		// intact: the repair restores the data as written (false: RAID5
		// data flips, where parity follows the data, and flips of a
		// mirror's first copy, which wins).
		intact  bool
		located bool // the report names the flipped role as located
		role    func(g stripe.Geometry, f flip) int
	}
	same := func(_ stripe.Geometry, f flip) int { return f.role }
	cases := []tc{
		{"raid1/2", stripe.RAID1, 2, func(stripe.Geometry) []flip {
			return []flip{{1, 1, 100, 7}, {4, 1, 0, 1}, {9, 1, chunk - 3, 3}}
		}, true, false, same},
		{"raid1/3", stripe.RAID1, 3, func(stripe.Geometry) []flip {
			return []flip{{2, 1, 10, 4}, {5, 2, 4000, 100}}
		}, true, false, same},
		{"raid10/4", stripe.RAID10, 4, func(stripe.Geometry) []flip {
			return []flip{{0, 1, 5, 5}, {3, 3, 2048, 9}, {7, 1, 0, 4096}}
		}, true, false, same},
		{"raid5/data", stripe.RAID5, 4, func(g stripe.Geometry) []flip {
			return []flip{{1, g.DataMember(1, 0), 77, 3}, {6, g.DataMember(6, 2), 0, 512}}
		}, false, false, func(g stripe.Geometry, f flip) int { return g.ParityMember(f.row) }},
		{"raid5/parity", stripe.RAID5, 4, func(g stripe.Geometry) []flip {
			return []flip{{2, g.ParityMember(2), 9, 1}, {3, g.ParityMember(3), 100, 1000}, {11, g.ParityMember(11), chunk - 1, 1}}
		}, true, false, func(g stripe.Geometry, f flip) int { return g.ParityMember(f.row) }},
		{"raid6/data", stripe.RAID6, 5, func(g stripe.Geometry) []flip {
			return []flip{{0, g.DataMember(0, 0), 1, 1}, {4, g.DataMember(4, 1), 300, 40}, {8, g.DataMember(8, 2), chunk - 8, 8}}
		}, true, true, same},
		{"raid6/P", stripe.RAID6, 6, func(g stripe.Geometry) []flip {
			return []flip{{1, g.ParityMember(1), 0, 16}, {10, g.ParityMember(10), 5000, 1}}
		}, true, true, same},
		{"raid6/Q", stripe.RAID6, 4, func(g stripe.Geometry) []flip {
			return []flip{{3, g.QMember(3), 64, 64}, {7, g.QMember(7), 0, chunk}}
		}, true, true, same},
		{"raid6/mixed", stripe.RAID6, 6, func(g stripe.Geometry) []flip {
			return []flip{{2, g.DataMember(2, 3), 10, 10}, {5, g.QMember(5), 0, 1}, {6, g.ParityMember(6), 1, 1}, {9, g.DataMember(9, 0), 0, chunk}}
		}, true, true, same},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(c.n, levelSizeFor(c.level, chunk, rows))
			var evMu sync.Mutex
			var events []raid.Event
			a := createArray(t, r.devs, raid.CreateOptions{Name: "sc", Level: c.level, Chunk: chunk},
				raid.Options{CleanDelay: -1, OnEvent: func(e raid.Event) { evMu.Lock(); events = append(events, e); evMu.Unlock() }})
			want := fill(t, a, 31)
			require.NoError(t, a.Sync())
			g := a.Geometry()
			flips := c.flips(g)
			for _, f := range flips {
				flipBytes(t, r, chunk, f)
			}

			res, err := scrub(t, a, false)
			require.ErrorIs(t, err, raid.ErrInconsistent)
			assert.EqualValues(t, len(flips), res.Inconsistent, "%s", res)
			assert.EqualValues(t, len(flips), res.Mismatches, "%s", res)
			assert.EqualValues(t, rows-len(flips), res.Verified)
			assert.Zero(t, res.Repaired)
			require.Len(t, res.Findings, len(flips))
			for i, f := range flips {
				got := res.Findings[i]
				assert.Equal(t, f.row, got.Row, "finding %d: %s", i, got)
				assert.Equal(t, c.role(g, f), got.Role, "finding %d: %s", i, got)
				assert.Equal(t, c.located, got.Located, "finding %d: %s", i, got)
				assert.False(t, got.Repaired)
				if c.located || c.level != stripe.RAID5 {
					assert.Equal(t, f.row*chunk+f.in, got.Offset, "finding %d: %s", i, got)
				}
				if c.level == stripe.RAID1 || c.level == stripe.RAID10 {
					assert.Contains(t, got.Detail, "first readable copy")
				}
			}

			res, err = scrub(t, a, true)
			require.NoError(t, err, "every mismatch is repaired: %s", res)
			assert.EqualValues(t, len(flips), res.Mismatches, "%s", res)
			assert.EqualValues(t, len(flips), res.Repaired, "%s", res)
			assert.EqualValues(t, len(flips), res.RepairedRows, "%s", res)
			for i, f := range res.Findings {
				assert.True(t, f.Repaired, "finding %d: %s", i, f)
			}
			assert.Positive(t, a.Status().Stats.ScrubBytesWritten)

			res, err = scrub(t, a, false)
			require.NoError(t, err)
			assert.True(t, res.Consistent(), "%s", res)
			if c.intact {
				requireContent(t, a, want, "the repair restored what was written")
			}
			st := a.Status()
			require.NotNil(t, st.LastScrub)
			assert.Nil(t, st.Scrub)
			assert.EqualValues(t, rows, st.LastScrub.Done)
			assert.False(t, st.LastScrubFinished.IsZero())

			// Events reach the hook from a goroutine of their own.
			require.Eventually(t, func() bool {
				evMu.Lock()
				defer evMu.Unlock()
				n := 0
				for _, e := range events {
					if e.Kind == raid.EventScrubFinished {
						n++
					}
				}
				return n == 3
			}, 10*time.Second, time.Millisecond)
			evMu.Lock()
			defer evMu.Unlock()
			var kinds []string
			finished := 0
			repaired := 0
			for _, e := range events {
				switch e.Kind {
				case raid.EventScrubStarted, raid.EventScrubFinished:
					kinds = append(kinds, string(e.Kind))
				case raid.EventScrubRepaired:
					repaired++
				}
				if e.Kind == raid.EventScrubFinished && finished == 0 {
					finished++
					assert.Contains(t, e.Detail, fmt.Sprintf("check: %d mismatches", len(flips)))
				}
			}
			assert.Equal(t, strings.Repeat("scrub-started scrub-finished ", 3), strings.Join(kinds, " ")+" ")
			assert.Equal(t, len(flips), repaired)
		})
	}
}

// TestScrubMirrorFirstCopyWins: without checksums the first readable copy
// wins, as in md, even when it is the one that rotted: the other copies
// are reported and, by a repair, overwritten with it. The report says which
// rule chose the copy.
func TestScrubMirrorFirstCopyWins(t *testing.T) {
	const chunk = 8 << 10
	r := newRig(3, levelSizeFor(stripe.RAID1, chunk, 4))
	a := createArray(t, r.devs, raid.CreateOptions{Name: "fc", Level: stripe.RAID1, Chunk: chunk}, raid.Options{CleanDelay: -1})
	want := fill(t, a, 8)
	require.NoError(t, a.Sync())
	flipBytes(t, r, chunk, flip{2, 0, 10, 4})
	res, err := scrub(t, a, true)
	require.NoError(t, err)
	assert.EqualValues(t, 1, res.Inconsistent)
	require.EqualValues(t, 2, res.Mismatches, "copies 1 and 2 differ from copy 0: %s", res)
	for i, f := range res.Findings {
		assert.Equal(t, i+1, f.Role)
		assert.False(t, f.Located)
		assert.Contains(t, f.Detail, "no checksums: the first readable copy (role 0) wins")
	}
	got := make([]byte, 4)
	_, err = a.ReadAt(got, 2*chunk+10)
	require.NoError(t, err)
	assert.NotEqual(t, want[2*chunk+10:2*chunk+14], got, "the rotten first copy won")
	checkConsistent(t, a)
}

// trustRole is a CopyVerifier whose checksums confirm only role's copies.
type trustRole int

func (r trustRole) VerifyCopy(c raid.Copy) (ok, known bool) { return c.Member == int(r), true }

// TestScrubCopyVerifierPicksCopy: with a CopyVerifier (the seam for
// per-block checksums) the copy it confirms wins, and the finding is
// located.
func TestScrubCopyVerifierPicksCopy(t *testing.T) {
	const chunk = 8 << 10
	r := newRig(2, levelSizeFor(stripe.RAID1, chunk, 4))
	a := createArray(t, r.devs, raid.CreateOptions{Name: "cv", Level: stripe.RAID1, Chunk: chunk}, raid.Options{CleanDelay: -1})
	want := fill(t, a, 8)
	require.NoError(t, a.Sync())
	a.SetCopyVerifier(trustRole(1))
	flipBytes(t, r, chunk, flip{1, 0, 0, 100})
	res, err := scrub(t, a, true)
	require.NoError(t, err)
	require.Len(t, res.Findings, 1)
	f := res.Findings[0]
	assert.Equal(t, 0, f.Role)
	assert.True(t, f.Located)
	assert.True(t, f.Repaired)
	assert.Contains(t, f.Detail, "role 1 matches its checksum")
	requireContent(t, a, want, "the confirmed copy won")
}

// TestScrubRAID6TwoChunksInOneRow: two wrong chunks in one row fit no
// single chunk: the check reports the row unlocated, and the repair
// recomputes P and Q from the data, as md does.
func TestScrubRAID6TwoChunksInOneRow(t *testing.T) {
	const chunk = 8 << 10
	r := newRig(5, levelSizeFor(stripe.RAID6, chunk, 4))
	a := createArray(t, r.devs, raid.CreateOptions{Name: "sc", Level: stripe.RAID6, Chunk: chunk}, raid.Options{CleanDelay: -1})
	fill(t, a, 3)
	g := a.Geometry()
	// (The same bytes flipped at the same offsets of two data chunks
	// would cancel in P and look like a wrong Q: any single-error locator
	// has that blind spot.)
	flipBytes(t, r, chunk, flip{1, g.DataMember(1, 0), 0, 4})
	flipBytes(t, r, chunk, flip{1, g.DataMember(1, 2), 100, 4})
	res, err := scrub(t, a, false)
	require.ErrorIs(t, err, raid.ErrInconsistent)
	require.Len(t, res.Findings, 1)
	assert.Equal(t, -1, res.Findings[0].Role)
	assert.False(t, res.Findings[0].Located)
	res, err = scrub(t, a, true)
	require.NoError(t, err)
	assert.EqualValues(t, 1, res.Repaired)
	assert.Contains(t, res.Findings[0].Detail, "P and Q recomputed")
	checkConsistent(t, a, "after the repair")
}

// TestScrubDegraded: a check of a degraded array never reports it
// consistent: it counts the rows it could not verify, and what it can
// still compare it compares (a RAID6 row missing one member). A RAID6 row
// missing its Q, with a wrong data chunk, mismatches in P; one syndrome
// cannot tell P from the data chunk, so repair leaves the row alone (it
// used to recompute P from the wrong data, and the corruption became
// permanent). With the member back, both syndromes locate the data chunk,
// and the repair restores the bytes written.
func TestScrubDegraded(t *testing.T) {
	const chunk = 8 << 10
	const rows = 6
	for _, c := range []struct {
		level            stripe.Level
		n                int
		wantUnverifiable int64
	}{{stripe.RAID5, 4, rows}, {stripe.RAID1, 2, rows}, {stripe.RAID6, 5, 0}} {
		t.Run(c.level.String(), func(t *testing.T) {
			r := newRig(c.n, levelSizeFor(c.level, chunk, rows))
			a := createArray(t, r.devs, raid.CreateOptions{Name: "dg", Level: c.level, Chunk: chunk}, raid.Options{CleanDelay: 10 * time.Millisecond})
			want := fill(t, a, 5)
			waitBitmapClean(t, a) // so that the re-add below resyncs nothing
			failRole(t, a, 0)
			g := a.Geometry()
			if c.level == stripe.RAID6 {
				// A data chunk of a row whose Q is on the missing member.
				row := int64(0)
				for ; row < rows; row++ {
					if g.QMember(row) == 0 {
						break
					}
				}
				require.Less(t, row, int64(rows))
				data := 0
				for data == 0 || data == g.ParityMember(row) {
					data++
				}
				flipBytes(t, r, chunk, flip{row, data, 3, 3})
			}
			res, err := scrub(t, a, false)
			assert.False(t, res.Consistent())
			assert.Equal(t, c.wantUnverifiable, res.Unverifiable, "%s", res)
			if c.wantUnverifiable > 0 {
				require.ErrorIs(t, err, raid.ErrUnverifiable)
				assert.Contains(t, res.String(), "could not be verified because the array is degraded")
				return
			}
			require.ErrorIs(t, err, raid.ErrInconsistent)
			assert.EqualValues(t, 1, res.Mismatches)
			res, err = scrub(t, a, true)
			require.ErrorIs(t, err, raid.ErrInconsistent, "%s", res)
			assert.EqualValues(t, 0, res.Repaired, "one syndrome cannot locate")
			require.Len(t, res.Findings, 1)
			assert.Contains(t, res.Findings[0].Detail, "not repaired. If the missing member's device is intact, re-add it and repair")
			assert.Equal(t, -1, res.Findings[0].Role, "the wrong chunk is not known")

			require.NoError(t, a.Release(r.devs[0].Path))
			require.NoError(t, a.AddMember(r.devs[0], false)) // a re-add: nothing was written since
			waitIdle(t, a)
			res, err = scrub(t, a, true)
			require.NoError(t, err, "%s", res)
			assert.EqualValues(t, 1, res.Repaired, "%s", res)
			res, err = scrub(t, a, false)
			require.NoError(t, err)
			assert.True(t, res.Consistent())
			requireContent(t, a, want, "repaired with both syndromes")
		})
	}
}

// TestScrubSkipsHoles: rows never written are holes on every member and
// are counted verified without being read.
func TestScrubSkipsHoles(t *testing.T) {
	const chunk = 8 << 10
	dir := t.TempDir()
	var devs []raid.Device
	for i := range 3 {
		p := filepath.Join(dir, fmt.Sprint("m", i))
		require.NoError(t, member.CreateSparse(p, levelSizeFor(stripe.RAID5, chunk, 16)))
		f, err := member.Open(p, member.Options{})
		require.NoError(t, err)
		devs = append(devs, raid.Device{Path: p, Member: f})
	}
	a := createArray(t, devs, raid.CreateOptions{Name: "ho", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1})
	defer closeChecked(t, a)
	buf := make([]byte, 2*chunk)
	randomBytes(buf, 9)
	_, err := a.WriteAt(buf, 4*a.Geometry().StripeWidth()+chunk)
	require.NoError(t, err)
	res, err := scrub(t, a, false)
	require.NoError(t, err)
	assert.True(t, res.Consistent())
	assert.EqualValues(t, 14, res.Skipped, "two rows hold data: %s", res)
}

// TestScrubRefusesSecond: one scrub at a time; a repair of a read-only
// array is refused.
func TestScrubRefusesSecond(t *testing.T) {
	const chunk = 8 << 10
	clk := clock.NewFake(time.Unix(1e9, 0))
	r := newRig(2, levelSizeFor(stripe.RAID1, chunk, 8))
	a := createArray(t, r.devs, raid.CreateOptions{Name: "two", Level: stripe.RAID1, Chunk: chunk},
		raid.WithClock(raid.Options{CleanDelay: -1, RebuildMinRate: chunk, RebuildMaxRate: chunk}, clk))
	fill(t, a, 1)
	s, err := a.StartScrub(false)
	require.NoError(t, err)
	_, err = a.StartScrub(true)
	require.ErrorIs(t, err, raid.ErrScrubRunning)
	st := a.Status()
	require.NotNil(t, st.Scrub)
	assert.Equal(t, "check", st.Scrub.Kind)
	for {
		select {
		case <-s.Done():
			res, err := s.Wait(context.Background())
			require.NoError(t, err)
			assert.EqualValues(t, 8, res.Verified)
			return
		default:
		}
		if clk.WaitSleepers(1, time.Millisecond) {
			clk.AdvanceToNext()
		}
	}
}

// TestScrubResumesAfterRestart: a scrub interrupted by Close records its
// position in the superblocks; the next assembly resumes it there, and it
// still finds what lies beyond.
func TestScrubResumesAfterRestart(t *testing.T) {
	const chunk = 8 << 10
	const rows = 64
	r := newRig(2, levelSizeFor(stripe.RAID1, chunk, rows))
	// 20 rows a second: the scrub takes over three seconds.
	opts := raid.Options{CleanDelay: -1, RebuildMinRate: 20 * chunk, RebuildMaxRate: 20 * chunk, ProgressInterval: 50 * time.Millisecond}
	a := createArray(t, r.devs, raid.CreateOptions{Name: "rs", Level: stripe.RAID1, Chunk: chunk}, opts)
	fill(t, a, 2)
	require.NoError(t, a.Sync())
	flipBytes(t, r, chunk, flip{rows - 2, 1, 0, 1})
	_, err := a.StartScrub(true)
	require.NoError(t, err)
	for a.Status().Scrub.Done < 10 {
		time.Sleep(5 * time.Millisecond)
	}
	require.NoError(t, a.Close())
	m, err := superblock.Read(r.mem[0])
	require.NoError(t, err)
	require.NotZero(t, m.Scrub&superblock.ScrubRunning, "the superblocks record a scrub in progress")
	require.NotZero(t, m.Scrub&superblock.ScrubRepair)
	at := int64(m.Scrub & superblock.ScrubRowMask)
	require.GreaterOrEqual(t, at, int64(10))
	require.Less(t, at, int64(rows))

	b := assembleArray(t, r.devs, raid.Options{CleanDelay: -1})
	var st raid.Status
	deadline := time.Now().Add(20 * time.Second)
	for {
		st = b.Status()
		if st.LastScrub != nil {
			break
		}
		require.True(t, time.Now().Before(deadline), "the resumed scrub did not finish")
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, at, st.LastScrub.ResumedAt)
	assert.EqualValues(t, rows-at, st.LastScrub.Rows)
	assert.EqualValues(t, 1, st.LastScrub.Repaired, "%+v %+v %+v", st.LastScrub, st.LastResync, st.History)
	m, err = superblock.Read(r.mem[0])
	require.NoError(t, err)
	assert.Zero(t, m.Scrub&superblock.ScrubRunning)
	assert.NotZero(t, m.Scrub, "the finish time is recorded")
	checkConsistent(t, b, "after the resumed repair")
	closeChecked(t, b)
}

// TestScrubSchedule: with ScrubInterval a scrub starts an interval after
// the array's creation, and the next an interval after that one finished;
// the finish time survives a restart, so a restart does not scrub at once.
func TestScrubSchedule(t *testing.T) {
	const chunk = 8 << 10
	start := time.Now()
	clk := clock.NewFake(start)
	r := newRig(2, levelSizeFor(stripe.RAID1, chunk, 4))
	opts := raid.WithClock(raid.Options{CleanDelay: -1, ScrubInterval: time.Hour, ScrubRepair: true}, clk)
	a := createArray(t, r.devs, raid.CreateOptions{Name: "sch", Level: stripe.RAID1, Chunk: chunk}, opts)
	fill(t, a, 4)
	flipBytes(t, r, chunk, flip{1, 1, 0, 1})
	require.True(t, clk.WaitSleepers(1, 5*time.Second))
	assert.Nil(t, a.Status().LastScrub, "no scrub before the interval")
	clk.Advance(time.Hour + time.Minute)
	waitScrub := func(a *raid.Array) *raid.ScrubStatus {
		deadline := time.Now().Add(20 * time.Second)
		for {
			if s := a.Status().LastScrub; s != nil {
				return s
			}
			require.True(t, time.Now().Before(deadline), "no scheduled scrub")
			time.Sleep(time.Millisecond)
		}
	}
	s := waitScrub(a)
	assert.Equal(t, "repair", s.Kind)
	assert.EqualValues(t, 1, s.Repaired)
	require.NoError(t, a.Close())

	// Restarted 10 minutes later: the next scrub is due 50 minutes on.
	clk.Advance(10 * time.Minute)
	b := assembleArray(t, r.devs, opts)
	defer closeChecked(t, b)
	require.True(t, clk.WaitSleepers(1, 5*time.Second))
	assert.Nil(t, b.Status().LastScrub)
	assert.Nil(t, b.Status().Scrub)
	clk.Advance(40 * time.Minute)
	require.True(t, clk.WaitSleepers(1, 5*time.Second))
	assert.Nil(t, b.Status().LastScrub, "not due yet")
	assert.Nil(t, b.Status().Scrub, "not due yet")
	clk.Advance(11 * time.Minute)
	s = waitScrub(b)
	assert.True(t, s.Consistent())
}

// TestScrubConcurrentWrites: a repairing scrub runs while clients write;
// it reports nothing (writes keep rows consistent) and the data is what
// the clients wrote.
func TestScrubConcurrentWrites(t *testing.T) {
	const chunk = 4 << 10
	for _, level := range []stripe.Level{stripe.RAID1, stripe.RAID5, stripe.RAID6, stripe.RAID10} {
		t.Run(level.String(), func(t *testing.T) {
			n := 4
			if level == stripe.RAID1 {
				n = 2
			}
			r := newRig(n, levelSizeFor(level, chunk, 64))
			a := createArray(t, r.devs, raid.CreateOptions{Name: "cw", Level: level, Chunk: chunk}, raid.Options{CleanDelay: -1})
			want := fill(t, a, 6)
			var wg sync.WaitGroup
			stop := make(chan struct{})
			var mu sync.Mutex
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int64(0); ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					off := (i * 7919 * 512) % (a.Size() - 3000)
					b := make([]byte, 3000)
					randomBytes(b, i)
					mu.Lock()
					copy(want[off:], b)
					_, err := a.WriteAt(b, off)
					mu.Unlock()
					if !assert.NoError(t, err) {
						return
					}
				}
			}()
			for range 3 {
				res, err := scrub(t, a, true)
				require.NoError(t, err, "%s", res)
				assert.Zero(t, res.Mismatches, "%s", res)
			}
			close(stop)
			wg.Wait()
			requireContent(t, a, want, "after scrubs during writes")
			checkConsistent(t, a)
		})
	}
}
