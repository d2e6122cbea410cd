package raid6

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// TestEncodeNoAllocs: computing P and Q from scratch (full stripe, RCW) and
// applying a delta (RMW) allocate nothing, with chunks large enough for the
// library's SIMD paths.
func TestEncodeNoAllocs(t *testing.T) {
	for _, n := range []int{4, 6, 10} {
		const chunk = 64 << 10
		l, op := newTestLayout(t, n, chunk)
		data := make([][]byte, l.dk)
		for i := range data {
			data[i] = make([]byte, chunk)
			rand.New(rand.NewSource(int64(i))).Read(data[i])
		}
		p, q := make([]byte, chunk), make([]byte, chunk)
		allocs := testing.AllocsPerRun(20, func() {
			l.encode(op, data, p, q)
			l.accumulate(op, data[1], 1, p, q)
		})
		require.Zero(t, allocs, "members=%d", n)
	}
}

// BenchmarkEncode measures computing P and Q of one 64 KiB-chunk row from
// scratch, the CPU part of a full-stripe write (the array-level numbers are
// raid's BenchmarkFullStripeWrite, next to BenchmarkMemcpy).
// Where the CPU has AVX-512 it runs with either kernel (avx512=false:
// AVX2), interleaved.
func BenchmarkEncode(b *testing.B) {
	const chunk = 64 << 10
	kernels := []bool{useAVX512}
	if useAVX512 {
		kernels = []bool{false, true}
	}
	defer func(v bool) { useAVX512 = v }(useAVX512)
	for _, n := range []int{4, 6, 10} {
		for _, wide := range kernels {
			useAVX512 = wide
			b.Run(fmt.Sprintf("members=%d/avx512=%v", n, wide), func(b *testing.B) { benchmarkEncode(b, n, chunk) })
		}
	}
}

func benchmarkEncode(b *testing.B, n int, chunk int) {
	l, op := newTestLayout(b, n, int64(chunk))
	shards := make([][]byte, n)
	for i := range shards {
		shards[i] = make([]byte, chunk)
	}
	b.SetBytes(int64(l.dk * chunk))
	b.ReportAllocs()
	for b.Loop() {
		l.encode(op, shards[:l.dk], shards[l.dk], shards[l.dk+1])
	}
}

// TestSyndromeKernel: the one-pass syndrome kernels (genSyndrome, AVX2
// and, where the CPU has it, AVX-512, with the library finishing the tail)
// compute the same P and Q as the library alone, for 2 to 14 data chunks,
// lengths around the kernel's block and data that is not aligned in
// memory. TestGoldenParity pins them against md's arithmetic.
func TestSyndromeKernel(t *testing.T) {
	if !haveSyndromeKernel {
		t.Skip("no syndrome kernel on this CPU or platform")
	}
	kernels := []bool{false}
	if useAVX512 {
		kernels = append(kernels, true)
	}
	defer func(v bool) { useAVX512 = v }(useAVX512)
	for _, wide := range kernels {
		useAVX512 = wide
		t.Run(fmt.Sprint("avx512=", wide), testSyndromeKernel)
	}
}

func testSyndromeKernel(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{4, 5, 6, 9, 16} {
		g, err := stripe.New(stripe.RAID6, n, 64<<10, 4*64<<10)
		require.NoError(t, err)
		lay, err := New(g)
		require.NoError(t, err)
		l := lay.(*Layout)
		devs := make([]raid.Member, n)
		for m := range devs {
			devs[m] = member.NewMemory(4 * 64 << 10)
		}
		op, err := raid.NewOp(g, raid.OpConfig{Members: devs})
		require.NoError(t, err)
		for _, size := range []int{0, 1, 127, 128, 129, 255, 256, 4096, 4096 + 77, 64 << 10} {
			data := make([][]byte, l.dk)
			for i := range data {
				skew := rng.Intn(32) // unaligned starts
				data[i] = make([]byte, size+skew)[skew:]
				rng.Read(data[i])
			}
			p, q := make([]byte, size), make([]byte, size)
			wantP, wantQ := make([]byte, size), make([]byte, size)
			l.encode(op, data, p, q)
			l.encodeFrom(op, data, wantP, wantQ, 0)
			require.Equal(t, wantP, p, "members=%d size=%d: P", n, size)
			require.Equal(t, wantQ, q, "members=%d size=%d: Q", n, size)
			if size >= syndromeBlock {
				require.Equal(t, size&^(syndromeBlock-1), genSyndrome(data, p, q), "members=%d size=%d", n, size)
			}
		}
	}
}

// newTestLayout returns a RAID6 layout of n members with the given chunk,
// and an Op over memory members of four rows, for its encoding functions.
func newTestLayout(tb testing.TB, n int, chunk int64) (*Layout, *raid.Op) {
	tb.Helper()
	g, err := stripe.New(stripe.RAID6, n, chunk, 4*chunk)
	require.NoError(tb, err)
	lay, err := New(g)
	require.NoError(tb, err)
	devs := make([]raid.Member, n)
	for m := range devs {
		devs[m] = member.NewMemory(4 * chunk)
	}
	op, err := raid.NewOp(g, raid.OpConfig{Members: devs})
	require.NoError(tb, err)
	return lay.(*Layout), op
}
