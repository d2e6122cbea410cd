package superblock

import (
	"io"
)

// Remains is what the damaged slots of a member still say of its identity:
// the array and member UUIDs of every slot that carries Magic but fails its
// checksum or its rules (a header overwritten in part, a bit flip). Decode
// trusts no field of such a slot; Remains is only evidence, for a tool that
// asks which member a device was (raid.RestoreHeader).
type Remains struct {
	ArrayUUID  [16]byte
	MemberUUID [16]byte
	Events     uint64 // the slot's event counter, as damaged as the rest
}

// ReadRemains reads both slots of r and returns what those that still look
// like slots carry: Magic, or all but at most two of its bytes (a byte
// overwritten or flipped there, as in the rest), with a nonzero array UUID
// or member UUID (either may be zero or garbled: the caller judges). They
// come in slot order and without repeats (two entries mean the slots
// disagree; one identity carried by both slots has the higher of their
// event counters). Slots that decode are included too. It returns nil when
// no slot looks like one (a wiped header), and an error only when r fails
// to read.
func ReadRemains(r io.ReaderAt) ([]Remains, error) {
	var (
		out []Remains
		buf [SlotSize]byte
	)
	for s := range Slots {
		n, err := r.ReadAt(buf[:], SlotOffset(s))
		if n < offMemberUUID+16 {
			if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
				return nil, err
			}
			continue
		}
		if differing(buf[offMagic:offMagic+len(Magic)], []byte(Magic)) > 2 {
			continue
		}
		var id Remains
		copy(id.ArrayUUID[:], buf[offArrayUUID:])
		copy(id.MemberUUID[:], buf[offMemberUUID:])
		if id.ArrayUUID == ([16]byte{}) && id.MemberUUID == ([16]byte{}) {
			continue
		}
		id.Events = le.Uint64(buf[offEvents:])
		if len(out) == 0 || out[0].ArrayUUID != id.ArrayUUID || out[0].MemberUUID != id.MemberUUID {
			out = append(out, id)
		} else {
			out[0].Events = max(out[0].Events, id.Events)
		}
	}
	return out, nil
}

// differing counts the positions where a and b, of equal length, differ.
func differing(a, b []byte) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// NearUUID reports whether a and b are the same UUID or differ in at most
// two bytes: a UUID read from a damaged slot, garbled with it. Two random
// UUIDs share about one byte in sixteen.
func NearUUID(a, b [16]byte) bool {
	return a != [16]byte{} && b != [16]byte{} && differing(a[:], b[:]) <= 2
}
