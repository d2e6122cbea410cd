//go:build !purego

#include "textflag.h"

// func xorAVX2(dst *byte, src [][]byte, n int, stream bool)
//
// For each 128 bytes: load src[0], XOR every further source into the four
// registers, store to dst. Every source byte is read once and dst written
// once. Each block is loaded in full before it is stored, so dst may be
// src[0] itself. n is a multiple of 128, len(src) >= 1. Without stream the
// stores are regular (a parity read again right away, to be copied to its
// member); with it they are non-temporal (VMOVNTDQ, dst 32-byte aligned)
// and fenced (SFENCE) before the return: a parity that goes straight into
// a member's memory out of the cache and is not read again soon.
TEXT ·xorAVX2(SB), NOSPLIT, $0-41
	MOVQ    dst+0(FP), DI
	MOVQ    src_base+8(FP), SI
	MOVQ    src_len+16(FP), CX
	MOVQ    n+32(FP), BX
	MOVBLZX stream+40(FP), DX

	// R10 = &src[len(src)] (slice headers are 24 bytes)
	IMUL3Q $24, CX, R10
	ADDQ   SI, R10
	XORQ   R9, R9 // byte offset

loop:
	CMPQ    R9, BX
	JAE     done
	MOVQ    (SI), R8
	VMOVDQU (R8)(R9*1), Y0
	VMOVDQU 32(R8)(R9*1), Y1
	VMOVDQU 64(R8)(R9*1), Y2
	VMOVDQU 96(R8)(R9*1), Y3
	LEAQ    24(SI), R11

next:
	CMPQ  R11, R10
	JAE   store
	MOVQ  (R11), R8
	VPXOR (R8)(R9*1), Y0, Y0
	VPXOR 32(R8)(R9*1), Y1, Y1
	VPXOR 64(R8)(R9*1), Y2, Y2
	VPXOR 96(R8)(R9*1), Y3, Y3
	ADDQ  $24, R11
	JMP   next

store:
	TESTB   DX, DX
	JNZ     stream
	VMOVDQU Y0, (DI)(R9*1)
	VMOVDQU Y1, 32(DI)(R9*1)
	VMOVDQU Y2, 64(DI)(R9*1)
	VMOVDQU Y3, 96(DI)(R9*1)
	ADDQ    $128, R9
	JMP     loop

stream:
	VMOVNTDQ Y0, (DI)(R9*1)
	VMOVNTDQ Y1, 32(DI)(R9*1)
	VMOVNTDQ Y2, 64(DI)(R9*1)
	VMOVNTDQ Y3, 96(DI)(R9*1)
	ADDQ     $128, R9
	JMP      loop

done:
	TESTB DX, DX
	JZ    ret
	SFENCE

ret:
	VZEROUPPER
	RET

