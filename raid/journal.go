package raid

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/raidd/raidd/raid/superblock"
)

// The write-hole journal of a parity array (consistency policy "journal").
//
// Every member holds a log area (superblock LogOffset, LogLength): a header
// block naming the array and the log's epoch, then records appended one
// after another. Before a partial-stripe row write touches data or parity,
// the exact member writes it is about to make (the new data of the chunks
// it writes and the new P, and Q on RAID6) go into one record, appended to
// the log of the row's parity member (and of its Q member) and synced. A
// crash can then tear the row's data and parity writes, but assembly
// replays the record and the row holds the new bytes on every member, the
// missing one included, since its chunk is what the replayed parity says.
// Full-stripe rows write no record: every data byte and the parity of the
// range they write is new, so no byte they did not write depends on them.
//
// Records stay valid until a checkpoint: every member is synced (so every
// write a record describes is durable) and a new epoch is written to every
// log header, which makes the old records stale. A checkpoint runs when a
// log is full and when the member set changes. Within an epoch, every write
// to a row that has a record is recorded too (full-stripe or not), and a
// whole-row discard of such rows checkpoints first, so replaying the
// epoch's records in order always ends at the row's latest contents.

// Sizes of the log area's pieces. Records are padded to recAlign bytes.
const (
	logHeaderSize = 4096
	recAlign      = 512
	recHeaderSize = 48
	recDescSize   = 24
)

// Kinds of record pieces.
const (
	pieceData   = 1 // bytes to write
	pieceZeroes = 2 // a range to discard (read as zeroes)
)

const (
	logMagic = "RAIDDJH\x00"
	recMagic = "RAIDDJR\x00"
)

// JournalLength returns the log area length for a parity array of n
// members with the given chunk: room for two records of the largest row
// write (every member's chunk, cut into pieces at every 4 KiB zero-block
// boundary) after the header, at least 1 MiB, rounded up to
// superblock.Align.
func JournalLength(n int, chunk int64) int64 {
	return roundUp(max(logHeaderSize+2*maxRecord(n, chunk), 1<<20), superblock.Align)
}

func maxRecord(n int, chunk int64) int64 {
	return roundUp(recHeaderSize+int64(n)*(chunk+(chunk/elideMin+2)*recDescSize), recAlign)
}

func roundUp(x, a int64) int64 { return (x + a - 1) / a * a }

// piece is one member write of a record: data bytes or zeroes at a
// data-region offset of the member in role.
type piece struct {
	role int
	kind uint8
	off  int64
	n    int64
	data []byte // kind == pieceData: n bytes
}

// record is a decoded log record.
type record struct {
	epoch, seq uint64
	row        int64
	pieces     []piece
}

// appendRecord appends the encoding of a record to dst and returns it,
// unpadded. Layout (little-endian):
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
func appendRecord(dst []byte, epoch, seq uint64, row int64, pieces []piece) []byte {
	dst = appendRecordHead(dst, epoch, seq, row, pieces)
	for _, p := range pieces {
		if p.kind == pieceData {
			dst = append(dst, p.data...)
		}
	}
	return dst
}

// appendRecordHead appends the header and descriptors of the record of
// appendRecord, whose payload (the data pieces, in order) the caller
// writes after them; the CRC covers the payload too.
func appendRecordHead(dst []byte, epoch, seq uint64, row int64, pieces []piece) []byte {
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
	crc := crc32.Update(0, castagnoli, dst[start:])
	for _, p := range pieces {
		if p.kind == pieceData {
			crc = crc32.Update(crc, castagnoli, p.data)
		}
	}
	le.PutUint32(dst[start+36:], crc)
	return dst
}

var (
	le         = binary.LittleEndian
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// recordLength returns the unpadded length a record header at the start
// of b announces, or an error wrapping errBadRecord when b does not start
// with a record header of the given epoch. It needs recHeaderSize bytes.
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

// decodeRecord parses the record that fills b exactly (as recordLength
// announced it) and checks its checksum, piece kinds, roles (below
// members) and lengths. The data pieces alias b. Errors wrap errBadRecord.
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

// encodeLogHeader returns the header block of a log: magic, array UUID,
// epoch and a CRC32C of the first 32 bytes; the rest is zero.
func encodeLogHeader(uuid [16]byte, epoch uint64) []byte {
	b := make([]byte, logHeaderSize)
	copy(b, logMagic)
	copy(b[8:], uuid[:])
	le.PutUint64(b[24:], epoch)
	le.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli))
	return b
}

