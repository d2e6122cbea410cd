package member

import (
	"math/bits"
	"sync"
	"unsafe"
)

// Bounce buffers come in power-of-two size classes from 1<<minBounceShift
// to maxBounce bytes, each aligned to DirectAlignment. A run of buffers
// whose device span fits maxBounce (every request an NBD client may send
// with the default payload limit) goes through one buffer and one system
// call; longer runs are served in windows of maxBounce bytes.
const (
	minBounceShift = 12
	maxBounceShift = 25
	maxBounce      = 1 << maxBounceShift
)

// bouncePools holds *[]byte, by size class (index shift-minBounceShift).
var bouncePools [maxBounceShift - minBounceShift + 1]sync.Pool

// getBounce returns a buffer of at least n ≤ maxBounce bytes, aligned to
// DirectAlignment, with arbitrary contents. Give it back with putBounce.
func getBounce(n int) *[]byte {
	shift := max(minBounceShift, bits.Len(uint(n-1)))
	if v := bouncePools[shift-minBounceShift].Get(); v != nil {
		return v.(*[]byte)
	}
	size := 1 << shift
	b := make([]byte, size+DirectAlignment)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) & (DirectAlignment - 1)); r != 0 {
		skip = DirectAlignment - r
	}
	b = b[skip : skip+size : skip+size]
	return &b
}

func putBounce(b *[]byte) {
	bouncePools[bits.Len(uint(cap(*b)-1))-minBounceShift].Put(b)
}

// window describes the aligned span of the device that covers the next
// part of a request that is not aligned for O_DIRECT.
type window struct {
	start int64 // aligned device offset of the window
	skip  int   // bytes between start and the first byte of the request
	want  int   // request bytes covered by this window
	span  int   // aligned length of the window
}

// nextWindow returns the window, aligned to align and at most maxBounce
// bytes long, covering the request bytes starting at device offset pos, of
// which rem remain.
func nextWindow(pos, rem, align int64) window {
	mask := align - 1
	w := window{start: pos &^ mask}
	w.skip = int(pos - w.start)
	w.want = int(min(rem, int64(maxBounce-w.skip)))
	w.span = int((int64(w.skip+w.want) + mask) &^ mask)
	return w
}

// scatter copies src into the concatenation of bufs, starting pos bytes
// into it.
func scatter(bufs [][]byte, pos int64, src []byte) {
	for _, b := range bufs {
		if len(src) == 0 {
			return
		}
		if pos >= int64(len(b)) {
			pos -= int64(len(b))
			continue
		}
		n := copy(b[pos:], src)
		src, pos = src[n:], 0
	}
}

// gather fills dst from the concatenation of bufs, starting pos bytes into
// it.
func gather(dst []byte, bufs [][]byte, pos int64) {
	for _, b := range bufs {
		if len(dst) == 0 {
			return
		}
		if pos >= int64(len(b)) {
			pos -= int64(len(b))
			continue
		}
		n := copy(dst, b[pos:])
		dst, pos = dst[n:], 0
	}
}

// readBounce reads the want bytes bufs hold, in order, from device offset
// off through an aligned bounce buffer: one read(2) per window of up to
// maxBounce bytes, so a run of chunks that are not aligned for O_DIRECT
// still costs one system call, not one per chunk. The caller has clamped
// [off, off+want) to Size, which is a multiple of DirectAlignment, so every
// window lies inside the device. bufs are not retained.
func (m *File) readBounce(bufs [][]byte, off, want int64) (int, error) {
	done := int64(0)
	for done < want {
		w := nextWindow(off+done, want-done, m.align)
		bp := getBounce(w.span)
		buf := (*bp)[:w.span]
		got, err := m.pread(buf, w.start)
		avail := min(max(got-w.skip, 0), w.want)
		scatter(bufs, done, buf[w.skip:w.skip+avail])
		putBounce(bp)
		done += int64(avail)
		if err != nil {
			return int(done), err
		}
	}
	return int(done), nil
}

// edgeLocks is the number of stripes of File.edges.
const edgeLocks = 64

