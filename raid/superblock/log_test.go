package superblock

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logMeta is validMeta as a RAID5 with a 4 MiB write-hole log area right
// after the header.
func logMeta() *Meta {
	m := validMeta()
	m.Level = 5
	m.LogOffset, m.LogLength = HeaderSize, 4<<20
	m.DataOffset = HeaderSize + 4<<20
	return m
}

// TestLogLayout pins the log area fields: FlagLog in the Flags word and
// the offset and length at bytes 240 and 248; without a log all of them
// are zero, as before the field existed.
func TestLogLayout(t *testing.T) {
	le := binary.LittleEndian
	b := encode(t, logMeta())
	assert.EqualValues(t, FlagLog, le.Uint32(b[12:]), "Flags")
	assert.Equal(t, uint64(HeaderSize), le.Uint64(b[240:]), "LogOffset")
	assert.Equal(t, uint64(4<<20), le.Uint64(b[248:]), "LogLength")
	got, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, logMeta(), got)

	b = encode(t, validMeta())
	assert.Zero(t, le.Uint32(b[12:]), "Flags without a log")
	assert.Equal(t, make([]byte, 16), b[240:256], "log fields without a log")
}

func TestLogDecodeErrors(t *testing.T) {
	le := binary.LittleEndian
	for _, tt := range []struct {
		name  string
		base  func() *Meta
		mod   func(b []byte)
		want  error
		field string
	}{
		{"flag-without-fields", validMeta, func(b []byte) { le.PutUint32(b[12:], FlagLog) }, ErrCorrupt, ""},
		{"fields-without-flag", logMeta, func(b []byte) { le.PutUint32(b[12:], 0) }, ErrCorrupt, ""},
		{"unknown-flag", logMeta, func(b []byte) { le.PutUint32(b[12:], FlagLog|1<<2) }, ErrVersion, ""},
		{"unaligned-length", logMeta, func(b []byte) { le.PutUint64(b[248:], 4<<20+1) }, ErrCorrupt, "LogLength"},
		{"past-data", logMeta, func(b []byte) { le.PutUint64(b[248:], 8<<20) }, ErrCorrupt, "LogLength"},
		{"in-header", logMeta, func(b []byte) { le.PutUint64(b[240:], 4096) }, ErrCorrupt, "LogOffset"},
		{"not-parity", logMeta, func(b []byte) { le.PutUint32(b[96:], 1) }, ErrCorrupt, "LogLength"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := encode(t, tt.base())
			tt.mod(b)
			_, err := Decode(resum(b))
			require.ErrorIs(t, err, tt.want)
			if tt.field != "" {
				var fe *FieldError
				require.True(t, errors.As(err, &fe), "%v", err)
				assert.Contains(t, err.Error(), tt.field)
			}
		})
	}
	// The bitmap must end before the log area begins.
	// 8 Mi bits fit before DataOffset but not before LogOffset.
	m := logMeta()
	m.BitmapRegion, m.DataSize = Align, 8<<20*Align
	err := m.Validate()
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "BitmapRegion")
	assert.Contains(t, err.Error(), "LogOffset")
	m.LogOffset, m.LogLength = 0, 0
	require.NoError(t, m.Validate(), "the same bitmap fits before DataOffset")

	// The log area and the checksum area never overlap.
	m = logMeta()
	m.Checksums, m.ChecksumOffset, m.ChecksumLength = true, HeaderSize+4<<20-Align, 2*Align
	m.DataOffset += 2 * Align
	err = m.Validate()
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "overlaps the checksum area")
	m.ChecksumOffset += Align
	require.NoError(t, m.Validate(), "the checksum area right after the log area")
}
