package raid

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// appendRecord appends the encoding of a version 1 record to dst (what
// raidd wrote before the partial parity log), unpadded.
func appendRecord(dst []byte, epoch, seq uint64, row int64, pieces []piece) []byte {
	start := len(dst)
	length := int64(recHeaderSize + recDescSize*len(pieces))
	for _, p := range pieces {
		if p.kind == pieceData {
			length += p.n
		}
	}
	dst = append(dst, recMagic...)
	dst = le.AppendUint64(dst, epoch)
	dst = le.AppendUint64(dst, seq)
	dst = le.AppendUint64(dst, uint64(row))
	dst = le.AppendUint32(dst, uint32(len(pieces)))
	dst = le.AppendUint32(dst, 0)
	dst = le.AppendUint64(dst, uint64(length))
	for _, p := range pieces {
		dst = append(dst, byte(p.role), p.kind, 0, 0, 0, 0, 0, 0)
		dst = le.AppendUint64(dst, uint64(p.off))
		dst = le.AppendUint64(dst, uint64(p.n))
	}
	for _, p := range pieces {
		if p.kind == pieceData {
			dst = append(dst, p.data...)
		}
	}
	le.PutUint32(dst[start+36:], crc32.Checksum(dst[start:], castagnoli))
	return dst
}

// encodeLogHeaderV1 is a log header of version 1 (an older raidd's).
func encodeLogHeaderV1(uuid [16]byte, epoch uint64) []byte {
	b := make([]byte, logHeaderSize)
	copy(b, logMagic)
	copy(b[8:], uuid[:])
	le.PutUint64(b[24:], epoch)
	le.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli))
	return b
}

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
}

// TestLogHeaderVersions: a header this build writes says version 2, or
// version 3 with its slot size; a version 1 header (an older raidd's)
// reads as version 1; a header of an unknown version is refused with
// errLogVersion, never read as another format; another array's or a
// damaged header (its version, its slot size) is no header.
func TestLogHeaderVersions(t *testing.T) {
	uuid := [16]byte{1, 2, 3}
	h := encodeLogHeader(uuid, 5, 0)
	e, v, slot, err := decodeLogHeader(h, uuid)
	require.NoError(t, err)
	assert.EqualValues(t, 5, e)
	assert.Equal(t, logV2, v)
	assert.Zero(t, slot)
	e, v, slot, err = decodeLogHeader(encodeLogHeader(uuid, 8, 33*recAlign), uuid)
	require.NoError(t, err)
	assert.EqualValues(t, 8, e)
	assert.Equal(t, logV3, v)
	assert.EqualValues(t, 33*recAlign, slot)
	e, v, _, err = decodeLogHeader(encodeLogHeaderV1(uuid, 6), uuid)
	require.NoError(t, err)
	assert.EqualValues(t, 6, e)
	assert.Equal(t, logV1, v)
	_, _, _, err = decodeLogHeader(h, [16]byte{9})
	assert.ErrorIs(t, err, errBadRecord, "another array's log")
	future := bytes.Clone(h)
	le.PutUint32(future[36:], 4)
	le.PutUint32(future[40:], crc32.Checksum(future[:40], castagnoli))
	_, _, _, err = decodeLogHeader(future, uuid)
	assert.ErrorIs(t, err, errLogVersion, "a newer format")
	h[37] ^= 1
	_, _, _, err = decodeLogHeader(h, uuid)
	assert.ErrorIs(t, err, errBadRecord, "damaged version")
	h[37] ^= 1
	h[24] ^= 1
	_, _, _, err = decodeLogHeader(h, uuid)
	assert.ErrorIs(t, err, errBadRecord, "damaged header")
	s := encodeLogHeader(uuid, 9, 4*recAlign)
	s[45] ^= 1
	_, _, _, err = decodeLogHeader(s, uuid)
	assert.ErrorIs(t, err, errBadRecord, "damaged slot size")
	bad := encodeLogHeader(uuid, 9, recAlign+1)
	_, _, _, err = decodeLogHeader(bad, uuid)
	assert.ErrorIs(t, err, errBadRecord, "a slot size that is not whole blocks")
}

