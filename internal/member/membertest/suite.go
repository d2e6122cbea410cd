package membertest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
)

// SuiteSize is the size of the members the conformance suite asks for in
// most of its tests. It is a multiple of 4096, as members opened with
// O_DIRECT require.
const SuiteSize = 1 << 20

// TestMember runs the member conformance suite. open must return a new,
// open member of exactly size bytes (size is always a multiple of 4096) and
// register a cleanup that closes it; the suite closes some members itself,
// so that cleanup must ignore os.ErrClosed. The initial contents do not
// matter. The suite checks:
//
//   - Size reports the requested size.
//   - Round trips at aligned and unaligned offsets, lengths and buffer
//     addresses, leaving every other byte unchanged.
//   - Concurrent writers and readers on disjoint ranges (meaningful under
//     -race).
//   - Discard makes its range read as zeroes, at byte granularity, without
//     touching neighbours; out-of-range discards fail and change nothing.
//     A member whose Discard returns errors.ErrUnsupported skips these.
//   - Sync succeeds and keeps the data.
//   - Reads past the end return n < len(p) with an error; writes past the
//     end return n < len(p) with an error and never grow the member.
//   - After Close every call fails with an error wrapping os.ErrClosed.
//   - A member with vectored I/O (ReadvAt and WritevAt, which the engine
//     uses for back-to-back extents) round-trips runs of buffers at
//     aligned and unaligned offsets, lengths and addresses, runs longer
//     than the kernel's IOV_MAX, and runs reaching past the end, and
//     agrees with ReadAt.
func TestMember(t *testing.T, open func(t *testing.T, size int64) raid.Member) {
	t.Helper()
	t.Run("size", func(t *testing.T) { testSize(t, open) })
	t.Run("round_trip", func(t *testing.T) { testRoundTrip(t, open) })
	t.Run("concurrent_disjoint", func(t *testing.T) { testConcurrent(t, open) })
	t.Run("discard", func(t *testing.T) { testDiscard(t, open) })
	t.Run("discard_out_of_range", func(t *testing.T) { testDiscardOutOfRange(t, open) })
	t.Run("sync", func(t *testing.T) { testSync(t, open) })
	t.Run("read_past_end", func(t *testing.T) { testReadPastEnd(t, open) })
	t.Run("write_past_end", func(t *testing.T) { testWritePastEnd(t, open) })
	t.Run("closed", func(t *testing.T) { testClosed(t, open) })
	t.Run("vectored", func(t *testing.T) { testVectored(t, open) })
}

// model is the expected content of a member under test.
type model []byte

// prefill writes seeded random bytes over the whole member and returns the
// matching model.
func prefill(t *testing.T, m raid.Member, seed int64) model {
	t.Helper()
	want := make(model, m.Size())
	rand.New(rand.NewSource(seed)).Read(want)
	for off := int64(0); off < int64(len(want)); off += 64 << 10 {
		end := min(off+64<<10, int64(len(want)))
		n, err := m.WriteAt(want[off:end], off)
		require.NoError(t, err, "prefill at %d", off)
		require.Equal(t, int(end-off), n, "prefill at %d", off)
	}
	return want
}

// verify reads the whole member and compares it with want, reporting the
// first mismatching offset rather than dumping megabytes.
func verify(t *testing.T, m raid.Member, want model, context string) {
	t.Helper()
	got := make([]byte, len(want))
	n, err := m.ReadAt(got, 0)
	require.NoError(t, err, "%s: reading the whole member", context)
	require.Equal(t, len(want), n, "%s: reading the whole member", context)
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("%s: member differs from model at offset %d: got %#02x, want %#02x", context, i, got[i], want[i])
	}
}

// firstDiff returns the first index where a and b differ, or -1.
func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func testSize(t *testing.T, open func(t *testing.T, size int64) raid.Member) {
	for _, size := range []int64{4096, 3 * 4096, SuiteSize} {
		t.Run(fmt.Sprintf("size=%d", size), func(t *testing.T) {
			m := open(t, size)
			require.Equal(t, size, m.Size())
			last := []byte{0xA5}
			n, err := m.WriteAt(last, size-1)
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			got := []byte{0}
			n, err = m.ReadAt(got, size-1)
			require.NoError(t, err)
			assert.Equal(t, 1, n)
			assert.Equal(t, last, got)
			assert.Equal(t, size, m.Size(), "size changed after writing the last byte")
		})
	}
}

