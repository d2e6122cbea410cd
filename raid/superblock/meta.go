package superblock

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf8"
)

// ArrayState says whether the array may have writes in flight that left
// redundancy inconsistent. It is stored as one byte.
type ArrayState uint8

const (
	// StateClean means every write that reached the members completed on all
	// of them: mirrors agree and parity matches.
	StateClean ArrayState = iota
	// StateDirty means writes may have been in flight; after a crash the
	// array must be resynchronised (or the write-intent bitmap consulted).
	StateDirty
)

func (s ArrayState) String() string {
	switch s {
	case StateClean:
		return "clean"
	case StateDirty:
		return "dirty"
	}
	return fmt.Sprintf("ArrayState(%d)", uint8(s))
}

func (s ArrayState) valid() bool { return s <= StateDirty }

// MemberState is the state of one member as recorded in a member table. It is
// stored as one byte.
type MemberState uint8

const (
	// MemberActive: the member holds its role and its data is current.
	MemberActive MemberState = iota
	// MemberRebuilding: the member holds its role but its data is current
	// only up to the rebuild checkpoint (when it is the RebuildRole) or not
	// at all (when it waits for its turn).
	MemberRebuilding
	// MemberFailed: the member failed; its data must not be trusted. It may
	// keep the role it had, so the role shows which slot it left.
	MemberFailed
	// MemberSpare: the member holds no role and stands by to replace one.
	MemberSpare
	// MemberRemoved: the member was taken out of the array by the operator.
	MemberRemoved
	// MemberReplacing: the member is being made a copy of the active
	// member of its Role (raidd replace), which still holds the role and
	// serves. Its data is current below RebuildCheckpoint (RebuildRole is
	// its Role), and every write since the copy began reached it too. It
	// holds no role until the copy completes. A raidd older than this state
	// refuses the whole table (an unknown state), which is safe: it would
	// otherwise see the replacement as a spare.
	MemberReplacing
)

func (s MemberState) String() string {
	switch s {
	case MemberActive:
		return "active"
	case MemberRebuilding:
		return "rebuilding"
	case MemberFailed:
		return "failed"
	case MemberSpare:
		return "spare"
	case MemberRemoved:
		return "removed"
	case MemberReplacing:
		return "replacing"
	}
	return fmt.Sprintf("MemberState(%d)", uint8(s))
}

// MemberInfo is one entry of the member table: a member as another member
// last knew it.
type MemberInfo struct {
	UUID  [16]byte    // the member's MemberUUID
	Role  int32       // index in [0, RaidDisks), or -1 for none
	State MemberState // what the writing member last knew of it
}

// Meta is the decoded content of one superblock slot: the array's identity
// and geometry, this member's place in it, and what this member last knew of
// the other members. See the package documentation for the byte layout and
// the rules Validate enforces.
type Meta struct {
	ArrayUUID  [16]byte // identity of the array, the same on every member; not zero
	Name       string   // operator's name for the array: UTF-8, no NUL, at most NameMax bytes
	Level      uint32   // RAID level: 0, 1, 5, 6 or 10
	Layout     uint32   // level-specific layout; 0 = default (RAID5 left-symmetric, RAID10 near-2)
	ChunkSize  uint64   // bytes; a power of two, at least MinChunkSize
	RaidDisks  uint32   // number of roles, 1..MaxMembers
	Role       int32    // this member's role in [0, RaidDisks), or -1 for a spare
	MemberUUID [16]byte // identity of this member; not zero

	DataOffset uint64 // start of the data region on every member; >= HeaderSize, multiple of Align
	DataSize   uint64 // bytes of each member's data region in use; > 0

	Events uint64     // event counter, bumped by the caller on every update
	State  ArrayState // clean or dirty

	RebuildRole       int32  // role being rebuilt, or -1 for none
	RebuildCheckpoint uint64 // data-region offset below which RebuildRole is rebuilt; 0 if none

	BitmapRegion uint64 // bytes of each member's data region covered by one write-intent bitmap bit; 0 = no bitmap

	CreateTime int64 // unix nanoseconds
	UpdateTime int64 // unix nanoseconds

	// DegradedEvents is the event counter of the update that last took a
	// role out of sync (a member failed or went missing), or 0 while every
	// role is in sync. From that update on, the write-intent bitmap keeps
	// every region written, so a member that left at DegradedEvents or
	// later can be re-added by resyncing only those regions. At most Events.
	DegradedEvents uint64

	// Scrub records the scrub (raidd check) across restarts. With
	// ScrubRunning set a scrub is in progress: ScrubRepair says whether it
	// repairs, and the bits of ScrubRowMask are the row it resumes at (at
	// most DataSize/ChunkSize). Without ScrubRunning it is the unix time in
	// seconds at which the last scrub finished, 0 for never.
	Scrub uint64

	// Checksums says every member's data region has per-block CRC32C
	// checksums (FlagChecksums) in the area [ChecksumOffset,
	// ChecksumOffset+ChecksumLength) of every member, between the header
	// and DataOffset (see package raid/internal/integrity for its format).
	// Both are 0 without checksums.
	Checksums      bool
	ChecksumOffset uint64 // bytes; >= HeaderSize, a multiple of Align
	ChecksumLength uint64 // bytes; > 0, ends at or before DataOffset

	// LogOffset and LogLength place the write-hole log area on every
	// member: bytes [LogOffset, LogOffset+LogLength), after the header and
	// before DataOffset. Both are 0 when the array keeps no log (any level
	// but 5 and 6, or consistency policy "bitmap"). Package raid owns the
	// area's content; FlagLog is set exactly when LogLength is not 0.
	LogOffset, LogLength uint64

	// Members lists every member this member knows of, including itself,
	// with roles and spares, as it last knew them. At most MaxMembers.
	Members []MemberInfo
}

