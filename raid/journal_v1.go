package raid

import (
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
)

// The first log format (log header version 1, written by raidd before the
// partial parity log): a redo log. Each record holds the exact member
// writes of a partial-stripe row write (the new data of the chunks it
// wrote and the new parity, Q too on RAID6), and replay writes them all
// again, in order. This build no longer writes it, but it still replays a
// dirty log of this format left by an older build, so that such an array
// assembles without losing what that build promised.

// Sizes of the version 1 record's pieces.
const (
	recHeaderSize = 48
	recDescSize   = 24
)

// Kinds of version 1 record pieces.
const (
	pieceData   = 1 // bytes to write
	pieceZeroes = 2 // a range to discard (read as zeroes)
)

const recMagic = "RAIDDJR\x00"

// piece is one member write of a version 1 record: data bytes or zeroes at
// a data-region offset of the member in role.
type piece struct {
	role int
	kind uint8
	off  int64
	n    int64
	data []byte // kind == pieceData: n bytes
}

// record is a decoded version 1 log record. Layout (little-endian):
//
//	0   8  magic "RAIDDJR\x00"
//	8   8  epoch
//	16  8  seq: the record's place in the array-wide order
//	24  8  row (for messages)
//	32  4  piece count
//	36  4  CRC32C of the whole record, this field taken as zero
//	40  8  length: header, descriptors and payload
//	48     descriptors, 24 bytes each: role u8, kind u8, 6 zero bytes,
//	       data-region offset u64, length u64
//	...    payload: the data pieces' bytes, in order
type record struct {
	epoch, seq uint64
	row        int64
	pieces     []piece
}

// recordLength returns the unpadded length a version 1 record header at
// the start of b announces, or an error wrapping errBadRecord when b does
// not start with a record header of the given epoch. It needs
// recHeaderSize bytes.
func recordLength(b []byte, epoch uint64, limit int64) (int64, error) {
	if len(b) < recHeaderSize || string(b[:8]) != recMagic {
		return 0, fmt.Errorf("%w: no record magic", errBadRecord)
	}
	if e := le.Uint64(b[8:]); e != epoch {
		return 0, fmt.Errorf("%w: epoch %d, the log's is %d", errBadRecord, e, epoch)
	}
	n := le.Uint64(b[40:])
	if n < recHeaderSize || n > uint64(limit) {
		return 0, fmt.Errorf("%w: length %d outside [%d, %d]", errBadRecord, n, recHeaderSize, limit)
	}
	return int64(n), nil
}

// decodeRecord parses the version 1 record that fills b exactly (as
// recordLength announced it) and checks its checksum, piece kinds, roles
// (below members) and lengths. The data pieces alias b. Errors wrap
// errBadRecord.
func decodeRecord(b []byte, epoch uint64, members int) (record, error) {
	n, err := recordLength(b, epoch, int64(len(b)))
	if err != nil {
		return record{}, err
	}
	if n != int64(len(b)) {
		return record{}, fmt.Errorf("%w: length %d, buffer %d", errBadRecord, n, len(b))
	}
	want := le.Uint32(b[36:])
	crc := crc32.Update(0, castagnoli, b[:36])
	crc = crc32.Update(crc, castagnoli, []byte{0, 0, 0, 0})
	crc = crc32.Update(crc, castagnoli, b[40:])
	if crc != want {
		return record{}, fmt.Errorf("%w: checksum %#08x, computed %#08x", errBadRecord, want, crc)
	}
	r := record{epoch: epoch, seq: le.Uint64(b[16:]), row: int64(le.Uint64(b[24:]))}
	count := uint64(le.Uint32(b[32:]))
	if count > uint64(len(b)-recHeaderSize)/recDescSize {
		return record{}, fmt.Errorf("%w: %d pieces do not fit in %d bytes", errBadRecord, count, len(b))
	}
	payload := b[recHeaderSize+int(count)*recDescSize:]
	r.pieces = make([]piece, count)
	for i := range r.pieces {
		d := b[recHeaderSize+i*recDescSize:]
		p := piece{role: int(d[0]), kind: d[1], off: int64(le.Uint64(d[8:])), n: int64(le.Uint64(d[16:]))}
		switch {
		case p.role >= members:
			return record{}, fmt.Errorf("%w: piece %d names role %d of %d", errBadRecord, i, p.role, members)
		case p.kind != pieceData && p.kind != pieceZeroes:
			return record{}, fmt.Errorf("%w: piece %d has kind %d", errBadRecord, i, p.kind)
		case string(d[2:8]) != "\x00\x00\x00\x00\x00\x00":
			return record{}, fmt.Errorf("%w: piece %d has non-zero padding", errBadRecord, i)
		case p.off < 0 || p.n <= 0 || p.n > 1<<40 || p.off > 1<<62:
			return record{}, fmt.Errorf("%w: piece %d covers [%d, +%d)", errBadRecord, i, p.off, p.n)
		}
		if p.kind == pieceData {
			if p.n > int64(len(payload)) {
				return record{}, fmt.Errorf("%w: piece %d needs %d payload bytes, %d left", errBadRecord, i, p.n, len(payload))
			}
			p.data, payload = payload[:p.n:p.n], payload[p.n:]
		}
		r.pieces[i] = p
	}
	if len(payload) != 0 {
		return record{}, fmt.Errorf("%w: %d payload bytes left over", errBadRecord, len(payload))
	}
	return r, nil
}

// scanV1 returns the version 1 records of epoch in a member's log (buf, the
// log after its header), in log order, stopping at the first block that is
// not a valid record.
func (j *journal) scanV1(buf []byte, epoch uint64) []record {
	var recs []record
	for pos := int64(0); pos+recHeaderSize <= j.cap; {
		n, err := recordLength(buf[pos:], epoch, j.cap-pos)
		if err != nil {
			break
		}
		r, err := decodeRecord(buf[pos:pos+n], epoch, j.a.geo.Members())
		if err != nil {
			break
		}
		recs = append(recs, r)
		pos += roundUp(n, recAlign)
	}
	return recs
}

// replayV1 applies version 1 records in seq order (a record found in two
// logs, RAID6's P and Q, is applied once) to every writable member of v.
// It returns how many records it applied.
func (j *journal) replayV1(v *View, recs []record) (int64, error) {
	slices.SortFunc(recs, func(x, y record) int { return cmpSeq(x.seq, y.seq) })
	last := uint64(0)
	count := int64(0)
	dataSize := v.geo.MemberSize()
	for i, r := range recs {
		if i > 0 && r.seq == last {
			continue
		}
		last = r.seq
		count++
		for _, p := range r.pieces {
			d := v.devs[p.role]
			if d == nil || v.writable&(1<<uint(p.role)) == 0 {
				continue // missing: its bytes are what the replayed parity says
			}
			if p.off+p.n > dataSize {
				return count, fmt.Errorf("%w: record %d writes [%d, +%d) past the data region of member %d", ErrJournal, r.seq, p.off, p.n, p.role)
			}
			var err error
			if p.kind == pieceData {
				_, err = d.WriteAt(p.data, v.dataOff+p.off)
			} else {
				err = d.Discard(v.dataOff+p.off, p.n)
				if errors.Is(err, errors.ErrUnsupported) {
					_, err = d.WriteAt(make([]byte, p.n), v.dataOff+p.off)
				}
			}
			if err != nil {
				return count, fmt.Errorf("%w: replay record %d on member %d: %w", ErrJournal, r.seq, p.role, err)
			}
		}
	}
	return count, nil
}

func cmpSeq(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
