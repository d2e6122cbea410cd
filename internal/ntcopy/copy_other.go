//go:build !amd64 || purego

package ntcopy

func streamBlocks(dst, src *byte, n int) { panic("ntcopy: no kernel") }

const haveStream = false
