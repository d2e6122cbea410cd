//go:build !purego

#include "textflag.h"

// Fold constants for CRC32C (Castagnoli), bit-reflected as in the Intel
// white paper "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ":
// to move a 128-bit lane D bits further along the message, its first 8
// bytes (the low quadword) are multiplied by x^(D+32) mod P and its last 8
// by x^(D-32) mod P, each reflected and shifted left by one
// (TestFoldConstants recomputes them). Each 16-byte pair is repeated
// for the four lanes of a ZMM register.

// D = 2048: four ZMM accumulators (256 bytes) move by 256 bytes.
DATA k2048<>+0(SB)/8, $0x0dcb17aa4
DATA k2048<>+8(SB)/8, $0x0b9e02b86
DATA k2048<>+16(SB)/8, $0x0dcb17aa4
DATA k2048<>+24(SB)/8, $0x0b9e02b86
DATA k2048<>+32(SB)/8, $0x0dcb17aa4
DATA k2048<>+40(SB)/8, $0x0b9e02b86
DATA k2048<>+48(SB)/8, $0x0dcb17aa4
DATA k2048<>+56(SB)/8, $0x0b9e02b86
GLOBL k2048<>(SB), RODATA, $64

// D = 512: one ZMM accumulator moves onto the next (64 bytes).
DATA k512<>+0(SB)/8, $0x0740eef02
DATA k512<>+8(SB)/8, $0x09e4addf8
DATA k512<>+16(SB)/8, $0x0740eef02
DATA k512<>+24(SB)/8, $0x09e4addf8
DATA k512<>+32(SB)/8, $0x0740eef02
DATA k512<>+40(SB)/8, $0x09e4addf8
DATA k512<>+48(SB)/8, $0x0740eef02
DATA k512<>+56(SB)/8, $0x09e4addf8
GLOBL k512<>(SB), RODATA, $64

// D = 128: one 128-bit lane moves onto the next.
DATA k128<>+0(SB)/8, $0x0f20c0dfe
DATA k128<>+8(SB)/8, $0x14cd00bd6
GLOBL k128<>(SB), RODATA, $16

// LOAD_256 loads the next 256 bytes of the message (SI) into Z12..Z15.
#define LOAD_256 \
	VMOVDQU64 (SI), Z12; \
	VMOVDQU64 64(SI), Z13; \
	VMOVDQU64 128(SI), Z14; \
	VMOVDQU64 192(SI), Z15

// FOLD_256 moves the four accumulators Z0..Z3 256 bytes along (times the
// constants in Z8) and adds the 256 bytes in Z12..Z15: the loop step of
// both kernels.
#define FOLD_256 \
	VPCLMULQDQ $0x11, Z8, Z0, Z4; \
	VPCLMULQDQ $0x00, Z8, Z0, Z0; \
	VPCLMULQDQ $0x11, Z8, Z1, Z5; \
	VPCLMULQDQ $0x00, Z8, Z1, Z1; \
	VPCLMULQDQ $0x11, Z8, Z2, Z6; \
	VPCLMULQDQ $0x00, Z8, Z2, Z2; \
	VPCLMULQDQ $0x11, Z8, Z3, Z7; \
	VPCLMULQDQ $0x00, Z8, Z3, Z3; \
	VPTERNLOGD $0x96, Z12, Z4, Z0; \
	VPTERNLOGD $0x96, Z13, Z5, Z1; \
	VPTERNLOGD $0x96, Z14, Z6, Z2; \
	VPTERNLOGD $0x96, Z15, Z7, Z3