// decodeLogHeader returns the epoch of a log header block of the array
// uuid, or an error wrapping errBadRecord.
func decodeLogHeader(b []byte, uuid [16]byte) (uint64, error) {
	if len(b) < 36 || string(b[:8]) != logMagic {
		return 0, fmt.Errorf("%w: no log header", errBadRecord)
	}
	if crc32.Checksum(b[:32], castagnoli) != le.Uint32(b[32:]) {
		return 0, fmt.Errorf("%w: log header checksum", errBadRecord)
	}
	if [16]byte(b[8:24]) != uuid {
		return 0, fmt.Errorf("%w: log of another array", errBadRecord)
	}
	return le.Uint64(b[24:]), nil
}

// journal is the runtime side of the log areas of one array.
type journal struct {
	a      *Array
	off    int64 // absolute offset of the log area on every member
	cap    int64 // bytes for records after the header
	uuid   [16]byte
	maxRec int64

	// mu is held shared by a row write from BeginRow to EndRow and
	// exclusively by a checkpoint. epoch, view and the tails change only
	// under it exclusively.
	mu    sync.RWMutex
	epoch uint64
	view  *View // the member set the epoch started with
	need  atomic.Bool
	seq   atomic.Uint64

	// wmu orders record writes: the reservation of space and the WriteAt,
	// so that a record is synced only after every record before it in its
	// log has been written (a scan stops at the first gap).
	wmu     sync.Mutex
	tail    [superblock.MaxMembers]int64
	written [superblock.MaxMembers]uint64
	synced  [superblock.MaxMembers]struct {
		mu   sync.Mutex
		done uint64
	}

	rowsMu sync.Mutex
	rows   map[int64]struct{} // rows with a record in this epoch
	nrows  atomic.Int64

	bufs sync.Pool

	records, bytes, checkpoints atomic.Int64
	replayed                    int64 // records replayed at assembly
}

func newJournal(a *Array, meta *superblock.Meta) *journal {
	j := &journal{
		a: a, off: int64(meta.LogOffset), cap: int64(meta.LogLength) - logHeaderSize, uuid: meta.ArrayUUID,
		maxRec: maxRecord(a.geo.Members(), a.geo.Chunk()),
		rows:   map[int64]struct{}{},
	}
	j.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	return j
}

// inEpoch reports whether row has a record in the current epoch.
func (j *journal) inEpoch(row int64) bool {
	if j.nrows.Load() == 0 {
		return false
	}
	j.rowsMu.Lock()
	_, ok := j.rows[row]
	j.rowsMu.Unlock()
	return ok
}

// anyInEpoch reports whether a row of [lo, hi) has a record in the current epoch.
func (j *journal) anyInEpoch(lo, hi int64) bool {
	if j.nrows.Load() == 0 {
		return false
	}
	j.rowsMu.Lock()
	defer j.rowsMu.Unlock()
	if int64(len(j.rows)) < hi-lo {
		for r := range j.rows {
			if r >= lo && r < hi {
				return true
			}
		}
		return false
	}
	for r := lo; r < hi; r++ {
		if _, ok := j.rows[r]; ok {
			return true
		}
	}
	return false
}

// BeginRow starts the write of one row by a parity Layout: it must be
// paired with EndRow, and the row's member writes queued between them are
// the ones JournalRow records. It may first run a checkpoint (a log is full
// or the member set changed). Without a journal it does nothing.
func (op *Op) BeginRow() { op.beginRow(-1, -1) }

// BeginDiscard is BeginRow for a discard of the whole rows [lo, hi): when
// one of them has a record in the current epoch it checkpoints first, so
// that no record replays over the discard. The discard needs no record.
func (op *Op) BeginDiscard(lo, hi int64) { op.beginRow(lo, hi) }

