package crc32c

import (
	"hash/crc32"
	"math/rand"
	"testing"
)

// TestSumMatchesHashCRC32 compares Sum with hash/crc32's Castagnoli on
// random bytes of every length up to 3 KiB and on blocks of 4 KiB and more,
// at every alignment modulo 64; and foldKernel, where the CPU has it, from
// random starting states. The seed is fixed and printed.
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
// TestCopySums checks that CopySums copies exactly src (no byte of dst
// past it changes) and that its sums are hash/crc32's, for lengths that
// end in whole blocks, in a short last block and in a last piece shorter
// than the kernel's 256 bytes, at random alignments of both sides.
func TestCopySums(t *testing.T) {
	seed := int64(1201)
	t.Logf("seed %d, folding kernel: %v", seed, haveFold)
	rng := rand.New(rand.NewSource(seed))
	src := make([]byte, 5*BlockSize+64)
	rng.Read(src)
	for _, n := range []int{0, 1, 255, 256, 257, BlockSize - 1, BlockSize, BlockSize + 100, 3 * BlockSize, 3*BlockSize + 300, 5 * BlockSize} {
		for range 20 {
			so, do := rng.Intn(64), rng.Intn(64)
			dst := make([]byte, len(src)+64)
			rng.Read(dst)
			want := append([]byte(nil), dst...)
			copy(want[do:], src[so:so+n])
			sums := make([]uint32, (n+BlockSize-1)/BlockSize)
			CopySums(dst[do:], src[so:so+n], sums)
			if string(dst) != string(want) {
				t.Fatalf("CopySums of %d bytes (src at %d, dst at %d) did not copy exactly them", n, so, do)
			}
			for i := range sums {
				b := src[so+i*BlockSize : so+min(n, (i+1)*BlockSize)]
				if c := crc32.Checksum(b, castagnoli); sums[i] != c {
					t.Fatalf("CopySums of %d bytes: block %d sum %#x, hash/crc32 %#x", n, i, sums[i], c)
				}
			}
		}
	}
}

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

// BenchmarkSum: Sum of one 4 KiB block in cache, against hash/crc32;
// and CopySums of one block against a copy and hash/crc32.
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
	dst := make([]byte, BlockSize)
	var sums [1]uint32
	b.Run("copy+hash-crc32", func(b *testing.B) {
		b.SetBytes(BlockSize)
		for b.Loop() {
			copy(dst, blk)
			sink += crc32.Checksum(blk, castagnoli)
		}
	})
	b.Run("CopySums", func(b *testing.B) {
		b.SetBytes(BlockSize)
		for b.Loop() {
			CopySums(dst, blk, sums[:])
		}
	})
	_ = sink
}
