package member

import "unsafe"

// Prefetching a member held in memory.
//
// A RAID5 or RAID6 write smaller than a stripe reads the old data and
// parity it overwrites (a read-modify-write). On members held in memory
// those reads are copies out of the member's pages, and on a random
// workload the pages are out of the cache (and out of the TLB): the copy
// waits for memory line by line. The NBD server knows the write's range as
// soon as it has parsed the request header, well before the request
// reaches a worker, which first receives the payload and wakes one: the
// array asks its members to prefetch the ranges then (raid.Array.Prefetch),
// so that the memory reads overlap that work. A prefetch is a hint that
// never faults, so it needs neither the mapping's lock nor a check that
// the pages hold data: an address unmapped meanwhile, or a hole, is
// ignored by the CPU.
//
// One line per page is asked for, not every line: what the copy waits for
// most is the page walk of a page out of the TLB (4 KiB pages over
// gigabytes of members, where the page tables are out of the cache too),
// and the first line's fetch starts the CPU's own prefetcher on the rest.
// On RAID5 random 4 KiB writes on tmpfs (bench/nbd-ab.sh, 4 rounds): a
// line per page, 388-415 against 347-378 MB/s without, at the same CPU
// per GiB; every line (64 per page), no faster and 8% more CPU (the
// prefetches fill the CPU's miss buffers and stall the NBD reader that
// issues them); a line per KiB, the same as one per page.

// Prefetch asks for [off, off+n) of a member held in memory and mapped to
// be brought into the CPU's cache. It does nothing on other members, and
// costs no system call and no lock.
func (m *File) Prefetch(off, n int64) {
	base := m.mapped.base.Load()
	if base == 0 || off < 0 || n <= 0 || off+n > m.mapped.end {
		return
	}
	prefetch(base+uintptr(off), uintptr(n))
}

// mappedBase is the address of the first byte of mem (0 for none), for
// Prefetch.
func mappedBase(mem []byte) uintptr {
	if len(mem) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&mem[0]))
}