// lockEdges locks the edge-block stripes of the window [start, start+span)
// whose first (head) or last (tail) alignment block is only partly written,
// in ascending stripe order. It returns the stripes for unlockEdges.
func (m *File) lockEdges(start int64, span int, head, tail bool) (idx [2]int, n int) {
	if head {
		idx[n] = int(uint64(start/m.align) % edgeLocks)
		n++
	}
	if tail {
		t := int(uint64((start+int64(span))/m.align-1) % edgeLocks)
		if n == 0 || t != idx[0] {
			idx[n] = t
			n++
		}
	}
	if n == 2 && idx[1] < idx[0] {
		idx[0], idx[1] = idx[1], idx[0]
	}
	for i := 0; i < n; i++ {
		m.edges[idx[i]].Lock()
	}
	return idx, n
}

// unlockEdges unlocks what lockEdges locked.
func (m *File) unlockEdges(idx [2]int, n int) {
	for i := n - 1; i >= 0; i-- {
		m.edges[idx[i]].Unlock()
	}
}

// writeBounce writes the want bytes bufs hold, in order, at device offset
// off through an aligned bounce buffer: one write(2) per window of up to
// maxBounce bytes, after reading the partially covered edge blocks of the
// window, if any (read-modify-write). Callers never issue overlapping
// requests concurrently, but two requests that do not overlap can still
// share an alignment block; the read-modify-write of a partly covered block
// therefore holds that block's stripe of m.edges until its write is done,
// so neither request loses the other's bytes. With dsync each window is
// written with RWF_DSYNC (WritevAtDSync). bufs are not retained.
func (m *File) writeBounce(bufs [][]byte, off, want int64, dsync bool) (int, error) {
	a := int(m.align)
	done := int64(0)
	for done < want {
		w := nextWindow(off+done, want-done, m.align)
		bp := getBounce(w.span)
		buf := (*bp)[:w.span]
		head := w.skip != 0
		tail := w.skip+w.want != w.span && (w.skip == 0 || w.span > a)
		locked, nlocked := m.lockEdges(w.start, w.span, head, tail)
		if head {
			if _, err := m.pread(buf[:a], w.start); err != nil {
				m.unlockEdges(locked, nlocked)
				putBounce(bp)
				return int(done), err
			}
		}
		if tail {
			last := w.span - a
			if _, err := m.pread(buf[last:w.span], w.start+int64(last)); err != nil {
				m.unlockEdges(locked, nlocked)
				putBounce(bp)
				return int(done), err
			}
		}
		gather(buf[w.skip:w.skip+w.want], bufs, done)
		var put int
		var err error
		if dsync {
			one := [1][]byte{buf}
			if put, err = m.vectored(one[:], w.start, sysPwritevDSync); err != nil {
				err = m.wrap("pwritev2", err)
			}
		} else {
			put, err = m.pwrite(buf, w.start)
		}
		m.unlockEdges(locked, nlocked)
		putBounce(bp)
		if err != nil {
			return int(done) + min(max(put-w.skip, 0), w.want), err
		}
		done += int64(w.want)
	}
	return int(done), nil
}

// testHookIO, when set by a test, is called before every read or write
// system call on a member's data (pread, pwrite, preadv, pwritev), with
// the device offset and the bytes asked for.
var testHookIO func(m *File, write bool, off int64, n int)

// pread reads p at off with the os.File's ReadAt, which holds the
// descriptor's reference for the call.
func (m *File) pread(p []byte, off int64) (int, error) {
	if testHookIO != nil {
		testHookIO(m, false, off, len(p))
	}
	if m.mapped.data != nil {
		one := [1][]byte{p}
		if n, ok := m.readMapped(one[:], off, int64(len(p)), nil); ok {
			return n, nil
		}
	}
	return m.f.ReadAt(p, off)
}

// pwrite writes p at off with the os.File's WriteAt, which holds the
// descriptor's reference for the call.
func (m *File) pwrite(p []byte, off int64) (int, error) {
	m.beginWrite() // before the hook: a test's hook holds a write in flight
	defer m.endWrite()
	if testHookIO != nil {
		testHookIO(m, true, off, len(p))
	}
	if m.mapped.data != nil {
		one := [1][]byte{p}
		if n, ok := m.writeMapped(one[:], off, int64(len(p)), nil); ok {
			return n, nil
		}
	}
	n, err := m.f.WriteAt(p, off)
	m.wrote(off, int64(n)) // a no-op unless mapped
	return n, err
}
