// Package crc32c computes the CRC32C (Castagnoli) of the 4 KiB blocks that
// package raid's per-block checksums cover, and copies bytes while it does.
//
// Sum is hash/crc32's Castagnoli checksum, bit for bit. Where the CPU has
// AVX-512 carry-less multiplies (VPCLMULQDQ on ZMM registers) it folds 256
// bytes at a time in four independent registers, the way the Intel white
// paper "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"
// folds 64, and hands the last 16 bytes to the CRC32 instruction: a 4 KiB
// block in cache costs half what hash/crc32 (three interleaved CRC32
// instruction streams) does. Elsewhere Sum is hash/crc32.
//
// CopySums copies and checksums in one pass: each 256 bytes are loaded
// into registers once, stored to the destination and folded. A member held
// in memory (a tmpfs file mapped by package member) writes a checksummed
// array's blocks with it, so that the CRC costs the copy's loads instead of
// a second pass over bytes that are, by then, out of the first-level cache.
package crc32c

import "hash/crc32"

// BlockSize is the block CopySums gives one checksum: a data block of
// package raid's checksums.
const BlockSize = 4096

// foldUnit is the granule of the folding kernels: they take a whole
// number of them.
const foldUnit = 256

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Sum returns the CRC32C of p (crc32.Checksum(p, crc32.MakeTable(crc32.Castagnoli))).
func Sum(p []byte) uint32 {
	if !haveFold || len(p) < foldUnit {
		return crc32.Checksum(p, castagnoli)
	}
	n := len(p) &^ (foldUnit - 1)
	c := ^foldKernel(^uint32(0), p[:n])
	if n < len(p) {
		c = crc32.Update(c, castagnoli, p[n:])
	}
	return c
}

// CopySums copies src to dst (copy(dst, src); dst must be at least as long)
// and sets sums[i] to the Sum of src's i-th block of BlockSize bytes (the
// last may be short). sums must hold one entry per block.
func CopySums(dst, src []byte, sums []uint32) {
	_ = dst[:len(src)]
	for i := 0; len(src) > 0; i++ {
		n := min(len(src), BlockSize)
		b := src[:n]
		if !haveFold || n < foldUnit {
			copy(dst, b)
			sums[i] = crc32.Checksum(b, castagnoli)
		} else {
			w := n &^ (foldUnit - 1)
			c := ^copyFoldKernel(^uint32(0), b[:w], dst[:w])
			if w < n {
				copy(dst[w:], b[w:])
				c = crc32.Update(c, castagnoli, b[w:])
			}
			sums[i] = c
		}
		src, dst = src[n:], dst[n:]
	}
}
