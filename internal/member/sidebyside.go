package member

import (
	"runtime/debug"
	"unsafe"
)

// Reading several members held in memory side by side.
//
// A RAID5 write smaller than a stripe reads the old data and the old
// parity before it writes (a read-modify-write; RAID6 also the old Q, a
// reconstruct-write the row's other data chunks): small reads of different
// members, each a copy out of a page that, on a random workload, is out of
// the cache and out of the TLB. One such copy waits for memory line after
// line; the CPU's prefetcher only starts on a page once the copy has
// reached it. Copied one after the other, the reads wait in turn. Copied
// side by side, a piece of each at a time, their waits overlap: on this
// project's machines two random 4 KiB pages out of a 2 GiB tmpfs mapping
// cost 2.3-2.6 µs copied in 512-byte pieces taken in turn, against
// 3.0-3.3 µs copied one after the other (about what one page costs alone);
// prefetching the second page's lines before the first copy gained nothing
// (3.1 µs: the prefetches fill the same miss buffers the copy needs).

// maxSideBySide bounds the reads ReadSideBySide takes: the data and
// parities of a read-modify-write, or a reconstruct-write's other data
// chunks of a wide array.
const maxSideBySide = 16

// sidePiece is how much of one read is copied before the next read's turn.
const sidePiece = 512

// SideRead is one read of ReadSideBySide: len(P) bytes of member F at Off.
type SideRead struct {
	F   *File
	P   []byte
	Off int64
}

// ReadSideBySide serves reads of members held in memory (each a different
// member, or the same one at different offsets) as copies out of their
// mappings taken side by side, a piece of each in turn. It returns true
// when every read was served so, in full. It returns false when any of
// them cannot be, before copying anything or after a copy faulted (the
// file shrank behind the member's back): the buffers' contents are then
// undefined, and the caller reads each with ReadAt, which reports the
// cause. Reads it takes are those ReadAt would serve from the mapping:
// within Size, of pages that hold data, of a member opened without
// O_DIRECT and neither closed nor shrunk.
func ReadSideBySide(reads []SideRead) bool {
	if len(reads) < 2 || len(reads) > maxSideBySide || testHookIO != nil {
		return false
	}
	for _, r := range reads {
		f, n := r.F, int64(len(r.P))
		if f.direct || f.closed.Load() || f.shrunk.Load() || !f.mappable(r.Off, n) || !f.allData(r.Off, n) {
			return false
		}
	}
	// Read-lock each member's mapping once, in address order: Close's
	// unmap takes one mapping's lock at a time, but a writer waiting on a
	// lock blocks later readers, so two calls taking the same locks in
	// different orders could each hold one lock and wait for the other's.
	var locked [maxSideBySide]*File
	nl := 0
	for _, r := range reads {
		i := 0
		for i < nl && uintptr(unsafe.Pointer(locked[i])) < uintptr(unsafe.Pointer(r.F)) {
			i++
		}
		if i < nl && locked[i] == r.F {
			continue
		}
		copy(locked[i+1:nl+1], locked[i:nl])
		locked[i] = r.F
		nl++
	}
	for _, f := range locked[:nl] {
		f.mapped.mu.RLock()
	}
	defer func() {
		for _, f := range locked[:nl] {
			f.mapped.mu.RUnlock()
		}
	}()
	for _, f := range locked[:nl] {
		if f.mapped.mem == nil {
			return false // unmapped by Close since mappable
		}
		if testHookMapped != nil {
			testHookMapped(f, false)
		}
	}
	return copySideBySide(reads)
}

// copySideBySide copies every read out of its member's mapping, sidePiece
// bytes of each in turn; false if a copy faulted. The caller holds the
// mappings' locks.
func copySideBySide(reads []SideRead) (ok bool) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if recover() != nil {
			ok = false
		}
	}()
	for at := 0; ; at += sidePiece {
		more := false
		for _, r := range reads {
			if at >= len(r.P) {
				continue
			}
			end := min(at+sidePiece, len(r.P))
			copy(r.P[at:end], r.F.mapped.mem[r.Off+int64(at):])
			more = more || end < len(r.P)
		}
		if !more {
			return true
		}
	}
}
