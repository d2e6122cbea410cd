//go:build !purego

package crc32c

import "golang.org/x/sys/cpu"

// haveFold reports whether the folding kernels can run here.
var haveFold = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasSSE42

// foldAVX512 returns the CRC32C state (not inverted) after p from state
// crc (kernel_amd64.s). len(p) must be a positive multiple of foldUnit.
//
//go:noescape
func foldAVX512(crc uint32, p []byte) uint32

// copyFoldAVX512 is foldAVX512 that also copies p to dst.
//
//go:noescape
func copyFoldAVX512(crc uint32, p []byte, dst []byte) uint32

func foldKernel(crc uint32, p []byte) uint32          { return foldAVX512(crc, p) }
func copyFoldKernel(crc uint32, p, dst []byte) uint32 { return copyFoldAVX512(crc, p, dst) }
