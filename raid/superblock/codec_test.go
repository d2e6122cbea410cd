package superblock

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.hex from the encoder")

func goldenMeta() *Meta {
	return &Meta{
		ArrayUUID:         [16]byte{0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x46, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff},
		Name:              "golden-☃",
		Level:             10,
		Layout:            0,
		ChunkSize:         64 << 10,
		RaidDisks:         4,
		Role:              2,
		MemberUUID:        [16]byte{0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x46, 0x87, 0x98, 0x89, 0x7a, 0x6b, 0x5c, 0x4d, 0x3e, 0x2f},
		DataOffset:        HeaderSize,
		DataSize:          0x1_0000_0000,
		Events:            0x0102030405060708,
		State:             StateDirty,
		RebuildRole:       3,
		RebuildCheckpoint: 0x20_0000,
		BitmapRegion:      8192,
		CreateTime:        1_700_000_000_123_456_789,
		UpdateTime:        -1,
		DegradedEvents:    0x0102030405060700,
		Members: []MemberInfo{
			{UUID: uuidN(0x11), Role: 0, State: MemberActive},
			{UUID: uuidN(0x22), Role: 1, State: MemberFailed},
			{UUID: [16]byte{0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x46, 0x87, 0x98, 0x89, 0x7a, 0x6b, 0x5c, 0x4d, 0x3e, 0x2f}, Role: 2, State: MemberActive},
			{UUID: uuidN(0x44), Role: 3, State: MemberRebuilding},
			{UUID: uuidN(0x55), Role: -1, State: MemberRemoved},
		},
	}
}

