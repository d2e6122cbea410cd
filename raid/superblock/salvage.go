package superblock

import (
	"bytes"
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

// ReadRemains reads both slots of r and returns the identities of those
// that carry Magic and nonzero UUIDs, in slot order and without repeats (so
// two entries mean the slots contradict each other; one identity carried
// by both slots has the higher of their event counters). Slots that
// decode are included too.
// It returns nil when no slot carries anything (a wiped header), and an
// error only when r fails to read.
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
		if !bytes.Equal(buf[offMagic:offMagic+len(Magic)], []byte(Magic)) {
			continue
		}
		var id Remains
		copy(id.ArrayUUID[:], buf[offArrayUUID:])
		copy(id.MemberUUID[:], buf[offMemberUUID:])
		if id.ArrayUUID == ([16]byte{}) || id.MemberUUID == ([16]byte{}) {
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
