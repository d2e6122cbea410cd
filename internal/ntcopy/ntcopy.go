// Package ntcopy copies into memory that will not be read again soon
// with non-temporal stores.
//
// A store into a line that is not in the cache first reads the line from
// memory (a read for ownership), then writes it back later: a 4 KiB write
// into a member held in memory (a tmpfs page out of the cache, as every
// random write's is) costs the memory 8 KiB of traffic and the copy the
// latency of 64 line reads. A non-temporal store writes whole lines
// through the write-combining buffers without reading them and leaves no
// copy in the cache, which the member's page does not need: the engine
// reads it back only through a later read or read-modify-write, seldom
// soon. Copy uses them for copies of at least Min bytes on amd64 (SSE2
// MOVNTDQ, which every amd64 CPU has), and the built-in copy elsewhere and
// for smaller copies.
package ntcopy

import "unsafe"

// Min is the smallest copy Copy streams: below it, the built-in copy,
// whose lines stay cached for the reads that often follow a small copy.
const Min = 4096

// Copy copies min(len(dst), len(src)) bytes from src to dst, as the
// built-in copy does, but with non-temporal stores for the 64-byte blocks
// of dst from its first 16-byte boundary when there are at least Min
// bytes. The stores are fenced (SFENCE) before Copy returns, so that they
// are ordered before every later store, as a plain copy's are. dst and src
// must not overlap.
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if !haveStream || n < Min {
		return copy(dst, src)
	}
	head := int(-uintptr(unsafe.Pointer(&dst[0])) & 15)
	body := (n - head) &^ 63
	copy(dst[:head], src[:head])
	streamBlocks(&dst[head], &src[head], body)
	copy(dst[head+body:n], src[head+body:n])
	return n
}
