package parity

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
func XOR(dst []byte, src [][]byte) int {
	n := len(dst) &^ (xorBlock - 1)
	if !haveXORKernel || n == 0 || len(src) == 0 {
		return 0
	}
	for _, s := range src {
		if len(s) < n {
			panic("parity: xor: source shorter than destination")
		}
	}
	xorKernel(&dst[0], src, n)
	return n
}
