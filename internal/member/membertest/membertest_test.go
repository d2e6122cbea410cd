package membertest_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
)

var (
	_ raid.Member = (*membertest.Faulty)(nil)
	_ raid.Member = (*membertest.Crashable)(nil)
)

func TestConformance(t *testing.T) {
	t.Run("crashable", func(t *testing.T) {
		membertest.TestMember(t, func(t *testing.T, size int64) raid.Member {
			return membertest.NewCrashable(size)
		})
	})
	t.Run("faulty/never", func(t *testing.T) {
		membertest.TestMember(t, func(t *testing.T, size int64) raid.Member {
			return membertest.Inject(member.NewMemory(size), membertest.Never())
		})
	})
	t.Run("faulty/toggle_off", func(t *testing.T) {
		membertest.TestMember(t, func(t *testing.T, size int64) raid.Member {
			return membertest.Inject(membertest.NewCrashable(size), membertest.NewToggle(membertest.Always()))
		})
	})
}

func TestOpString(t *testing.T) {
	cases := map[membertest.Op]string{
		membertest.OpRead:    "read",
		membertest.OpWrite:   "write",
		membertest.OpSync:    "sync",
		membertest.OpDiscard: "discard",
		membertest.Op(42):    "Op(42)",
	}
	for op, want := range cases {
		assert.Equal(t, want, op.String())
	}
}

// call is one operation asked of an injector.
type call struct {
	op     membertest.Op
	off, n int64
}

// decisions runs calls through inj and reports which ones it failed.
func decisions(inj membertest.Injector, calls []call) []bool {
	out := make([]bool, len(calls))
	for i, c := range calls {
		out[i] = inj.MaybeError(c.op, c.off, c.n) != nil
	}
	return out
}

func TestInjectors(t *testing.T) {
	r := func(off, n int64) call { return call{membertest.OpRead, off, n} }
	w := func(off, n int64) call { return call{membertest.OpWrite, off, n} }
	s := call{op: membertest.OpSync}
	d := func(off, n int64) call { return call{membertest.OpDiscard, off, n} }
	calls := []call{r(0, 10), w(0, 10), w(100, 10), s, d(50, 100), w(200, 10), r(105, 1)}

	cases := []struct {
		name string
		inj  membertest.Injector
		want []bool
	}{
		{name: "never", inj: membertest.Never(),
			want: []bool{false, false, false, false, false, false, false}},
		{name: "always", inj: membertest.Always(),
			want: []bool{true, true, true, true, true, true, true}},
		{name: "on_index_0", inj: membertest.OnIndex(0),
			want: []bool{true, false, false, false, false, false, false}},
		{name: "on_index_3", inj: membertest.OnIndex(3),
			want: []bool{false, false, false, true, false, false, false}},
		{name: "on_index_past_end", inj: membertest.OnIndex(100),
			want: []bool{false, false, false, false, false, false, false}},
		{name: "second_write", inj: membertest.OpFilter(membertest.OnIndex(1), membertest.OpWrite),
			want: []bool{false, false, true, false, false, false, false}},
		{name: "writes_and_syncs", inj: membertest.OpFilter(membertest.Always(), membertest.OpWrite, membertest.OpSync),
			want: []bool{false, true, true, true, false, true, false}},
		{name: "in_range", inj: membertest.InRange(100, 10, membertest.Always()),
			want: []bool{false, false, true, false, true, false, true}},
		{name: "in_range_edges_exclusive", inj: membertest.InRange(10, 90, membertest.Always()),
			want: []bool{false, false, false, false, true, false, false}},
		{name: "in_range_first_match", inj: membertest.InRange(100, 10, membertest.OnIndex(1)),
			want: []bool{false, false, false, false, true, false, false}},
		{name: "any", inj: membertest.Any(membertest.OpFilter(membertest.Always(), membertest.OpSync), membertest.InRange(0, 1, membertest.Always())),
			want: []bool{true, true, false, true, false, false, false}},
		{name: "randomly_0", inj: membertest.Randomly(0, 1),
			want: []bool{false, false, false, false, false, false, false}},
		{name: "randomly_1", inj: membertest.Randomly(1, 1),
			want: []bool{true, true, true, true, true, true, true}},
		{name: "toggle_starts_off", inj: membertest.NewToggle(membertest.Always()),
			want: []bool{false, false, false, false, false, false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, decisions(tc.inj, calls))
		})
	}
}