func testRoundTrip(t *testing.T, open func(t *testing.T, size int64) raid.Member) {
	const size = SuiteSize
	m := open(t, size)
	want := prefill(t, m, 1)
	rng := rand.New(rand.NewSource(2))
	cases := []struct {
		name     string
		off, n   int64
		misalign int // offset of the buffer inside its allocation
	}{
		{name: "aligned_4k", off: 8192, n: 4096},
		{name: "aligned_64k", off: 65536, n: 65536},
		{name: "unaligned_start", off: 100, n: 4096},
		{name: "unaligned_both", off: 4097, n: 5000},
		{name: "inside_one_block", off: 12345, n: 17},
		{name: "one_byte", off: 77777, n: 1},
		{name: "sector_aligned", off: 512 * 9, n: 512 * 3},
		{name: "cross_many_blocks", off: 511, n: 3*65536 + 7},
		{name: "first_byte", off: 0, n: 1},
		{name: "last_byte", off: size - 1, n: 1},
		{name: "tail", off: size - 777, n: 777},
		{name: "misaligned_buffer", off: 16384, n: 8192, misalign: 1},
		{name: "misaligned_buffer_unaligned_off", off: 20000, n: 10000, misalign: 3},
		{name: "larger_than_1MiB_window", off: 3, n: size - 3},
		{name: "whole", off: 0, n: size},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := make([]byte, tc.n+int64(tc.misalign))[tc.misalign:]
			rng.Read(p)
			n, err := m.WriteAt(p, tc.off)
			require.NoError(t, err)
			require.Equal(t, len(p), n)
			copy(want[tc.off:], p)

			got := make([]byte, tc.n+int64(tc.misalign))[tc.misalign:]
			n, err = m.ReadAt(got, tc.off)
			require.NoError(t, err)
			require.Equal(t, len(got), n)
			if i := firstDiff(got, p); i >= 0 {
				t.Fatalf("read back differs at offset %d", tc.off+int64(i))
			}
			verify(t, m, want, "after write")

			// Unaligned reads of a sub-range see the same bytes.
			if tc.n > 2 {
				sub := make([]byte, tc.n-2)
				n, err = m.ReadAt(sub, tc.off+1)
				require.NoError(t, err)
				require.Equal(t, len(sub), n)
				assert.True(t, bytes.Equal(sub, p[1:tc.n-1]), "sub-range read differs")
			}
		})
	}
}

func testConcurrent(t *testing.T, open func(t *testing.T, size int64) raid.Member) {
	const (
		size    = SuiteSize
		workers = 8
		region  = size / workers
		rounds  = 40
	)
	m := open(t, size)
	want := prefill(t, m, 3)
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = concurrentWorker(m, want[w*region:(w+1)*region], int64(w*region), int64(w))
		}()
	}
	wg.Wait()
	for w, err := range errs {
		assert.NoError(t, err, "worker %d", w)
	}
	verify(t, m, want, "after concurrent writers")
}

// concurrentWorker writes random unaligned pieces inside its own region,
// updating mine (its part of the model), and reads each piece back.
func concurrentWorker(m raid.Member, mine []byte, base, seed int64) error {
	rng := rand.New(rand.NewSource(100 + seed))
	buf := make([]byte, 20000)
	got := make([]byte, 20000)
	for range 40 {
		n := 1 + rng.Intn(len(buf))
		rel := rng.Intn(len(mine) - n + 1)
		p := buf[:n]
		rng.Read(p)
		if k, err := m.WriteAt(p, base+int64(rel)); err != nil || k != n {
			return fmt.Errorf("write [%d, +%d): n=%d err=%v", base+int64(rel), n, k, err)
		}
		copy(mine[rel:], p)
		// Read back a random piece of the region, which no one else touches.
		rn := 1 + rng.Intn(len(got))
		rrel := rng.Intn(len(mine) - rn + 1)
		if k, err := m.ReadAt(got[:rn], base+int64(rrel)); err != nil || k != rn {
			return fmt.Errorf("read [%d, +%d): n=%d err=%v", base+int64(rrel), rn, k, err)
		}
		if i := firstDiff(got[:rn], mine[rrel:rrel+rn]); i >= 0 {
			return fmt.Errorf("read back differs at offset %d", base+int64(rrel+i))
		}
	}
	return nil
}

