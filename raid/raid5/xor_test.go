package raid5_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/klauspost/reedsolomon"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid/internal/parity"
)

// xorBlock is the kernel's step (parity.XOR computes the longest prefix of
// its destination that is a multiple of it).
const xorBlock = 128

// haveXORKernel reports whether parity.XOR has a kernel here: without one
// it computes nothing.
var haveXORKernel = parity.XOR(make([]byte, xorBlock), [][]byte{make([]byte, xorBlock)}) == xorBlock

// TestXORKernel: the one-pass XOR kernel (XOR, with the caller finishing
// the tail) computes the same parity as the library's single-parity
// encoder that RAID5 used alone before it, for 1 to 15 sources, lengths
// around the kernel's block and sources that are not aligned in memory;
// also with dst the first source itself (RAID5's delta updates). It lives
// here, not beside the kernel in raid/internal/parity, because only the
// parity levels may import the library (TestImportGraph).
func TestXORKernel(t *testing.T) {
	if !haveXORKernel {
		t.Skip("no XOR kernel on this CPU or platform")
	}
	rng := rand.New(rand.NewSource(1))
	for k := 1; k <= 15; k++ {
		// The library has no 1-data-shard single parity: its parity
		// there is the copy, which is what XOR of one source is.
		var enc reedsolomon.Encoder
		if k > 1 {
			var err error
			enc, err = reedsolomon.New(k, 1, reedsolomon.WithFastOneParityMatrix(), reedsolomon.WithMaxGoroutines(1))
			require.NoError(t, err)
		}
		for _, size := range []int{0, 1, 127, 128, 129, 255, 256, 4096, 4096 + 77, 64 << 10} {
			t.Run(fmt.Sprintf("k=%d/size=%d", k, size), func(t *testing.T) {
				src := make([][]byte, k)
				for i := range src {
					skew := rng.Intn(32) // unaligned starts
					src[i] = make([]byte, size+skew)[skew:]
					rng.Read(src[i])
				}
				want := make([]byte, size)
				if k == 1 || size == 0 { // the library refuses empty shards
					copy(want, src[0])
				} else {
					shards := append(append([][]byte{}, src...), want)
					require.NoError(t, enc.Encode(shards))
				}
				got := make([]byte, size)
				n := parity.XOR(got, src)
				require.Equal(t, size&^(xorBlock-1), n)
				xorTail(got, src, n)
				require.Equal(t, want, got, "dst apart")

				// XORStream, into a 32-byte aligned dst (non-temporal
				// stores) and an unaligned one (the plain kernel).
				for _, skew := range []int{0, 32, 5} {
					buf := bytes.Repeat([]byte{0xa5}, size+64)
					at := skew + int(-uintptr(unsafe.Pointer(&buf[0]))&31)
					dst := buf[at : at+size]
					if size > 0 && skew%32 == 0 {
						require.Zero(t, uintptr(unsafe.Pointer(&dst[0]))&31)
					}
					n := parity.XORStream(dst, src)
					require.Equal(t, size&^(xorBlock-1), n)
					xorTail(dst, src, n)
					require.Equal(t, want, dst, "XORStream, dst at +%d", skew)
					outside := append(append([]byte(nil), buf[:at]...), buf[at+size:]...)
					require.Equal(t, bytes.Repeat([]byte{0xa5}, len(outside)), outside, "XORStream wrote outside dst")
				}

				// In place: dst is src[0].
				first := append([]byte(nil), src[0]...)
				n = parity.XOR(src[0], src)
				xorTail(src[0], append([][]byte{first}, src[1:]...), n)
				require.Equal(t, want, src[0], "dst is src[0]")
			})
		}
	}
}

// xorTail sets dst[n:] to the XOR of src[i][n:len(dst)], bytewise.
func xorTail(dst []byte, src [][]byte, n int) {
	for j := n; j < len(dst); j++ {
		var b byte
		for _, s := range src {
			b ^= s[j]
		}
		dst[j] = b
	}
}

// BenchmarkXOR: the kernel on a RAID5 row of 4 members (3 data chunks of
// 64 KiB), against the copy and XOR passes of the library it replaces.
func BenchmarkXOR(b *testing.B) {
	const k, chunk = 3, 64 << 10
	src := make([][]byte, k)
	for i := range src {
		src[i] = make([]byte, chunk)
		rand.New(rand.NewSource(int64(i))).Read(src[i])
	}
	dst := make([]byte, chunk)
	b.Run("kernel", func(b *testing.B) {
		if !haveXORKernel {
			b.Skip("no XOR kernel")
		}
		b.SetBytes(k * chunk)
		for b.Loop() {
			parity.XOR(dst, src)
		}
	})
	b.Run("library", func(b *testing.B) {
		enc, err := reedsolomon.New(k, 1, reedsolomon.WithFastOneParityMatrix(), reedsolomon.WithMaxGoroutines(1))
		require.NoError(b, err)
		par := [][]byte{dst}
		b.SetBytes(k * chunk)
		for b.Loop() {
			copy(dst, src[0])
			for i := 1; i < k; i++ {
				if err := enc.EncodeIdx(src[i], 0, par); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