// Bits of Meta.Scrub.
const (
	// ScrubRunning marks a scrub in progress.
	ScrubRunning = uint64(1) << 63
	// ScrubRepair marks a scrub in progress that repairs what it finds.
	ScrubRepair = uint64(1) << 62
	// ScrubRowMask selects the row a scrub in progress resumes at.
	ScrubRowMask = ScrubRepair - 1
)

// Clone returns a deep copy of m; the copy shares no memory with m. Clone of
// nil is nil.
func (m *Meta) Clone() *Meta {
	if m == nil {
		return nil
	}
	c := *m
	c.Members = slices.Clone(m.Members)
	return &c
}

// Validate reports every rule of the format that m breaks, at once. The
// returned error wraps ErrInvalid and one *FieldError per problem, each naming
// the field. It returns nil if m can be encoded.
//
// Rules: ArrayUUID and MemberUUID are not zero; Name is valid UTF-8 of at most
// NameMax bytes with no NUL; Level is 0, 1, 5, 6 or 10; ChunkSize is a power of
// two >= MinChunkSize; 1 <= RaidDisks <= MaxMembers; Role and RebuildRole are
// -1 or in [0, RaidDisks); DataOffset >= HeaderSize and a multiple of Align;
// DataSize > 0 and DataOffset+DataSize fits in an int64; State is known;
// RebuildCheckpoint <= DataSize, and is 0 when RebuildRole is -1;
// DegradedEvents <= Events; a running Scrub resumes at a row <= DataSize/ChunkSize;
// with Checksums, ChecksumOffset >= HeaderSize is a multiple of Align and the
// non-empty checksum area ends at or before DataOffset, and without it both
// are 0; BitmapRegion is 0 or a power of two >= Align, and the bitmap of
// ceil(DataSize/BitmapRegion) bits fits between BitmapOffset and DataOffset
// (LogOffset when there is a log area); LogOffset and LogLength are both 0,
// or, on a level 5 or 6 array, LogLength is a non-zero multiple of Align and
// [LogOffset, LogOffset+LogLength) lies between HeaderSize and DataOffset,
// LogOffset a multiple of Align. The member table has 1..MaxMembers entries with distinct, non
// zero UUIDs and known states; active and rebuilding entries hold a role in
// range, and no two of them the same role; spares hold role -1; failed and
// removed entries hold -1 or a role in range; at most one entry is
// replacing, in the role RebuildRole (not holding it). The table lists this
// member (MemberUUID) with its Role, and when RebuildRole is set it lists a
// rebuilding or replacing member in that role.
func (m *Meta) Validate() error {
	if m == nil {
		return fmt.Errorf("%w: nil Meta", ErrInvalid)
	}
	if p := m.problems(); len(p) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, p)
	}
	return nil
}

