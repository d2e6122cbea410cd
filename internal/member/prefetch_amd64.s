//go:build !purego

#include "textflag.h"

// func prefetch(p, n uintptr)
// Asks for the first line of every page [p, p+n) touches to be loaded into
// the cache (PREFETCHT0 every 4096 bytes from p). A prefetch never faults:
// an address that is not mapped, or a page not yet present, is ignored.
TEXT ·prefetch(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	ADDQ AX, CX

loop:
	CMPQ       AX, CX
	JAE        done
	PREFETCHT0 (AX)
	ADDQ       $4096, AX
	JMP        loop

done:
	RET