func TestInjectedError(t *testing.T) {
	err := membertest.Always().MaybeError(membertest.OpWrite, 4096, 512)
	require.Error(t, err)
	assert.ErrorIs(t, err, syscall.EIO)
	assert.ErrorIs(t, err, membertest.ErrInjected)
	var ie *membertest.InjectedError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, membertest.OpWrite, ie.Op)
	assert.Equal(t, int64(4096), ie.Off)
	assert.Equal(t, int64(512), ie.N)
	assert.Contains(t, err.Error(), "write")

	err = membertest.WithErrno(syscall.ENOSPC, membertest.Always()).MaybeError(membertest.OpWrite, 0, 1)
	assert.ErrorIs(t, err, syscall.ENOSPC)
	assert.NotErrorIs(t, err, syscall.EIO)
	assert.ErrorIs(t, err, membertest.ErrInjected)
	assert.NoError(t, membertest.WithErrno(syscall.ENOSPC, membertest.Never()).MaybeError(membertest.OpWrite, 0, 1))

	// A real error is not mistaken for an injected one.
	assert.NotErrorIs(t, fmt.Errorf("disk: %w", syscall.EIO), membertest.ErrInjected)
}

func TestToggle(t *testing.T) {
	tg := membertest.NewToggle(membertest.Always())
	assert.False(t, tg.IsOn())
	assert.NoError(t, tg.MaybeError(membertest.OpRead, 0, 1))
	tg.On()
	assert.True(t, tg.IsOn())
	assert.Error(t, tg.MaybeError(membertest.OpRead, 0, 1))
	tg.Off()
	assert.NoError(t, tg.MaybeError(membertest.OpRead, 0, 1))
}

