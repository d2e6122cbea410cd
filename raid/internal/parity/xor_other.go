//go:build !amd64 || purego

package parity

// haveXORKernel: there is no one-pass XOR kernel on this platform; XOR
// computes nothing and RAID5 uses the library.
var haveXORKernel = false

func xorKernel(dst *byte, src [][]byte, n int, stream bool) { panic("parity: no xor kernel") }
