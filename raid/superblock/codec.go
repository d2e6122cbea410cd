package superblock

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Sizes and offsets of the member header. They are untyped so they serve as
// int and int64 alike.
const (
	// HeaderSize is the reserved header at the start of every member; the
	// default DataOffset.
	HeaderSize = 1 << 20
	// SlotSize is the size of one superblock slot.
	SlotSize = 4096
	// Slots is the number of superblock slots in the header.
	Slots = 2
	// BitmapOffset is where the write-intent bitmap area starts.
	BitmapOffset = 64 << 10
	// BitmapBytes is the bitmap area that fits in the default header.
	BitmapBytes = HeaderSize - BitmapOffset
	// MaxMembers is the most entries a member table holds, and the most roles.
	MaxMembers = 64
	// NameMax is the longest array name, in bytes.
	NameMax = 64
	// MinChunkSize is the smallest chunk size.
	MinChunkSize = 4096
	// Align is the alignment of DataOffset and BitmapRegion.
	Align = 4096
	// Version is the format version this package reads and writes.
	Version = 1
)

// Feature flags (the Flags word at byte 12): incompatible features. A
// build refuses a slot with a flag it does not know (ErrVersion). Encode
// derives each flag from the fields it stands for, and Decode refuses a
// slot whose flags and fields disagree (ErrCorrupt).
const (
	// FlagChecksums: the members carry per-block checksums in the area
	// [ChecksumOffset, ChecksumOffset+ChecksumLength).
	FlagChecksums = 1 << 0
	// FlagLog is set when the members carry a write-hole log area
	// (LogOffset, LogLength): the journal of partial-stripe writes of a
	// parity array whose consistency policy is "journal".
	FlagLog = 1 << 1

	knownFlags = FlagChecksums | FlagLog
)

// flags returns the feature flags m needs.
func (m *Meta) flags() uint32 {
	var f uint32
	if m.Checksums {
		f |= FlagChecksums
	}
	if m.LogLength != 0 {
		f |= FlagLog
	}
	return f
}

// Magic opens every superblock slot.
const Magic = "RAIDDSB\x00"

// Field offsets within a slot; see the table in doc.go.
const (
	offMagic        = 0
	offVersion      = 8
	offFlags        = 12
	offArrayUUID    = 16
	offName         = 32
	offLevel        = 96
	offLayout       = 100
	offChunkSize    = 104
	offRaidDisks    = 112
	offRole         = 116
	offMemberUUID   = 120
	offDataOffset   = 136
	offDataSize     = 144
	offEvents       = 152
	offState        = 160
	offRebuildRole  = 164
	offCheckpoint   = 168
	offBitmapRegion = 176
	offCreateTime   = 184
	offUpdateTime   = 192
	offMemberCount  = 200
	offDegraded     = 208
	offScrub        = 216
	offCsumOffset   = 224
	offCsumLength   = 232
	offLogOffset    = 240
	offLogLength    = 248
	offMembers      = 256
	entrySize       = 24
	entRole         = 16
	entState        = 20
	endMembers      = offMembers + MaxMembers*entrySize // 1792
	offChecksum     = SlotSize - 4
)

