package superblock

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"unicode/utf8"
)

// InUseOffset is where a member's in-use block lives: the first 4096 bytes
// of the header's reserved area after the two slots. Formats before the
// block existed kept these bytes zero and never read them, so the block is
// a compatible extension: an older raidd ignores it, and this one reads
// zeroes there as "no holder".
const InUseOffset = 3 * SlotSize

// InUseMagic opens an in-use block.
const InUseMagic = "RAIDDIU\x00"

// InUseVersion is the in-use block format this package reads and writes.
const InUseVersion = 1

// Field offsets within the in-use block; see doc.go.
const (
	iuMagic     = 0
	iuVersion   = 8
	iuPID       = 12
	iuProcStart = 16
	iuBootID    = 24
	iuSince     = 40
	iuHeartbeat = 48
	iuPIDNS     = 56
	iuHost      = 64
	iuPath      = 128
	iuEnd       = iuPath + InUsePathMax // 384
	iuChecksum  = SlotSize - 4

	// InUseHostMax is the longest host name an in-use block records.
	InUseHostMax = 64
	// InUsePathMax is the longest path an in-use block records; longer
	// paths are cut at a UTF-8 boundary.
	InUsePathMax = 256
)

// InUse says which process holds a member open for writing: a marker in the
// member itself, so that a second raidd reaching the same bytes by another
// name (a loop device over the member file, another host on shared
// storage) sees it even where advisory file locks cannot reach.
type InUse struct {
	Host      string   // holder's host name, at most InUseHostMax bytes
	BootID    [16]byte // holder's kernel boot id (/proc/sys/kernel/random/boot_id)
	PID       uint32   // holder's process id
	ProcStart uint64   // holder's start time in clock ticks after boot (/proc/PID/stat field 22)
	PIDNS     uint64   // inode of the holder's PID namespace (/proc/PID/ns/pid), which PID is relative to
	Since     int64    // when the holder claimed the member, unix nanoseconds
	Heartbeat int64    // the holder's last refresh, unix nanoseconds
	Path      string   // the path the holder opened the member by, cut to InUsePathMax bytes
}

// ErrNoInUse is returned by DecodeInUse and ReadInUse when the block does
// not start with InUseMagic: nobody holds the member (an orderly holder
// clears the block when it lets go).
var ErrNoInUse = errors.New("superblock: no in-use block")

// Encode writes iu as one in-use block into dst, which must be SlotSize
// bytes. Every byte is written; the encoding is canonical. Host and Path
// are cut at a UTF-8 boundary to fit. Errors wrap ErrBufferSize.
func (iu *InUse) Encode(dst []byte) error {
	if len(dst) != SlotSize {
		return fmt.Errorf("%w: got %d", ErrBufferSize, len(dst))
	}
	clear(dst)
	copy(dst[iuMagic:], InUseMagic)
	le.PutUint32(dst[iuVersion:], InUseVersion)
	le.PutUint32(dst[iuPID:], iu.PID)
	le.PutUint64(dst[iuProcStart:], iu.ProcStart)
	copy(dst[iuBootID:], iu.BootID[:])
	le.PutUint64(dst[iuSince:], uint64(iu.Since))
	le.PutUint64(dst[iuHeartbeat:], uint64(iu.Heartbeat))
	le.PutUint64(dst[iuPIDNS:], iu.PIDNS)
	copy(dst[iuHost:iuHost+InUseHostMax], cut(iu.Host, InUseHostMax))
	copy(dst[iuPath:iuPath+InUsePathMax], cut(iu.Path, InUsePathMax))
	le.PutUint32(dst[iuChecksum:], crc32.Checksum(dst[:iuChecksum], castagnoli))
	return nil
}

