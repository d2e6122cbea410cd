//go:build !purego

package raid6

import "golang.org/x/sys/cpu"

// haveSyndromeKernel reports whether genSyndromeAVX2 can run here.
var haveSyndromeKernel = cpu.X86.HasAVX2

// genSyndromeAVX2 sets p[:n] and q[:n] to the P and Q of data[i][:n]
// (syndrome_amd64.s). n must be a multiple of syndromeBlock and every
// slice at least n long; data must not be empty.
//
//go:noescape
func genSyndromeAVX2(data [][]byte, p, q *byte, n int)

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
	genSyndromeAVX2(data, &p[0], &q[0], n)
	return n
}
