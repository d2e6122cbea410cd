//go:build !purego

package ntcopy

// streamBlocks copies n bytes, a positive multiple of 64, from src to
// the 16-byte aligned dst with non-temporal stores (MOVNTDQ), followed
// by SFENCE (copy_amd64.s).
//
//go:noescape
func streamBlocks(dst, src *byte, n int)

const haveStream = true
