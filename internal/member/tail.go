package member

import (
	"os"
	"runtime/debug"
	"sync"

	"golang.org/x/sys/unix"
)

// The size check after a write to a regular file, without a system call.
//
// A write to a file that was truncated behind the member's back extends it
// again and leaves holes that read back as zeroes, so every write must find
// out whether the file is still Size bytes long. An fstat after each write
// answers that, but costs a system call per member write (a third of the
// system calls of a 4 KiB random write). Instead, the File keeps a
// read-only shared mapping of the file's last page, and after a write it
// loads one byte of it: the kernel unmaps the pages of a truncated range,
// and faulting one in beyond end-of-file raises SIGBUS, which
// debug.SetPanicOnFault turns into a panic that the probe recovers. So:
//
//   - A file truncated to at most the last page's start makes the probe
//     fault, whatever a write then did to the size: a write ending below
//     that page extends the file to at most its start. The fstat then
//     confirms the shrink and reports the size.
//   - A file truncated inside its last page cannot be extended by a write
//     ending below that page; every write reaching into the last page
//     (and so every write ending at Size) keeps the fstat, and a read
//     there meets end-of-file. Either reports the shrink.
//
// On a file system that keeps its files on disk the last page is mapped
// at Open, hole or not: faulting in a hole there fills a page of the page
// cache with zeroes and allocates nothing on disk (the page stays a hole
// for SEEK_DATA). On tmpfs and ramfs (holeFaults) a fault on a hole
// allocates the page and turns the hole into data, so there the mapping
// exists only while the last page holds data written through this File
// (found at Open with SEEK_DATA, made by a write into that page, or by
// ReserveTail), and Discard, Trim and ZeroRange reaching into the last
// page drop it. Close drops it everywhere. A probe that faults on a file
// that fstat finds intact (a file system whose mappings misbehave) drops
// it for good. Without a mapping, every write makes the fstat.

// tailProbe is a File's mapping of its last page.
type tailProbe struct {
	mu    sync.RWMutex // RLock: a probe runs; Lock: the mapping changes
	mem   []byte       // nil: no mapping, writes fstat
	start int64        // file offset of the last page: Size-1 rounded down to the page size
	never bool         // mappings failed or misbehaved: never map again
	// holeFaults: the file is on tmpfs or ramfs, where faulting in a
	// hole allocates it; map the last page only while it holds data.
	holeFaults bool
}

// initTail sets up the probe of a regular file opened for writing.
func (m *File) initTail() {
	if m.block || m.readOnly || m.size <= 0 {
		m.tail.never = true
		return
	}
	m.tail.start = (m.size - 1) &^ int64(os.Getpagesize()-1)
	if !m.tail.holeFaults || m.HasData(m.tail.start, m.size-m.tail.start) {
		m.mapTail()
	}
}

// mapTail maps the last page, once it holds data.
func (m *File) mapTail() {
	m.tail.mu.Lock()
	defer m.tail.mu.Unlock()
	if m.tail.mem != nil || m.tail.never || m.closed.Load() {
		return
	}
	var mem []byte
	err := m.control(func(fd int) error {
		var err error
		mem, err = unix.Mmap(fd, m.tail.start, int(m.size-m.tail.start), unix.PROT_READ, unix.MAP_SHARED)
		return err
	})
	if err != nil {
		m.tail.never = true
		return
	}
	m.tail.mem = mem
}

// unmapTail drops the mapping; never also forbids a new one.
func (m *File) unmapTail(never bool) {
	m.tail.mu.Lock()
	defer m.tail.mu.Unlock()
	if never {
		m.tail.never = true
	}
	if m.tail.mem != nil {
		_ = unix.Munmap(m.tail.mem)
		m.tail.mem = nil
	}
}

// tailIntact reports whether the probe shows the last page inside the
// file; false also when there is no mapping.
func (m *File) tailIntact() bool {
	m.tail.mu.RLock()
	defer m.tail.mu.RUnlock()
	return m.tail.mem != nil && loadByte(&m.tail.mem[len(m.tail.mem)-1])
}

// loadByte loads *p and reports false if that faulted.
func loadByte(p *byte) (ok bool) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if recover() != nil {
			ok = false
		}
	}()
	load(p)
	return true
}

// load reads *p; it is not inlined, so the load cannot be optimised away.
//
//go:noinline
func load(p *byte) byte { return *p }

// checkWrite verifies, after a write ending at end to a regular file, that
// the file is still Size bytes long (see the comment at the top of this
// file): the probe for a write below the last page, the fstat of checkSize
// otherwise, or when the probe is unavailable or faults. A write into the
// last page that succeeded (wrote) and finds the file intact sets up the
// probe.
func (m *File) checkWrite(op string, end int64, wrote bool) error {
	if m.block {
		return nil
	}
	if end <= m.tail.start && m.tailIntact() {
		return nil
	}
	err := m.checkSize(op)
	switch {
	case err != nil:
	case end <= m.tail.start:
		if m.hasTail() {
			m.unmapTail(true) // the probe faulted on an intact file
		}
	case wrote && !m.hasTail():
		m.mapTail() // the write put data in the last page
	}
	return err
}

// hasTail reports whether the last page is mapped.
func (m *File) hasTail() bool {
	m.tail.mu.RLock()
	defer m.tail.mu.RUnlock()
	return m.tail.mem != nil
}

// dropTailFor drops the mapping before [off, off+n) is discarded or zeroed
// if the range reaches into the last page, which may become a hole (on
// tmpfs and ramfs only: elsewhere a mapped hole costs nothing).
func (m *File) dropTailFor(off, n int64) {
	if !m.block && m.tail.holeFaults && off+n > m.tail.start && m.hasTail() {
		m.unmapTail(false)
	}
}

// ReserveTail tells the member that the array keeps nothing in [from,
// Size): the space past its data region, which no write of the array
// ever reaches (a member's size is rarely a whole number of chunks past
// its header). On tmpfs and ramfs, if the last page lies in that range
// and holds no data, it is written with zeroes once, so that the size
// check after each write loads from its mapping instead of making an
// fstat: without it, such a member whose last page is never written pays
// one fstat per write for as long as it is open. Nothing happens
// elsewhere (the last page is mapped already, hole or not), on block
// devices, read-only members, members opened over data in their last
// page, or when from reaches into the last page (the array's own writes
// put data there). A failed write is returned; the member then keeps the
// fstat.
func (m *File) ReserveTail(from int64) error {
	if m.block || m.readOnly || from > m.tail.start || m.hasTail() {
		return nil
	}
	if m.HasData(m.tail.start, m.size-m.tail.start) {
		return nil // intact data nobody told us about: a write maps it
	}
	_, err := m.WriteAt(make([]byte, m.size-m.tail.start), m.tail.start)
	return err
}
