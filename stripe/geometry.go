package stripe

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Level is a RAID level.
type Level int

// The supported levels. The numeric values are the level numbers stored on disk.
const (
	RAID0  Level = 0
	RAID1  Level = 1
	RAID5  Level = 5
	RAID10 Level = 10
)

func (l Level) String() string {
	switch l {
	case RAID0, RAID1, RAID5, RAID10:
		return "raid" + strconv.Itoa(int(l))
	}
	return "level(" + strconv.Itoa(int(l)) + ")"
}

// Valid reports whether l is a level raidd implements.
func (l Level) Valid() bool {
	switch l {
	case RAID0, RAID1, RAID5, RAID10:
		return true
	}
	return false
}

// ParseLevel accepts "0", "raid0", "1", "raid1", "mirror", "5", "raid5", "10" and "raid10".
func ParseLevel(s string) (Level, error) {
	t := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "raid")
	if t == "mirror" {
		return RAID1, nil
	}
	n, err := strconv.Atoi(t)
	if err != nil || !Level(n).Valid() || strconv.Itoa(n) != t {
		return 0, fmt.Errorf("%w: %q (want 0, 1, 5 or 10)", ErrLevel, s)
	}
	return Level(n), nil
}

// MinMembers is the smallest member count the level accepts.
func (l Level) MinMembers() int {
	if l == RAID5 {
		return 3
	}
	return 2
}

// Chunk size limits.
const (
	MinChunk     int64 = 4 << 10
	MaxChunk     int64 = 64 << 20
	DefaultChunk int64 = 512 << 10
	// MaxMembers bounds the member count of one array.
	MaxMembers = 64
	// Copies is the number of copies RAID10 keeps of each chunk (md's near=2).
	Copies = 2
)

// Geometry maps array byte ranges onto members. The zero value is not
// usable; build one with New.
type Geometry struct {
	level      Level
	members    int
	chunk      int64
	shift      uint  // log2(chunk)
	rows       int64 // chunk-sized rows per member
	chunks     int64 // data chunks in the array
	size       int64 // array size in bytes
	dataChunks int   // data chunks per row (RAID10: members, counted per copy slot)
}

// New validates and builds a geometry. memberSize is the usable size of the
// smallest member's data region; it is rounded down to whole chunks.
func New(level Level, members int, chunk, memberSize int64) (Geometry, error) {
	if !level.Valid() {
		return Geometry{}, fmt.Errorf("%w: %d", ErrLevel, int(level))
	}
	if chunk < MinChunk || chunk > MaxChunk || chunk&(chunk-1) != 0 {
		return Geometry{}, fmt.Errorf("%w: %d bytes (want a power of two from %d to %d)", ErrChunk, chunk, MinChunk, MaxChunk)
	}
	if members < level.MinMembers() || members > MaxMembers {
		return Geometry{}, fmt.Errorf("%w: %s needs %d to %d members, got %d", ErrMembers, level, level.MinMembers(), MaxMembers, members)
	}
	g := Geometry{level: level, members: members, chunk: chunk, shift: uint(bits.TrailingZeros64(uint64(chunk)))}
	g.rows = memberSize >> g.shift
	if g.rows < 1 {
		return Geometry{}, fmt.Errorf("%w: data region of %d bytes is smaller than one %d-byte chunk", ErrTooSmall, memberSize, chunk)
	}
	switch level {
	case RAID0:
		g.dataChunks = members
		g.chunks = g.rows * int64(members)
	case RAID1:
		g.dataChunks = 1
		g.chunks = g.rows
	case RAID5:
		g.dataChunks = members - 1
		g.chunks = g.rows * int64(members-1)
	case RAID10:
		g.dataChunks = members // slots per row; chunks per row is members/2
		g.chunks = g.rows * int64(members) / Copies
	}
	if g.chunks > (1<<62)>>g.shift {
		return Geometry{}, fmt.Errorf("%w: %d chunks of %d bytes overflow the array size", ErrTooLarge, g.chunks, chunk)
	}
	g.size = g.chunks << g.shift
	return g, nil
}

// Level returns the RAID level.
func (g Geometry) Level() Level { return g.level }

// Members returns the member count.
func (g Geometry) Members() int { return g.members }

// Chunk returns the chunk size in bytes.
func (g Geometry) Chunk() int64 { return g.chunk }

// Rows returns the number of chunk-sized rows used on every member.
func (g Geometry) Rows() int64 { return g.rows }

