package superblock

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// NewUUID returns a random (version 4, RFC 9562 variant) UUID from
// crypto/rand. It is never the zero UUID.
func NewUUID() [16]byte {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never returns an error
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}

// FormatUUID returns u in the canonical lowercase form
// xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx.
func FormatUUID(u [16]byte) string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}

// ParseUUID parses the canonical 36-character form (any letter case) or the
// same 32 hex digits without hyphens. Errors wrap ErrUUID.
func ParseUUID(s string) ([16]byte, error) {
	var u [16]byte
	var digits []byte
	switch len(s) {
	case 36:
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return u, fmt.Errorf("%w: %q: hyphens not at positions 8, 13, 18 and 23", ErrUUID, s)
		}
		digits = []byte(s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36])
	case 32:
		digits = []byte(s)
	default:
		return u, fmt.Errorf("%w: %q is %d characters, want 36 (or 32 without hyphens)", ErrUUID, s, len(s))
	}
	if _, err := hex.Decode(u[:], digits); err != nil {
		return [16]byte{}, fmt.Errorf("%w: %q: %w", ErrUUID, s, err)
	}
	return u, nil
}
