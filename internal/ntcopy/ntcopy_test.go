package ntcopy

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestCopy: every length and alignment of dst and src around the
// thresholds copies exactly the bytes copy would, and nothing outside.
func TestCopy(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	src := make([]byte, 3*Min+256)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	for _, n := range []int{0, 1, 63, Min - 1, Min, Min + 1, Min + 63, Min + 64, 2*Min + 17, 3 * Min} {
		for so := 0; so < 40; so += 13 {
			for do := 0; do < 40; do += 7 {
				dst := make([]byte, n+do+64)
				for i := range dst {
					dst[i] = 0xa5
				}
				got := Copy(dst[do:do+n], src[so:so+n])
				if got != n {
					t.Fatalf("n %d: Copy returned %d", n, got)
				}
				if !bytes.Equal(dst[do:do+n], src[so:so+n]) {
					t.Fatalf("n %d, src+%d, dst+%d: bytes differ", n, so, do)
				}
				for i, b := range append(dst[:do:do], dst[do+n:]...) {
					if b != 0xa5 {
						t.Fatalf("n %d, src+%d, dst+%d: byte %d outside dst written", n, so, do, i)
					}
				}
			}
		}
	}
	// Shorter dst or src: min of the two, as copy.
	dst := make([]byte, Min+100)
	if got := Copy(dst, src[:Min+10]); got != Min+10 || !bytes.Equal(dst[:Min+10], src[:Min+10]) {
		t.Fatalf("short src: %d", got)
	}
}

func BenchmarkCopy4K(b *testing.B)    { benchCopy(b, 4096, false) }
func BenchmarkBuiltin4K(b *testing.B) { benchCopy(b, 4096, true) }

// benchCopy copies size bytes to random places in 1 GiB (out of the
// cache, as a member's pages are).
func benchCopy(b *testing.B, size int, builtin bool) {
	dst := make([]byte, 1<<30)
	for i := 0; i < len(dst); i += 4096 {
		dst[i] = 1
	}
	src := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := rng.IntN(len(dst)/size) * size
		if builtin {
			copy(dst[off:], src)
		} else {
			Copy(dst[off:off+size], src)
		}
	}
}