func (op *Op) beginRow(lo, hi int64) {
	j := op.a.journal
	if j == nil || op.inRow {
		return
	}
	for {
		j.mu.RLock()
		if !j.need.Load() && j.view == op.v && (lo < 0 || !j.anyInEpoch(lo, hi)) {
			break
		}
		j.mu.RUnlock()
		j.mu.Lock()
		if j.need.Load() || j.view != op.v || (lo >= 0 && j.anyInEpoch(lo, hi)) {
			j.checkpoint(op)
		}
		j.mu.Unlock()
	}
	op.inRow, op.rowMark = true, len(op.batch)
}

// EndRow ends what BeginRow began. When the row was recorded, its queued
// member writes run now, before a checkpoint may declare its record stale.
func (op *Op) EndRow() {
	if !op.inRow {
		return
	}
	if op.journaled {
		op.Run()
		op.journaled = false
	}
	op.inRow = false
	op.a.journal.mu.RUnlock()
}

// JournalRow is called by a parity Layout between BeginRow and EndRow,
// once it has queued every member write of the row and before it runs
// them. partial says whether the write leaves some data of its range
// unwritten (not every data chunk covers [Lo, Hi)); logs are the row's
// parity members. A partial row, or any row that already has a record in
// this epoch, is recorded: the queued writes are appended to the log of
// every writable member in logs and synced. Without a journal, or with no
// writable parity member (no parity, no hole), it records nothing.
//
// It returns nil when the Layout may run its writes, and errRetryRow
// otherwise: a log member failed (it is recorded on the op) or a log is
// full. The queued writes of the row are then dropped and the
// Layout must plan the row again, after EndRow and BeginRow.
func (op *Op) JournalRow(row int64, partial bool, logs ...int) error {
	j := op.a.journal
	if j == nil || !op.inRow {
		return nil
	}
	if !partial && !j.inEpoch(row) {
		return nil
	}
	var lm [2]int
	k := 0
	for _, m := range logs {
		if op.Writable(m) && k < len(lm) {
			lm[k] = m
			k++
		}
	}
	if k == 0 {
		return nil
	}
	pieces := op.pieces[:0]
	for i := op.rowMark; i < len(op.batch); i++ {
		r := &op.batch[i]
		if r.repl {
			continue
		}
		switch r.kind {
		case ioWrite:
			pieces = append(pieces, piece{role: r.m, kind: pieceData, off: r.off - op.v.dataOff, n: r.n, data: r.p})
		case ioDiscard:
			pieces = append(pieces, piece{role: r.m, kind: pieceZeroes, off: r.off - op.v.dataOff, n: r.n})
		}
	}
	// The record is written as one vector: its head, the data pieces
	// where they are, and zero padding.
	bp := j.bufs.Get().(*[]byte)
	head := appendRecordHead((*bp)[:0], j.epoch, j.seq.Add(1), row, pieces)
	*bp = head[:0]
	vec := append(op.recVec[:0], head)
	length := int64(len(head))
	for _, p := range pieces {
		if p.kind == pieceData {
			vec = append(vec, p.data)
			length += p.n
		}
	}
	size := roundUp(length, recAlign)
	if size > length {
		vec = append(vec, zeroPage[:size-length])
	}
	err := j.append(op, vec, size, lm[:k])
	j.bufs.Put(bp)
	clear(vec)
	op.recVec = vec[:0]
	clear(pieces)
	op.pieces = pieces[:0]
	if err != nil {
		op.dropBatch(op.rowMark)
		return err
	}
	j.rowsMu.Lock()
	if _, ok := j.rows[row]; !ok {
		j.rows[row] = struct{}{}
		j.nrows.Add(1)
	}
	j.rowsMu.Unlock()
	op.journaled = true
	return nil
}

