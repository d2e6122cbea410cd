//go:build !purego

package parity

import "golang.org/x/sys/cpu"

// haveXORKernel reports whether xorAVX2 can run here.
var haveXORKernel = cpu.X86.HasAVX2

// xorAVX2 sets dst[:n] to the XOR of src[i][:n] (xor_amd64.s). n must be a
// multiple of xorBlock, src non-empty and every slice at least n long.
//
//go:noescape
func xorAVX2(dst *byte, src [][]byte, n int)

func xorKernel(dst *byte, src [][]byte, n int) { xorAVX2(dst, src, n) }

// xorAVX2NT is xorAVX2 with non-temporal stores, fenced; dst must be
// 32-byte aligned.
//
//go:noescape
func xorAVX2NT(dst *byte, src [][]byte, n int)

func xorKernelNT(dst *byte, src [][]byte, n int) { xorAVX2NT(dst, src, n) }
