package integrity

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/raidd/raidd/internal/crc32c"
)

// On-disk format of the checksum area (see doc.go): an array of 4 KiB
// pages. Page i holds the checksums of data blocks [i*PerPage,
// (i+1)*PerPage) as little-endian uint32 entries, then, in its last 4
// bytes, the CRC32C of the page index (8 bytes, little-endian) followed by
// the first PageSize-4 bytes of the page. An all-zero page is valid (a
// fresh area: every block a hole).
const (
	// BlockSize is the data block one checksum covers.
	BlockSize = 4096
	// PageSize is the size of one checksum page.
	PageSize = 4096
	// PerPage is the number of block checksums in one page.
	PerPage = (PageSize - 4) / 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var le = binary.LittleEndian

// AreaSize returns the bytes of checksum area needed for a data region of
// dataSize bytes: one page per PerPage blocks, rounded up.
func AreaSize(dataSize int64) int64 {
	if dataSize <= 0 {
		return 0
	}
	blocks := (dataSize + BlockSize - 1) / BlockSize
	return (blocks + PerPage - 1) / PerPage * PageSize
}

// Sum returns the checksum stored for a data block: its CRC32C
// (crc32c.Sum: hash/crc32's, computed with AVX-512 where the CPU has it).
func Sum(block []byte) uint32 { return crc32c.Sum(block) }

// Matches reports whether block agrees with the stored entry e. Entry 0
// means a hole (the block reads as zeroes) and also matches a block whose
// CRC is 0, which is how such a block is stored.
func Matches(block []byte, e uint32) bool {
	if e == 0 && isZero(block) {
		return true
	}
	return Sum(block) == e
}

// pageSum is the self-checksum of page idx with contents b.
func pageSum(idx int64, b []byte) uint32 {
	var h [8]byte
	le.PutUint64(h[:], uint64(idx))
	c := crc32.Update(0, castagnoli, h[:])
	return crc32.Update(c, castagnoli, b[:PageSize-4])
}

// SealPage sets the self-checksum of page idx (b is PageSize bytes).
func SealPage(idx int64, b []byte) { le.PutUint32(b[PageSize-4:], pageSum(idx, b)) }

// PageValid reports whether b (PageSize bytes) is a valid page idx: all
// zero, or carrying its correct self-checksum.
func PageValid(idx int64, b []byte) bool {
	if len(b) != PageSize {
		return false
	}
	if le.Uint32(b[PageSize-4:]) == pageSum(idx, b) {
		return true
	}
	return isZero(b)
}

// Entry returns entry i (0 <= i < PerPage) of page b.
func Entry(b []byte, i int) uint32 { return le.Uint32(b[4*i:]) }

func setEntry(b []byte, i int, e uint32) { le.PutUint32(b[4*i:], e) }

var zeroBlock [BlockSize]byte

func isZero(p []byte) bool {
	for len(p) > 0 {
		n := min(len(p), BlockSize)
		if string(p[:n]) != string(zeroBlock[:n]) {
			return false
		}
		p = p[n:]
	}
	return true
}