// append writes the record vec (size bytes, padded) to the logs of
// members lm and syncs them.
func (j *journal) append(op *Op, vec [][]byte, size int64, lm []int) error {
	if size > j.cap {
		panic(fmt.Sprintf("raid: journal record of %d bytes exceeds the log area (%d): JournalLength is wrong", size, j.cap))
	}
	var upto [2]uint64
	var flat []byte // the record in one buffer, for members without vectored writes
	failed := false
	j.wmu.Lock()
	for _, m := range lm {
		if j.tail[m]+size > j.cap {
			j.wmu.Unlock()
			j.need.Store(true)
			return errRetryRow
		}
	}
	for i, m := range lm {
		d, off := op.v.devs[m], j.off+logHeaderSize+j.tail[m]
		var err error
		if vd, ok := d.(vectorIO); ok {
			_, err = vd.WritevAt(vec, off)
		} else {
			if flat == nil {
				flat = make([]byte, 0, size)
				for _, b := range vec {
					flat = append(flat, b...)
				}
			}
			_, err = d.WriteAt(flat, off)
		}
		if err != nil {
			op.countError(m, false, ioWrite)
			op.fail(m, &MemberError{Op: "write", Member: m, Offset: -1, Err: fmt.Errorf("write-hole journal record: %w", err)})
			failed = true
			continue
		}
		j.tail[m] += size
		j.written[m]++
		upto[i] = j.written[m]
	}
	j.wmu.Unlock()
	if failed {
		return errRetryRow
	}
	j.records.Add(1)
	j.bytes.Add(size * int64(len(lm)))
	for i, m := range lm {
		if err := j.syncTo(op.v.devs[m], m, upto[i]); err != nil {
			op.countError(m, false, ioSync)
			op.fail(m, &MemberError{Op: "sync", Member: m, Offset: -1, Err: fmt.Errorf("write-hole journal record: %w", err)})
			failed = true
		}
	}
	if failed {
		return errRetryRow
	}
	return nil
}

// syncTo returns once the first upto records written to member m's log
// are durable. Concurrent callers share one Sync (group commit).
func (j *journal) syncTo(dev Member, m int, upto uint64) error {
	s := &j.synced[m]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done >= upto {
		return nil
	}
	j.wmu.Lock()
	target := j.written[m]
	j.wmu.Unlock()
	if err := dev.Sync(); err != nil {
		return err
	}
	s.done = target
	return nil
}

// checkpoint makes every record stale: it syncs every writable member of
// op's view, so every write a record describes is durable, then writes a
// new epoch to every writable member's log header and syncs it. Member
// failures are recorded on op. Callers hold j.mu exclusively.
func (j *journal) checkpoint(op *Op) {
	v := op.v
	j.syncAll(op, v, nil)
	j.epoch++
	j.syncAll(op, v, encodeLogHeader(j.uuid, j.epoch))
	for m := range j.tail {
		j.tail[m] = 0
	}
	j.rowsMu.Lock()
	clear(j.rows)
	j.nrows.Store(0)
	j.rowsMu.Unlock()
	j.view = v
	j.need.Store(false)
	j.checkpoints.Add(1)
}

// syncAll syncs every writable member of v in parallel, after writing hdr
// to its log header when hdr is not nil. Failures are recorded on op.
func (j *journal) syncAll(op *Op, v *View, hdr []byte) {
	n := v.geo.Members()
	errs := make([]error, n)
	kinds := make([]ioKind, n)
	var wg sync.WaitGroup
	for m := 0; m < n; m++ {
		d := v.devs[m]
		if d == nil || !op.Writable(m) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if hdr != nil {
				if _, err := d.WriteAt(hdr, j.off); err != nil {
					errs[m], kinds[m] = err, ioWrite
					return
				}
			}
			errs[m], kinds[m] = d.Sync(), ioSync
		}()
	}
	wg.Wait()
	for m, err := range errs {
		if err != nil {
			op.countError(m, false, kinds[m])
			op.fail(m, &MemberError{Op: ioNames[kinds[m]], Member: m, Offset: -1, Err: fmt.Errorf("write-hole journal checkpoint: %w", err)})
		}
	}
}

// dropBatch forgets the queued member I/O from index from on.
func (op *Op) dropBatch(from int) {
	for i := from; i < len(op.batch); i++ {
		op.batch[i] = ioReq{}
	}
	op.batch = op.batch[:from]
}