func testDiscard(t *testing.T, open func(t *testing.T, size int64) raid.Member) {
	const size = SuiteSize
	m := open(t, size)
	want := prefill(t, m, 4)
	cases := []struct {
		name   string
		off, n int64
	}{
		{name: "aligned_4k", off: 4096, n: 8192},
		{name: "aligned_64k", off: 131072, n: 65536},
		{name: "sector_aligned", off: 512 * 101, n: 512 * 5},
		{name: "unaligned_edges", off: 1000 + 262144, n: 10000},
		{name: "inside_one_block", off: 5000 + 393216, n: 100},
		{name: "one_byte", off: 500001, n: 1},
		{name: "zero_length", off: 600000, n: 0},
		{name: "first_bytes", off: 0, n: 3},
		{name: "tail", off: size - 5000, n: 5000},
		{name: "whole", off: 0, n: size},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := m.Discard(tc.off, tc.n)
			if errors.Is(err, errors.ErrUnsupported) {
				t.Skipf("member cannot guarantee zeroes: %v", err)
			}
			require.NoError(t, err)
			clear(want[tc.off : tc.off+tc.n])
			verify(t, m, want, fmt.Sprintf("after Discard(%d, %d)", tc.off, tc.n))
			// The range is writable again afterwards.
			if tc.n > 0 {
				p := []byte{0x5A}
				_, err := m.WriteAt(p, tc.off)
				require.NoError(t, err)
				want[tc.off] = 0x5A
				verify(t, m, want, "after rewriting a discarded byte")
			}
		})
	}
}

func testDiscardOutOfRange(t *testing.T, open func(t *testing.T, size int64) raid.Member) {
	const size = SuiteSize
	m := open(t, size)
	want := prefill(t, m, 5)
	cases := []struct {
		name   string
		off, n int64
	}{
		{name: "straddles_end", off: size - 4096, n: 8192},
		{name: "one_past_end", off: size - 10, n: 11},
		{name: "beyond_end", off: size + 4096, n: 4096},
		{name: "negative_offset", off: -4096, n: 8192},
		{name: "negative_length", off: 4096, n: -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Error(t, m.Discard(tc.off, tc.n))
			verify(t, m, want, "after a rejected Discard")
			assert.Equal(t, int64(size), m.Size())
		})
	}
}

func testSync(t *testing.T, open func(t *testing.T, size int64) raid.Member) {
	const size = SuiteSize
	m := open(t, size)
	want := prefill(t, m, 6)
	require.NoError(t, m.Sync(), "sync after prefill")
	p := bytes.Repeat([]byte{0xC3}, 10000)
	_, err := m.WriteAt(p, 3333)
	require.NoError(t, err)
	copy(want[3333:], p)
	require.NoError(t, m.Sync(), "sync after write")
	require.NoError(t, m.Sync(), "sync with nothing to do")
	verify(t, m, want, "after sync")
}

func testReadPastEnd(t *testing.T, open func(t *testing.T, size int64) raid.Member) {
	const size = SuiteSize
	m := open(t, size)
	want := prefill(t, m, 7)
	cases := []struct {
		name  string
		off   int64
		n     int
		wantN int
	}{
		{name: "at_end", off: size, n: 10, wantN: 0},
		{name: "straddles_end", off: size - 10, n: 100, wantN: 10},
		{name: "straddles_end_aligned", off: size - 4096, n: 8192, wantN: 4096},
		{name: "beyond_end", off: size + 4096, n: 1, wantN: 0},
		{name: "negative_offset", off: -1, n: 10, wantN: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := make([]byte, tc.n)
			n, err := m.ReadAt(p, tc.off)
			require.Error(t, err, "ReadAt(len %d, off %d) must fail", tc.n, tc.off)
			assert.Less(t, n, len(p))
			assert.Equal(t, tc.wantN, n)
			if tc.wantN > 0 {
				assert.True(t, bytes.Equal(want[tc.off:tc.off+int64(tc.wantN)], p[:tc.wantN]), "bytes before the end differ")
			}
		})
	}
}

func testWritePastEnd(t *testing.T, open func(t *testing.T, size int64) raid.Member) {
	const size = SuiteSize
	m := open(t, size)
	want := prefill(t, m, 8)
	cases := []struct {
		name string
		off  int64
		n    int
	}{
		{name: "at_end", off: size, n: 10},
		{name: "straddles_end", off: size - 10, n: 100},
		{name: "straddles_end_aligned", off: size - 4096, n: 8192},
		{name: "beyond_end", off: size + 4096, n: 4096},
		{name: "negative_offset", off: -1, n: 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := bytes.Repeat([]byte{0x3C}, tc.n)
			n, err := m.WriteAt(p, tc.off)
			require.Error(t, err, "WriteAt(len %d, off %d) must fail", tc.n, tc.off)
			require.Less(t, n, len(p))
			require.GreaterOrEqual(t, n, 0)
			assert.Equal(t, int64(size), m.Size(), "member grew")
			// Whatever the member reports as written must be there; nothing
			// else may change.
			if n > 0 {
				copy(want[tc.off:], p[:n])
			}
			verify(t, m, want, "after a write past the end")
		})
	}
}

