//go:build !purego

package parity

import "golang.org/x/sys/cpu"

// haveXORKernel reports whether xorAVX2 can run here.
var haveXORKernel = cpu.X86.HasAVX2

// xorAVX2 sets dst[:n] to the XOR of src[i][:n] (xor_amd64.s), with
// non-temporal stores when stream is set (dst must then be 32-byte
// aligned). n must be a multiple of xorBlock, src non-empty and every
// slice at least n long.
//
//go:noescape
func xorAVX2(dst *byte, src [][]byte, n int, stream bool)

func xorKernel(dst *byte, src [][]byte, n int, stream bool) { xorAVX2(dst, src, n, stream) }