// cut returns the longest prefix of s of at most n bytes that ends on a
// UTF-8 boundary and holds no NUL.
func cut(s string, n int) string {
	if i := bytes.IndexByte([]byte(s), 0); i >= 0 {
		s = s[:i]
	}
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// DecodeInUse parses an in-use block. The checks run in this order:
// ErrNoInUse (no magic), ErrBufferSize, ErrVersion, ErrChecksum, and
// ErrCorrupt (non-zero reserved bytes, or text fields that are not NUL
// padded UTF-8). Anything it accepts encodes back to exactly b.
func DecodeInUse(b []byte) (*InUse, error) {
	if len(b) < len(InUseMagic) || string(b[:len(InUseMagic)]) != InUseMagic {
		return nil, ErrNoInUse
	}
	if len(b) != SlotSize {
		return nil, fmt.Errorf("%w: got %d", ErrBufferSize, len(b))
	}
	if v := le.Uint32(b[iuVersion:]); v != InUseVersion {
		return nil, fmt.Errorf("%w: in-use block version %d, want %d", ErrVersion, v, InUseVersion)
	}
	if got, want := le.Uint32(b[iuChecksum:]), crc32.Checksum(b[:iuChecksum], castagnoli); got != want {
		return nil, fmt.Errorf("%w: in-use block has %#08x, computed %#08x", ErrChecksum, got, want)
	}
	for _, c := range b[iuEnd:iuChecksum] {
		if c != 0 {
			return nil, fmt.Errorf("%w: in-use block: non-zero reserved byte", ErrCorrupt)
		}
	}
	host, err := padded(b[iuHost : iuHost+InUseHostMax])
	if err != nil {
		return nil, fmt.Errorf("%w: in-use block host: %v", ErrCorrupt, err)
	}
	path, err := padded(b[iuPath : iuPath+InUsePathMax])
	if err != nil {
		return nil, fmt.Errorf("%w: in-use block path: %v", ErrCorrupt, err)
	}
	iu := &InUse{
		Host: host, Path: path,
		PID:       le.Uint32(b[iuPID:]),
		ProcStart: le.Uint64(b[iuProcStart:]),
		Since:     int64(le.Uint64(b[iuSince:])),
		Heartbeat: int64(le.Uint64(b[iuHeartbeat:])),
		PIDNS:     le.Uint64(b[iuPIDNS:]),
	}
	copy(iu.BootID[:], b[iuBootID:])
	return iu, nil
}

// padded returns the NUL-padded UTF-8 text in f.
func padded(f []byte) (string, error) {
	n := bytes.IndexByte(f, 0)
	if n < 0 {
		n = len(f)
	}
	for _, c := range f[n:] {
		if c != 0 {
			return "", errors.New("bytes after the NUL padding")
		}
	}
	if !utf8.Valid(f[:n]) {
		return "", errors.New("not UTF-8")
	}
	return string(f[:n]), nil
}

// ReadInUse reads the in-use block of a member. A device too short to hold
// it has none (ErrNoInUse). Other errors are DecodeInUse's or wrap r's.
func ReadInUse(r io.ReaderAt) (*InUse, error) {
	var buf [SlotSize]byte
	n, err := r.ReadAt(buf[:], InUseOffset)
	switch {
	case n == SlotSize:
	case err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return nil, ErrNoInUse
	default:
		return nil, fmt.Errorf("superblock: read in-use block at offset %d: %w", InUseOffset, err)
	}
	return DecodeInUse(buf[:])
}

// WriteInUse writes iu as the member's in-use block. It does not sync.
func WriteInUse(w io.WriterAt, iu *InUse) error {
	var buf [SlotSize]byte
	if err := iu.Encode(buf[:]); err != nil {
		return err
	}
	if err := writeFull(w, buf[:], InUseOffset); err != nil {
		return fmt.Errorf("superblock: write in-use block at offset %d: %w", InUseOffset, err)
	}
	return nil
}

// ClearInUse zeroes the in-use block: nobody holds the member. It does not
// sync.
func ClearInUse(w io.WriterAt) error {
	var zero [SlotSize]byte
	if err := writeFull(w, zero[:], InUseOffset); err != nil {
		return fmt.Errorf("superblock: clear in-use block at offset %d: %w", InUseOffset, err)
	}
	return nil
}
