package raid

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testPieces() []piece {
	return []piece{
		{role: 0, kind: pieceData, off: 4096, n: 5, data: []byte("hello")},
		{role: 2, kind: pieceZeroes, off: 8192, n: 4096},
		{role: 3, kind: pieceData, off: 0, n: 3, data: []byte{1, 2, 3}},
	}
}

// TestRecordRoundTrip: what appendRecord writes, decodeRecord reads back,
// and recordLength announces its exact length.
func TestRecordRoundTrip(t *testing.T) {
	b := appendRecord([]byte("prefix"), 7, 42, 9, testPieces())[len("prefix"):]
	require.Len(t, b, recHeaderSize+3*recDescSize+8)
	n, err := recordLength(b, 7, int64(len(b)))
	require.NoError(t, err)
	assert.EqualValues(t, len(b), n)
	r, err := decodeRecord(b, 7, 4)
	require.NoError(t, err)
	assert.Equal(t, record{epoch: 7, seq: 42, row: 9, pieces: testPieces()}, r)
}

// TestRecordRejects: a torn or damaged record, one of another epoch, and
// one naming a role the array does not have all end a scan.
func TestRecordRejects(t *testing.T) {
	good := appendRecord(nil, 7, 42, 9, testPieces())
	for _, tt := range []struct {
		name    string
		mod     func(b []byte) []byte
		epoch   uint64
		members int
	}{
		{"epoch", func(b []byte) []byte { return b }, 8, 4},
		{"role", func(b []byte) []byte { return b }, 7, 3},
		{"payload-bit", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, 7, 4},
		{"torn-tail", func(b []byte) []byte { return b[:len(b)-1] }, 7, 4},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, 7, 4},
		{"zero", func(b []byte) []byte { return make([]byte, len(b)) }, 7, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.mod(bytes.Clone(good))
			_, err := decodeRecord(b, tt.epoch, tt.members)
			require.Error(t, err)
			assert.True(t, errors.Is(err, errBadRecord), "%v", err)
		})
	}
	uuid := [16]byte{1, 2, 3}
	h := encodeLogHeader(uuid, 5)
	e, err := decodeLogHeader(h, uuid)
	require.NoError(t, err)
	assert.EqualValues(t, 5, e)
	_, err = decodeLogHeader(h, [16]byte{9})
	assert.ErrorIs(t, err, errBadRecord, "another array's log")
	h[24] ^= 1
	_, err = decodeLogHeader(h, uuid)
	assert.ErrorIs(t, err, errBadRecord, "damaged header")
}

// FuzzDecodeRecord: the record decoder never panics on bytes read from a
// member; whatever it accepts is within the announced length, has pieces
// of known kinds and roles, and encodes back to exactly the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, 7, 42, 9, testPieces()), uint64(7), uint8(4))
	f.Add(appendRecord(nil, 1, 1, 0, nil), uint64(1), uint8(3))
	f.Add(make([]byte, recHeaderSize), uint64(0), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, epoch uint64, members uint8) {
		n, err := recordLength(b, epoch, int64(len(b)))
		if err != nil {
			if !errors.Is(err, errBadRecord) {
				t.Fatalf("recordLength error %v is not errBadRecord", err)
			}
			return
		}
		if n > int64(len(b)) {
			t.Fatalf("recordLength %d beyond the %d bytes given", n, len(b))
		}
		r, err := decodeRecord(b[:n], epoch, int(members))
		if err != nil {
			if !errors.Is(err, errBadRecord) {
				t.Fatalf("decodeRecord error %v is not errBadRecord", err)
			}
			return
		}
		for _, p := range r.pieces {
			if p.role >= int(members) || (p.kind != pieceData && p.kind != pieceZeroes) || p.n <= 0 {
				t.Fatalf("accepted a bad piece %+v", p)
			}
			if p.kind == pieceData && int64(len(p.data)) != p.n {
				t.Fatalf("piece %+v carries %d bytes", p, len(p.data))
			}
		}
		if again := appendRecord(nil, r.epoch, r.seq, r.row, r.pieces); !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, b[:n])
		}
	})
}