// readHexFile parses whitespace-separated hex, ignoring "#" comments.
func readHexFile(t *testing.T, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var digits strings.Builder
	for line := range strings.Lines(string(raw)) {
		line, _, _ = strings.Cut(line, "#")
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(digits.String())
	require.NoError(t, err)
	return b
}

func writeHexFile(t *testing.T, path string, b []byte) {
	t.Helper()
	var s strings.Builder
	s.WriteString("# One superblock slot (4096 bytes) encoding goldenMeta(); 32 bytes a line.\n")
	s.WriteString("# A change here is a change of the on-disk format: bump Version instead.\n")
	for off := 0; off < len(b); off += 32 {
		s.WriteString(hex.EncodeToString(b[off:off+32]) + "\n")
	}
	require.NoError(t, os.WriteFile(path, []byte(s.String()), 0o644))
}

// TestGolden pins the on-disk bytes of a fixed Meta.
func TestGolden(t *testing.T) {
	path := filepath.Join("testdata", "golden.hex")
	got := encode(t, goldenMeta())
	if *update {
		writeHexFile(t, path, got)
	}
	want := readHexFile(t, path)
	require.Len(t, want, SlotSize)
	require.Equal(t, hex.Dump(want), hex.Dump(got), "encoding of goldenMeta changed")

	m, err := Decode(want)
	require.NoError(t, err)
	assert.Equal(t, goldenMeta(), m)
}

// TestLayout builds the golden slot by hand from the offsets in doc.go,
// without the package's offset constants, and compares it with Encode.
func TestLayout(t *testing.T) {
	m := goldenMeta()
	le := binary.LittleEndian
	w := make([]byte, 4096)
	copy(w[0:], "RAIDDSB\x00")
	le.PutUint32(w[8:], 1)
	copy(w[16:32], m.ArrayUUID[:])
	copy(w[32:96], "golden-\xe2\x98\x83")
	le.PutUint32(w[96:], 10)
	le.PutUint32(w[100:], 0)
	le.PutUint64(w[104:], 65536)
	le.PutUint32(w[112:], 4)
	le.PutUint32(w[116:], 2)
	copy(w[120:136], m.MemberUUID[:])
	le.PutUint64(w[136:], 1<<20)
	le.PutUint64(w[144:], 1<<32)
	le.PutUint64(w[152:], 0x0102030405060708)
	w[160] = 1 // dirty
	le.PutUint32(w[164:], 3)
	le.PutUint64(w[168:], 0x200000)
	le.PutUint64(w[176:], 8192)
	le.PutUint64(w[184:], 1_700_000_000_123_456_789)
	le.PutUint64(w[192:], math.MaxUint64) // -1
	le.PutUint32(w[200:], 5)
	le.PutUint64(w[208:], 0x0102030405060700)
	entries := []struct {
		uuid  [16]byte
		role  uint32
		state byte
	}{
		{uuidN(0x11), 0, 0},
		{uuidN(0x22), 1, 2},
		{m.MemberUUID, 2, 0},
		{uuidN(0x44), 3, 1},
		{uuidN(0x55), math.MaxUint32, 4},
	}
	for i, e := range entries {
		off := 256 + 24*i
		copy(w[off:], e.uuid[:])
		le.PutUint32(w[off+16:], e.role)
		w[off+20] = e.state
	}
	le.PutUint32(w[4092:], crc32.Checksum(w[:4092], crc32.MakeTable(crc32.Castagnoli)))

	assert.Equal(t, hex.Dump(w), hex.Dump(encode(t, m)))
}

func TestRoundTrip(t *testing.T) {
	name64 := strings.Repeat("é", 32) // 64 bytes of two-byte runes
	require.Len(t, name64, NameMax)
	tests := []struct {
		name string
		mod  func(m *Meta)
	}{
		{"raid5", func(m *Meta) {}},
		{"raid0/one-disk", func(m *Meta) {
			m.Level, m.RaidDisks = 0, 1
			m.Members = m.Members[:1]
		}},
		{"raid1", func(m *Meta) { m.Level = 1 }},
		{"raid10/layout", func(m *Meta) { m.Level, m.Layout = 10, math.MaxUint32 }},
		{"spare", func(m *Meta) { m.Role, m.MemberUUID = -1, uuidN(4) }},
		{"empty-name", func(m *Meta) { m.Name = "" }},
		{"name-64-bytes", func(m *Meta) { m.Name = name64 }},
		{"dirty", func(m *Meta) { m.State = StateDirty }},
		{"rebuilding", func(m *Meta) {
			m.Members[2].State = MemberRebuilding
			m.RebuildRole, m.RebuildCheckpoint = 2, m.DataSize
		}},
		{"replacing", func(m *Meta) {
			m.Members[3] = MemberInfo{UUID: uuidN(4), Role: 1, State: MemberReplacing}
			m.RebuildRole, m.RebuildCheckpoint = 1, 4096
		}},
		{"failed-keeps-role", func(m *Meta) {
			m.Members[2].State = MemberFailed
			m.Members[3] = MemberInfo{UUID: uuidN(4), Role: 2, State: MemberRebuilding}
			m.RebuildRole = 2
		}},
		{"extremes", func(m *Meta) {
			m.Events = math.MaxUint64
			m.ChunkSize = 1 << 63
			m.DataOffset = 1 << 62
			m.DataSize = math.MaxInt64 - 1<<62
			m.BitmapRegion = 1 << 62
			m.CreateTime, m.UpdateTime = math.MinInt64, math.MaxInt64
		}},
		{"max-members", func(m *Meta) {
			m.RaidDisks = MaxMembers
			m.Members = m.Members[:0]
			for i := range MaxMembers {
				m.Members = append(m.Members, MemberInfo{UUID: uuidN(byte(i + 1)), Role: int32(i)})
			}
		}},
		{"bitmap-64M", func(m *Meta) { m.BitmapRegion = 64 << 20 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validMeta()
			tt.mod(m)
			require.NoError(t, m.Validate())
			b := encode(t, m)
			got, err := Decode(b)
			require.NoError(t, err)
			assert.Equal(t, m, got)
			assert.Equal(t, b, encode(t, got), "re-encoding differs")
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mod    func(m *Meta)
		fields []string // every field Validate must name, in order; nil = valid
	}{
		{"valid", func(m *Meta) {}, nil},
		{"array-uuid-zero", func(m *Meta) { m.ArrayUUID = [16]byte{} }, []string{"ArrayUUID"}},
		{"name-too-long", func(m *Meta) { m.Name = strings.Repeat("x", NameMax+1) }, []string{"Name"}},
		{"name-nul", func(m *Meta) { m.Name = "a\x00b" }, []string{"Name"}},
		{"name-not-utf8", func(m *Meta) { m.Name = "a\xffb" }, []string{"Name"}},
		{"level-2", func(m *Meta) { m.Level = 2 }, []string{"Level"}},
		{"level-7", func(m *Meta) { m.Level = 7 }, []string{"Level"}},
		{"chunk-zero", func(m *Meta) { m.ChunkSize = 0 }, []string{"ChunkSize"}},
		{"chunk-2K", func(m *Meta) { m.ChunkSize = 2048 }, []string{"ChunkSize"}},
		{"chunk-not-pow2", func(m *Meta) { m.ChunkSize = 12288 }, []string{"ChunkSize"}},
		{"raid-disks-zero", func(m *Meta) {
			m.RaidDisks = 0
			m.Role = -1
			m.Members = []MemberInfo{{UUID: uuidN(1), Role: -1, State: MemberSpare}}
		}, []string{"RaidDisks"}},
		{"raid-disks-65", func(m *Meta) { m.RaidDisks = MaxMembers + 1 }, []string{"RaidDisks"}},
		{"role-out-of-range", func(m *Meta) { m.Role = 3 }, []string{"Role", "Members[0].Role"}},
		{"role-minus-2", func(m *Meta) { m.Role = -2 }, []string{"Role", "Members[0].Role"}},
		{"member-uuid-zero", func(m *Meta) { m.MemberUUID = [16]byte{} }, []string{"MemberUUID"}},
		{"data-offset-small", func(m *Meta) { m.DataOffset = HeaderSize - Align }, []string{"DataOffset"}},
		{"data-offset-unaligned", func(m *Meta) { m.DataOffset = HeaderSize + 512 }, []string{"DataOffset"}},
		{"data-size-zero", func(m *Meta) { m.DataSize = 0 }, []string{"DataSize"}},
		{"data-size-overflow", func(m *Meta) { m.DataSize = math.MaxInt64 }, []string{"DataSize"}},
		{"data-offset-overflow", func(m *Meta) { m.DataOffset = 1 << 63 }, []string{"DataOffset"}},
		{"state-unknown", func(m *Meta) { m.State = 2 }, []string{"State"}},
		{"rebuild-role-out-of-range", func(m *Meta) { m.RebuildRole = 3 }, []string{"RebuildRole"}},
		{"rebuild-role-minus-2", func(m *Meta) { m.RebuildRole = -2 }, []string{"RebuildRole"}},
		{"rebuild-role-not-rebuilding", func(m *Meta) { m.RebuildRole = 1 }, []string{"RebuildRole"}},
		{"checkpoint-without-rebuild", func(m *Meta) { m.RebuildCheckpoint = 4096 }, []string{"RebuildCheckpoint"}},
		{"scrub-row-beyond-data", func(m *Meta) { m.Scrub = ScrubRunning | (m.DataSize/m.ChunkSize + 1) }, []string{"Scrub"}},
		{"checkpoint-past-data", func(m *Meta) {
			m.Members[1].State = MemberRebuilding
			m.RebuildRole, m.RebuildCheckpoint = 1, m.DataSize+1
		}, []string{"RebuildCheckpoint"}},
		{"bitmap-unaligned", func(m *Meta) { m.BitmapRegion = 100 }, []string{"BitmapRegion"}},
		{"bitmap-not-power-of-two", func(m *Meta) { m.BitmapRegion = BitmapBytes + Align }, []string{"BitmapRegion"}},
		{"bitmap-too-fine", func(m *Meta) { m.DataSize = 1 << 40; m.BitmapRegion = Align }, []string{"BitmapRegion"}},
		{"members-empty", func(m *Meta) { m.Members = nil }, []string{"Members"}},
		{"members-too-many", func(m *Meta) {
			for i := range MaxMembers {
				m.Members = append(m.Members, MemberInfo{UUID: uuidN(byte(100 + i)), Role: -1, State: MemberSpare})
			}
		}, []string{"Members"}},
		{"member-uuid-duplicate", func(m *Meta) { m.Members[3].UUID = uuidN(2) }, []string{"Members[3].UUID"}},
		{"member-uuid-zero", func(m *Meta) { m.Members[3].UUID = [16]byte{} }, []string{"Members[3].UUID"}},
		{"member-role-taken", func(m *Meta) { m.Members[2].Role = 1 }, []string{"Members[2].Role"}},
		{"member-active-no-role", func(m *Meta) { m.Members[2].Role = -1 }, []string{"Members[2].Role"}},
		{"member-role-out-of-range", func(m *Meta) { m.Members[2].Role = 3 }, []string{"Members[2].Role"}},
		{"spare-with-role", func(m *Meta) { m.Members[3].Role = 1 }, []string{"Members[3].Role"}},
		{"failed-role-out-of-range", func(m *Meta) {
			m.Members[3] = MemberInfo{UUID: uuidN(4), Role: 7, State: MemberFailed}
		}, []string{"Members[3].Role"}},
		{"member-state-unknown", func(m *Meta) { m.Members[1].State = 9 }, []string{"Members[1].State"}},
		{"replacing-without-rebuild-role", func(m *Meta) {
			m.Members[3] = MemberInfo{UUID: uuidN(4), Role: 1, State: MemberReplacing}
		}, []string{"Members[3].Role"}},
		{"replacing-no-role", func(m *Meta) {
			m.Members[3] = MemberInfo{UUID: uuidN(4), Role: -1, State: MemberReplacing}
			m.RebuildRole = 1
		}, []string{"Members[3].Role", "RebuildRole"}},
		{"two-replacing", func(m *Meta) {
			m.Members[3] = MemberInfo{UUID: uuidN(4), Role: 1, State: MemberReplacing}
			m.Members = append(m.Members, MemberInfo{UUID: uuidN(5), Role: 1, State: MemberReplacing})
			m.RebuildRole = 1
		}, []string{"Members[4].State"}},
		{"self-missing", func(m *Meta) { m.MemberUUID = uuidN(9) }, []string{"Members"}},
		{"self-in-role-2", func(m *Meta) { m.Role = 2; m.Members[2].Role = 0; m.Members[0].Role = 2 }, nil},
		{"self-listed-with-other-role", func(m *Meta) { m.Members[0].Role = -1; m.Members[0].State = MemberFailed }, []string{"Members[0].Role"}},
		{"failed-shares-role-with-replacement", func(m *Meta) {
			m.Members[2].State = MemberFailed
			m.Members[3] = MemberInfo{UUID: uuidN(4), Role: 2, State: MemberRebuilding}
		}, nil},
		{"several-at-once", func(m *Meta) {
			m.Level, m.ChunkSize, m.Name = 4, 1000, "\x00"
		}, []string{"Name", "Level", "ChunkSize"}},
		{"zero-meta", func(m *Meta) { *m = Meta{} }, []string{
			"ArrayUUID", "ChunkSize", "RaidDisks", "Role", "MemberUUID",
			"DataOffset", "DataSize", "RebuildRole", "Members",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := validMeta()
			tt.mod(m)
			err := m.Validate()
			if tt.fields == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			assert.Equal(t, tt.fields, fieldErrors(err))
			for _, f := range tt.fields {
				assert.Contains(t, err.Error(), f+": ", "message names the field")
			}
			assert.NotContains(t, err.Error(), "\n", "one line for the CLI")

			// Encode refuses it and leaves dst alone; Write writes nothing.
			dst := bytes.Repeat([]byte{0xEE}, SlotSize)
			require.ErrorIs(t, m.Encode(dst), ErrInvalid)
			assert.Equal(t, bytes.Repeat([]byte{0xEE}, SlotSize), dst)
			d := newMemDev(HeaderSize)
			require.ErrorIs(t, Write(d, m), ErrInvalid)
			assert.Equal(t, make([]byte, HeaderSize), d.b)
		})
	}
}

func TestValidateNil(t *testing.T) {
	var m *Meta
	require.ErrorIs(t, m.Validate(), ErrInvalid)
	require.ErrorIs(t, m.Encode(make([]byte, SlotSize)), ErrInvalid)
	require.ErrorIs(t, Write(newMemDev(HeaderSize), nil), ErrInvalid)
}

func TestEncodeBufferSize(t *testing.T) {
	for _, n := range []int{0, SlotSize - 1, SlotSize + 1} {
		err := validMeta().Encode(make([]byte, n))
		assert.ErrorIs(t, err, ErrBufferSize, "len %d", n)
	}
}

// resum rewrites the checksum of a slot after a test edits it.
func resum(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[4092:], crc32.Checksum(b[:4092], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

func TestDecodeErrors(t *testing.T) {
	le := binary.LittleEndian
	tests := []struct {
		name  string
		mod   func(b []byte) []byte
		want  error
		field string // a *FieldError Decode must wrap, if any
	}{
		{"zero", func(b []byte) []byte { return make([]byte, SlotSize) }, ErrNoMagic, ""},
		{"empty", func(b []byte) []byte { return nil }, ErrNoMagic, ""},
		{"magic-damaged", func(b []byte) []byte { b[3] ^= 0x20; return b }, ErrNoMagic, ""},
		{"short-with-magic", func(b []byte) []byte { return b[:SlotSize-1] }, ErrBufferSize, ""},
		{"long-with-magic", func(b []byte) []byte { return append(b, 0) }, ErrBufferSize, ""},
		{"version-0", func(b []byte) []byte { le.PutUint32(b[8:], 0); return resum(b) }, ErrVersion, ""},
		{"version-2", func(b []byte) []byte { le.PutUint32(b[8:], 2); return resum(b) }, ErrVersion, ""},
		{"feature-flag", func(b []byte) []byte { b[12] = 0x80; return resum(b) }, ErrVersion, ""},
		{"checksums-flag-without-area", func(b []byte) []byte { b[12] |= FlagChecksums; return resum(b) }, ErrCorrupt, "ChecksumOffset"},
		{"checksum-area-without-flag", func(b []byte) []byte { le.PutUint64(b[224:], HeaderSize); return resum(b) }, ErrCorrupt, "ChecksumOffset"},
		{"reserved-after-checksum-area", func(b []byte) []byte { b[240] = 1; return resum(b) }, ErrCorrupt, ""},
		{"bit-flip-field", func(b []byte) []byte { b[104] ^= 1; return b }, ErrChecksum, ""},
		{"bit-flip-reserved", func(b []byte) []byte { b[3000] ^= 0x80; return b }, ErrChecksum, ""},
		{"bit-flip-checksum", func(b []byte) []byte { b[4095] ^= 1; return b }, ErrChecksum, ""},
		{"reserved-after-state", func(b []byte) []byte { b[161] = 1; return resum(b) }, ErrCorrupt, ""},
		{"reserved-after-count", func(b []byte) []byte { b[255] = 1; return resum(b) }, ErrCorrupt, ""},
		{"reserved-after-table", func(b []byte) []byte { b[1792] = 1; return resum(b) }, ErrCorrupt, ""},
		{"reserved-before-checksum", func(b []byte) []byte { b[4091] = 1; return resum(b) }, ErrCorrupt, ""},
		{"name-padding", func(b []byte) []byte { b[32+10] = 'x'; return resum(b) }, ErrCorrupt, ""},
		{"entry-padding", func(b []byte) []byte { b[256+24+21] = 1; return resum(b) }, ErrCorrupt, ""},
		{"unused-entry", func(b []byte) []byte { b[256+24*4] = 1; return resum(b) }, ErrCorrupt, ""},
		{"last-unused-entry", func(b []byte) []byte { b[256+24*64-1] = 1; return resum(b) }, ErrCorrupt, ""},
		{"count-65", func(b []byte) []byte { le.PutUint32(b[200:], 65); return resum(b) }, ErrCorrupt, ""},
		{"count-zero", func(b []byte) []byte {
			le.PutUint32(b[200:], 0)
			clear(b[256 : 256+24*4])
			return resum(b)
		}, ErrCorrupt, "Members"},
		{"chunk-size", func(b []byte) []byte { le.PutUint64(b[104:], 3000); return resum(b) }, ErrCorrupt, "ChunkSize"},
		{"level", func(b []byte) []byte { le.PutUint32(b[96:], 7); return resum(b) }, ErrCorrupt, "Level"},
		{"name-not-utf8", func(b []byte) []byte { b[32] = 0xff; return resum(b) }, ErrCorrupt, "Name"},
		{"member-state", func(b []byte) []byte { b[256+24+20] = 6; return resum(b) }, ErrCorrupt, "Members[1].State"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mod(encode(t, validMeta()))
			m, err := Decode(b)
			require.ErrorIs(t, err, tt.want)
			assert.Nil(t, m)
			for _, other := range []error{ErrNoMagic, ErrBufferSize, ErrVersion, ErrChecksum, ErrCorrupt} {
				if other != tt.want {
					assert.NotErrorIs(t, err, other)
				}
			}
			if tt.field != "" {
				assert.Contains(t, fieldErrors(err), tt.field)
				assert.Contains(t, err.Error(), tt.field)
			}
		})
	}
}

func TestClone(t *testing.T) {
	m := validMeta()
	c := m.Clone()
	require.Equal(t, m, c)
	c.Members[0].State = MemberFailed
	c.Members = append(c.Members, MemberInfo{UUID: uuidN(9), Role: -1, State: MemberSpare})
	c.Name = "other"
	assert.Equal(t, validMeta(), m, "changing the clone changed the original")
	assert.Nil(t, (*Meta)(nil).Clone())
}

func TestStateStrings(t *testing.T) {
	tests := []struct {
		name string
		got  string
	}{
		{"clean", StateClean.String()},
		{"dirty", StateDirty.String()},
		{"ArrayState(7)", ArrayState(7).String()},
		{"active", MemberActive.String()},
		{"rebuilding", MemberRebuilding.String()},
		{"failed", MemberFailed.String()},
		{"spare", MemberSpare.String()},
		{"removed", MemberRemoved.String()},
		{"replacing", MemberReplacing.String()},
		{"MemberState(200)", MemberState(200).String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { assert.Equal(t, tt.name, tt.got) })
	}
}

// TestScrubField: the scrub state sits at bytes 216..224 of the slot, round
// trips in both of its forms (a running scrub's resume row and repair bit,
// or the time the last one finished), and the bytes after it stay reserved.
func TestScrubField(t *testing.T) {
	rows := validMeta().DataSize / validMeta().ChunkSize
	for _, v := range []uint64{0, 1_764_000_000, ScrubRunning, ScrubRunning | ScrubRepair | rows, ScrubRunning | 7} {
		m := validMeta()
		m.Scrub = v
		b := make([]byte, SlotSize)
		require.NoError(t, m.Encode(b))
		assert.Equal(t, v, binary.LittleEndian.Uint64(b[216:224]))
		got, err := Decode(b)
		require.NoError(t, err)
		assert.Equal(t, v, got.Scrub)
	}
	b := make([]byte, SlotSize)
	require.NoError(t, validMeta().Encode(b))
	b[224] = 1
	_, err := Decode(resum(b))
	require.ErrorIs(t, err, ErrCorrupt, "byte 224 is not the scrub field's")
}

// checksumMeta is goldenMeta with a checksum area between the header and
// the data region.
func checksumMeta() *Meta {
	m := goldenMeta()
	m.Checksums = true
	m.ChecksumOffset = HeaderSize
	m.ChecksumLength = 1 << 20
	m.DataOffset = HeaderSize + 1<<20
	return m
}

// TestChecksumFields pins where FlagChecksums and the checksum area are
// stored: Flags bit 0 and bytes 224..240; every other byte is as in
// golden.hex but DataOffset and the slot checksum.
func TestChecksumFields(t *testing.T) {
	m := checksumMeta()
	got := encode(t, m)
	want := readHexFile(t, filepath.Join("testdata", "golden.hex"))
	le := binary.LittleEndian
	assert.Equal(t, uint32(FlagChecksums), le.Uint32(got[12:]))
	assert.Equal(t, uint64(HeaderSize), le.Uint64(got[224:]))
	assert.Equal(t, uint64(1<<20), le.Uint64(got[232:]))
	assert.Equal(t, uint64(2<<20), le.Uint64(got[136:]))
	for i := range got {
		switch {
		case i >= 12 && i < 16, i >= 224 && i < 240, i >= 136 && i < 144, i >= offChecksum:
			continue
		}
		require.Equal(t, want[i], got[i], "byte %d", i)
	}
	back, err := Decode(got)
	require.NoError(t, err)
	assert.Equal(t, m, back)

	bad := checksumMeta()
	bad.ChecksumLength = 2 << 20 // runs into the data region
	assert.ErrorIs(t, bad.Validate(), ErrInvalid)
	bad = checksumMeta()
	bad.ChecksumOffset = HeaderSize + 1 // not aligned
	assert.ErrorIs(t, bad.Validate(), ErrInvalid)
}