func testClosed(t *testing.T, open func(t *testing.T, size int64) raid.Member) {
	const size = SuiteSize
	m := open(t, size)
	require.NoError(t, m.Close())
	p := make([]byte, 10)
	cases := []struct {
		name string
		call func() error
	}{
		{name: "read", call: func() error { _, err := m.ReadAt(p, 0); return err }},
		{name: "write", call: func() error { _, err := m.WriteAt(p, 0); return err }},
		{name: "sync", call: m.Sync},
		{name: "discard", call: func() error { return m.Discard(0, 10) }},
		{name: "close", call: m.Close},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, tc.call(), os.ErrClosed)
		})
	}
	assert.Equal(t, int64(size), m.Size(), "Size after Close")
}

// vectorIO is what the engine calls for back-to-back extents on a member.
type vectorIO interface {
	ReadvAt(bufs [][]byte, off int64) (int, error)
	WritevAt(bufs [][]byte, off int64) (int, error)
}

// vecBufs returns buffers of the given lengths, each starting misalign
// bytes into a 4096-aligned allocation (Go allocates buffers of a page or
// more on page boundaries; the first is checked by the caller's cases).
func vecBufs(lens []int, misalign int) [][]byte {
	bufs := make([][]byte, len(lens))
	for i, n := range lens {
		bufs[i] = make([]byte, n+misalign+4096)[misalign : misalign+n]
	}
	return bufs
}

func testVectored(t *testing.T, open func(t *testing.T, size int64) raid.Member) {
	const size = SuiteSize
	m := open(t, size)
	v, ok := m.(vectorIO)
	if !ok {
		t.Skip("the member has no vectored I/O")
	}
	want := prefill(t, m, 9)
	rng := rand.New(rand.NewSource(10))
	many := make([]int, 1100) // more buffers than IOV_MAX (1024)
	for i := range many {
		many[i] = 512
	}
	cases := []struct {
		name     string
		off      int64
		lens     []int
		misalign int
	}{
		{name: "aligned_chunks", off: 64 << 10, lens: []int{64 << 10, 64 << 10, 64 << 10, 64 << 10}},
		{name: "aligned_4k", off: 4096, lens: []int{4096, 8192, 4096}},
		{name: "sector_lengths", off: 512, lens: []int{512, 1024, 3584}},
		{name: "misaligned_addresses", off: 8192, lens: []int{4096, 4096}, misalign: 8},
		{name: "unaligned_offset", off: 100, lens: []int{4096, 4096}},
		{name: "unaligned_lengths", off: 8192, lens: []int{100, 4096, 7}},
		{name: "inside_one_block", off: 20000, lens: []int{3, 5}},
		{name: "beyond_iov_max", off: 12288, lens: many},
		{name: "large_unaligned_run", off: 1, lens: []int{size/2 - 1, size / 4, size/4 - 4096}},
		{name: "tail", off: size - 8192, lens: []int{4096, 4096}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bufs := vecBufs(tc.lens, tc.misalign)
			total := 0
			for _, b := range bufs {
				rng.Read(b)
				total += len(b)
			}
			n, err := v.WritevAt(bufs, tc.off)
			require.NoError(t, err)
			require.Equal(t, total, n)
			copy(want[tc.off:], bytes.Join(bufs, nil))
			verify(t, m, want, "after WritevAt")

			// Read back in differently cut buffers.
			rev := make([]int, len(tc.lens))
			for i, n := range tc.lens {
				rev[len(rev)-1-i] = n
			}
			got := vecBufs(rev, tc.misalign)
			n, err = v.ReadvAt(got, tc.off)
			require.NoError(t, err)
			require.Equal(t, total, n)
			if i := firstDiff(bytes.Join(got, nil), want[tc.off:tc.off+int64(total)]); i >= 0 {
				t.Fatalf("ReadvAt differs at offset %d", tc.off+int64(i))
			}
		})
	}
	t.Run("read_past_end", func(t *testing.T) {
		bufs := vecBufs([]int{4096, 4096}, 0)
		n, err := v.ReadvAt(bufs, size-4096)
		require.Error(t, err)
		assert.Equal(t, 4096, n)
		assert.True(t, bytes.Equal(want[size-4096:], bufs[0]), "bytes before the end differ")
	})
	t.Run("write_past_end", func(t *testing.T) {
		bufs := [][]byte{bytes.Repeat([]byte{0x5E}, 4096), bytes.Repeat([]byte{0xE5}, 4096)}
		n, err := v.WritevAt(bufs, size-4096)
		require.Error(t, err)
		require.Less(t, n, 8192)
		assert.Equal(t, int64(size), m.Size(), "member grew")
		if n > 0 {
			copy(want[size-4096:], bufs[0][:n])
		}
		verify(t, m, want, "after a vectored write past the end")
	})
}