// FuzzDecodeLogHeader: no header block makes decodeLogHeader panic, and
// one it accepts of version 2 or 3 is what encodeLogHeader writes for its
// epoch and slot size.
func FuzzDecodeLogHeader(f *testing.F) {
	uuid := [16]byte{7, 7}
	f.Add(encodeLogHeader(uuid, 3, 0))
	f.Add(encodeLogHeader(uuid, 4, 66*recAlign))
	f.Add(encodeLogHeaderV1(uuid, 5))
	f.Add(make([]byte, logHeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		epoch, v, slot, err := decodeLogHeader(b, uuid)
		if err != nil || v == logV1 {
			return
		}
		want := encodeLogHeader(uuid, epoch, slot)
		n := 44
		if v == logV3 {
			n = 56
		}
		if !bytes.Equal(b[:n], want[:n]) {
			t.Fatalf("version %d header %x decodes to epoch %d, slot %d, which encode as %x", v, b[:n], epoch, slot, want[:n])
		}
	})
}

func testPPL() pplRecord {
	return pplRecord{
		epoch: 7, seq: 42, row: 9, lo: 100, hi: 108, pm: 3, qm: 0, flags: pplHasP | pplHasQ,
		spans: []pplSpan{{index: 0, role: 1, a: 100, b: 104}, {index: 2, role: 4, a: 102, b: 108}},
		pp:    []byte("partialP"),
		pq:    []byte("partialQ"),
	}
}

// TestPPLRoundTrip: what appendPPL writes, decodePPL reads back, and
// pplLength announces its exact length; a RAID5 record (no Q) too.
func TestPPLRoundTrip(t *testing.T) {
	want := testPPL()
	b := appendPPL([]byte("prefix"), &want)[len("prefix"):]
	require.Len(t, b, pplHeaderSize+2*pplSpanSize+16)
	n, err := pplLength(b, 7, int64(len(b)))
	require.NoError(t, err)
	assert.EqualValues(t, len(b), n)
	r, err := decodePPL(b, 7, 5)
	require.NoError(t, err)
	assert.Equal(t, want, r)

	want.qm, want.flags, want.pq = noRole, pplHasP, nil
	r, err = decodePPL(appendPPL(nil, &want), 7, 5)
	require.NoError(t, err)
	assert.Equal(t, want, r)

	// Zero partial parities are not stored.
	want.flags, want.pp = pplHasP|pplZero, nil
	b = appendPPL(nil, &want)
	require.Len(t, b, pplHeaderSize+2*pplSpanSize)
	r, err = decodePPL(b, 7, 5)
	require.NoError(t, err)
	assert.Equal(t, want, r)
}

// TestPPLRejects: a torn or damaged record, one of another epoch, one
// naming a member the array does not have, a span outside the parity
// range, and a version 1 record all end a scan.
func TestPPLRejects(t *testing.T) {
	good := testPPL()
	for _, tt := range []struct {
		name    string
		rec     func(r *pplRecord)
		mod     func(b []byte) []byte
		epoch   uint64
		members int
	}{
		{"epoch", nil, nil, 8, 5},
		{"member", nil, nil, 7, 4},
		{"span-outside", func(r *pplRecord) { r.spans[1].b = 109 }, nil, 7, 5},
		{"span-on-parity", func(r *pplRecord) { r.spans[0].role = 3 }, nil, 7, 5},
		{"empty-range", func(r *pplRecord) { r.hi = r.lo; r.spans = nil; r.pp, r.pq = nil, nil }, nil, 7, 5},
		{"q-without-member", func(r *pplRecord) { r.qm = noRole }, nil, 7, 5},
		{"no-parity", func(r *pplRecord) { r.flags = 0; r.pp, r.pq = nil, nil }, nil, 7, 5},
		{"short-payload", func(r *pplRecord) { r.pq = r.pq[:7] }, nil, 7, 5},
		{"zero-with-payload", func(r *pplRecord) { r.flags |= pplZero }, nil, 7, 5},
		{"unknown-flag", func(r *pplRecord) { r.flags |= 8 }, nil, 7, 5},
		{"payload-bit", nil, func(b []byte) []byte { b[len(b)-1] ^= 1; return b }, 7, 5},
		{"torn-tail", nil, func(b []byte) []byte { return b[:len(b)-1] }, 7, 5},
		{"magic", nil, func(b []byte) []byte { b[0] = 'X'; return b }, 7, 5},
		{"zero", nil, func(b []byte) []byte { return make([]byte, len(b)) }, 7, 5},
		{"version-1-record", nil, func([]byte) []byte { return appendRecord(nil, 7, 42, 9, testPieces()) }, 7, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := testPPL()
			if tt.rec != nil {
				tt.rec(&r)
			}
			b := appendPPL(nil, &r)
			if tt.mod != nil {
				b = tt.mod(b)
			}
			_, err := decodePPL(b, tt.epoch, tt.members)
			require.Error(t, err)
			assert.True(t, errors.Is(err, errBadRecord), "%v", err)
		})
	}
	_, err := decodePPL(appendPPL(nil, &good), 7, 5)
	require.NoError(t, err)
}

