package superblock

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// uuidN returns a recognisable non-zero UUID: every byte is n.
func uuidN(n byte) [16]byte {
	var u [16]byte
	for i := range u {
		u[i] = n
	}
	return u
}

// validMeta is a 3-disk RAID5 member in role 0 that knows of a spare.
func validMeta() *Meta {
	return &Meta{
		ArrayUUID:   uuidN(0xA0),
		Name:        "tank",
		Level:       5,
		Layout:      0,
		ChunkSize:   512 << 10,
		RaidDisks:   3,
		Role:        0,
		MemberUUID:  uuidN(1),
		DataOffset:  HeaderSize,
		DataSize:    1 << 30,
		Events:      7,
		State:       StateClean,
		RebuildRole: -1,
		CreateTime:  1_700_000_000_000_000_000,
		UpdateTime:  1_700_000_100_000_000_000,
		Members: []MemberInfo{
			{UUID: uuidN(1), Role: 0, State: MemberActive},
			{UUID: uuidN(2), Role: 1, State: MemberActive},
			{UUID: uuidN(3), Role: 2, State: MemberActive},
			{UUID: uuidN(4), Role: -1, State: MemberSpare},
		},
	}
}

func encode(t testing.TB, m *Meta) []byte {
	t.Helper()
	b := make([]byte, SlotSize)
	require.NoError(t, m.Encode(b))
	return b
}

// fieldErrors walks err's tree and returns the Field of every *FieldError.
func fieldErrors(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if fe, ok := e.(*FieldError); ok {
			out = append(out, fe.Field)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			if c := u.Unwrap(); c != nil {
				walk(c)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// memDev is an in-memory device following io.ReaderAt and io.WriterAt: a
// read past the end returns the bytes that exist and io.EOF; a write past
// the end fails with errShortDev (the device does not grow).
type memDev struct{ b []byte }

var errShortDev = errors.New("memdev: write past end of device")

func newMemDev(size int) *memDev { return &memDev{b: make([]byte, size)} }

func (d *memDev) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("memdev: negative offset")
	}
	if off >= int64(len(d.b)) {
		return 0, io.EOF
	}
	n := copy(p, d.b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (d *memDev) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("memdev: negative offset")
	}
	if off >= int64(len(d.b)) {
		return 0, errShortDev
	}
	n := copy(d.b[off:], p)
	if n < len(p) {
		return n, errShortDev
	}
	return n, nil
}

// slot returns a view of slot s of the device.
func (d *memDev) slot(s int) []byte { return d.b[SlotOffset(s) : SlotOffset(s)+SlotSize] }