// reserved lists the byte ranges that carry no field and must be zero.
// Padding inside the Name field and in unused or used member entries is
// checked separately.
var reserved = [][2]int{
	{offState + 1, offRebuildRole},
	{offMemberCount + 4, offDegraded},
	{offScrub + 8, offCsumOffset},
	{offCsumLength + 8, offLogOffset},
	{endMembers, offChecksum},
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var le = binary.LittleEndian

// Encode validates m and writes it as one slot into dst, which must be
// exactly SlotSize bytes. Every byte of dst is written: unused fields,
// padding and member entries are zero and the checksum is set. Encoding is
// canonical: equal Metas give equal bytes. On error dst is left untouched;
// the error wraps ErrBufferSize or ErrInvalid (with its *FieldError
// problems). Encode does not retain dst.
func (m *Meta) Encode(dst []byte) error {
	if len(dst) != SlotSize {
		return fmt.Errorf("%w: got %d", ErrBufferSize, len(dst))
	}
	if err := m.Validate(); err != nil {
		return err
	}
	clear(dst)
	copy(dst[offMagic:], Magic)
	le.PutUint32(dst[offVersion:], Version)
	le.PutUint32(dst[offFlags:], m.flags())
	copy(dst[offArrayUUID:], m.ArrayUUID[:])
	copy(dst[offName:offName+NameMax], m.Name)
	le.PutUint32(dst[offLevel:], m.Level)
	le.PutUint32(dst[offLayout:], m.Layout)
	le.PutUint64(dst[offChunkSize:], m.ChunkSize)
	le.PutUint32(dst[offRaidDisks:], m.RaidDisks)
	le.PutUint32(dst[offRole:], uint32(m.Role))
	copy(dst[offMemberUUID:], m.MemberUUID[:])
	le.PutUint64(dst[offDataOffset:], m.DataOffset)
	le.PutUint64(dst[offDataSize:], m.DataSize)
	le.PutUint64(dst[offEvents:], m.Events)
	dst[offState] = byte(m.State)
	le.PutUint32(dst[offRebuildRole:], uint32(m.RebuildRole))
	le.PutUint64(dst[offCheckpoint:], m.RebuildCheckpoint)
	le.PutUint64(dst[offBitmapRegion:], m.BitmapRegion)
	le.PutUint64(dst[offCreateTime:], uint64(m.CreateTime))
	le.PutUint64(dst[offUpdateTime:], uint64(m.UpdateTime))
	le.PutUint32(dst[offMemberCount:], uint32(len(m.Members)))
	le.PutUint64(dst[offDegraded:], m.DegradedEvents)
	le.PutUint64(dst[offScrub:], m.Scrub)
	le.PutUint64(dst[offCsumOffset:], m.ChecksumOffset)
	le.PutUint64(dst[offCsumLength:], m.ChecksumLength)
	le.PutUint64(dst[offLogOffset:], m.LogOffset)
	le.PutUint64(dst[offLogLength:], m.LogLength)
	for i, mi := range m.Members {
		e := dst[offMembers+i*entrySize:]
		copy(e, mi.UUID[:])
		le.PutUint32(e[entRole:], uint32(mi.Role))
		e[entState] = byte(mi.State)
	}
	le.PutUint32(dst[offChecksum:], crc32.Checksum(dst[:offChecksum], castagnoli))
	return nil
}

// Decode parses one slot. b must be exactly SlotSize bytes and is not
// retained. The checks run in this order and the first failure is returned:
// ErrNoMagic (b does not start with Magic, whatever its length),
// ErrBufferSize, ErrVersion (unknown version or feature flags), ErrChecksum,
// and ErrCorrupt (non-zero reserved or padding bytes, a member count above
// MaxMembers, or fields that fail Validate; the *FieldError problems are
// wrapped too). Anything Decode accepts encodes back to exactly b.
func Decode(b []byte) (*Meta, error) {
	if len(b) < len(Magic) || string(b[:len(Magic)]) != Magic {
		return nil, ErrNoMagic
	}
	if len(b) != SlotSize {
		return nil, fmt.Errorf("%w: got %d", ErrBufferSize, len(b))
	}
	if v := le.Uint32(b[offVersion:]); v != Version {
		return nil, fmt.Errorf("%w: version %d, this build reads version %d", ErrVersion, v, Version)
	}
	flags := le.Uint32(b[offFlags:])
	if f := flags &^ knownFlags; f != 0 {
		return nil, fmt.Errorf("%w: unknown feature flags %#x", ErrVersion, f)
	}
	if got, want := crc32.Checksum(b[:offChecksum], castagnoli), le.Uint32(b[offChecksum:]); got != want {
		return nil, fmt.Errorf("%w: stored %#08x, computed %#08x", ErrChecksum, want, got)
	}

	for _, r := range reserved {
		if i := nonZero(b[r[0]:r[1]]); i >= 0 {
			return nil, fmt.Errorf("%w: reserved byte at offset %d is %#02x", ErrCorrupt, r[0]+i, b[r[0]+i])
		}
	}
	name := b[offName : offName+NameMax]
	if n := bytes.IndexByte(name, 0); n >= 0 {
		if i := nonZero(name[n:]); i >= 0 {
			return nil, fmt.Errorf("%w: Name padding byte at offset %d is %#02x", ErrCorrupt, offName+n+i, name[n+i])
		}
		name = name[:n]
	}
	count := le.Uint32(b[offMemberCount:])
	if count > MaxMembers {
		return nil, fmt.Errorf("%w: member count %d exceeds %d", ErrCorrupt, count, MaxMembers)
	}
	for i := range MaxMembers {
		e := b[offMembers+i*entrySize : offMembers+(i+1)*entrySize]
		pad := e[entState+1:]
		if i >= int(count) {
			pad = e // unused entries are all zero
		}
		if j := nonZero(pad); j >= 0 {
			off := offMembers + i*entrySize + (entrySize - len(pad)) + j
			return nil, fmt.Errorf("%w: member entry %d has non-zero byte at offset %d", ErrCorrupt, i, off)
		}
	}

	m := &Meta{
		Name:              string(name),
		Level:             le.Uint32(b[offLevel:]),
		Layout:            le.Uint32(b[offLayout:]),
		ChunkSize:         le.Uint64(b[offChunkSize:]),
		RaidDisks:         le.Uint32(b[offRaidDisks:]),
		Role:              int32(le.Uint32(b[offRole:])),
		DataOffset:        le.Uint64(b[offDataOffset:]),
		DataSize:          le.Uint64(b[offDataSize:]),
		Events:            le.Uint64(b[offEvents:]),
		State:             ArrayState(b[offState]),
		RebuildRole:       int32(le.Uint32(b[offRebuildRole:])),
		RebuildCheckpoint: le.Uint64(b[offCheckpoint:]),
		BitmapRegion:      le.Uint64(b[offBitmapRegion:]),
		CreateTime:        int64(le.Uint64(b[offCreateTime:])),
		UpdateTime:        int64(le.Uint64(b[offUpdateTime:])),
		DegradedEvents:    le.Uint64(b[offDegraded:]),
		Scrub:             le.Uint64(b[offScrub:]),
		Checksums:         flags&FlagChecksums != 0,
		ChecksumOffset:    le.Uint64(b[offCsumOffset:]),
		ChecksumLength:    le.Uint64(b[offCsumLength:]),
		LogOffset:         le.Uint64(b[offLogOffset:]),
		LogLength:         le.Uint64(b[offLogLength:]),
		Members:           make([]MemberInfo, count),
	}
	copy(m.ArrayUUID[:], b[offArrayUUID:])
	copy(m.MemberUUID[:], b[offMemberUUID:])
	for i := range m.Members {
		e := b[offMembers+i*entrySize:]
		copy(m.Members[i].UUID[:], e)
		m.Members[i].Role = int32(le.Uint32(e[entRole:]))
		m.Members[i].State = MemberState(e[entState])
	}
	if got := m.flags(); flags != got {
		return nil, fmt.Errorf("%w: feature flags %#x disagree with the fields (%#x)", ErrCorrupt, flags, got)
	}
	if p := m.problems(); len(p) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, p)
	}
	return m, nil
}

// nonZero returns the index of the first non-zero byte of b, or -1.
func nonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return -1
}
