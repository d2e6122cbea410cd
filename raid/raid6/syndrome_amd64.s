//go:build !purego

#include "textflag.h"

// func genSyndromeAVX2(data [][]byte, p, q *byte, n int)
//
// md's gen_syndrome (lib/raid6/avx2.c, raid6_avx24) in one pass: for each
// 128 bytes, Horner's rule from the highest data slot down, wq = 2·wq ^ D_z
// and wp ^= D_z, with 2·x in GF(2^8)/0x11d computed bytewise as
// (x + x) ^ (0x1d where x's top bit was set). Every data byte is read once
// and P and Q are written once. n is a multiple of 128, len(data) >= 1.
TEXT ·genSyndromeAVX2(SB), NOSPLIT, $0-48
	MOVQ data_base+0(FP), SI
	MOVQ data_len+8(FP), CX
	MOVQ p+24(FP), DI
	MOVQ q+32(FP), DX
	MOVQ n+40(FP), BX

	MOVQ         $0x1d1d1d1d1d1d1d1d, AX
	MOVQ         AX, X15
	VPBROADCASTQ X15, Y15 // 0x1d in every byte
	VPXOR        Y14, Y14, Y14 // zero

	// R10 = &data[len(data)-1] (slice headers are 24 bytes)
	LEAQ  -1(CX), R10
	IMUL3Q $24, R10, R10
	ADDQ  SI, R10
	XORQ  R9, R9 // byte offset

loop:
	CMPQ R9, BX
	JAE  done
	MOVQ (R10), R8
	VMOVDQU (R8)(R9*1), Y0
	VMOVDQU 32(R8)(R9*1), Y1
	VMOVDQU 64(R8)(R9*1), Y2
	VMOVDQU 96(R8)(R9*1), Y3
	VMOVDQA Y0, Y4
	VMOVDQA Y1, Y5
	VMOVDQA Y2, Y6
	VMOVDQA Y3, Y7
	MOVQ    R10, R11

next:
	SUBQ $24, R11
	CMPQ R11, SI
	JB   store
	MOVQ (R11), R8

	// wq = 2·wq
	VPCMPGTB Y4, Y14, Y8
	VPCMPGTB Y5, Y14, Y9
	VPCMPGTB Y6, Y14, Y10
	VPCMPGTB Y7, Y14, Y11
	VPADDB   Y4, Y4, Y4
	VPADDB   Y5, Y5, Y5
	VPADDB   Y6, Y6, Y6
	VPADDB   Y7, Y7, Y7
	VPAND    Y15, Y8, Y8
	VPAND    Y15, Y9, Y9
	VPAND    Y15, Y10, Y10
	VPAND    Y15, Y11, Y11
	VPXOR    Y8, Y4, Y4
	VPXOR    Y9, Y5, Y5
	VPXOR    Y10, Y6, Y6
	VPXOR    Y11, Y7, Y7

	// wp ^= D_z, wq ^= D_z
	VMOVDQU (R8)(R9*1), Y8
	VMOVDQU 32(R8)(R9*1), Y9
	VMOVDQU 64(R8)(R9*1), Y10
	VMOVDQU 96(R8)(R9*1), Y11
	VPXOR   Y8, Y0, Y0
	VPXOR   Y9, Y1, Y1
	VPXOR   Y10, Y2, Y2
	VPXOR   Y11, Y3, Y3
	VPXOR   Y8, Y4, Y4
	VPXOR   Y9, Y5, Y5
	VPXOR   Y10, Y6, Y6
	VPXOR   Y11, Y7, Y7
	JMP     next

store:
	VMOVDQU Y0, (DI)(R9*1)
	VMOVDQU Y1, 32(DI)(R9*1)
	VMOVDQU Y2, 64(DI)(R9*1)
	VMOVDQU Y3, 96(DI)(R9*1)
	VMOVDQU Y4, (DX)(R9*1)
	VMOVDQU Y5, 32(DX)(R9*1)
	VMOVDQU Y6, 64(DX)(R9*1)
	VMOVDQU Y7, 96(DX)(R9*1)
	ADDQ    $128, R9
	JMP     loop

done:
	VZEROUPPER
	RET

// func genSyndromeAVX512(data [][]byte, p, q *byte, n int)
//
// genSyndromeAVX2 with 64-byte registers (AVX-512 F and BW): 2·wq is
// (wq + wq) ^ (0x1d where wq's top bit was set, from VPMOVB2M), and one
// VPTERNLOGD adds it and D_z to wq. n is a multiple of 128.
TEXT ·genSyndromeAVX512(SB), NOSPLIT, $0-48
	MOVQ data_base+0(FP), SI
	MOVQ data_len+8(FP), CX
	MOVQ p+24(FP), DI
	MOVQ q+32(FP), DX
	MOVQ n+40(FP), BX

	MOVQ         $0x1d1d1d1d1d1d1d1d, AX
	VPBROADCASTQ AX, Z15

	LEAQ   -1(CX), R10
	IMUL3Q $24, R10, R10
	ADDQ   SI, R10
	XORQ   R9, R9

loop512:
	CMPQ      R9, BX
	JAE       done512
	MOVQ      (R10), R8
	VMOVDQU64 (R8)(R9*1), Z0
	VMOVDQU64 64(R8)(R9*1), Z1
	VMOVDQA64 Z0, Z4
	VMOVDQA64 Z1, Z5
	MOVQ      R10, R11

next512:
	SUBQ $24, R11
	CMPQ R11, SI
	JB   store512
	MOVQ (R11), R8

	VPMOVB2M     Z4, K1
	VPMOVB2M     Z5, K2
	VPADDB       Z4, Z4, Z4
	VPADDB       Z5, Z5, Z5
	VMOVDQU8.Z   Z15, K1, Z8
	VMOVDQU8.Z   Z15, K2, Z9
	VMOVDQU64    (R8)(R9*1), Z12
	VMOVDQU64    64(R8)(R9*1), Z13
	VPTERNLOGD   $0x96, Z12, Z8, Z4
	VPTERNLOGD   $0x96, Z13, Z9, Z5
	VPXORQ       Z12, Z0, Z0
	VPXORQ       Z13, Z1, Z1
	JMP          next512

store512:
	VMOVDQU64 Z0, (DI)(R9*1)
	VMOVDQU64 Z1, 64(DI)(R9*1)
	VMOVDQU64 Z4, (DX)(R9*1)
	VMOVDQU64 Z5, 64(DX)(R9*1)
	ADDQ      $128, R9
	JMP       loop512

done512:
	VZEROUPPER
	RET
