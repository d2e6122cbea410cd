package superblock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"
)

// FuzzDecode checks that Decode never panics, classifies every failure with
// one of the package's sentinels, and that whatever it accepts is valid and
// re-encodes to exactly the input bytes. Each input is decoded as given, and
// again as the body of a slot (from offset 16, zero-padded or cut to
// SlotSize) behind a good magic, version and checksum, so that short inputs
// reach the field checks behind the checksum and minimise quickly.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, SlotSize))
	f.Add([]byte(Magic))
	for _, m := range []*Meta{validMeta(), goldenMeta(), checksumMeta()} {
		b := make([]byte, SlotSize)
		if err := m.Encode(b); err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		flipped := bytes.Clone(b)
		flipped[200] = 65
		f.Add(flipped)
		f.Add(bytes.TrimRight(b[16:offChecksum], "\x00")) // body for the repaired path
	}

	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecode(t, b)
		// Repaired: b zero-padded or cut to one slot, from offset 16 on.
		r := make([]byte, SlotSize)
		copy(r[16:], b)
		copy(r, Magic)
		binary.LittleEndian.PutUint32(r[8:], Version)
		resum(r)
		checkDecode(t, r)
	})
}

func checkDecode(t *testing.T, b []byte) {
	in := bytes.Clone(b)
	m, err := Decode(b)
	if !bytes.Equal(in, b) {
		t.Fatal("Decode modified its input")
	}
	if err != nil {
		if m != nil {
			t.Fatalf("Decode returned a Meta with error %v", err)
		}
		known := 0
		for _, s := range []error{ErrNoMagic, ErrBufferSize, ErrVersion, ErrChecksum, ErrCorrupt} {
			if errors.Is(err, s) {
				known++
			}
		}
		if known != 1 {
			t.Fatalf("error %q matches %d sentinels, want 1", err, known)
		}
		return
	}
	if err := m.Validate(); err != nil {
		t.Fatalf("Decode accepted a Meta that fails Validate: %v", err)
	}
	out := make([]byte, SlotSize)
	if err := m.Encode(out); err != nil {
		t.Fatalf("re-encode: %v", err)
	}
	if !bytes.Equal(out, b) {
		t.Fatalf("re-encoding differs from the decoded bytes:\n got %x\nwant %x", out, b)
	}
}

// FuzzRoundTrip builds a Meta from fuzzed fields. If it validates, it must
// encode, decode to an equal Meta, and survive Write then Read; if it does
// not, Encode must refuse it with ErrInvalid and leave dst untouched.
// members packs member table entries as 21 bytes each: UUID, Role (int32
// little-endian) and State.
func FuzzRoundTrip(f *testing.F) {
	add := func(m *Meta) {
		var members []byte
		for _, mi := range m.Members {
			members = append(members, mi.UUID[:]...)
			members = binary.LittleEndian.AppendUint32(members, uint32(mi.Role))
			members = append(members, byte(mi.State))
		}
		f.Add(m.ArrayUUID[:], m.Name, m.Level, m.Layout, m.ChunkSize, m.RaidDisks, m.Role,
			m.MemberUUID[:], m.DataOffset, m.DataSize, m.Events, byte(m.State), m.RebuildRole,
			m.RebuildCheckpoint, m.BitmapRegion, m.CreateTime, m.UpdateTime, members,
			m.LogOffset, m.LogLength)
	}
	add(validMeta())
	add(goldenMeta())
	spare := validMeta()
	spare.Role, spare.MemberUUID = -1, uuidN(4)
	add(spare)
	add(logMeta())

	f.Fuzz(func(t *testing.T, arrayUUID []byte, name string, level, layout uint32, chunk uint64,
		raidDisks uint32, role int32, memberUUID []byte, dataOffset, dataSize, events uint64,
		state byte, rebuildRole int32, checkpoint, bitmap uint64, ctime, utime int64, members []byte,
		logOffset, logLength uint64,
	) {
		m := &Meta{
			Name: name, Level: level, Layout: layout, ChunkSize: chunk, RaidDisks: raidDisks,
			Role: role, DataOffset: dataOffset, DataSize: dataSize, Events: events,
			State: ArrayState(state), RebuildRole: rebuildRole, RebuildCheckpoint: checkpoint,
			BitmapRegion: bitmap, CreateTime: ctime, UpdateTime: utime,
			LogOffset: logOffset, LogLength: logLength,
		}
		copy(m.ArrayUUID[:], arrayUUID)
		copy(m.MemberUUID[:], memberUUID)
		for len(members) >= 21 && len(m.Members) <= MaxMembers {
			var mi MemberInfo
			copy(mi.UUID[:], members)
			mi.Role = int32(binary.LittleEndian.Uint32(members[16:]))
			mi.State = MemberState(members[20])
			m.Members = append(m.Members, mi)
			members = members[21:]
		}
		orig := m.Clone()

		dst := bytes.Repeat([]byte{0xEE}, SlotSize)
		if verr := m.Validate(); verr != nil {
			if !errors.Is(verr, ErrInvalid) || len(fieldErrors(verr)) == 0 {
				t.Fatalf("Validate error %q is not ErrInvalid with field problems", verr)
			}
			if err := m.Encode(dst); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Encode of invalid Meta: %v", err)
			}
			if !bytes.Equal(dst, bytes.Repeat([]byte{0xEE}, SlotSize)) {
				t.Fatal("Encode wrote into dst for an invalid Meta")
			}
			return
		}
		if err := m.Encode(dst); err != nil {
			t.Fatalf("Encode of valid Meta: %v", err)
		}
		got, err := Decode(dst)
		if err != nil {
			t.Fatalf("Decode(Encode(m)): %v", err)
		}
		assertMetaEqual(t, orig, got)

		d := newMemDev(3 * SlotSize)
		if err := Write(d, m); err != nil {
			t.Fatalf("Write: %v", err)
		}
		read, err := Read(d)
		if err != nil {
			t.Fatalf("Read after Write: %v", err)
		}
		assertMetaEqual(t, orig, read)
		assertMetaEqual(t, orig, m) // Encode and Write leave m alone
	})
}

func assertMetaEqual(t *testing.T, want, got *Meta) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("Meta differs:\n got %+v\nwant %+v", got, want)
	}
}
