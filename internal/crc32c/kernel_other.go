//go:build !amd64 || purego

package crc32c

const haveFold = false

func foldKernel(crc uint32, p []byte) uint32 { panic("crc32c: no folding kernel") }

func copyFoldKernel(crc uint32, p, dst []byte) uint32 { panic("crc32c: no folding kernel") }