// problems returns every rule m breaks, as *FieldError values.
func (m *Meta) problems() problemList {
	var p problemList
	bad := func(field, format string, args ...any) {
		p = append(p, &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}

	if m.ArrayUUID == ([16]byte{}) {
		bad("ArrayUUID", "is zero")
	}
	if len(m.Name) > NameMax {
		bad("Name", "is %d bytes, longer than %d", len(m.Name), NameMax)
	}
	if strings.IndexByte(m.Name, 0) >= 0 {
		bad("Name", "contains a NUL byte")
	}
	if !utf8.ValidString(m.Name) {
		bad("Name", "is not valid UTF-8")
	}
	switch m.Level {
	case 0, 1, 5, 6, 10:
	default:
		bad("Level", "%d is not 0, 1, 5, 6 or 10", m.Level)
	}
	if m.ChunkSize < MinChunkSize || bits.OnesCount64(m.ChunkSize) != 1 {
		bad("ChunkSize", "%d is not a power of two of at least %d", m.ChunkSize, MinChunkSize)
	}
	disksOK := m.RaidDisks >= 1 && m.RaidDisks <= MaxMembers
	if !disksOK {
		bad("RaidDisks", "%d is not in [1, %d]", m.RaidDisks, MaxMembers)
	}
	inRange := func(role int32) bool { return role >= 0 && int64(role) < int64(m.RaidDisks) }
	if m.Role != -1 && !inRange(m.Role) {
		bad("Role", "%d is neither -1 (spare) nor in [0, RaidDisks=%d)", m.Role, m.RaidDisks)
	}
	if m.MemberUUID == ([16]byte{}) {
		bad("MemberUUID", "is zero")
	}
	if m.DataOffset < HeaderSize || m.DataOffset%Align != 0 {
		bad("DataOffset", "%d is not a multiple of %d of at least HeaderSize=%d", m.DataOffset, Align, HeaderSize)
	}
	if m.DataSize == 0 {
		bad("DataSize", "is zero")
	}
	if m.DataOffset > math.MaxInt64 {
		bad("DataOffset", "%d overflows int64", m.DataOffset)
	} else if m.DataSize > math.MaxInt64-m.DataOffset {
		bad("DataSize", "DataOffset %d + DataSize %d overflows int64", m.DataOffset, m.DataSize)
	}
	if !m.State.valid() {
		bad("State", "%d is not a known array state", uint8(m.State))
	}
	switch {
	case m.RebuildRole == -1:
		if m.RebuildCheckpoint != 0 {
			bad("RebuildCheckpoint", "is %d with no RebuildRole", m.RebuildCheckpoint)
		}
	case !inRange(m.RebuildRole):
		bad("RebuildRole", "%d is neither -1 (none) nor in [0, RaidDisks=%d)", m.RebuildRole, m.RaidDisks)
	case m.RebuildCheckpoint > m.DataSize:
		bad("RebuildCheckpoint", "%d is beyond DataSize %d", m.RebuildCheckpoint, m.DataSize)
	}
	if m.Scrub&ScrubRunning != 0 && m.ChunkSize != 0 && m.Scrub&ScrubRowMask > m.DataSize/m.ChunkSize {
		bad("Scrub", "resume row %d is beyond the %d rows of DataSize %d", m.Scrub&ScrubRowMask, m.DataSize/m.ChunkSize, m.DataSize)
	}
	if m.DegradedEvents > m.Events {
		bad("DegradedEvents", "%d is beyond Events %d", m.DegradedEvents, m.Events)
	}
	if r := m.BitmapRegion; r != 0 {
		// The bitmap ends where the first area after it begins: the log
		// area when there is one, else the data region.
		end, endName := m.DataOffset, "DataOffset"
		if m.LogLength != 0 && m.LogOffset < end {
			end, endName = m.LogOffset, "LogOffset"
		}
		switch {
		case r < Align || bits.OnesCount64(r) != 1:
			bad("BitmapRegion", "%d is not a power of two of at least %d", r, Align)
		case m.DataSize > 0 && end >= BitmapOffset && (m.DataSize-1)/r+1 > (end-BitmapOffset)*8:
			bad("BitmapRegion", "%d gives %d bits for DataSize %d, more than fit between BitmapOffset %d and %s %d", r, (m.DataSize-1)/r+1, m.DataSize, BitmapOffset, endName, end)
		}
	}

	if m.LogOffset != 0 || m.LogLength != 0 {
		switch {
		case m.Level != 5 && m.Level != 6:
			bad("LogLength", "is %d, but only levels 5 and 6 keep a write-hole log (level %d)", m.LogLength, m.Level)
		case m.LogLength == 0 || m.LogLength%Align != 0:
			bad("LogLength", "%d is not a non-zero multiple of %d", m.LogLength, Align)
		case m.LogOffset < HeaderSize || m.LogOffset%Align != 0:
			bad("LogOffset", "%d is not a multiple of %d of at least HeaderSize=%d", m.LogOffset, Align, HeaderSize)
		case m.LogLength > m.DataOffset || m.LogOffset > m.DataOffset-m.LogLength:
			bad("LogLength", "the log area [%d, +%d) reaches past DataOffset %d", m.LogOffset, m.LogLength, m.DataOffset)
		case m.ChecksumLength != 0 && m.LogOffset < m.ChecksumOffset+m.ChecksumLength && m.ChecksumOffset < m.LogOffset+m.LogLength:
			bad("LogOffset", "the log area [%d, +%d) overlaps the checksum area [%d, +%d)", m.LogOffset, m.LogLength, m.ChecksumOffset, m.ChecksumLength)
		}
	}

	switch {
	case !m.Checksums && (m.ChecksumOffset != 0 || m.ChecksumLength != 0):
		bad("ChecksumOffset", "is %d (length %d) without Checksums", m.ChecksumOffset, m.ChecksumLength)
	case m.Checksums && (m.ChecksumOffset < HeaderSize || m.ChecksumOffset%Align != 0):
		bad("ChecksumOffset", "%d is not a multiple of %d of at least HeaderSize=%d", m.ChecksumOffset, Align, HeaderSize)
	case m.Checksums && m.ChecksumLength == 0:
		bad("ChecksumLength", "is zero with Checksums")
	case m.Checksums && (m.ChecksumLength > math.MaxInt64-m.ChecksumOffset || m.ChecksumOffset+m.ChecksumLength > m.DataOffset):
		bad("ChecksumLength", "area [%d, +%d) does not end at or before DataOffset %d", m.ChecksumOffset, m.ChecksumLength, m.DataOffset)
	}

	if len(m.Members) == 0 {
		bad("Members", "is empty; it must list at least this member")
	}
	if len(m.Members) > MaxMembers {
		bad("Members", "has %d entries, more than %d", len(m.Members), MaxMembers)
	}
	seen := make(map[[16]byte]int, len(m.Members))
	holder := make(map[int32]int)
	self, rebuilding, replacing := false, false, -1
	for i, mi := range m.Members {
		f := func(name string) string { return fmt.Sprintf("Members[%d].%s", i, name) }
		if mi.UUID == ([16]byte{}) {
			bad(f("UUID"), "is zero")
		} else if j, dup := seen[mi.UUID]; dup {
			bad(f("UUID"), "%s duplicates Members[%d]", FormatUUID(mi.UUID), j)
		} else {
			seen[mi.UUID] = i
		}
		switch mi.State {
		case MemberActive, MemberRebuilding:
			if !inRange(mi.Role) {
				bad(f("Role"), "%d is not in [0, RaidDisks=%d) for a %s member", mi.Role, m.RaidDisks, mi.State)
			} else if j, dup := holder[mi.Role]; dup {
				bad(f("Role"), "%d is already held by Members[%d]", mi.Role, j)
			} else {
				holder[mi.Role] = i
			}
		case MemberSpare:
			if mi.Role != -1 {
				bad(f("Role"), "%d is not -1 for a spare", mi.Role)
			}
		case MemberReplacing:
			switch {
			case !inRange(mi.Role):
				bad(f("Role"), "%d is not in [0, RaidDisks=%d) for a replacing member", mi.Role, m.RaidDisks)
			case replacing >= 0:
				bad(f("State"), "replacing, and so is Members[%d]: one replace runs at a time", replacing)
			case mi.Role != m.RebuildRole:
				bad(f("Role"), "%d is not the RebuildRole %d, which records the copy's progress", mi.Role, m.RebuildRole)
			}
			replacing = i
		case MemberFailed, MemberRemoved:
			if mi.Role != -1 && !inRange(mi.Role) {
				bad(f("Role"), "%d is neither -1 nor in [0, RaidDisks=%d)", mi.Role, m.RaidDisks)
			}
		default:
			bad(f("State"), "%d is not a known member state", uint8(mi.State))
		}
		if mi.UUID == m.MemberUUID && mi.UUID != ([16]byte{}) {
			self = true
			if mi.Role != m.Role {
				bad(f("Role"), "%d differs from this member's Role %d", mi.Role, m.Role)
			}
		}
		if m.RebuildRole >= 0 && mi.Role == m.RebuildRole && (mi.State == MemberRebuilding || mi.State == MemberReplacing) {
			rebuilding = true
		}
	}
	if len(m.Members) > 0 && !self && m.MemberUUID != ([16]byte{}) {
		bad("Members", "does not list this member %s", FormatUUID(m.MemberUUID))
	}
	if m.RebuildRole >= 0 && inRange(m.RebuildRole) && !rebuilding {
		bad("RebuildRole", "%d is not held by a rebuilding member, nor copied onto a replacing one, in Members", m.RebuildRole)
	}
	return p
}
