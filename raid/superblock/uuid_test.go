package superblock

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNewUUID(t *testing.T) {
	seen := make(map[[16]byte]bool)
	for range 1000 {
		u := NewUUID()
		require.NotEqual(t, [16]byte{}, u)
		require.False(t, seen[u], "duplicate UUID %s", FormatUUID(u))
		seen[u] = true
		assert.Equal(t, byte(0x40), u[6]&0xf0, "version nibble")
		assert.Equal(t, byte(0x80), u[8]&0xc0, "variant bits")
		s := FormatUUID(u)
		assert.Equal(t, byte('4'), s[14])
	}
}

func TestFormatParseUUID(t *testing.T) {
	u := [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0x4e, 0xf0, 0x81, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
	const canon = "12345678-9abc-4ef0-8123-456789abcdef"
	require.Equal(t, canon, FormatUUID(u))
	require.Equal(t, "00000000-0000-0000-0000-000000000000", FormatUUID([16]byte{}))

	ok := []struct{ name, in string }{
		{"canonical", canon},
		{"upper", strings.ToUpper(canon)},
		{"no-hyphens", strings.ReplaceAll(canon, "-", "")},
	}
	for _, tt := range ok {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseUUID(tt.in)
			require.NoError(t, err)
			assert.Equal(t, u, got)
		})
	}

	bad := []struct{ name, in string }{
		{"empty", ""},
		{"short", canon[:35]},
		{"long", canon + "0"},
		{"hyphen-moved", "1234567-89abc-4ef0-8123-456789abcdef"},
		{"not-hex", "12345678-9abc-4ef0-8123-456789abcdeg"},
		{"hyphens-in-32", "12345678-9abc-4ef0-8123-456789abcd"[:32]},
		{"braces", "{" + canon[:34] + "}"},
	}
	for _, tt := range bad {
		t.Run("bad/"+tt.name, func(t *testing.T) {
			got, err := ParseUUID(tt.in)
			require.ErrorIs(t, err, ErrUUID)
			assert.Equal(t, [16]byte{}, got)
		})
	}

	for range 100 {
		u := NewUUID()
		got, err := ParseUUID(FormatUUID(u))
		require.NoError(t, err)
		require.Equal(t, u, got)
	}
}
