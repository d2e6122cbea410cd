//go:build !amd64 || purego

package raid6

// haveSyndromeKernel: there is no one-pass kernel on this platform; encode
// uses the library's per-chunk EncodeIdx.
const haveSyndromeKernel = false

// useAVX512 selects no kernel here (see syndrome_amd64.go).
var useAVX512 = false

// genSyndrome computes nothing here (see syndrome_amd64.go).
func genSyndrome(data [][]byte, p, q []byte) int { return 0 }