// open starts the journal of an assembled (or created) array: with replay
// set it first replays the records of the newest epoch found on the
// readable members, then syncs; then it writes a new epoch, above every
// epoch on any member in use, to every writable member's log header. It
// runs before the array serves anything.
func (j *journal) open(replay bool) error {
	v := j.a.view.Load()
	n := v.geo.Members()
	hdr := make([]byte, logHeaderSize)
	epochs := make([]uint64, n)
	valid := make([]bool, n)
	newest := uint64(0)
	for m := 0; m < n; m++ {
		d := v.devs[m]
		if d == nil || v.writable&(1<<uint(m)) == 0 {
			continue
		}
		if _, err := d.ReadAt(hdr, j.off); err != nil {
			return fmt.Errorf("%w: read the log header of member %d: %w", ErrJournal, m, err)
		}
		e, err := decodeLogHeader(hdr, j.uuid)
		if err != nil {
			continue // never written, or not this array's: no records
		}
		epochs[m], valid[m] = e, true
		newest = max(newest, e)
	}
	if replay {
		var recs []record
		for m := 0; m < n; m++ {
			// Only in-sync members: a member being rebuilt may carry the
			// log of an earlier membership.
			if !valid[m] || epochs[m] != newest || v.readable&(1<<uint(m)) == 0 {
				continue
			}
			r, err := j.scan(v.devs[m], newest)
			if err != nil {
				return fmt.Errorf("%w: member %d: %w", ErrJournal, m, err)
			}
			recs = append(recs, r...)
		}
		if err := j.replay(v, recs); err != nil {
			return err
		}
	}
	j.epoch = newest + 1
	j.view = v
	op := j.a.getOp()
	defer j.a.putOp(op)
	op.v = v
	j.syncAll(op, v, encodeLogHeader(j.uuid, j.epoch))
	if op.failed != 0 {
		return fmt.Errorf("%w: write the log headers: %w", ErrJournal, op.memberErrors())
	}
	return nil
}

// scan reads a member's log and returns its records of epoch, in log
// order, stopping at the first block that is not a valid record (the end
// of the log, or a record whose write was torn: no record after it was
// ever synced).
func (j *journal) scan(d Member, epoch uint64) ([]record, error) {
	buf := make([]byte, j.cap)
	if _, err := d.ReadAt(buf, j.off+logHeaderSize); err != nil {
		return nil, fmt.Errorf("read the log: %w", err)
	}
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
	return recs, nil
}

// replay applies recs in seq order (a record found in two logs, RAID6's P
// and Q, is applied once) to every writable member of v, then syncs them.
func (j *journal) replay(v *View, recs []record) error {
	slices.SortFunc(recs, func(x, y record) int {
		switch {
		case x.seq < y.seq:
			return -1
		case x.seq > y.seq:
			return 1
		}
		return 0
	})
	rows := map[int64]bool{}
	last := uint64(0)
	count := int64(0)
	dataSize := v.geo.MemberSize()
	for i, r := range recs {
		if i > 0 && r.seq == last {
			continue
		}
		last = r.seq
		count++

		rows[r.row] = true
		for _, p := range r.pieces {
			d := v.devs[p.role]
			if d == nil || v.writable&(1<<uint(p.role)) == 0 {
				continue // missing: its bytes are what the replayed parity says
			}
			if p.off+p.n > dataSize {
				return fmt.Errorf("%w: record %d writes [%d, +%d) past the data region of member %d", ErrJournal, r.seq, p.off, p.n, p.role)
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
				return fmt.Errorf("%w: replay record %d on member %d: %w", ErrJournal, r.seq, p.role, err)
			}
		}
	}
	if count == 0 {
		return nil
	}
	for m, d := range v.devs {
		if d != nil && v.writable&(1<<uint(m)) != 0 {
			if err := d.Sync(); err != nil {
				return fmt.Errorf("%w: sync member %d after the replay: %w", ErrJournal, m, err)
			}
		}
	}
	j.replayed = count
	j.a.log.Info("write-hole journal replayed", "records", count, "rows", len(rows))
	return nil
}