// MemberSize returns the bytes of each member's data region that the array uses.
func (g Geometry) MemberSize() int64 { return g.rows << g.shift }

// Size returns the array size in bytes.
func (g Geometry) Size() int64 { return g.size }

// Tolerance returns how many members may be missing without data loss in
// the worst case: RAID0 0, RAID1 n-1, RAID5 1, RAID10 1 (one per copy set
// in the best case; use Survives for a specific set of missing members).
func (g Geometry) Tolerance() int {
	switch g.level {
	case RAID1:
		return g.members - 1
	case RAID5, RAID10:
		return 1
	}
	return 0
}

// DataMembers returns how many members' worth of each row holds data
// (RAID10 with an odd member count gives the floor of n/2).
func (g Geometry) DataMembers() int {
	switch g.level {
	case RAID0:
		return g.members
	case RAID1:
		return 1
	case RAID5:
		return g.members - 1
	}
	return g.members / Copies
}

// StripeWidth returns the array bytes held by one row: chunk × data members
// (for RAID10 with an odd member count, chunk × n / 2 rounded down to chunks).
func (g Geometry) StripeWidth() int64 { return int64(g.DataMembers()) << g.shift }

// Stripes returns the number of lockable stripes (see the package doc).
func (g Geometry) Stripes() int64 {
	switch g.level {
	case RAID0, RAID5:
		return g.rows
	}
	return g.chunks
}

// StripeOf returns the stripe that holds array offset off.
func (g Geometry) StripeOf(off int64) int64 {
	c := off >> g.shift
	switch g.level {
	case RAID0, RAID5:
		return c / int64(g.dataChunks)
	}
	return c
}

// StripeRange returns the first and last stripe touched by [off, off+n), n > 0.
func (g Geometry) StripeRange(off, n int64) (first, last int64) {
	return g.StripeOf(off), g.StripeOf(off + n - 1)
}

// RowStripes returns the stripes whose data or parity lies in member row
// row: the stripes a rebuild or check step of that row must lock.
func (g Geometry) RowStripes(row int64) (first, last int64) {
	if g.level != RAID10 {
		return row, row
	}
	n := int64(g.members)
	first = row * n / Copies
	last = ((row+1)*n - 1) / Copies
	if last >= g.chunks {
		last = g.chunks - 1
	}
	return first, last
}

// ParityMember returns the member holding parity in row row (RAID5 only; -1 otherwise).
func (g Geometry) ParityMember(row int64) int {
	if g.level != RAID5 {
		return -1
	}
	n := int64(g.members)
	return int(n - 1 - row%n)
}

// DataMember returns the member holding data chunk i (0 ≤ i < DataMembers)
// of row row, for RAID0 and RAID5.
func (g Geometry) DataMember(row int64, i int) int {
	switch g.level {
	case RAID0:
		return i
	case RAID5:
		return (g.ParityMember(row) + 1 + i) % g.members
	}
	panic("stripe: DataMember on " + g.level.String())
}

// DataIndex is the inverse of DataMember: the data index of member m in row
// row, or -1 if m holds the parity (RAID0 and RAID5).
func (g Geometry) DataIndex(row int64, m int) int {
	switch g.level {
	case RAID0:
		return m
	case RAID5:
		p := g.ParityMember(row)
		if m == p {
			return -1
		}
		return (m - p - 1 + g.members) % g.members
	}
	panic("stripe: DataIndex on " + g.level.String())
}

// Loc is a place on a member: member index and data-region offset.
type Loc struct {
	Member int
	Off    int64
}

// Extent is the part of an array range that lies in one chunk.
type Extent struct {
	Chunk  int64 // array chunk index
	Stripe int64 // lockable stripe
	Row    int64 // member row of the primary copy
	Index  int   // data index within the row (RAID0, RAID5); 0 otherwise
	Loc          // primary (first) copy: member and member offset of the first byte
	Len    int64 // bytes
	BufOff int64 // offset of the first byte within the request
}

