package member

import "github.com/raidd/raidd/internal/crc32c"

// Copies that checksum. Package raid's per-block checksums need the CRC32C
// of every 4 KiB block (crc32c.BlockSize) written to or read from a
// member. A member held in memory serves a write or read with a copy; the
// methods below let that copy compute the CRCs as it goes
// (crc32c.CopySums), which costs the copy's loads, instead of a second
// pass over the bytes by the caller. They serve every request the plain
// methods serve, with the same errors; summed reports whether the copy
// computed the sums (otherwise the caller computes them from the bytes).
// For every buffer but the last a whole number of blocks is expected.

// WriteAtSums is WriteAt that, when the write is a copy into the member
// (a File held in memory, a Memory), sets sums[i] to the CRC32C of p's
// i-th block and reports summed.
func (m *File) WriteAtSums(p []byte, off int64, sums []uint32) (n int, summed bool, err error) {
	if m.summable(off, int64(len(p))) {
		one := [1][]byte{p}
		if n, ok := m.writeMapped(one[:], off, int64(len(p)), sums); ok {
			return n, true, m.checkWrite("write", off+int64(len(p)), true)
		}
	}
	n, err = m.WriteAt(p, off)
	return n, false, err
}

// WritevAtSums is WritevAt that, when the write is a copy into the
// member, sets sums[i] to the CRC32C of the i-th block of the bytes
// written and reports summed.
func (m *File) WritevAtSums(bufs [][]byte, off int64, sums []uint32) (n int, summed bool, err error) {
	want := total(bufs)
	if m.summable(off, want) {
		if n, ok := m.writeMapped(bufs, off, want, sums); ok {
			return n, true, m.checkWrite("write", off+want, true)
		}
	}
	n, err = m.WritevAt(bufs, off)
	return n, false, err
}

// ReadAtSums is ReadAt that, when the read is a copy out of the member,
// sets sums[i] to the CRC32C of p's i-th block and reports summed.
func (m *File) ReadAtSums(p []byte, off int64, sums []uint32) (n int, summed bool, err error) {
	if m.summable(off, int64(len(p))) {
		one := [1][]byte{p}
		if n, ok := m.readMapped(one[:], off, int64(len(p)), sums); ok {
			return n, true, nil
		}
	}
	n, err = m.ReadAt(p, off)
	return n, false, err
}

// ReadvAtSums is ReadvAt that, when the read is a copy out of the member,
// sets sums[i] to the CRC32C of the i-th block of the bytes read and
// reports summed.
func (m *File) ReadvAtSums(bufs [][]byte, off int64, sums []uint32) (n int, summed bool, err error) {
	want := total(bufs)
	if m.summable(off, want) {
		if n, ok := m.readMapped(bufs, off, want, sums); ok {
			return n, true, nil
		}
	}
	n, err = m.ReadvAt(bufs, off)
	return n, false, err
}

// summable reports whether [off, off+n) may be served by a copy through
// the mapping that sums as it goes: the conditions of the plain paths'
// copies (the write or read itself is checked again by writeMapped and
// readMapped), a range that ends before the file's last byte (a write
// ending at Size is checked before it is issued, see WriteAt), and no test
// hook that expects to see every request.
func (m *File) summable(off, n int64) bool {
	return m.mapped.data != nil && !m.direct && !m.closed.Load() && !m.shrunk.Load() &&
		off >= 0 && n > 0 && off+n < m.size &&
		testHookIO == nil && testHookVector == nil && testHookFault == nil
}

// WriteAtSums is WriteAt, and sums p's blocks (summed is true unless the
// write fails).
func (m *Memory) WriteAtSums(p []byte, off int64, sums []uint32) (n int, summed bool, err error) {
	if m.closed.Load() || off < 0 || off+int64(len(p)) > int64(len(m.buf)) {
		n, err = m.WriteAt(p, off)
		return n, false, err
	}
	crc32c.CopySums(m.buf[off:], p, sums)
	return len(p), true, nil
}

// WritevAtSums writes bufs back to back from off, as WriteAt of each, and
// sums their blocks.
func (m *Memory) WritevAtSums(bufs [][]byte, off int64, sums []uint32) (n int, summed bool, err error) {
	if m.closed.Load() || off < 0 || off+total(bufs) > int64(len(m.buf)) {
		n, err = writeEach(m, bufs, off)
		return n, false, err
	}
	for _, b := range bufs {
		crc32c.CopySums(m.buf[off+int64(n):], b, sums)
		sums = sums[(len(b)+crc32c.BlockSize-1)/crc32c.BlockSize:]
		n += len(b)
	}
	return n, true, nil
}

// ReadAtSums is ReadAt, and sums p's blocks (summed is true unless the
// read fails).
func (m *Memory) ReadAtSums(p []byte, off int64, sums []uint32) (n int, summed bool, err error) {
	if m.closed.Load() || off < 0 || off+int64(len(p)) > int64(len(m.buf)) {
		n, err = m.ReadAt(p, off)
		return n, false, err
	}
	crc32c.CopySums(p, m.buf[off:off+int64(len(p))], sums)
	return len(p), true, nil
}

// ReadvAtSums reads bufs back to back from off, as ReadAt of each, and
// sums their blocks.
func (m *Memory) ReadvAtSums(bufs [][]byte, off int64, sums []uint32) (n int, summed bool, err error) {
	if m.closed.Load() || off < 0 || off+total(bufs) > int64(len(m.buf)) {
		n, err = readEach(m, bufs, off)
		return n, false, err
	}
	for _, b := range bufs {
		crc32c.CopySums(b, m.buf[off+int64(n):off+int64(n+len(b))], sums)
		sums = sums[(len(b)+crc32c.BlockSize-1)/crc32c.BlockSize:]
		n += len(b)
	}
	return n, true, nil
}
