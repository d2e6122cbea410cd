package stripe

import (
	"fmt"
	"math/bits"
)

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
	dataChunks int   // striped levels: data chunks per row; mirrored levels: slots per row (members)
	parity     int   // striped levels: parity chunks per row
	copies     int   // mirrored levels: copies of each chunk; 0 for striped levels
}

// mirrored reports whether the level keeps copies (near layout) rather
// than data and parity chunks in rows.
func (g Geometry) mirrored() bool { return g.copies > 0 }

// Mirrored reports whether the level keeps whole copies of every chunk
// (RAID1, RAID10: use Copies) rather than rows of data and parity chunks
// (RAID0, RAID5: use DataMember and ParityMember).
func (g Geometry) Mirrored() bool { return g.mirrored() }

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
	sh := levels[level]
	if sh.copies != 0 {
		g.copies = sh.copies
		if g.copies < 0 {
			g.copies = members
		}
		g.dataChunks = members
		g.chunks = g.rows * int64(members) / int64(g.copies)
	} else {
		g.parity = sh.parity
		g.dataChunks = members - sh.parity
		g.chunks = g.rows * int64(g.dataChunks)
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
// the worst case: RAID0 0, RAID1 n-1, RAID5 1, RAID6 2, RAID10 1 (one per
// copy set in the best case; use Survives for a specific set of missing
// members).
func (g Geometry) Tolerance() int {
	if g.mirrored() {
		return g.copies - 1
	}
	return g.parity
}

// DataMembers returns how many members' worth of each row holds data
// (RAID10 with an odd member count gives the floor of n/2).
func (g Geometry) DataMembers() int {
	if g.mirrored() {
		return g.members / g.copies
	}
	return g.dataChunks
}

// StripeWidth returns the array bytes held by one row: chunk × data members
// (for RAID10 with an odd member count, chunk × n / 2 rounded down to chunks).
func (g Geometry) StripeWidth() int64 { return int64(g.DataMembers()) << g.shift }

// Stripes returns the number of lockable stripes (see the package doc).
func (g Geometry) Stripes() int64 {
	if g.mirrored() {
		return g.chunks
	}
	return g.rows
}

// StripeOf returns the stripe that holds array offset off.
func (g Geometry) StripeOf(off int64) int64 {
	c := off >> g.shift
	if g.mirrored() {
		return c
	}
	return c / int64(g.dataChunks)
}

// StripeRange returns the first and last stripe touched by [off, off+n), n > 0.
func (g Geometry) StripeRange(off, n int64) (first, last int64) {
	return g.StripeOf(off), g.StripeOf(off + n - 1)
}

// RowStripes returns the stripes whose data or parity lies in member row
// row: the stripes a rebuild or check step of that row must lock.
func (g Geometry) RowStripes(row int64) (first, last int64) {
	if !g.mirrored() {
		return row, row
	}
	n, k := int64(g.members), int64(g.copies)
	first = row * n / k
	last = ((row+1)*n - 1) / k
	if last >= g.chunks {
		last = g.chunks - 1
	}
	return first, last
}

// RowSpan returns the member rows that hold any copy, data or parity of
// the array chunks stored in member row row: row itself, except for a
// mirrored level whose copies of a chunk can straddle two rows (RAID10
// with an odd member count).
func (g Geometry) RowSpan(row int64) (first, last int64) {
	if !g.mirrored() {
		return row, row
	}
	c0, c1 := g.RowStripes(row)
	return g.RowRange(c0<<g.shift, (c1-c0+1)<<g.shift)
}

// ParityMember returns the member holding the (first) parity chunk of row
// row, or -1 for a level without parity.
func (g Geometry) ParityMember(row int64) int {
	if g.parity == 0 {
		return -1
	}
	n := int64(g.members)
	return int(n - 1 - row%n)
}

// QMember returns the member holding the second parity chunk (RAID6's Q
// syndrome) of row row: the member after ParityMember, as in md's
// left-symmetric RAID6. It returns -1 for a level with fewer than two
// parity chunks.
func (g Geometry) QMember(row int64) int {
	if g.parity < 2 {
		return -1
	}
	return (g.ParityMember(row) + 1) % g.members
}

// DataMember returns the member holding data chunk i (0 ≤ i < DataMembers)
// of row row, for striped levels (RAID0, RAID5, RAID6); it panics for mirrored ones.
func (g Geometry) DataMember(row int64, i int) int {
	if g.mirrored() {
		panic("stripe: DataMember on " + g.level.String())
	}
	if g.parity == 0 {
		return i
	}
	return (g.ParityMember(row) + g.parity + i) % g.members
}

// DataIndex is the inverse of DataMember: the data index of member m in row
// row, or -1 if m holds parity (striped levels; it panics for mirrored ones).
func (g Geometry) DataIndex(row int64, m int) int {
	if g.mirrored() {
		panic("stripe: DataIndex on " + g.level.String())
	}
	if g.parity == 0 {
		return m
	}
	k := (m - g.ParityMember(row) + g.members) % g.members
	if k < g.parity {
		return -1
	}
	return k - g.parity
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
		if g.mirrored() {
			s := c * int64(g.copies)
			e.Stripe = c
			e.Row = s / int64(g.members)
			e.Member = int(s % int64(g.members))
		} else {
			e.Row = c / int64(g.dataChunks)
			e.Index = int(c % int64(g.dataChunks))
			e.Stripe = e.Row
			e.Member = g.DataMember(e.Row, e.Index)
		}
		e.Off = e.Row<<g.shift + in
		dst = append(dst, e)
		p += l
	}
	return dst
}