func TestRandomly(t *testing.T) {
	run := func(seed int64) []bool {
		inj := membertest.Randomly(0.3, seed)
		out := make([]bool, 2000)
		for i := range out {
			out[i] = inj.MaybeError(membertest.OpRead, int64(i), 1) != nil
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	assert.Equal(t, a, b, "same seed, same decisions")
	assert.NotEqual(t, a, c, "different seeds, different decisions")
	hits := 0
	for _, h := range a {
		if h {
			hits++
		}
	}
	assert.InDelta(t, 600, hits, 100, "about 30%% of 2000 calls fail")

	// Concurrency-safe: every call is decided exactly once (checked by -race
	// and by the total).
	inj := membertest.Randomly(1, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := 0
			for range 500 {
				if inj.MaybeError(membertest.OpWrite, 0, 1) != nil {
					k++
				}
			}
			mu.Lock()
			total += k
			mu.Unlock()
		}()
	}
	wg.Wait()
	assert.Equal(t, 4000, total)
}

func TestOnIndexConcurrent(t *testing.T) {
	inj := membertest.OnIndex(500)
	var wg sync.WaitGroup
	var mu sync.Mutex
	fails := 0
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if inj.MaybeError(membertest.OpRead, 0, 1) != nil {
					mu.Lock()
					fails++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, 1, fails, "exactly one of 1000 concurrent calls fails")
}

func TestFaulty(t *testing.T) {
	t.Run("failed_write_does_not_reach_member", func(t *testing.T) {
		mem := member.NewMemory(8192)
		f := membertest.Inject(mem, membertest.OpFilter(membertest.OnIndex(1), membertest.OpWrite))
		n, err := f.WriteAt([]byte{1, 1}, 0)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		n, err = f.WriteAt([]byte{2, 2}, 100)
		assert.ErrorIs(t, err, syscall.EIO)
		assert.Equal(t, 0, n)
		assert.Equal(t, []byte{0, 0}, mem.Bytes()[100:102], "failed write must not be applied")
		n, err = f.WriteAt([]byte{3, 3}, 200)
		require.NoError(t, err)
		assert.Equal(t, 2, n)
		assert.Equal(t, []byte{3, 3}, mem.Bytes()[200:202])
	})
	t.Run("failed_read_sync_discard", func(t *testing.T) {
		mem := member.NewMemory(8192)
		mem.Bytes()[0] = 9
		f := membertest.Inject(mem, membertest.Always())
		p := []byte{0}
		n, err := f.ReadAt(p, 0)
		assert.ErrorIs(t, err, syscall.EIO)
		assert.Equal(t, 0, n)
		assert.ErrorIs(t, f.Sync(), syscall.EIO)
		assert.ErrorIs(t, f.Discard(0, 10), syscall.EIO)
		assert.Equal(t, byte(9), mem.Bytes()[0], "failed discard must not be applied")
		assert.Equal(t, int64(3), f.Stats().Injected)
		assert.NoError(t, f.Close(), "Close is never intercepted")
	})
	t.Run("drop_writes", func(t *testing.T) {
		mem := member.NewMemory(8192)
		f := membertest.Inject(mem, membertest.DropWrites(membertest.InRange(4096, 4096, membertest.Always())))
		n, err := f.WriteAt(bytes.Repeat([]byte{5}, 100), 4000)
		require.NoError(t, err, "a dropped write reports success")
		assert.Equal(t, 100, n)
		assert.Equal(t, make([]byte, 100), mem.Bytes()[4000:4100], "a dropped write is not applied")
		_, err = f.WriteAt([]byte{6}, 0)
		require.NoError(t, err)
		assert.Equal(t, byte(6), mem.Bytes()[0], "writes outside the range are applied")
		require.NoError(t, f.Discard(4096, 10), "discards are not dropped")
		got := make([]byte, 1)
		_, err = f.ReadAt(got, 0)
		require.NoError(t, err)
		st := f.Stats()
		assert.Equal(t, int64(1), st.Dropped)
		assert.Equal(t, int64(0), st.Injected)
	})
	t.Run("bit_flip_on_read", func(t *testing.T) {
		mem := member.NewMemory(8192)
		for i := range mem.Bytes() {
			mem.Bytes()[i] = byte(i)
		}
		f := membertest.Inject(mem, membertest.BitFlipOnRead(1, 42))
		got := make([]byte, 1000)
		n, err := f.ReadAt(got, 500)
		require.NoError(t, err)
		require.Equal(t, 1000, n)
		flipped, corrupted := 0, 0
		for i := range got {
			flipped += bits.OnesCount8(got[i] ^ byte(500+i))
			if mem.Bytes()[500+i] != byte(500+i) {
				corrupted++
			}
		}
		assert.Equal(t, 1, flipped, "exactly one bit differs")
		assert.Zero(t, corrupted, "the member itself is not corrupted")
		_, err = f.WriteAt([]byte{1}, 0)
		assert.NoError(t, err, "writes are unaffected")
		assert.Equal(t, int64(1), f.Stats().Flipped)

		clean := membertest.Inject(mem, membertest.BitFlipOnRead(0, 42))
		_, err = clean.ReadAt(got, 500)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(mem.Bytes()[500:1500], got))
	})
	t.Run("latency", func(t *testing.T) {
		f := membertest.Inject(member.NewMemory(4096), membertest.OpFilter(membertest.Latency(20*time.Millisecond), membertest.OpSync))
		start := time.Now()
		_, err := f.ReadAt(make([]byte, 10), 0)
		require.NoError(t, err)
		assert.Less(t, time.Since(start), 20*time.Millisecond, "reads are not delayed")
		start = time.Now()
		require.NoError(t, f.Sync())
		assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "syncs are delayed")
	})
	t.Run("latency_then_fail", func(t *testing.T) {
		f := membertest.Inject(member.NewMemory(4096), membertest.Any(membertest.Latency(time.Millisecond), membertest.Always()))
		assert.ErrorIs(t, f.Sync(), syscall.EIO)
	})
	t.Run("toggle_at_run_time", func(t *testing.T) {
		tg := membertest.NewToggle(membertest.OpFilter(membertest.Always(), membertest.OpWrite))
		f := membertest.Inject(member.NewMemory(4096), tg)
		_, err := f.WriteAt([]byte{1}, 0)
		assert.NoError(t, err)
		tg.On()
		_, err = f.WriteAt([]byte{1}, 0)
		assert.ErrorIs(t, err, membertest.ErrInjected)
		_, err = f.ReadAt([]byte{0}, 0)
		assert.NoError(t, err)
		tg.Off()
		_, err = f.WriteAt([]byte{1}, 0)
		assert.NoError(t, err)
	})
	t.Run("stats", func(t *testing.T) {
		f := membertest.Inject(member.NewMemory(1<<16), nil)
		for range 3 {
			_, err := f.WriteAt(make([]byte, 4096), 0)
			require.NoError(t, err)
		}
		_, err := f.ReadAt(make([]byte, 100), 0)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Discard(0, 8192))
		assert.Equal(t, membertest.Stats{
			Reads: 1, Writes: 3, Syncs: 1, Discards: 1,
			BytesRead: 100, BytesWritten: 3 * 4096, BytesDiscarded: 8192,
		}, f.Stats())
		f.ResetStats()
		assert.Equal(t, membertest.Stats{}, f.Stats())
		assert.Equal(t, int64(1<<16), f.Size())
	})
	t.Run("concurrent_stats", func(t *testing.T) {
		f := membertest.Inject(member.NewMemory(1<<16), membertest.Randomly(0.5, 3))
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 100 {
					_, _ = f.WriteAt(make([]byte, 16), int64(w*16))
				}
			}()
		}
		wg.Wait()
		st := f.Stats()
		assert.Equal(t, int64(800), st.Writes)
		assert.Equal(t, int64(800*16), st.BytesWritten)
		assert.InDelta(t, 400, st.Injected, 80)
	})
}

