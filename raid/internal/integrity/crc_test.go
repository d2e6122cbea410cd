package integrity

import (
	"hash/crc32"
	"math/rand"
	"testing"
)

// TestSumMatchesHashCRC32 compares Sum with hash/crc32's Castagnoli on
// random bytes of every length up to 3 KiB and on blocks of 4 KiB and more,
// at every alignment modulo 64; and foldKernel, where the CPU has it, from
// random starting states. Replay: -run TestSumMatchesHashCRC32 with the
// printed seed in place of the time.
func TestSumMatchesHashCRC32(t *testing.T) {
	seed := int64(20261201)
	t.Logf("seed %d, folding kernel: %v", seed, haveFold)
	rng := rand.New(rand.NewSource(seed))
	buf := make([]byte, 3*BlockSize+64)
	rng.Read(buf)
	check := func(p []byte) {
		t.Helper()
		if got, want := Sum(p), crc32.Checksum(p, castagnoli); got != want {
			t.Fatalf("Sum of %d bytes at alignment %d = %#x, hash/crc32 %#x", len(p), uintptr(len(buf)-len(p))%64, got, want)
		}
	}
	for n := 0; n <= 3<<10; n++ {
		off := rng.Intn(64)
		check(buf[off : off+n])
	}
	for _, n := range []int{BlockSize - 1, BlockSize, BlockSize + 1, 2 * BlockSize, 3 * BlockSize} {
		for off := 0; off < 64; off++ {
			check(buf[off : off+n])
		}
	}
	// Edge patterns: all zeroes, all ones, a single bit set anywhere in a
	// block (every lane and every fold distance).
	blk := make([]byte, BlockSize)
	check(blk)
	for i := range blk {
		blk[i] = 0xff
	}
	check(blk)
	for i := 0; i < BlockSize*8; i += 61 {
		clear(blk)
		blk[i/8] = 1 << (i % 8)
		check(blk)
	}
	if !haveFold {
		t.Skip("no AVX-512 carry-less multiply on this CPU: Sum is hash/crc32 itself")
	}
	for range 2000 {
		n := (1 + rng.Intn(len(buf)/foldUnit-1)) * foldUnit
		off := rng.Intn(len(buf) - n + 1)
		p := buf[off : off+n]
		state := rng.Uint32()
		if got, want := foldKernel(state, p), ^crc32.Update(^state, castagnoli, p); got != want {
			t.Fatalf("foldKernel(%#x, %d bytes at %d) = %#x, hash/crc32 %#x", state, n, off, got, want)
		}
	}
}

// TestFoldConstants recomputes the kernel's fold constants (crc_amd64.s):
// x^(D+32) mod P and x^(D-32) mod P, bit-reflected and shifted left by
// one, for D = 2048, 512 and 128 bits.
func TestFoldConstants(t *testing.T) {
	xnmod := func(n int) uint64 {
		const poly = 0x1EDC6F41 // Castagnoli, normal form
		r := uint32(1)
		for range n {
			carry := r & 0x80000000
			r <<= 1
			if carry != 0 {
				r ^= poly
			}
		}
		var rev uint32
		for i := range 32 {
			rev |= (r >> i & 1) << (31 - i)
		}
		return uint64(rev) << 1
	}
	for _, c := range []struct {
		d      int
		lo, hi uint64
	}{{2048, 0x0dcb17aa4, 0x0b9e02b86}, {512, 0x0740eef02, 0x09e4addf8}, {128, 0x0f20c0dfe, 0x14cd00bd6}} {
		if lo, hi := xnmod(c.d+32), xnmod(c.d-32); lo != c.lo || hi != c.hi {
			t.Errorf("D=%d: constants %#x %#x, crc_amd64.s has %#x %#x", c.d, lo, hi, c.lo, c.hi)
		}
	}
}

// BenchmarkSum: Sum of one 4 KiB block in cache, against hash/crc32.
func BenchmarkSum(b *testing.B) {
	blk := make([]byte, BlockSize)
	rand.New(rand.NewSource(1)).Read(blk)
	var sink uint32
	b.Run("hash-crc32", func(b *testing.B) {
		b.SetBytes(BlockSize)
		for b.Loop() {
			sink += crc32.Checksum(blk, castagnoli)
		}
	})
	b.Run("Sum", func(b *testing.B) {
		b.SetBytes(BlockSize)
		for b.Loop() {
			sink += Sum(blk)
		}
	})
	_ = sink
}
