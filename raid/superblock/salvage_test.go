package superblock

import (
	"bytes"
	"testing"
)

// TestReadRemains: a header that reads gives its identity; one whose slots
// fail their checksums keeps it; a wiped header and slots without magic
// give none; two slots naming different members give both.
func TestReadRemains(t *testing.T) {
	m := validMeta()
	d := newMemDev(HeaderSize)
	got, err := ReadRemains(d)
	if err != nil || got != nil {
		t.Fatalf("wiped: %v, %v", got, err)
	}
	for _, ev := range []uint64{4, 5} {
		m.Events = ev
		if err := Write(d, m); err != nil {
			t.Fatal(err)
		}
	}
	want := []Remains{{m.ArrayUUID, m.MemberUUID, 5}}
	if got, _ := ReadRemains(d); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("intact: %v, want %v", got, want)
	}
	for s := range Slots {
		d.slot(s)[1000] ^= 1
	}
	if _, err := Read(d); err == nil {
		t.Fatal("damaged slots still read")
	}
	if got, _ := ReadRemains(d); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("damaged: %v, want %v", got, want)
	}
	other := uuidN(99)
	copy(d.slot(1)[offMemberUUID:], other[:])
	if got, _ := ReadRemains(d); len(got) != 2 || got[1].MemberUUID != other {
		t.Fatalf("contradicting slots: %v", got)
	}
	// A flipped magic byte and a zeroed member UUID: still a slot, and
	// still this array's, with its event counter.
	d.slot(0)[0] = 'X'
	copy(d.slot(0)[offMemberUUID:], make([]byte, 16))
	if got, _ := ReadRemains(d); len(got) != 2 || got[0].ArrayUUID != m.ArrayUUID || got[0].MemberUUID != ([16]byte{}) || got[0].Events != 4 {
		t.Fatalf("garbled magic and member UUID: %+v", got)
	}
	copy(d.slot(0), "XXXXXXB\x00")
	copy(d.slot(1), "XXXXXXB\x00")
	if got, _ := ReadRemains(d); got != nil {
		t.Fatalf("magic gone: %v", got)
	}
}

func TestNearUUID(t *testing.T) {
	a := uuidN(7)
	b := a
	b[3] ^= 1
	b[9] ^= 0x80
	c := b
	c[12]++
	if !NearUUID(a, a) || !NearUUID(a, b) || NearUUID(a, c) || NearUUID(a, [16]byte{}) {
		t.Fatal("NearUUID")
	}
}

// FuzzReadRemains: ReadRemains never panics or fails on a readable
// device, and whenever Read accepts a header, its identity is among what
// ReadRemains reports.
func FuzzReadRemains(f *testing.F) {
	good := make([]byte, SlotSize)
	if err := validMeta().Encode(good); err != nil {
		f.Fatal(err)
	}
	f.Add(good, []byte{})
	f.Add(good, good)
	f.Add(good[:200], []byte(Magic))
	f.Fuzz(func(t *testing.T, s0, s1 []byte) {
		d := newMemDev(3 * SlotSize)
		copy(d.slot(0), s0)
		copy(d.slot(1), s1)
		in := bytes.Clone(d.b)
		got, err := ReadRemains(d)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(in, d.b) {
			t.Fatal("ReadRemains wrote")
		}
		if len(got) > Slots {
			t.Fatalf("%d remains from %d slots", len(got), Slots)
		}
		for _, r := range got {
			if !NearUUID(r.ArrayUUID, r.ArrayUUID) && !NearUUID(r.MemberUUID, r.MemberUUID) {
				t.Fatalf("an entry with neither UUID: %+v", r)
			}
		}
		if m, err := Read(d); err == nil {
			found := false
			for _, r := range got {
				found = found || (r.ArrayUUID == m.ArrayUUID && r.MemberUUID == m.MemberUUID && r.Events >= m.Events)
			}
			if !found {
				t.Fatalf("Read gives %x/%x, ReadRemains %v", m.ArrayUUID, m.MemberUUID, got)
			}
		}
	})
}
