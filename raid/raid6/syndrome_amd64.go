//go:build !purego

package raid6

import "golang.org/x/sys/cpu"

// haveSyndromeKernel reports whether genSyndromeAVX2 can run here, and
// useAVX512 whether genSyndromeAVX512 can (and runs instead).
var (
	haveSyndromeKernel = cpu.X86.HasAVX2
	useAVX512          = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW
)

// genSyndromeAVX2 sets p[:n] and q[:n] to the P and Q of data[i][:n]
// (syndrome_amd64.s). n must be a multiple of syndromeBlock and every
// slice at least n long; data must not be empty.
//
//go:noescape
func genSyndromeAVX2(data [][]byte, p, q *byte, n int)

// genSyndromeAVX512 is genSyndromeAVX2 with AVX-512 (F and BW).
//
//go:noescape
func genSyndromeAVX512(data [][]byte, p, q *byte, n int)

// genSyndrome computes P and Q of the longest prefix of data it can (a
// multiple of syndromeBlock bytes) and returns its length: 0 without the
// kernel.
func genSyndrome(data [][]byte, p, q []byte) int {
	n := len(p) &^ (syndromeBlock - 1)
	if !haveSyndromeKernel || n == 0 || len(data) == 0 || len(q) < n {
		return 0
	}
	for _, d := range data {
		if len(d) < n {
			panic("raid6: syndrome: data shorter than parity")
		}
	}
	if useAVX512 {
		genSyndromeAVX512(data, &p[0], &q[0], n)
	} else {
		genSyndromeAVX2(data, &p[0], &q[0], n)
	}
	return n
}
