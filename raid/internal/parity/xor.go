package parity

import "unsafe"

// xorBlock is what the one-pass XOR kernel (xorKernel, where the platform
// has one) computes per step: XOR computes the longest prefix of its
// destination that is a multiple of it.
const xorBlock = 128

// XOR sets dst[:n] to the XOR of src[i][:n] over every source, in one pass
// that reads each source byte once and writes each dst byte once, for the
// longest prefix n of dst that is a multiple of 128 bytes, and returns n.
// It returns 0, computing nothing, where there is no kernel (other
// platforms, CPUs without AVX2, the purego build tag) or src is empty: the
// caller computes dst[n:] its own way (RAID5's encoder: the library).
// Every source must be at least n bytes long. dst may be one of the
// sources itself (the same start), but must not otherwise overlap one.
func XOR(dst []byte, src [][]byte) int { return xor(dst, src, false) }

// XORStream is XOR, but it writes dst with non-temporal stores when dst
// is 32-byte aligned: stores that go to memory without first reading
// dst's lines into the cache, and leave none of them there (fenced before
// it returns). That is for parity computed straight into a member held in
// memory (raid.Op.WriteFill) over bytes out of the cache that nothing
// reads soon: a full stripe's or a reconstruct-write's parity. Parity
// over bytes just read (a read-modify-write's) is in the cache and takes
// XOR.
func XORStream(dst []byte, src [][]byte) int { return xor(dst, src, true) }

func xor(dst []byte, src [][]byte, stream bool) int {
	n := len(dst) &^ (xorBlock - 1)
	if !haveXORKernel || n == 0 || len(src) == 0 {
		return 0
	}
	for _, s := range src {
		if len(s) < n {
			panic("parity: xor: source shorter than destination")
		}
	}
	xorKernel(&dst[0], src, n, stream && uintptr(unsafe.Pointer(&dst[0]))&31 == 0)
	return n
}