// FOLD_TAIL ends both kernels: it folds the four ZMM accumulators Z0 onto
// Z1, Z1 onto Z2 and Z2 onto Z3 (64 bytes each), then the lanes of Z3 (X3,
// X1, X2, X5 in message order) onto the last, and leaves in BX the CRC of
// that lane's 16 bytes from state 0: the CRC of the whole message.
#define FOLD_TAIL \
	VMOVDQU64  k512<>(SB), Z9; \
	VPCLMULQDQ $0x11, Z9, Z0, Z4; \
	VPCLMULQDQ $0x00, Z9, Z0, Z0; \
	VPTERNLOGD $0x96, Z4, Z0, Z1; \
	VPCLMULQDQ $0x11, Z9, Z1, Z4; \
	VPCLMULQDQ $0x00, Z9, Z1, Z1; \
	VPTERNLOGD $0x96, Z4, Z1, Z2; \
	VPCLMULQDQ $0x11, Z9, Z2, Z4; \
	VPCLMULQDQ $0x00, Z9, Z2, Z2; \
	VPTERNLOGD $0x96, Z4, Z2, Z3; \
	VEXTRACTI32X4 $1, Z3, X1; \
	VEXTRACTI32X4 $2, Z3, X2; \
	VEXTRACTI32X4 $3, Z3, X5; \
	VMOVDQU       k128<>(SB), X9; \
	VPCLMULQDQ    $0x11, X9, X3, X4; \
	VPCLMULQDQ    $0x00, X9, X3, X3; \
	VPTERNLOGD    $0x96, X4, X3, X1; \
	VPCLMULQDQ    $0x11, X9, X1, X4; \
	VPCLMULQDQ    $0x00, X9, X1, X1; \
	VPTERNLOGD    $0x96, X4, X1, X2; \
	VPCLMULQDQ    $0x11, X9, X2, X4; \
	VPCLMULQDQ    $0x00, X9, X2, X2; \
	VPTERNLOGD    $0x96, X4, X2, X5; \
	VMOVQ   X5, AX; \
	VPEXTRQ $1, X5, DX; \
	VZEROUPPER; \
	XORL    BX, BX; \
	CRC32Q  AX, BX; \
	CRC32Q  DX, BX

// func foldAVX512(crc uint32, p []byte) uint32
//
// Returns the CRC32C state (not inverted) after p, starting from state crc.
// len(p) is a positive multiple of 256. Four ZMM registers (256 bytes, 16
// lanes) fold independently, so the multiplies of one do not wait for
// another's; at the end they fold onto the last one, its four lanes onto
// its last lane, and that lane's 16 bytes, which have the CRC of everything
// folded into them, go through two CRC32 instructions from state 0.
TEXT ·foldAVX512(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX

	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VPXORQ    Z4, Z4, Z4
	VMOVQ     AX, X4           // zeroes the rest of Z4
	VPXORQ    Z4, Z0, Z0       // the initial state enters with the first 4 bytes
	ADDQ      $256, SI
	SUBQ      $256, CX
	JZ        fold

	VMOVDQU64 k2048<>(SB), Z8

loop:
	LOAD_256
	FOLD_256
	ADDQ       $256, SI
	SUBQ       $256, CX
	JNZ        loop

fold:
	FOLD_TAIL
	MOVL    BX, ret+32(FP)
	RET

// func copyFoldAVX512(crc uint32, p []byte, dst []byte) uint32
//
// foldAVX512 that also copies p to dst (len(dst) >= len(p)) from the
// registers it loaded p into: one pass over p for the copy and the CRC.
// The stores are ordinary ones (a copy's destination is usually read or
// copied again soon: a member block read for a client, a mapping's page).
TEXT ·copyFoldAVX512(SB), NOSPLIT, $0-60
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	MOVQ dst_base+32(FP), DI

	VMOVDQU64 (SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VMOVDQU64 Z0, (DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z3, 192(DI)
	ADDQ      $256, DI
	VPXORQ    Z4, Z4, Z4
	VMOVQ     AX, X4           // zeroes the rest of Z4
	VPXORQ    Z4, Z0, Z0       // the initial state enters with the first 4 bytes
	ADDQ      $256, SI
	SUBQ      $256, CX
	JZ        cfold

	VMOVDQU64 k2048<>(SB), Z8

cloop:
	LOAD_256
	VMOVDQU64  Z12, (DI)
	VMOVDQU64  Z13, 64(DI)
	VMOVDQU64  Z14, 128(DI)
	VMOVDQU64  Z15, 192(DI)
	ADDQ       $256, DI
	FOLD_256
	ADDQ       $256, SI
	SUBQ       $256, CX
	JNZ        cloop

cfold:
	FOLD_TAIL
	MOVL    BX, ret+56(FP)
	RET
