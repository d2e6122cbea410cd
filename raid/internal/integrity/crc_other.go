//go:build !amd64 || purego

package integrity

const haveFold = false

func foldKernel(crc uint32, p []byte) uint32 { panic("integrity: no CRC32C folding kernel") }
