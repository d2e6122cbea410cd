package member

import (
	"sync"
	"unsafe"
)

// bounceSize is the size of one pooled bounce buffer. Larger unaligned
// requests are split into windows of this size.
const bounceSize = 1 << 20

// bouncePool holds *[]byte of bounceSize bytes aligned to DirectAlignment.
var bouncePool = sync.Pool{New: func() any {
	b := make([]byte, bounceSize+DirectAlignment)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) & (DirectAlignment - 1)); r != 0 {
		skip = DirectAlignment - r
	}
	b = b[skip : skip+bounceSize : skip+bounceSize]
	return &b
}}

// window describes the aligned span of the device that covers the next
// part of an unaligned request.
type window struct {
	start int64 // aligned device offset of the window
	skip  int   // bytes between start and the first byte of the request
	want  int   // request bytes covered by this window
	span  int   // aligned length of the window
}

// nextWindow returns the window covering the request bytes starting at device
// offset pos, of which rem remain.
func nextWindow(pos int64, rem int) window {
	const mask = DirectAlignment - 1
	w := window{start: pos &^ mask}
	w.skip = int(pos - w.start)
	w.want = min(rem, bounceSize-w.skip)
	w.span = (w.skip + w.want + mask) &^ mask
	return w
}

// readBounce reads p at off through an aligned bounce buffer. The caller has
// clamped [off, off+len(p)) to Size, which is a multiple of DirectAlignment,
// so every window lies inside the device.
func (m *File) readBounce(p []byte, off int64) (int, error) {
	bp := bouncePool.Get().(*[]byte)
	defer bouncePool.Put(bp)
	buf := *bp
	done := 0
	for done < len(p) {
		w := nextWindow(off+int64(done), len(p)-done)
		got, err := m.f.ReadAt(buf[:w.span], w.start)
		avail := min(max(got-w.skip, 0), w.want)
		done += copy(p[done:done+avail], buf[w.skip:w.skip+avail])
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// writeBounce writes p at off through an aligned bounce buffer, reading the
// partially covered edge blocks first (read-modify-write). No lock protects
// the edge blocks: callers never issue overlapping requests concurrently.
func (m *File) writeBounce(p []byte, off int64) (int, error) {
	bp := bouncePool.Get().(*[]byte)
	defer bouncePool.Put(bp)
	buf := *bp
	done := 0
	for done < len(p) {
		w := nextWindow(off+int64(done), len(p)-done)
		if w.skip != 0 {
			if _, err := m.f.ReadAt(buf[:DirectAlignment], w.start); err != nil {
				return done, err
			}
		}
		if end := w.skip + w.want; end != w.span && (w.skip == 0 || w.span > DirectAlignment) {
			last := w.span - DirectAlignment
			if _, err := m.f.ReadAt(buf[last:w.span], w.start+int64(last)); err != nil {
				return done, err
			}
		}
		copy(buf[w.skip:], p[done:done+w.want])
		put, err := m.f.WriteAt(buf[:w.span], w.start)
		if err != nil {
			return done + min(max(put-w.skip, 0), w.want), err
		}
		done += w.want
	}
	return done, nil
}