// FuzzDecodePPL: the partial parity record decoder never panics on bytes
// read from a member; whatever it accepts is within the announced length,
// has members below members, spans inside its parity range and partial
// parities of the range's width, and encodes back to exactly the same
// bytes.
func FuzzDecodePPL(f *testing.F) {
	r := testPPL()
	f.Add(appendPPL(nil, &r), uint64(7), uint8(5))
	r.qm, r.flags, r.pq = noRole, pplHasP, nil
	f.Add(appendPPL(nil, &r), uint64(7), uint8(4))
	r.flags, r.pp = pplHasP|pplZero, nil
	f.Add(appendPPL(nil, &r), uint64(7), uint8(4))
	f.Add(make([]byte, pplHeaderSize), uint64(0), uint8(3))
	f.Fuzz(func(t *testing.T, b []byte, epoch uint64, members uint8) {
		n, err := pplLength(b, epoch, int64(len(b)))
		if err != nil {
			if !errors.Is(err, errBadRecord) {
				t.Fatalf("pplLength error %v is not errBadRecord", err)
			}
			return
		}
		if n > int64(len(b)) {
			t.Fatalf("pplLength %d beyond the %d bytes given", n, len(b))
		}
		r, err := decodePPL(b[:n], epoch, int(members))
		if err != nil {
			if !errors.Is(err, errBadRecord) {
				t.Fatalf("decodePPL error %v is not errBadRecord", err)
			}
			return
		}
		if r.pm >= int(members) || r.lo >= r.hi {
			t.Fatalf("accepted a bad header %+v", r)
		}
		for _, s := range r.spans {
			if s.role >= int(members) || s.a < r.lo || s.b > r.hi || s.a >= s.b {
				t.Fatalf("accepted a bad span %+v of [%d, %d)", s, r.lo, r.hi)
			}
		}
		for _, p := range [][]byte{r.pp, r.pq} {
			if p != nil && int64(len(p)) != r.hi-r.lo {
				t.Fatalf("partial parity of %d bytes for [%d, %d)", len(p), r.lo, r.hi)
			}
		}
		if again := appendPPL(nil, &r); !bytes.Equal(again, b[:n]) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, b[:n])
		}
	})
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

// TestParseConsistencyPolicy: "ppl" is the write-hole log (md's word for
// what it now is), "journal" (its name in an earlier raidd) still parses
// to it, and Status names it "ppl".
func TestParseConsistencyPolicy(t *testing.T) {
	for _, s := range []string{"ppl", "journal"} {
		p, err := ParseConsistencyPolicy(s)
		require.NoError(t, err, s)
		assert.Equal(t, PolicyJournal, p, s)
		assert.Equal(t, "ppl", CanonicalConsistencyPolicy(s))
	}
	assert.Equal(t, "ppl", PolicyJournal.String())
	_, err := ParseConsistencyPolicy("write-back")
	assert.ErrorIs(t, err, ErrConfig)
}
