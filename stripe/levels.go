package stripe

import (
	"fmt"
	"slices"
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
	RAID6  Level = 6
	RAID10 Level = 10
)

// shape is everything the geometry needs to know about a level. Every
// level belongs to one of two families, and its shape gives the family's
// parameters:
//
//   - striped: each row holds members-parity data chunks and parity parity
//     chunks. With parity > 0 the parity rotates in md's left-symmetric
//     layout: in row r the first parity chunk is on member n-1 - (r mod n),
//     the others follow it, and data chunk i is on the member after them
//     (RAID0: no parity; RAID5: one parity chunk; RAID6: P, then Q on
//     the member after P).
//   - mirrored (copies != 0): md's "near" layout. Copy k of array chunk c
//     sits in slot s = copies*c + k of the member×row grid numbered
//     row-major (member s mod n, row s div n). copies < 0 means one copy per
//     member (RAID1, where every member holds the whole array at the same
//     offsets); RAID10 keeps Copies copies.
//
// Adding a level to the geometry is one entry in levels.
type shape struct {
	minMembers int
	parity     int // striped levels: parity chunks per row
	copies     int // mirrored levels: copies of each chunk (< 0: one per member); 0 for striped levels
}

var levels = map[Level]shape{
	RAID0:  {minMembers: 2},
	RAID1:  {minMembers: 2, copies: -1},
	RAID5:  {minMembers: 3, parity: 1},
	RAID6:  {minMembers: 4, parity: 2},
	RAID10: {minMembers: 2, copies: Copies},
}

func (l Level) String() string {
	if l.Valid() {
		return "raid" + strconv.Itoa(int(l))
	}
	return "level(" + strconv.Itoa(int(l)) + ")"
}

// Valid reports whether l is a level raidd implements.
func (l Level) Valid() bool {
	_, ok := levels[l]
	return ok
}

// Levels returns the levels raidd implements, in ascending order.
func Levels() []Level {
	out := make([]Level, 0, len(levels))
	for l := range levels {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// ParseLevel accepts "0", "raid0", "1", "raid1", "mirror", "5", "raid5", "6",
// "raid6", "10" and "raid10".
func ParseLevel(s string) (Level, error) {
	t := strings.TrimPrefix(strings.ToLower(strings.TrimSpace(s)), "raid")
	if t == "mirror" {
		return RAID1, nil
	}
	n, err := strconv.Atoi(t)
	if err != nil || !Level(n).Valid() || strconv.Itoa(n) != t {
		return 0, fmt.Errorf("%w: %q (want %s)", ErrLevel, s, levelList())
	}
	return Level(n), nil
}

// levelList is "0, 1, 5, 6 or 10".
func levelList() string {
	var names []string
	for _, l := range Levels() {
		names = append(names, strconv.Itoa(int(l)))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// MinMembers is the smallest member count the level accepts (2 for a level
// raidd does not implement).
func (l Level) MinMembers() int {
	if s, ok := levels[l]; ok {
		return s.minMembers
	}
	return 2
}
