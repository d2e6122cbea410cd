package superblock

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func goldenInUse() *InUse {
	return &InUse{
		Host:      "host-☃",
		BootID:    [16]byte{0xb0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xbf},
		PID:       4242,
		ProcStart: 0x0102030405,
		Since:     1_700_000_000_000_000_001,
		Heartbeat: 1_700_000_010_000_000_002,
		PIDNS:     4026531836,
		Path:      "/dev/loop7",
	}
}

// TestInUseGolden pins the on-disk bytes of a fixed in-use block.
func TestInUseGolden(t *testing.T) {
	path := filepath.Join("testdata", "inuse.hex")
	var got [SlotSize]byte
	require.NoError(t, goldenInUse().Encode(got[:]))
	if *update {
		var s strings.Builder
		s.WriteString("# One in-use block (4096 bytes at InUseOffset) encoding goldenInUse(); 32 bytes a line.\n")
		s.WriteString("# A change here is a change of the on-disk format: bump InUseVersion instead.\n")
		for off := 0; off < len(got); off += 32 {
			s.WriteString(hex.EncodeToString(got[off:off+32]) + "\n")
		}
		require.NoError(t, os.WriteFile(path, []byte(s.String()), 0o644))
	}
	want := readHexFile(t, path)
	require.Len(t, want, SlotSize)
	require.Equal(t, hex.Dump(want), hex.Dump(got[:]), "encoding of goldenInUse changed")
	iu, err := DecodeInUse(want)
	require.NoError(t, err)
	assert.Equal(t, goldenInUse(), iu)
}

// TestInUseLayout builds the golden block by hand from the offsets in
// doc.go and compares it with Encode.
func TestInUseLayout(t *testing.T) {
	iu := goldenInUse()
	le := binary.LittleEndian
	w := make([]byte, 4096)
	copy(w[0:], "RAIDDIU\x00")
	le.PutUint32(w[8:], 1)
	le.PutUint32(w[12:], 4242)
	le.PutUint64(w[16:], 0x0102030405)
	copy(w[24:40], iu.BootID[:])
	le.PutUint64(w[40:], 1_700_000_000_000_000_001)
	le.PutUint64(w[48:], 1_700_000_010_000_000_002)
	le.PutUint64(w[56:], 4026531836)
	copy(w[64:128], "host-\xe2\x98\x83")
	copy(w[128:384], "/dev/loop7")
	le.PutUint32(w[4092:], crc32.Checksum(w[:4092], crc32.MakeTable(crc32.Castagnoli)))
	var got [SlotSize]byte
	require.NoError(t, iu.Encode(got[:]))
	assert.Equal(t, hex.Dump(w), hex.Dump(got[:]))
	assert.Equal(t, int64(12288), int64(InUseOffset), "the block sits right after slot 1")
}

func TestInUseDecodeErrors(t *testing.T) {
	var good [SlotSize]byte
	require.NoError(t, goldenInUse().Encode(good[:]))
	mutate := func(f func(b []byte)) []byte {
		b := bytes.Clone(good[:])
		f(b)
		return b
	}
	resum := func(b []byte) {
		binary.LittleEndian.PutUint32(b[4092:], crc32.Checksum(b[:4092], castagnoli))
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"zeroes", make([]byte, SlotSize), ErrNoInUse},
		{"short", good[:100], ErrBufferSize},
		{"version", mutate(func(b []byte) { b[8] = 2; resum(b) }), ErrVersion},
		{"checksum", mutate(func(b []byte) { b[70] ^= 1 }), ErrChecksum},
		{"reserved", mutate(func(b []byte) { b[1000] = 1; resum(b) }), ErrCorrupt},
		{"host_padding", mutate(func(b []byte) { b[127] = 'x'; b[126] = 0; resum(b) }), ErrCorrupt},
		{"path_utf8", mutate(func(b []byte) { b[128] = 0xff; resum(b) }), ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeInUse(c.b)
			assert.True(t, errors.Is(err, c.want), "got %v, want %v", err, c.want)
		})
	}
}

func TestInUseReadWrite(t *testing.T) {
	dev := &memDev{b: make([]byte, 64<<10)}
	_, err := ReadInUse(dev)
	assert.ErrorIs(t, err, ErrNoInUse, "a fresh member has no holder")
	long := &InUse{Host: strings.Repeat("h", 100), Path: "/" + strings.Repeat("☃", 200), PID: 1}
	require.NoError(t, WriteInUse(dev, long))
	got, err := ReadInUse(dev)
	require.NoError(t, err)
	assert.Len(t, got.Host, InUseHostMax)
	assert.LessOrEqual(t, len(got.Path), InUsePathMax)
	assert.True(t, strings.HasPrefix(long.Path, got.Path), "the path is cut, not mangled")
	// The slots are untouched by the in-use block and vice versa.
	m := goldenMeta()
	require.NoError(t, Write(dev, m))
	got, err = ReadInUse(dev)
	require.NoError(t, err)
	assert.Equal(t, uint32(1), got.PID)
	require.NoError(t, ClearInUse(dev))
	_, err = ReadInUse(dev)
	assert.ErrorIs(t, err, ErrNoInUse)
	_, err = Read(dev)
	assert.NoError(t, err, "clearing the in-use block leaves the superblock")
	_, err = ReadInUse(&memDev{b: make([]byte, 8192)})
	assert.ErrorIs(t, err, ErrNoInUse, "a device too short for the block has none")
}

// FuzzDecodeInUse: DecodeInUse never panics, and what it accepts encodes
// back to the same bytes.
func FuzzDecodeInUse(f *testing.F) {
	var good [SlotSize]byte
	if err := goldenInUse().Encode(good[:]); err != nil {
		f.Fatal(err)
	}
	f.Add(good[:])
	f.Add(make([]byte, SlotSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		iu, err := DecodeInUse(b)
		if err != nil {
			return
		}
		var again [SlotSize]byte
		require.NoError(t, iu.Encode(again[:]))
		require.Equal(t, b, again[:])
	})
}
