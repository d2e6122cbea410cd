package integrity_test

import (
	"testing"

	"github.com/raidd/raidd/raid/internal/integrity"
)

// FuzzPage checks the checksum-page parser: PageValid never panics, accepts
// an all-zero page and any sealed page, and rejects a sealed page moved to
// another index or with any one bit flipped.
func FuzzPage(f *testing.F) {
	f.Add(int64(0), []byte{})
	f.Add(int64(7), make([]byte, integrity.PageSize))
	f.Add(int64(1), []byte("some entries"))
	f.Fuzz(func(t *testing.T, idx int64, b []byte) {
		integrity.PageValid(idx, b) // any input: no panic
		page := make([]byte, integrity.PageSize)
		copy(page, b)
		integrity.SealPage(idx, page)
		if !integrity.PageValid(idx, page) {
			t.Fatal("a sealed page is invalid")
		}
		for i := 0; i < integrity.PerPage; i++ {
			_ = integrity.Entry(page, i)
		}
		if integrity.PageValid(idx+1, page) && !allZero(page) {
			t.Fatal("a page is valid at another index")
		}
		bit := int(uint64(idx) % (integrity.PageSize * 8))
		page[bit/8] ^= 1 << (bit % 8)
		if integrity.PageValid(idx, page) && !allZero(page) {
			t.Fatalf("a one-bit flip at bit %d went unnoticed", bit)
		}
	})
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