// Copies appends to dst the location of every copy of the chunk-relative
// byte at offset in within array chunk c, for mirrored levels (RAID1 gives
// one Loc per member, RAID10 two), and returns it.
func (g Geometry) Copies(dst []Loc, c, in int64) []Loc {
	if !g.mirrored() {
		panic("stripe: Copies on " + g.level.String())
	}
	n, k := int64(g.members), int64(g.copies)
	for i := int64(0); i < k; i++ {
		s := c*k + i
		dst = append(dst, Loc{Member: int(s % n), Off: (s/n)<<g.shift + in})
	}
	return dst
}

// Role says what a member byte holds.
type Role uint8

// Member byte roles returned by Locate.
const (
	RoleData   Role = iota // a copy of array data
	RoleParity             // RAID5 parity, RAID6 P or Q
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
	if g.mirrored() {
		s := row*int64(g.members) + int64(m)
		c := s / int64(g.copies)
		if c >= g.chunks {
			return 0, RoleUnused
		}
		return c<<g.shift + in, RoleData
	}
	i := g.DataIndex(row, m)
	if i < 0 {
		return (row*int64(g.dataChunks))<<g.shift + in, RoleParity
	}
	return (row*int64(g.dataChunks)+int64(i))<<g.shift + in, RoleData
}

func (g Geometry) String() string {
	return fmt.Sprintf("%s members=%d chunk=%d size=%d", g.level, g.members, g.chunk, g.size)
}

// Survives reports whether the array still holds every byte when the
// members in the bit mask missing are unavailable: a striped level loses
// at most as many members as it has parity chunks per row (RAID0 none,
// RAID5 one, RAID6 two), a mirrored level keeps one copy of every chunk (RAID1 any
// one member, RAID10 one of each pair).
func (g Geometry) Survives(missing uint64) bool {
	missing &= 1<<uint(g.members) - 1
	if !g.mirrored() {
		return bits.OnesCount64(missing) <= g.parity
	}
	// Chunk c uses members k*c+i mod n (i < k copies); the pattern repeats every n chunks.
	n, k := g.members, g.copies
	for c := 0; c < n; c++ {
		lost := true
		for i := 0; i < k && lost; i++ {
			lost = missing&(1<<uint((k*c+i)%n)) != 0
		}
		if lost {
			return false
		}
	}
	return true
}

// RowRange returns the first and last member row that hold any copy, data
// or parity of array bytes [off, off+n), n > 0.
func (g Geometry) RowRange(off, n int64) (first, last int64) {
	c0, c1 := off>>g.shift, (off+n-1)>>g.shift
	if !g.mirrored() {
		return c0 / int64(g.dataChunks), c1 / int64(g.dataChunks)
	}
	m, k := int64(g.members), int64(g.copies)
	return c0 * k / m, (c1*k + k - 1) / m
}