// Extents appends to dst the per-chunk extents of [off, off+n) in order and
// returns it. The range must lie inside the array (the caller validates).
// For mirrored levels the extent names the first copy; use Copies for all.
func (g Geometry) Extents(dst []Extent, off, n int64) []Extent {
	end := off + n
	for p := off; p < end; {
		c := p >> g.shift
		in := p & (g.chunk - 1)
		l := g.chunk - in
		if l > end-p {
			l = end - p
		}
		e := Extent{Chunk: c, Len: l, BufOff: p - off}
		switch g.level {
		case RAID0, RAID5:
			e.Row = c / int64(g.dataChunks)
			e.Index = int(c % int64(g.dataChunks))
			e.Stripe = e.Row
			e.Member = g.DataMember(e.Row, e.Index)
			e.Off = e.Row<<g.shift + in
		case RAID1:
			e.Row, e.Stripe = c, c
			e.Member, e.Off = 0, p
		case RAID10:
			s := c * Copies
			e.Stripe = c
			e.Row = s / int64(g.members)
			e.Member = int(s % int64(g.members))
			e.Off = e.Row<<g.shift + in
		}
		dst = append(dst, e)
		p += l
	}
	return dst
}

// Copies appends to dst the location of every copy of the chunk-relative
// byte at offset in within array chunk c, for mirrored levels (RAID1 gives
// one Loc per member, RAID10 two), and returns it.
func (g Geometry) Copies(dst []Loc, c, in int64) []Loc {
	switch g.level {
	case RAID1:
		for m := 0; m < g.members; m++ {
			dst = append(dst, Loc{Member: m, Off: c<<g.shift + in})
		}
	case RAID10:
		for k := int64(0); k < Copies; k++ {
			s := c*Copies + k
			dst = append(dst, Loc{Member: int(s % int64(g.members)), Off: (s/int64(g.members))<<g.shift + in})
		}
	default:
		panic("stripe: Copies on " + g.level.String())
	}
	return dst
}

// Role says what a member byte holds.
type Role uint8

// Member byte roles returned by Locate.
const (
	RoleData   Role = iota // a copy of array data
	RoleParity             // RAID5 parity
	RoleUnused             // beyond the array (an odd RAID10's last half row)
)

func (r Role) String() string {
	switch r {
	case RoleData:
		return "data"
	case RoleParity:
		return "parity"
	}
	return "unused"
}

// Locate is the inverse mapping: the array offset stored at data-region
// offset off of member m, and whether it holds data, parity or nothing. For
// parity, arrayOff is the offset of the row's first byte at the same
// chunk-relative position. off must be inside MemberSize.
func (g Geometry) Locate(m int, off int64) (arrayOff int64, role Role) {
	row := off >> g.shift
	in := off & (g.chunk - 1)
	switch g.level {
	case RAID0:
		return (row*int64(g.members)+int64(m))<<g.shift + in, RoleData
	case RAID1:
		return off, RoleData
	case RAID5:
		i := g.DataIndex(row, m)
		if i < 0 {
			return (row*int64(g.dataChunks))<<g.shift + in, RoleParity
		}
		return (row*int64(g.dataChunks)+int64(i))<<g.shift + in, RoleData
	}
	s := row*int64(g.members) + int64(m)
	c := s / Copies
	if c >= g.chunks {
		return 0, RoleUnused
	}
	return c<<g.shift + in, RoleData
}

func (g Geometry) String() string {
	return fmt.Sprintf("%s members=%d chunk=%d size=%d", g.level, g.members, g.chunk, g.size)
}

// Survives reports whether the array still holds every byte when the
// members in the bit mask missing are unavailable: RAID0 needs all of them,
// RAID1 one, RAID5 all but one, and RAID10 one copy of every chunk.
func (g Geometry) Survives(missing uint64) bool {
	missing &= 1<<uint(g.members) - 1
	switch g.level {
	case RAID0:
		return missing == 0
	case RAID1:
		return missing != 1<<uint(g.members)-1
	case RAID5:
		return missing&(missing-1) == 0
	}
	// Chunk c uses members 2c mod n and 2c+1 mod n; the pattern repeats every n chunks.
	n := g.members
	for c := 0; c < n; c++ {
		a, b := (2*c)%n, (2*c+1)%n
		if missing&(1<<uint(a)) != 0 && missing&(1<<uint(b)) != 0 {
			return false
		}
	}
	return true
}

// RowRange returns the first and last member row that hold any copy, data
// or parity of array bytes [off, off+n), n > 0.
func (g Geometry) RowRange(off, n int64) (first, last int64) {
	c0, c1 := off>>g.shift, (off+n-1)>>g.shift
	switch g.level {
	case RAID0, RAID5:
		return c0 / int64(g.dataChunks), c1 / int64(g.dataChunks)
	case RAID1:
		return c0, c1
	}
	m := int64(g.members)
	return c0 * Copies / m, (c1*Copies + Copies - 1) / m
}