func TestCrashable(t *testing.T) {
	const size = 64 << 10
	pattern := func(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

	t.Run("synced_bytes_survive", func(t *testing.T) {
		for seed := range int64(20) {
			c := membertest.NewCrashable(size)
			_, err := c.WriteAt(pattern(1, 10000), 1000)
			require.NoError(t, err)
			require.NoError(t, c.Sync())
			// Unsynced writes elsewhere do not endanger synced bytes.
			_, err = c.WriteAt(pattern(2, 5000), 20000)
			require.NoError(t, err)
			require.NoError(t, c.Discard(40000, 3000))
			c.Crash(seed)
			got := make([]byte, 10000)
			_, err = c.ReadAt(got, 1000)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(pattern(1, 10000), got), "seed %d: synced bytes lost", seed)
			assert.Zero(t, c.Pending())
		}
	})
	t.Run("unsynced_sectors_kept_or_lost_whole", func(t *testing.T) {
		// An unsynced write of 8 sectors over zeroes, crashed with many
		// seeds: every sector is all-new or all-old, and both outcomes occur.
		sawKept, sawLost := false, false
		for seed := range int64(30) {
			c := membertest.NewCrashable(size)
			_, err := c.WriteAt(pattern(7, 8*512), 4096)
			require.NoError(t, err)
			require.Equal(t, 1, c.Pending())
			res := c.Crash(seed)
			assert.Equal(t, 1, res.Ops)
			assert.Equal(t, 8, res.SectorsKept+res.SectorsLost)
			kept := 0
			for s := range 8 {
				got := make([]byte, 512)
				_, err := c.ReadAt(got, int64(4096+s*512))
				require.NoError(t, err)
				switch {
				case bytes.Equal(got, pattern(7, 512)):
					kept++
					sawKept = true
				case bytes.Equal(got, pattern(0, 512)):
					sawLost = true
				default:
					t.Fatalf("seed %d: sector %d is torn inside", seed, s)
				}
			}
			assert.Equal(t, res.SectorsKept, kept, "seed %d", seed)
		}
		assert.True(t, sawKept, "some unsynced sector must survive some crash")
		assert.True(t, sawLost, "some unsynced sector must be lost in some crash")
	})
	t.Run("unaligned_write_split_at_sector_boundaries", func(t *testing.T) {
		c := membertest.NewCrashable(size)
		_, err := c.WriteAt(pattern(3, 1000), 300) // sectors 0 (212 B), 1 (512 B), 2 (276 B)
		require.NoError(t, err)
		res := c.CrashKeep(1, 1)
		assert.Equal(t, membertest.CrashResult{Ops: 1, SectorsKept: 3}, res)
		got := make([]byte, 1600)
		_, err = c.ReadAt(got, 0)
		require.NoError(t, err)
		want := make([]byte, 1600)
		copy(want[300:], pattern(3, 1000))
		assert.Equal(t, want, got)
	})
	t.Run("keep_all_and_keep_none", func(t *testing.T) {
		c := membertest.NewCrashable(size)
		_, err := c.WriteAt(pattern(1, 4096), 0)
		require.NoError(t, err)
		require.NoError(t, c.Sync())
		_, err = c.WriteAt(pattern(2, 4096), 0)
		require.NoError(t, err)
		require.NoError(t, c.Discard(1024, 1024))
		volatile := make([]byte, 4096)
		_, err = c.ReadAt(volatile, 0)
		require.NoError(t, err)

		res := c.CrashKeep(9, 0)
		assert.Equal(t, membertest.CrashResult{Ops: 2, SectorsLost: 8 + 2}, res)
		got := make([]byte, 4096)
		_, err = c.ReadAt(got, 0)
		require.NoError(t, err)
		assert.Equal(t, pattern(1, 4096), got, "keep none: the synced state")

		_, err = c.WriteAt(pattern(2, 4096), 0)
		require.NoError(t, err)
		require.NoError(t, c.Discard(1024, 1024))
		c.CrashKeep(9, 1)
		_, err = c.ReadAt(got, 0)
		require.NoError(t, err)
		assert.Equal(t, volatile, got, "keep all: the volatile state, in order")
	})
	t.Run("seeded_crash_reproducible", func(t *testing.T) {
		run := func(seed int64) []byte {
			c := membertest.NewCrashable(size)
			for i := range 50 {
				_, err := c.WriteAt(pattern(byte(i+1), 3000), int64(i*997)%(size-3000))
				require.NoError(t, err)
				if i%10 == 9 {
					require.NoError(t, c.Discard(int64(i*311), 2000))
				}
			}
			c.Crash(seed)
			return c.Durable()
		}
		a, b, other := run(11), run(11), run(12)
		assert.True(t, bytes.Equal(a, b), "same seed, same post-crash state")
		assert.False(t, bytes.Equal(a, other), "different seed, different post-crash state")
	})
	t.Run("views", func(t *testing.T) {
		c := membertest.NewCrashable(size)
		_, err := c.WriteAt([]byte{1, 2, 3}, 0)
		require.NoError(t, err)
		got := make([]byte, 3)
		_, err = c.ReadAt(got, 0)
		require.NoError(t, err)
		assert.Equal(t, []byte{1, 2, 3}, got, "reads see unsynced writes")
		assert.Equal(t, []byte{0, 0, 0}, c.Durable()[:3], "unsynced writes are not durable")
		assert.Equal(t, 1, c.Pending())
		require.NoError(t, c.Sync())
		assert.Equal(t, []byte{1, 2, 3}, c.Durable()[:3])
		assert.Zero(t, c.Pending())
	})
	t.Run("reusable_after_close_and_crash", func(t *testing.T) {
		c := membertest.NewCrashable(size)
		_, err := c.WriteAt([]byte{4}, 0)
		require.NoError(t, err)
		require.NoError(t, c.Sync())
		require.NoError(t, c.Close())
		_, err = c.ReadAt(make([]byte, 1), 0)
		assert.ErrorIs(t, err, os.ErrClosed)
		c.Crash(1)
		got := make([]byte, 1)
		_, err = c.ReadAt(got, 0)
		require.NoError(t, err, "Crash reopens the member")
		assert.Equal(t, byte(4), got[0])
	})
	t.Run("concurrent_with_crash", func(t *testing.T) {
		c := membertest.NewCrashable(size)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 200 {
					_, _ = c.WriteAt(pattern(byte(w), 100), int64(w*8192+i%50))
					if i%20 == 0 {
						_ = c.Sync()
					}
					_, _ = c.ReadAt(make([]byte, 100), int64(w*8192))
				}
			}()
		}
		for range 5 {
			c.Crash(1)
		}
		wg.Wait()
		assert.Equal(t, int64(size), c.Size())
	})
	t.Run("out_of_range", func(t *testing.T) {
		c := membertest.NewCrashable(4096)
		n, err := c.WriteAt(pattern(1, 100), 4050)
		assert.ErrorIs(t, err, member.ErrOutOfRange)
		assert.Equal(t, 46, n)
		assert.ErrorIs(t, c.Discard(4000, 200), member.ErrOutOfRange)
		assert.Panics(t, func() { membertest.NewCrashable(-1) })
	})
}

// TestFaultyOverCrashable shows the two doubles composing: a write dropped by
// the injector never reaches the crashable member, not even its volatile view.
func TestFaultyOverCrashable(t *testing.T) {
	c := membertest.NewCrashable(8192)
	f := membertest.Inject(c, membertest.DropWrites(membertest.OnIndex(0)))
	_, err := f.WriteAt([]byte{1}, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{2}, 1)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	assert.Equal(t, []byte{0, 2}, c.Durable()[:2])
	assert.True(t, errors.Is(f.Discard(0, 9000), member.ErrOutOfRange))
}
