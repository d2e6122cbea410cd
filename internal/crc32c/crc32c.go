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
