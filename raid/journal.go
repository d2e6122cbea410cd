package raid

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// The write-hole log of a parity array (consistency policy "ppl"): a
// partial parity log, in the style of md's PPL.
//
// Every member holds a log area (superblock LogOffset, LogLength): a header
// block naming the array, the log's epoch and its format version, then
// records appended one after another. Before a row write that could open
// the write hole touches data or parity, a record is appended to the log of
// the row's parity member (and of its Q member) and made durable (the
// records of concurrent row writes share one durable log write per member:
// see append; one pwritev2 with RWF_DSYNC where the member can, see
// writeDurable). It holds the
// row's partial parity over the parity range [lo, hi) the write changes:
// P' = the XOR of the row's data bytes in that range that the write does
// not write, and on RAID6 Q' = their sum weighted by Q's coefficients; and
// the list W of data bytes it treats as written (the write's own ranges,
// and those of earlier writes to the row that are not yet durable: see
// below). Replay sets P = P' + the current data of W (and Q likewise),
// which is right whatever mix of old and new bytes the crash left in W, so
// every byte outside W, on every member, the missing ones included, reads
// the value it had. No data is logged and no data is replayed.
//
// P' is computed from what the write has anyway: the new parity minus the
// written data (P' = P_new + sum over W of the current bytes). When W holds
// bytes of earlier writes, the row's previous record's P', kept in memory
// for the last few rows (takeCached), gives it without those bytes: P' =
// the previous P' + the old bytes of the write's own spans outside the
// previous W, which a read-modify-write reads anyway.
//
// W must hold every byte of the range whose current value may not be on
// disk: a byte written by an earlier write that neither a FLUSH (Sync) nor
// FUA has made durable since. Each row with a record in the epoch keeps
// the spans its records wrote (rowEntry); a Sync drops them all once every
// member is synced (it holds the journal lock exclusively while the
// members sync, so that no record is built meanwhile), and a FUA write
// drops its own once its members are synced.
//
// On an array whose members are all held in memory (tmpfs, ramfs: their
// sync is a no-op) a write is as durable as it will ever be once it
// returns: a killed raidd leaves every byte it copied in the members'
// pages, and what loses those pages (the machine's crash) loses the whole
// array. Such rows keep no spans (keep): W is the write's own spans. A
// later write of the row plans its record only after the earlier one
// returned, because a row's writes hold its stripe lock throughout.
//
// A slotted log. Where every member is held in memory a record is needed
// only while its row write is in flight: once the write has returned its
// bytes are as durable as they will be, and the next write of the row,
// which waits for the row's stripe lock, describes the row afresh. So an
// epoch whose view is held in memory (View.inMemory) uses its log areas as
// slots of a fixed size (journal.slot: a record of one chunk's partial
// parities and a span per data member): a record takes a free slot of each
// of its logs, and EndRow clears the slots (zeroes their magic) once the
// row's writes are done, before the row's stripe lock is released, and
// frees them. The free slots are taken last-freed first, so that the few
// in use stay warm in the cache and the TLB. No row keeps an entry in the
// row table (its map insert and shard lock were 6% of the engine's CPU per
// random 4 KiB write in a profile), and no log fills up, so the random
// writes meet no checkpoint (no slot free is taken as a full log: a
// checkpoint). At any time a row has at most one valid record, of the
// write in flight (or cut by a kill): replay applies the valid records of
// the epoch found in any slot, in seq order. A record cleared, or left by
// an earlier epoch, is not valid. The header (format version 3) gives the
// slot size. Measured (two interleaved rounds each): BenchmarkTmpfsRandomWrite4K
// (RAID5, tmpfs) 8592-8932 -> 7565-8118 CPU ns per write; bench/writehole.sh,
// the log's throughput cost against policy bitmap on random 4K writes,
// RAID5 35% -> 24-28% (degraded 24% -> 12-17%), RAID6 35% -> 20-22%
// (degraded 28% -> 10-16%).
//
// A row write needs no record when it cannot open a hole:
//   - no parity member is written (RAID5 with its parity missing);
//   - W covers every data byte of [lo, hi) (full-stripe writes, and rows
//     completed by this write): every byte whose value the parity carries
//     is then being written, and none of them is durable yet;
//   - the array already misses as many members as it tolerates, and every
//     missing data member's bytes of [lo, hi) are in W: no other member can
//     go missing, and those bytes are being written.
// Except: a row that has a record in the epoch records every later write
// (full-stripe or not), so that replay, which applies the epoch's records
// in order, never ends on a record whose partial parity is stale.
//
// Records stay valid until a checkpoint: every member is synced and a new
// epoch is written to every log header, which makes the older records
// stale. A checkpoint runs when a log is full, when a row has kept too many
// spans, and when the member set changes; a whole-row discard of a row
// with a record checkpoints first.

// Sizes of the log area's pieces. Records are padded to recAlign bytes.
const (
	logHeaderSize = 4096
	recAlign      = 512
	pplHeaderSize = 64
	pplSpanSize   = 16
	// maxRowSpans bounds the spans a row keeps between Syncs; past it, the
	// next row write checkpoints.
	maxRowSpans = 32
)

// Log format versions, in the log header: version 1 (bytes 36..44 zero)
// is the redo log of journal_v1.go; version 2 the partial parity log,
// records one after another; version 3 the partial parity log in slots
// (the slot size in the header), for an epoch whose members are all held
// in memory (see "A slotted log" above).
const (
	logV1 = 1
	logV2 = 2
	logV3 = 3
)

// minSlots is the fewest slots a log area must hold for an epoch to use a
// slotted log; with fewer, records are appended.
const minSlots = 8

const (
	logMagic = "RAIDDJH\x00"
	pplMagic = "RAIDDPP\x00"
)

// Flags of a partial parity record: which parities it rewrites (P', Q' in
// the payload, in that order), or that its partial parities are zero and
// not stored (W covers the whole range: the write completes it).
const (
	pplHasP = 1 << 0
	pplHasQ = 1 << 1
	pplZero = 1 << 2
)

// noRole marks an absent Q member in a record.
const noRole = 0xff

// JournalLength returns the log area length for a parity array of n
// members with the given chunk: room for two records of the largest row
// write of the first log format (every member's chunk, cut into pieces at
// every 4 KiB zero-block boundary) after the header, at least 1 MiB,
// rounded up to superblock.Align. (The partial parity log's records are
// smaller: two partial parities of a chunk at most.)
func JournalLength(n int, chunk int64) int64 {
	return roundUp(max(logHeaderSize+2*maxRecord(n, chunk), 1<<20), superblock.Align)
}

// journalLengthFor returns the log area length of a new parity array of n
// members, the smallest minSize bytes: a 32nd of the member, between
// JournalLength and maxJournal. The log fills up with the records of
// random partial writes (about 4.5 KiB for a 4 KiB write); a full log
// means a checkpoint, which waits for every row write in flight and syncs
// every member: with the stripe cache's flusher writing out 128 stripes at
// once (flushParallel), RAID5 random 4 KiB writes on bench/disks.sh's
// disks checkpointed twice a second in a 1 MiB log.
func journalLengthFor(n int, chunk, minSize int64) int64 {
	l := min(minSize/32, maxJournal) / superblock.Align * superblock.Align
	return max(JournalLength(n, chunk), l)
}

// maxJournal bounds the log area journalLengthFor gives.
const maxJournal = 16 << 20

func maxRecord(n int, chunk int64) int64 {
	return roundUp(recHeaderSize+int64(n)*(chunk+(chunk/elideMin+2)*recDescSize), recAlign)
}

// maxPPL is the largest partial parity record of a chunk.
func maxPPL(chunk int64) int64 {
	return roundUp(pplHeaderSize+(maxRowSpans+2*superblock.MaxMembers)*pplSpanSize+2*chunk, recAlign)
}

func roundUp(x, a int64) int64 { return (x + a - 1) / a * a }

var (
	le         = binary.LittleEndian
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// Span is the range [A, B) (chunk-relative) of data index Index of a row.
type Span struct {
	Index int
	A, B  int64
}

// pplRecord is a decoded partial parity record. Layout (little-endian):
//
//	0   8  magic "RAIDDPP\x00"
//	8   8  epoch
//	16  8  seq: the record's place in the array-wide order
//	24  8  row
//	32  4  span count
//	36  4  CRC32C of the whole record, this field taken as zero
//	40  8  length: header, spans and payload
//	48  4  lo: start of the parity range, chunk-relative
//	52  4  hi: its end
//	56  1  P member
//	57  1  Q member (0xff: none, RAID5)
//	58  1  flags: 1 the record rewrites P, 2 it rewrites Q, 4 the partial
//	       parities are zero and not stored
//	59  5  zero
//	64     spans, 16 bytes each: data index u8, member u8, 6 zero bytes,
//	       a u32, b u32 (chunk-relative, lo <= a < b <= hi)
//	...    payload (without flag 4): P' (hi-lo bytes) when flag 1, then Q'
//	       when flag 2
type pplRecord struct {
	epoch, seq uint64
	row        int64
	lo, hi     int64
	pm, qm     int // qm == noRole: none
	flags      uint8
	spans      []pplSpan
	pp, pq     []byte
}

type pplSpan struct {
	index, role int
	a, b        int64
}

// appendPPLHead appends the header and spans of a partial parity record
// whose payload (pp, then pq, each nil when absent) the caller writes after
// them; the CRC covers the payload too.
func appendPPLHead(dst []byte, r *pplRecord) []byte {
	start := len(dst)
	length := int64(pplHeaderSize+pplSpanSize*len(r.spans)) + int64(len(r.pp)+len(r.pq))
	dst = append(dst, pplMagic...)
	dst = le.AppendUint64(dst, r.epoch)
	dst = le.AppendUint64(dst, r.seq)
	dst = le.AppendUint64(dst, uint64(r.row))
	dst = le.AppendUint32(dst, uint32(len(r.spans)))
	dst = le.AppendUint32(dst, 0)
	dst = le.AppendUint64(dst, uint64(length))
	dst = le.AppendUint32(dst, uint32(r.lo))
	dst = le.AppendUint32(dst, uint32(r.hi))
	dst = append(dst, byte(r.pm), byte(r.qm), r.flags, 0, 0, 0, 0, 0)
	for _, s := range r.spans {
		dst = append(dst, byte(s.index), byte(s.role), 0, 0, 0, 0, 0, 0)
		dst = le.AppendUint32(dst, uint32(s.a))
		dst = le.AppendUint32(dst, uint32(s.b))
	}
	crc := crc32.Update(0, castagnoli, dst[start:])
	crc = crc32.Update(crc, castagnoli, r.pp)
	crc = crc32.Update(crc, castagnoli, r.pq)
	le.PutUint32(dst[start+36:], crc)
	return dst
}

// appendPPL appends the whole encoding of r, unpadded.
func appendPPL(dst []byte, r *pplRecord) []byte {
	dst = appendPPLHead(dst, r)
	dst = append(dst, r.pp...)
	return append(dst, r.pq...)
}

// pplLength returns the unpadded length a partial parity record header at
// the start of b announces, or an error wrapping errBadRecord when b does
// not start with a record header of the given epoch.
func pplLength(b []byte, epoch uint64, limit int64) (int64, error) {
	if len(b) < pplHeaderSize || string(b[:8]) != pplMagic {
		return 0, fmt.Errorf("%w: no record magic", errBadRecord)
	}
	if e := le.Uint64(b[8:]); e != epoch {
		return 0, fmt.Errorf("%w: epoch %d, the log's is %d", errBadRecord, e, epoch)
	}
	n := le.Uint64(b[40:])
	if n < pplHeaderSize || n > uint64(limit) {
		return 0, fmt.Errorf("%w: length %d outside [%d, %d]", errBadRecord, n, pplHeaderSize, limit)
	}
	return int64(n), nil
}

// decodePPL parses the partial parity record that fills b exactly and
// checks its checksum and its internal consistency (members below members,
// spans inside [lo, hi), lengths). The partial parities alias b. Whether
// its members fit the row's geometry is the replay's check. Errors wrap
// errBadRecord.
func decodePPL(b []byte, epoch uint64, members int) (pplRecord, error) {
	n, err := pplLength(b, epoch, int64(len(b)))
	if err != nil {
		return pplRecord{}, err
	}
	if n != int64(len(b)) {
		return pplRecord{}, fmt.Errorf("%w: length %d, buffer %d", errBadRecord, n, len(b))
	}
	want := le.Uint32(b[36:])
	crc := crc32.Update(0, castagnoli, b[:36])
	crc = crc32.Update(crc, castagnoli, []byte{0, 0, 0, 0})
	crc = crc32.Update(crc, castagnoli, b[40:])
	if crc != want {
		return pplRecord{}, fmt.Errorf("%w: checksum %#08x, computed %#08x", errBadRecord, want, crc)
	}
	r := pplRecord{
		epoch: epoch, seq: le.Uint64(b[16:]), row: int64(le.Uint64(b[24:])),
		lo: int64(le.Uint32(b[48:])), hi: int64(le.Uint32(b[52:])),
		pm: int(b[56]), qm: int(b[57]), flags: b[58],
	}
	switch {
	case r.row < 0:
		return pplRecord{}, fmt.Errorf("%w: row %d", errBadRecord, r.row)
	case r.lo >= r.hi:
		return pplRecord{}, fmt.Errorf("%w: parity range [%d, %d)", errBadRecord, r.lo, r.hi)
	case r.pm >= members || (r.qm >= members && r.qm != noRole) || r.pm == r.qm:
		return pplRecord{}, fmt.Errorf("%w: parity members %d and %d of %d", errBadRecord, r.pm, r.qm, members)
	case r.flags&^(pplHasP|pplHasQ|pplZero) != 0 || r.flags&(pplHasP|pplHasQ) == 0 || (r.flags&pplHasQ != 0 && r.qm == noRole):
		return pplRecord{}, fmt.Errorf("%w: flags %#x", errBadRecord, r.flags)
	case string(b[59:64]) != "\x00\x00\x00\x00\x00":
		return pplRecord{}, fmt.Errorf("%w: non-zero header padding", errBadRecord)
	}
	count := uint64(le.Uint32(b[32:]))
	if count > uint64(len(b)-pplHeaderSize)/pplSpanSize {
		return pplRecord{}, fmt.Errorf("%w: %d spans do not fit in %d bytes", errBadRecord, count, len(b))
	}
	payload := b[pplHeaderSize+int(count)*pplSpanSize:]
	r.spans = make([]pplSpan, count)
	for i := range r.spans {
		d := b[pplHeaderSize+i*pplSpanSize:]
		s := pplSpan{index: int(d[0]), role: int(d[1]), a: int64(le.Uint32(d[8:])), b: int64(le.Uint32(d[12:]))}
		switch {
		case s.role >= members || s.index >= members || s.role == r.pm || s.role == r.qm:
			return pplRecord{}, fmt.Errorf("%w: span %d names data index %d on member %d", errBadRecord, i, s.index, s.role)
		case string(d[2:8]) != "\x00\x00\x00\x00\x00\x00":
			return pplRecord{}, fmt.Errorf("%w: span %d has non-zero padding", errBadRecord, i)
		case s.a < r.lo || s.a >= s.b || s.b > r.hi:
			return pplRecord{}, fmt.Errorf("%w: span %d covers [%d, %d) outside [%d, %d)", errBadRecord, i, s.a, s.b, r.lo, r.hi)
		}
		r.spans[i] = s
	}
	width := r.hi - r.lo
	for _, f := range []uint8{pplHasP, pplHasQ} {
		if r.flags&f == 0 || r.flags&pplZero != 0 {
			continue
		}
		if int64(len(payload)) < width {
			return pplRecord{}, fmt.Errorf("%w: partial parity of %d bytes, %d left", errBadRecord, width, len(payload))
		}
		if f == pplHasP {
			r.pp = payload[:width:width]
		} else {
			r.pq = payload[:width:width]
		}
		payload = payload[width:]
	}
	if len(payload) != 0 {
		return pplRecord{}, fmt.Errorf("%w: %d payload bytes left over", errBadRecord, len(payload))
	}
	return r, nil
}

// encodeLogHeader returns the header block of a log of format version 2
// (slot 0) or 3 (a slotted log of slot-byte slots): magic, array UUID,
// epoch, a CRC32C of the first 32 bytes (what version 1 checks), the
// version and a CRC32C of the first 40 bytes (what version 2 checks); in
// version 3 then the slot size (8 bytes) and a CRC32C of the first 52
// bytes. The rest is zero.
func encodeLogHeader(uuid [16]byte, epoch uint64, slot int64) []byte {
	b := make([]byte, logHeaderSize)
	copy(b, logMagic)
	copy(b[8:], uuid[:])
	le.PutUint64(b[24:], epoch)
	le.PutUint32(b[32:], crc32.Checksum(b[:32], castagnoli))
	v := uint32(logV2)
	if slot > 0 {
		v = logV3
	}
	le.PutUint32(b[36:], v)
	le.PutUint32(b[40:], crc32.Checksum(b[:40], castagnoli))
	if slot > 0 {
		le.PutUint64(b[44:], uint64(slot))
		le.PutUint32(b[52:], crc32.Checksum(b[:52], castagnoli))
	}
	return b
}

// decodeLogHeader returns the epoch, format version and slot size (0 but
// for version 3) of a log header block of the array uuid, or an error
// wrapping errBadRecord (not a header of this array, or a slot size
// that is not a positive multiple of recAlign) or errLogVersion (a format
// this build does not know).
func decodeLogHeader(b []byte, uuid [16]byte) (epoch uint64, version int, slot int64, err error) {
	if len(b) < 56 || string(b[:8]) != logMagic {
		return 0, 0, 0, fmt.Errorf("%w: no log header", errBadRecord)
	}
	if crc32.Checksum(b[:32], castagnoli) != le.Uint32(b[32:]) {
		return 0, 0, 0, fmt.Errorf("%w: log header checksum", errBadRecord)
	}
	if [16]byte(b[8:24]) != uuid {
		return 0, 0, 0, fmt.Errorf("%w: log of another array", errBadRecord)
	}
	epoch = le.Uint64(b[24:])
	v := le.Uint32(b[36:])
	if v == 0 && le.Uint32(b[40:]) == 0 {
		return epoch, logV1, 0, nil
	}
	if crc32.Checksum(b[:40], castagnoli) != le.Uint32(b[40:]) {
		return 0, 0, 0, fmt.Errorf("%w: log header version checksum", errBadRecord)
	}
	switch v {
	case logV2:
		return epoch, logV2, 0, nil
	case logV3:
		if crc32.Checksum(b[:52], castagnoli) != le.Uint32(b[52:]) {
			return 0, 0, 0, fmt.Errorf("%w: log header slot checksum", errBadRecord)
		}
		slot := le.Uint64(b[44:])
		if slot == 0 || slot%recAlign != 0 || slot > 1<<40 {
			return 0, 0, 0, fmt.Errorf("%w: slot size %d", errBadRecord, slot)
		}
		return epoch, logV3, int64(slot), nil
	}
	return 0, 0, 0, fmt.Errorf("%w: version %d (this build knows 1, 2 and 3)", errLogVersion, v)
}

// rowEntry is what a row with a record in the current epoch keeps: the
// spans its records wrote that no Sync or FUA has made durable since, and,
// for the rows of the last few records (j.cached), that record's partial
// parities (see takeCached).
type rowEntry struct {
	row   int64
	spans []Span // guarded by its shard's mu

	// The row's last record, when cached: its partial parities over
	// [plo, phi) (pp, pq: views of the chunk buffers pbuf, qbuf of
	// a.bufPool; nil when the record did not log that parity) and its W.
	// Guarded by j.cacheMu.
	cached     bool
	plo, phi   int64
	pp, pq     []byte
	pbuf, qbuf *[]byte
	w          []Span
}

// maxCachedRows bounds the rows whose last record's partial parities are
// kept in memory (each one or two chunks).
const maxCachedRows = 4

// rowShards is the number of parts the journal's row table is cut into,
// by row, each with its own lock.
//
// Every partial row write looks its row up twice (PlanRowLog, keep), and
// the lookups of writers on different CPUs then waited for each other
// when the table had one lock: on RAID5 random 4 KiB writes on tmpfs with
// two writers (BenchmarkTmpfsRandomWrite4K), the wait for that lock was
// most of the writers' time blocked, and they used 73% of the two CPUs.
const rowShards = 64

// rowShard is one part of the row table: the rows r with r % rowShards
// equal to its index that have a record in the current epoch, and spare
// entries. Padded to 64 bytes, so that no two shards' locks share a cache
// line (the table is not aligned to lines: a shard's map and free list
// may share one with the next shard's lock).
type rowShard struct {
	mu   sync.Mutex
	rows map[int64]*rowEntry
	free []*rowEntry
	_    [64 - 8 - 8 - 24]byte
}

// journal is the runtime side of the log areas of one array.
type journal struct {
	a      *Array
	off    int64 // absolute offset of the log area on every member
	cap    int64 // bytes for records after the header
	uuid   [16]byte
	maxRec int64
	// slot is the slot size of the epoch's slotted log, 0 when records
	// are appended (see "A slotted log"); it changes only with the epoch,
	// under mu held exclusively (atomic for Status, which does not take mu).
	slot atomic.Int64

	// mu is held shared by a row write from BeginRow to EndRow and
	// exclusively by a checkpoint and by Sync while the members sync.
	// epoch, view and the tails change only under it exclusively.
	mu    sync.RWMutex
	epoch uint64
	view  *View // the member set the epoch started with
	need  atomic.Bool
	seq   atomic.Uint64

	// logs[m] is member m's record queue (group commit, see append).
	logs [superblock.MaxMembers]logQueue

	// shards is the row table: the rows with a record in this epoch.
	shards [rowShards]rowShard
	nrows  atomic.Int64
	// cacheMu guards the entries' cached records and cached, the entries
	// holding one, oldest first (at most maxCachedRows). It is taken after
	// a shard's lock (or alone), and no other lock is taken under it.
	cacheMu sync.Mutex
	cached  []*rowEntry

	bufs sync.Pool

	records, bytes, checkpoints atomic.Int64
	logWrites                   atomic.Int64 // log writes (batches), every member's
	replayed                    int64        // records replayed at assembly

	// gatherMax bounds how long a batch's leader waits for the records
	// planned for its log (see gather).
	gatherMax time.Duration
}

// logQueue is one member's log: the records waiting to be written, and
// whether a writer is writing a batch of them (the leader).
type logQueue struct {
	mu     sync.Mutex
	cond   sync.Cond // L is &mu; signalled when a batch is done, and to a gathering leader
	leader bool
	// planned counts the row writes that planned a record for this log
	// (PlanRowLog) and have neither queued it nor given it up; gathering
	// says the leader waits for them (gather).
	planned   int
	gathering bool
	// fg counts the queued records of ops a client waits for (not
	// Op.background): a leader gathering for a background op stops
	// waiting when one is queued.
	fg int
	// lat is the time the log's durable writes take (a moving average):
	// how long a leader waits at most for planned records (gather).
	lat time.Duration
	// wake ends a gathering leader's wait (made by the first gather,
	// reset by each later one, so that a wait allocates nothing).
	wake *time.Timer
	tail int64 // bytes of the log taken by the epoch's records
	// free holds the free slots of a slotted log, the last freed last.
	free  []int32
	queue []*pendingRec
	batch []*pendingRec // the leader's scratch
	vec   [][]byte      // the leader's scratch
}

// pendingRec is one record queued for one member's log (an Op's
// logPend). The leader of the batch that takes it sets done, and err and
// kind (the failing I/O) or full (the log had no room for it).
type pendingRec struct {
	vec  [][]byte
	size int64
	fg   bool // a client waits for it (see logQueue.fg)
	done bool
	full bool
	err  error
	kind ioKind
	slot int32 // the slot it was written to, in a slotted log (-1: none)
}

// logSlot is a slot of member m's slotted log that a row's record holds.
type logSlot struct {
	m    int
	slot int32
}

// maxBatch bounds the records one log write carries (each is at most 4
// vectors: head, P', Q', padding; Linux takes 1024 per pwritev).
const maxBatch = 64

func newJournal(a *Array, meta *superblock.Meta) *journal {
	j := &journal{
		a: a, off: int64(meta.LogOffset), cap: int64(meta.LogLength) - logHeaderSize, uuid: meta.ArrayUUID,
		maxRec: maxPPL(a.geo.Chunk()),

		gatherMax: defaultGather,
	}
	for m := range j.logs {
		j.logs[m].cond.L = &j.logs[m].mu
	}
	for i := range j.shards {
		j.shards[i].rows = map[int64]*rowEntry{}
	}
	j.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	return j
}

// shard returns row's part of the row table.
func (j *journal) shard(row int64) *rowShard {
	return &j.shards[uint64(row)%rowShards]
}

// anyInEpoch reports whether a row of [lo, hi) has a record in the current epoch.
func (j *journal) anyInEpoch(lo, hi int64) bool {
	if j.nrows.Load() == 0 {
		return false
	}
	if j.nrows.Load() < hi-lo {
		for i := range j.shards {
			sh := &j.shards[i]
			sh.mu.Lock()
			for r := range sh.rows {
				if r >= lo && r < hi {
					sh.mu.Unlock()
					return true
				}
			}
			sh.mu.Unlock()
		}
		return false
	}
	for r := lo; r < hi; r++ {
		sh := j.shard(r)
		sh.mu.Lock()
		_, ok := sh.rows[r]
		sh.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// BeginRow starts the write of one row by a parity Layout: it must be
// paired with EndRow, and the row's log record, if it needs one, is
// written between them (PlanRowLog, LogRow). It may first run a checkpoint
// (a log is full or the member set changed). Without a journal it does
// nothing.
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
	op.unplanLogs()
	op.releaseLogBufs()
	if op.journaled {
		op.Run()
		op.journaled = false
	}
	if op.nLogSlots > 0 {
		op.a.journal.clearSlots(op)
	}
	op.inRow = false
	op.a.journal.mu.RUnlock()
}

// RowLog is the write-hole log's plan for one parity row write, made by
// Op.PlanRowLog before the Layout reads anything.
type RowLog struct {
	// Need says the row needs a record: once the Layout has the row's new
	// parity, it sets P (and Q) to the partial parity and calls Op.LogRow.
	Need bool
	// Extra says W holds bytes the write does not write (earlier writes'
	// that are not durable yet): the Layout must know their current value,
	// so it reads the whole range (reconstruct-write).
	Extra bool
	// Zero says W covers every data byte of the range, so the partial
	// parities are zero: the Layout computes nothing and calls Op.LogRow
	// (P and Q are nil). Extra is then false: nothing needs reading.
	Zero bool
	// Cached says P (and Q) already hold the partial parities of the
	// row's previous record over [Lo, Hi), whose W covers every span of
	// W but the write's own bytes in Fold (spans of own, by data index,
	// sorted): P' = that partial parity + the current (old) bytes of
	// Fold. A read-modify-write, which reads the old bytes of its own
	// spans, XORs those of Fold into P (Q: weighted) and calls
	// Op.LogRow without computing the partial parity from the new
	// parity; it need not know W's other bytes, so Extra does not
	// concern it. A reconstruct-write computes P and Q as without Cached.
	Cached bool
	Fold   []Span
	// W is the data the record treats as written: per data index, sorted,
	// disjoint spans inside [Lo, Hi).
	W []Span
	// P and Q are Hi-Lo bytes of scratch for the partial parities, nil
	// when that parity is not logged (its member is not written).
	P, Q []byte

	own         []Span // the write's own spans (the caller's slice)
	row, lo, hi int64
	pm, qm      int
	logP, logQ  bool
}

// PlanRowLog plans the log record of the write of row's data spans own
// (chunk-relative, sorted by data index, at most one per index) whose
// parity range is [lo, hi). It is called between BeginRow and EndRow,
// before the Layout plans its reads. The returned RowLog is the op's and
// valid until the next call.
func (op *Op) PlanRowLog(row, lo, hi int64, own []Span) *RowLog {
	rl := &op.rowLog
	*rl = RowLog{W: rl.W[:0], Fold: rl.Fold[:0], own: own, row: row, lo: lo, hi: hi, pm: -1, qm: -1}
	j := op.a.journal
	if j == nil || !op.inRow {
		return rl
	}
	op.unplanLogs()
	op.releaseLogBufs()
	geo := op.geo
	rl.pm = geo.ParityMember(row)
	if geo.Level() == stripe.RAID6 {
		rl.qm = geo.QMember(row)
	}
	logP := op.devWritable(rl.pm)
	logQ := rl.qm >= 0 && op.devWritable(rl.qm)
	if !logP && !logQ {
		// No parity is written: no hole, and no record. The row's last
		// record, if it is kept (takeCached), no longer describes the
		// bytes outside its W, which this write may change: drop it. (In
		// one view this happens only after a parity member failed during
		// the op; the next op's BeginRow then checkpoints, but a
		// concurrent op on the old view could otherwise take the record.)
		if j.nrows.Load() != 0 {
			sh := j.shard(row)
			sh.mu.Lock()
			if e := sh.rows[row]; e != nil {
				j.uncache(e)
			}
			sh.mu.Unlock()
		}
		return rl
	}
	// A missing member, or one being rebuilt, holds what the parity says.
	missing := 0
	for m := range geo.Members() {
		if op.v.readable&^op.failed&(1<<uint(m)) == 0 {
			missing++
		}
	}
	dk := geo.DataMembers()
	// W: own, and the spans of earlier writes still kept by the row.
	w := append(rl.W, own...)
	inEpoch := false
	lookup := j.nrows.Load() != 0
	if lookup && op.v.inMemory {
		// Rows keep no spans there (keep): the row's entry only says
		// that it has a record in the epoch, which matters below only
		// to a write covering the whole range or an array missing all
		// the members it tolerates.
		lookup = missing >= geo.Tolerance() || coversAll(own, dk, lo, hi)
	}
	if lookup {
		sh := j.shard(row)
		sh.mu.Lock()
		if e := sh.rows[row]; e != nil {
			inEpoch = true
			for _, s := range e.spans {
				// Spans inside the write's own add nothing (and W's spans
				// must not overlap: P' would count their bytes twice).
				if a, b := max(s.A, lo), min(s.B, hi); a < b && !within(own, s.Index, a, b) {
					rl.Extra = true
					w = append(w, Span{s.Index, a, b})
				}
			}
		}
		sh.mu.Unlock()
	}
	if rl.Extra {
		w = mergeSpans(w)
	}
	rl.W = w
	full := coversAll(w, dk, lo, hi)
	switch {
	case full:
		// Every byte the parity carries is being written: no hole. But a
		// row with a record in the epoch records every write, lest the
		// replay end on a stale record; the partial parity is zero.
		rl.Need, rl.Zero, rl.Extra = inEpoch, true, false
		rl.logP, rl.logQ = logP, logQ
		return rl
	case inEpoch || missing < geo.Tolerance():
		rl.Need = true
	default:
		for i := range dk {
			m := geo.DataMember(row, i)
			if op.v.readable&^op.failed&(1<<uint(m)) == 0 && !covers(w, i, lo, hi) {
				rl.Need = true
				break
			}
		}
	}
	rl.logP, rl.logQ = logP, logQ
	if rl.Need {
		if rl.Extra {
			op.takeCached(rl)
		}
		if logP {
			if rl.P == nil {
				rl.P = op.logBuf(0, hi-lo)
			}
			op.planLog(rl.pm)
		}
		if logQ {
			if rl.Q == nil {
				rl.Q = op.logBuf(1, hi-lo)
			}
			op.planLog(rl.qm)
		}
	}
	return rl
}

// logBuf returns n bytes of a chunk buffer for the partial parity k (0: P,
// 1: Q) of the row's record. The op holds the buffer until the record is
// written, when the row's entry keeps it (keep), or until EndRow.
func (op *Op) logBuf(k int, n int64) []byte {
	b := op.a.bufPool.Get().(*[]byte)
	op.logBufs[k] = b
	return (*b)[:n]
}

// releaseLogBufs returns the record buffers the op still holds.
func (op *Op) releaseLogBufs() {
	for k, b := range op.logBufs {
		if b != nil {
			op.a.bufPool.Put(b)
			op.logBufs[k] = nil
		}
	}
}

// takeCached lets the record rl plans start from the partial parities of
// the row's previous record, kept in memory, when that is possible: the
// previous record logged the same parities over a range holding [lo, hi),
// and every byte of its W in [lo, hi) is in rl.W. Every byte of the range
// outside the previous W then still has the value that record saw (a
// later write of the row would have a later record), so P' = the previous
// P' + the old bytes of the write's own spans outside the previous W
// (rl.Fold). The previous record's buffers pass to the op, which computes
// the new partial parities in them: a sequence of partial writes to one
// row (64 KiB sequential writes without the stripe cache) can then
// read-modify-write, where knowing the bytes of W that earlier writes left
// non-durable takes a reconstruct-write (a read of the whole range) without
// them.
func (op *Op) takeCached(rl *RowLog) {
	j := op.a.journal
	sh := j.shard(rl.row)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.rows[rl.row]
	if e == nil {
		return
	}
	j.cacheMu.Lock()
	defer j.cacheMu.Unlock()
	if !e.cached || (e.pp != nil) != rl.logP || (e.pq != nil) != rl.logQ || rl.lo < e.plo || rl.hi > e.phi {
		return
	}
	for _, c := range e.w {
		if a, b := max(c.A, rl.lo), min(c.B, rl.hi); a < b && !covers(rl.W, c.Index, a, b) {
			return // a byte the previous P' leaves out is left out of W
		}
	}
	fold := rl.Fold[:0]
	for _, s := range rl.own {
		fold = subtractSpans(fold, s, e.w)
	}
	rl.Fold, rl.Cached = fold, true
	if e.pp != nil {
		rl.P, op.logBufs[0] = e.pp[rl.lo-e.plo:rl.hi-e.plo], e.pbuf
	}
	if e.pq != nil {
		rl.Q, op.logBufs[1] = e.pq[rl.lo-e.plo:rl.hi-e.plo], e.qbuf
	}
	e.pp, e.pq, e.pbuf, e.qbuf = nil, nil, nil, nil
	j.uncacheLocked(e)
}

// subtractSpans appends to dst the parts of s outside spans (sorted by
// index and start, disjoint).
func subtractSpans(dst []Span, s Span, spans []Span) []Span {
	at := s.A
	for _, c := range spans {
		if c.Index != s.Index || c.B <= at {
			continue
		}
		if c.A >= s.B {
			break
		}
		if c.A > at {
			dst = append(dst, Span{s.Index, at, c.A})
		}
		at = max(at, c.B)
	}
	if at < s.B {
		dst = append(dst, Span{s.Index, at, s.B})
	}
	return dst
}

// uncache drops the partial parities e keeps, returning their buffers.
// e's shard's lock is held (or the journal exclusively).
func (j *journal) uncache(e *rowEntry) {
	j.cacheMu.Lock()
	j.uncacheLocked(e)
	j.cacheMu.Unlock()
}

// uncacheLocked is uncache with j.cacheMu held.
func (j *journal) uncacheLocked(e *rowEntry) {
	if !e.cached {
		return
	}
	for _, b := range [2]*[]byte{e.pbuf, e.qbuf} {
		if b != nil {
			j.a.bufPool.Put(b)
		}
	}
	e.pp, e.pq, e.pbuf, e.qbuf, e.cached = nil, nil, nil, nil, false
	clear(e.w)
	e.w = e.w[:0]
	if i := slices.Index(j.cached, e); i >= 0 {
		j.cached = slices.Delete(j.cached, i, i+1)
	}
}

// planLog counts the row's record as planned for member m's log, so that
// a leader of that log waits for it (gather).
func (op *Op) planLog(m int) {
	if inMemory(op.v.devs[m]) {
		// A log held in memory has no leader to wait for planned
		// records: each writer writes its own at once (writeNow).
		return
	}
	q := &op.a.journal.logs[m]
	q.mu.Lock()
	q.planned++
	q.mu.Unlock()
	op.logPlan[op.nLogPlan] = m
	op.nLogPlan++
}

// unplanLogs gives up the row's planned records that it has not queued:
// the plan changed, the row failed, or it ended.
func (op *Op) unplanLogs() {
	for _, m := range op.logPlan[:op.nLogPlan] {
		q := &op.a.journal.logs[m]
		q.mu.Lock()
		q.unplan()
		q.mu.Unlock()
	}
	op.nLogPlan = 0
}

// unplan drops one planned record; q.mu is held.
func (q *logQueue) unplan() {
	q.planned--
	if q.gathering {
		q.cond.Broadcast()
	}
}

// within reports whether [a, b) of data index i lies inside one of spans.
func within(spans []Span, i int, a, b int64) bool {
	for _, s := range spans {
		if s.Index == i && s.A <= a && b <= s.B {
			return true
		}
	}
	return false
}

// covers reports whether spans (sorted, disjoint per index) cover [lo, hi)
// of data index i.
func covers(spans []Span, i int, lo, hi int64) bool {
	at := lo
	for _, s := range spans {
		if s.Index == i && s.A <= at && s.B > at {
			at = s.B
		}
	}
	return at >= hi
}

// coversAll reports whether spans (sorted, disjoint per index) cover
// [lo, hi) of every one of the dk data indexes.
func coversAll(spans []Span, dk int, lo, hi int64) bool {
	for i := range dk {
		if !covers(spans, i, lo, hi) {
			return false
		}
	}
	return true
}

// mergeSpans sorts spans by index and start and merges those that touch.
func mergeSpans(w []Span) []Span {
	slices.SortFunc(w, func(x, y Span) int {
		if x.Index != y.Index {
			return x.Index - y.Index
		}
		return cmpSeq(uint64(x.A), uint64(y.A))
	})
	k := 0
	for _, s := range w {
		if k > 0 && w[k-1].Index == s.Index && s.A <= w[k-1].B {
			w[k-1].B = max(w[k-1].B, s.B)
			continue
		}
		w[k] = s
		k++
	}
	return w[:k]
}

// LogRow appends the record rl plans (rl.Need, with rl.P and rl.Q holding
// the partial parities) to the log of every writable parity member of the
// row and syncs them. It is called between BeginRow and EndRow, once the
// Layout has queued every member write of the row and before it runs
// them; those writes then run at EndRow at the latest. It returns nil when
// the Layout may run its writes, and errRetryRow otherwise: a log member
// failed (it is recorded on the op) or a log is full. The queued writes of
// the row are then dropped and the Layout must plan the row again, after
// EndRow and BeginRow.
func (op *Op) LogRow(rl *RowLog) error {
	j := op.a.journal
	if j == nil || !op.inRow || !rl.Need {
		return nil
	}
	rec := pplRecord{epoch: j.epoch, seq: j.seq.Add(1), row: rl.row, lo: rl.lo, hi: rl.hi, pm: rl.pm, qm: noRole, pp: rl.P, pq: rl.Q}
	if rl.qm >= 0 {
		rec.qm = rl.qm
	}
	if rl.logP {
		rec.flags |= pplHasP
	}
	if rl.logQ {
		rec.flags |= pplHasQ
	}
	if rl.Zero {
		rec.flags |= pplZero
	}
	spans := op.pplSpans[:0]
	for _, s := range rl.W {
		spans = append(spans, pplSpan{index: s.Index, role: op.geo.DataMember(rl.row, s.Index), a: s.A, b: s.B})
	}
	rec.spans = spans
	var lm [2]int
	k := 0
	for _, m := range [2]int{rl.pm, rl.qm} {
		if m >= 0 && op.devWritable(m) {
			lm[k] = m
			k++
		}
	}
	// The record is written as one vector: its head, the partial
	// parities where they are, and zero padding. Into logs held in
	// memory it is one buffer instead (see contiguous).
	bp := j.bufs.Get().(*[]byte)
	head := appendPPLHead((*bp)[:0], &rec)
	vec := op.recVec[:0]
	length := int64(len(head))
	for _, b := range [2][]byte{rl.P, rl.Q} {
		length += int64(len(b))
	}
	size := roundUp(length, recAlign)
	if contiguous(op, lm[:k]) {
		rec := append(head, rl.P...)
		rec = append(rec, rl.Q...)
		rec = append(rec, zeroPage[:size-length]...)
		*bp = rec[:0]
		vec = append(vec, rec)
	} else {
		*bp = head[:0]
		vec = append(vec, head)
		for _, b := range [2][]byte{rl.P, rl.Q} {
			if b != nil {
				vec = append(vec, b)
			}
		}
		if size > length {
			vec = append(vec, zeroPage[:size-length])
		}
	}
	err := j.append(op, vec, size, lm[:k])
	j.bufs.Put(bp)
	clear(vec)
	op.recVec = vec[:0]
	op.pplSpans = spans[:0]
	if err != nil {
		op.dropBatch(op.rowMark)
		return err
	}
	j.keep(op, rl)
	op.journaled = true
	return nil
}

// contiguous reports whether a record for logs lm is built as one buffer:
// when every one of them is held in memory, where the record's write is a
// copy into the log's pages, out of the cache. As one buffer starting on
// a recAlign boundary, the copy is whole lines of non-temporal stores
// (internal/ntcopy); as its head, partial parities and padding, it is
// lines split between plain and non-temporal stores, and the plain ones
// read their lines from memory first. The extra copy into the buffer is
// of bytes in the cache.
func contiguous(op *Op, lm []int) bool {
	for _, m := range lm {
		if !inMemory(op.v.devs[m]) {
			return false
		}
	}
	return len(lm) > 0
}

// keep records that rl's row has a record in this epoch, whose write
// wrote rl.own (the spans of W it did not write are kept already), and
// keeps the record's partial parities, in the buffers the op got for them
// (logBuf, takeCached), as the row's last (takeCached), dropping those of
// the row that had them longest when more than maxCachedRows rows have
// them.
func (j *journal) keep(op *Op, rl *RowLog) {
	if j.slot.Load() > 0 {
		// A slotted log: the record is cleared at EndRow, so the row has
		// none in the epoch once its write is done, and keeps nothing.
		return
	}
	sh := j.shard(rl.row)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.rows[rl.row]
	if e == nil {
		if n := len(sh.free); n > 0 {
			e, sh.free = sh.free[n-1], sh.free[:n-1]
		} else {
			e = &rowEntry{}
		}
		e.row = rl.row
		sh.rows[rl.row] = e
		j.nrows.Add(1)
	}
	if op.v.inMemory {
		// The write's bytes are durable once it returns, before the next
		// write of the row plans its record (the row's writes hold its
		// stripe lock until they return): no later record needs them in
		// its W, so the row keeps no spans, and no partial parities
		// either, which only a W with others' spans uses (takeCached).
		// (No entry is cached in such an epoch: only other views cache,
		// and the change of view checkpointed, which emptied the cache.)
		return
	}
	e.spans = append(e.spans, rl.own...)
	if len(e.spans) > maxRowSpans {
		j.need.Store(true)
	}
	j.cacheMu.Lock()
	defer j.cacheMu.Unlock()
	j.uncacheLocked(e)
	if rl.Zero || (op.logBufs[0] == nil && op.logBufs[1] == nil) {
		return
	}
	e.cached, e.plo, e.phi = true, rl.lo, rl.hi
	if rl.logP {
		e.pp, e.pbuf = rl.P, op.logBufs[0]
	}
	if rl.logQ {
		e.pq, e.qbuf = rl.Q, op.logBufs[1]
	}
	op.logBufs = [2]*[]byte{}
	e.w = append(e.w[:0], rl.W...)
	j.cached = append(j.cached, e)
	if len(j.cached) > maxCachedRows {
		j.uncacheLocked(j.cached[0])
	}
}

// syncMembers syncs every writable member of op's view (Sync, a FLUSH, and
// a FUA write) with the journal held exclusively, so that no record is
// built while the members sync; once they have, no row keeps spans: every
// write that completed before is durable. Member failures are recorded on
// op.
func (j *journal) syncMembers(op *Op) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for m, d := range op.v.devs {
		if d != nil && op.Writable(m) {
			op.queue(ioSync, m, nil, 0, 0)
		}
	}
	op.Run()
	if op.failed != 0 {
		return // the member set changes: the next row write checkpoints
	}
	j.eachShard(func(sh *rowShard) {
		for _, e := range sh.rows {
			clear(e.spans)
			e.spans = e.spans[:0]
		}
	})
}

// eachShard calls fn for every shard of the row table, holding its lock.
func (j *journal) eachShard(fn func(sh *rowShard)) {
	for i := range j.shards {
		sh := &j.shards[i]
		sh.mu.Lock()
		fn(sh)
		sh.mu.Unlock()
	}
}

// append writes the record vec (size bytes, padded) to the logs of
// members lm and syncs them. Concurrent records share log writes and
// syncs (group commit): each record is queued on its members' logs, and
// for each log one waiting writer at a time, the leader, takes every
// record queued there (up to maxBatch), reserves their space at the log's
// tail, writes them with one (vectored) write and syncs the member once,
// holding no lock meanwhile, so records queue up while it writes; then it
// wakes the writers of the batch. Before it takes the queue, the leader
// waits a little for the records planned for the log (gather). A record
// is thus written only after every record before it in its log (a scan
// stops at the first gap), and no writer waits for another's log write
// except by sharing it or by the leader's short wait. A log on a member
// held in memory has no leader: each writer writes its record at once
// (writeNow).
func (j *journal) append(op *Op, vec [][]byte, size int64, lm []int) error {
	if size > j.cap {
		panic(fmt.Sprintf("raid: journal record of %d bytes exceeds the log area (%d): JournalLength is wrong", size, j.cap))
	}
	for i, m := range lm {
		p := &op.logPend[i]
		*p = pendingRec{vec: vec, size: size, fg: !op.background, slot: -1}
		q := &j.logs[m]
		q.mu.Lock()
		planned := false
		if k := slices.Index(op.logPlan[:op.nLogPlan], m); k >= 0 {
			q.unplan()
			op.nLogPlan--
			op.logPlan[k] = op.logPlan[op.nLogPlan]
			planned = true
		}
		if j.slot.Load() > 0 || !q.leader && len(q.queue) == 0 && inMemory(op.v.devs[m]) {
			j.writeNow(op, m, q, p)
		} else {
			q.queue = append(q.queue, p)
			if p.fg {
				q.fg++
			}
			if q.gathering && (!planned || p.fg || len(q.queue) >= bgBatch) {
				q.cond.Broadcast()
			}
		}
		q.mu.Unlock()
	}
	op.unplanLogs() // a log no longer written (its member failed meanwhile)
	failed, full := false, false
	for i, m := range lm {
		p := &op.logPend[i]
		j.await(op, m, p)
		if p.slot >= 0 {
			// Cleared at EndRow, whatever becomes of the row.
			op.logSlots[op.nLogSlots] = logSlot{m, p.slot}
			op.nLogSlots++
		}
		switch {
		case p.full:
			full = true
		case p.err != nil:
			op.fail(m, &MemberError{Op: ioNames[p.kind], Member: m, Offset: -1, Err: fmt.Errorf("write-hole log record: %w", p.err)})
			failed = true
		}
		*p = pendingRec{}
	}
	if full {
		j.need.Store(true)
	}
	if failed || full {
		return errRetryRow
	}
	j.records.Add(1)
	j.bytes.Add(size * int64(len(lm)))
	return nil
}

// writeNow writes p to member m's log at once, holding q.mu (so no
// leader starts meanwhile), when no batch is queued or being written
// there and the member is held in memory (tmpfs, or a memory member): its
// durable write is a copy of the record, about a microsecond, where
// handing the record to a leader and waiting for it costs a sleep and a
// wake-up of several (on bench/checksums.sh FEATURE=ppl, most of what the
// log added to degraded random writes on tmpfs was the context switches
// of that hand-off). Writers then queue on the mutex, which spins before
// it sleeps. The log's tail moves as in writeBatch: not past a record
// whose write failed.
func (j *journal) writeNow(op *Op, m int, q *logQueue, p *pendingRec) {
	p.done = true
	if j.slot.Load() > 0 {
		j.writeSlot(op, m, q, p)
		return
	}
	if q.tail+p.size > j.cap {
		p.full = true // the log is full: the record waits for a checkpoint
		return
	}
	p.kind, p.err = j.writeLog(op, m, p.vec, q.tail, p.size)
	if p.err == nil || p.kind != ioWrite {
		q.tail += p.size
	}
}

// writeSlot writes p to a free slot of member m's slotted log, the one
// freed last, holding q.mu; with none free the log is full (a checkpoint
// frees them all). A slot whose write failed is free again: its member
// failed, and is not replayed.
func (j *journal) writeSlot(op *Op, m int, q *logQueue, p *pendingRec) {
	slot := j.slot.Load()
	if p.size > slot {
		panic(fmt.Sprintf("raid: journal record of %d bytes exceeds its slot (%d): slotFor is wrong", p.size, slot))
	}
	n := len(q.free)
	if n == 0 {
		p.full = true
		return
	}
	s := q.free[n-1]
	q.free = q.free[:n-1]
	p.kind, p.err = j.writeLog(op, m, p.vec, int64(s)*slot, p.size)
	if p.err != nil {
		q.free = append(q.free, s)
		return
	}
	p.slot = s
}

// clearSlots clears the slots the row's record took (zeroes their magic)
// and frees them, once the row's writes are done (EndRow): a kill after it
// finds no record of the row. A slot whose clear failed stays taken; its
// member is failed.
func (j *journal) clearSlots(op *Op) {
	slot := j.slot.Load()
	for _, s := range op.logSlots[:op.nLogSlots] {
		at := j.off + logHeaderSize + int64(s.slot)*slot
		if _, err := op.v.devs[s.m].WriteAt(zeroPage[:len(pplMagic)], at); err != nil {
			op.countError(s.m, false, ioWrite)
			op.fail(s.m, &MemberError{Op: "write", Member: s.m, Offset: -1, Err: fmt.Errorf("write-hole log slot: %w", err)})
			continue
		}
		q := &j.logs[s.m]
		q.mu.Lock()
		q.free = append(q.free, s.slot)
		q.mu.Unlock()
	}
	op.nLogSlots = 0
}

// slotFor returns the slot size of an epoch that starts with view v: 0
// (records are appended) unless every member of v is held in memory and
// the log area holds minSlots slots. A slot holds the largest record of
// such an epoch: its W is the write's own spans, at most one per data
// index (no row keeps spans there, see keep), and its partial parities
// are at most a chunk each.
func (j *journal) slotFor(v *View) int64 {
	if !v.inMemory {
		return 0
	}
	g := v.geo
	slot := roundUp(pplHeaderSize+int64(g.DataMembers())*pplSpanSize+int64(g.Tolerance())*g.Chunk(), recAlign)
	if j.cap/slot < minSlots {
		return 0
	}
	return slot
}

// startEpoch empties the logs for an epoch that starts with view v,
// slotted or not (slotFor). It runs with j.mu held exclusively, or before
// the array serves.
func (j *journal) startEpoch(v *View) {
	slot := j.slotFor(v)
	j.slot.Store(slot)
	slots := int32(0)
	if slot > 0 {
		slots = int32(j.cap / slot)
	}
	for m := range j.logs {
		q := &j.logs[m]
		q.mu.Lock()
		q.tail = 0
		q.free = q.free[:0]
		if m < v.geo.Members() {
			for s := slots - 1; s >= 0; s-- {
				q.free = append(q.free, s)
			}
		}
		q.mu.Unlock()
	}
}

// await returns once p, queued on member m's log, is written and synced
// (or failed), leading batches while no other writer does.
func (j *journal) await(op *Op, m int, p *pendingRec) {
	q := &j.logs[m]
	q.mu.Lock()
	for !p.done {
		if q.leader {
			q.cond.Wait()
			continue
		}
		q.leader = true
		j.gather(q, op.background)
		j.writeBatch(op, m, q)
		q.leader = false
		q.cond.Broadcast()
	}
	q.mu.Unlock()
}

// defaultGather caps how long a leader waits for the records planned for
// its log (gather), whatever its writes take.
const defaultGather = 10 * time.Millisecond

// gatherBackground is how long at most the leader of a background op's
// record (Op.background) waits for bgBatch records in its log's queue,
// while the stripe cache's flusher is saturated (gather).
const gatherBackground = 40 * time.Millisecond

// bgBatch is the batch a leader gathering for a background op waits for.
const bgBatch = 48

// gather makes the leader of q's next batch wait for the records planned
// for q (the row writes between PlanRowLog and LogRow whose record goes
// to this log, reading what their partial parity needs), until none is
// left, the batch is full, or as long as the log's durable writes take
// (q.lat, at most j.gatherMax) has passed: they join its batch instead of
// waiting for its write and then each costing a write of their own. It
// returns at once when none is planned, so a lone writer does not wait,
// and the wait is as short as a log write, so a fast member waits little.
// It is called with q.mu held, and releases it while it waits.
//
// Every log write costs the member a durable write, whatever the records
// in it: a write and a flush, two operations on a disk without FUA (and in
// bench/disks.sh's I/O throttle, which charges a FUA write on a loop
// device twice). Under random partial writes, the records of concurrent
// writes whose parity is on the same member arrive one by one, spread
// over their reads: without the wait, a log write carried about 1.2 of
// them (bench/README.md).
//
// A leader whose own op is a background one (the stripe cache's flusher
// writing out held random writes, Op.background), while the cache is at
// least half full (stripeCache.saturated), waits instead until bgBatch
// records are queued, gatherBackground has passed, or a record a client
// waits for is queued (logQueue.fg): no client waits for it, and the
// flusher's write-outs keep coming, so the longer wait costs no throughput
// and saves log writes (about 27 records per log write on bench/disks.sh,
// where the wait for planned records gave 5). With less of the cache
// in use the members keep up with the writes: the records it would wait
// for may never come (a stream's stripes that expired, random writes far
// apart), or a wait would only hold the row's stripe and the log's lock
// the longer, and it waits as above.
func (j *journal) gather(q *logQueue, background bool) {
	wait, limit := min(q.lat, j.gatherMax), maxBatch
	if background && j.a.cache.saturated() {
		wait, limit = gatherBackground, bgBatch
	} else {
		background = false
	}
	if wait <= 0 || len(q.queue) >= limit || (background && q.fg > 0) || (!background && q.planned <= 0) {
		return
	}
	deadline := time.Now().Add(wait)
	if q.wake == nil {
		q.wake = time.AfterFunc(wait, func() {
			q.mu.Lock()
			q.cond.Broadcast()
			q.mu.Unlock()
		})
	} else {
		q.wake.Reset(wait)
	}
	q.gathering = true
	for len(q.queue) < limit && time.Now().Before(deadline) && (background && q.fg == 0 || !background && q.planned > 0) {
		q.cond.Wait()
	}
	q.gathering = false
	q.wake.Stop()
}

// writeBatch writes and syncs the records queued on member m's log, the
// leader's among them. It is called with q.mu held and releases it for
// the I/O. A failure fails every record of the batch, and is counted once.
func (j *journal) writeBatch(op *Op, m int, q *logQueue) {
	n := min(len(q.queue), maxBatch)
	batch := append(q.batch[:0], q.queue[:n]...)
	rest := copy(q.queue, q.queue[n:])
	clear(q.queue[rest:])
	q.queue = q.queue[:rest]
	vec := q.vec[:0]
	off, size, k := q.tail, int64(0), 0
	for _, p := range batch {
		if off+size+p.size > j.cap {
			break // the log is full: this record and the rest wait for a checkpoint
		}
		vec = append(vec, p.vec...)
		size += p.size
		k++
	}
	q.tail += size
	q.batch = batch // being written (LogRecordsPending counts it)
	// The write is timed for gather, which waits only while records are
	// planned: when none is (a lone writer), the two clock reads, about a
	// tenth of a small record's bookkeeping, are skipped.
	timed := size > 0 && (q.lat == 0 || q.planned > 0)
	q.mu.Unlock()

	var err error
	kind := ioWrite
	var took time.Duration
	if size > 0 {
		var start time.Time
		if timed {
			start = time.Now()
		}
		kind, err = j.writeLog(op, m, vec, off, size)
		if timed {
			took = time.Since(start)
		}
	}

	q.mu.Lock()
	if timed && err == nil {
		if q.lat == 0 {
			q.lat = took
		} else {
			q.lat += (took - q.lat) / 8
		}
	}
	if err != nil && kind == ioWrite {
		q.tail -= size // nothing after it was reserved: the leader is alone
	}
	for i, p := range batch {
		if p.fg {
			q.fg--
		}
		if i < k {
			p.err, p.kind = err, kind
		} else {
			p.full = true
		}
		p.done = true
	}
	clear(vec)
	q.vec = vec[:0]
	clear(batch)
	q.batch = batch[:0]
}

// writeLog writes vec (size bytes) durably at offset off of member m's
// log's record space, counting the log write, and a failure against the
// member.
func (j *journal) writeLog(op *Op, m int, vec [][]byte, off, size int64) (ioKind, error) {
	j.logWrites.Add(1)
	kind, err := writeDurable(op.v.devs[m], vec, j.off+logHeaderSize+off, size)
	if err != nil {
		op.countError(m, false, kind)
	}
	return kind, err
}

// dsyncWriter is implemented by members that make one vectored write
// durable by itself (member.File, integrity.Dev: pwritev2 with RWF_DSYNC).
type dsyncWriter interface {
	WritevAtDSync(bufs [][]byte, off int64) (int, error)
}

// writeDurable writes vec (size bytes) at at on d and makes it durable:
// one durable write where the member can (WritevAtDSync: a FUA write on a
// block device with FUA, where a write and a sync are two operations),
// else a write and a sync.
// kind says which of the two failed.
func writeDurable(d Member, vec [][]byte, at, size int64) (kind ioKind, err error) {
	if dw, ok := d.(dsyncWriter); ok {
		_, err = dw.WritevAtDSync(vec, at)
		return ioWrite, err
	}
	if vd, ok := d.(vectorIO); ok {
		_, err = vd.WritevAt(vec, at)
	} else {
		// The batch in one buffer, for members without vectored writes.
		flat := make([]byte, 0, size)
		for _, b := range vec {
			flat = append(flat, b...)
		}
		_, err = d.WriteAt(flat, at)
	}
	if err != nil {
		return ioWrite, err
	}
	return ioSync, syncWrites(d)
}

// checkpoint makes every record stale: it syncs every writable member of
// op's view, so every write a record describes is durable, then writes a
// new epoch to every writable member's log header and syncs it. Member
// failures are recorded on op. Callers hold j.mu exclusively.
func (j *journal) checkpoint(op *Op) {
	v := op.v
	j.syncAll(op, v, nil)
	j.epoch++
	j.startEpoch(v)
	j.syncAll(op, v, encodeLogHeader(j.uuid, j.epoch, j.slot.Load()))
	j.cacheMu.Lock()
	for len(j.cached) > 0 {
		j.uncacheLocked(j.cached[0]) // which removes it from cached
	}
	j.cacheMu.Unlock()
	j.eachShard(func(sh *rowShard) {
		for r, e := range sh.rows {
			clear(e.spans)
			e.spans = e.spans[:0]
			sh.free = append(sh.free, e)
			delete(sh.rows, r)
		}
	})
	j.nrows.Store(0)
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
		if d == nil || !op.devWritable(m) {
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
			errs[m], kinds[m] = syncWrites(d), ioSync
		}()
	}
	wg.Wait()
	for m, err := range errs {
		if err != nil {
			op.countError(m, false, kinds[m])
			op.fail(m, &MemberError{Op: ioNames[kinds[m]], Member: m, Offset: -1, Err: fmt.Errorf("write-hole log checkpoint: %w", err)})
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
// epoch on any member in use, to every writable member's log header, in
// the current format. It runs before the array serves anything.
func (j *journal) open(replay bool) error {
	v := j.a.view.Load()
	n := v.geo.Members()
	hdr := make([]byte, logHeaderSize)
	epochs := make([]uint64, n)
	versions := make([]int, n)
	slots := make([]int64, n)
	newest := uint64(0)
	for m := 0; m < n; m++ {
		d := v.devs[m]
		if d == nil || v.writable&(1<<uint(m)) == 0 {
			continue
		}
		if _, err := d.ReadAt(hdr, j.off); err != nil {
			return fmt.Errorf("%w: read the log header of member %d: %w", ErrJournal, m, err)
		}
		e, ver, slot, err := decodeLogHeader(hdr, j.uuid)
		if errors.Is(err, errLogVersion) && replay {
			return fmt.Errorf("%w: member %d: %w: a newer raidd wrote this log; assemble the array with it, or with --readonly", ErrJournal, m, err)
		}
		if err != nil {
			continue // never written, or not this array's: no records
		}
		epochs[m], versions[m], slots[m] = e, ver, slot
		newest = max(newest, e)
	}
	if replay {
		var v1 []record
		var v2 []pplRecord
		slotted := false
		for m := 0; m < n; m++ {
			// Only in-sync members: a member being rebuilt may carry the
			// log of an earlier membership.
			if versions[m] == 0 || epochs[m] != newest || v.readable&(1<<uint(m)) == 0 {
				continue
			}
			buf := make([]byte, j.cap)
			if _, err := v.devs[m].ReadAt(buf, j.off+logHeaderSize); err != nil {
				return fmt.Errorf("%w: member %d: read the log: %w", ErrJournal, m, err)
			}
			switch versions[m] {
			case logV1:
				v1 = append(v1, j.scanV1(buf, newest)...)
			case logV3:
				slotted = true
				v2 = append(v2, j.scanSlots(buf, newest, slots[m])...)
			default:
				v2 = append(v2, j.scan(buf, newest)...)
			}
		}
		var count int64
		var err error
		switch {
		case len(v1) != 0 && len(v2) != 0:
			return fmt.Errorf("%w: epoch %d holds records of both log formats", ErrJournal, newest)
		case len(v1) != 0:
			count, err = j.replayV1(v, v1)
		default:
			count, err = j.replay(v, v2)
		}
		if err != nil {
			return err
		}
		if count != 0 {
			for m, d := range v.devs {
				if d != nil && v.writable&(1<<uint(m)) != 0 {
					if err := d.Sync(); err != nil {
						return fmt.Errorf("%w: sync member %d after the replay: %w", ErrJournal, m, err)
					}
				}
			}
			j.replayed = count
			format := "partial parity (version 2)"
			if slotted {
				format = "partial parity in slots (version 3)"
			}
			if len(v1) != 0 {
				format = "redo (version 1, written by an older raidd)"
			}
			j.a.log.Info("write-hole log replayed", "records", count, "format", format)
		}
	}
	j.epoch = newest + 1
	j.view = v
	j.startEpoch(v)
	op := j.a.getOp()
	defer j.a.putOp(op)
	op.v = v
	j.syncAll(op, v, encodeLogHeader(j.uuid, j.epoch, j.slot.Load()))
	if op.failed != 0 {
		a := j.a
		if lost := ^v.readable&fullMask(v.geo.Members()) | op.failed; a.redundant() && v.geo.Survives(lost) {
			// A member that refuses writes (a read-only device) fails
			// here, as it would at its superblock's write, and the array
			// starts degraded: the first write after the start
			// checkpoints the log on the View without it.
			a.lockConfig()
			a.markFailedLocked(v, op.failed, op.errs[:])
			a.unlockConfig()
			return nil
		}
		return fmt.Errorf("%w: write the log headers: %w; a member that refuses writes cannot keep the log, and the array cannot start without it", ErrJournal, op.memberErrors())
	}
	return nil
}

// scan returns the partial parity records of epoch in a member's log
// (buf, the log after its header), in log order, stopping at the first
// block that is not a valid record (the end of the log, or a record whose
// write was torn: no record after it was ever synced).
func (j *journal) scan(buf []byte, epoch uint64) []pplRecord {
	var recs []pplRecord
	for pos := int64(0); pos+pplHeaderSize <= j.cap; {
		r, n, ok := j.recordAt(buf[pos:], epoch, j.cap-pos)
		if !ok {
			break
		}
		recs = append(recs, r)
		pos += roundUp(n, recAlign)
	}
	return recs
}

// recordAt decodes the partial parity record of epoch at the start of b,
// of at most limit bytes, and returns it with its unpadded length; ok is
// false when b does not start with a valid one.
func (j *journal) recordAt(b []byte, epoch uint64, limit int64) (r pplRecord, n int64, ok bool) {
	n, err := pplLength(b, epoch, limit)
	if err != nil {
		return r, 0, false
	}
	r, err = decodePPL(b[:n], epoch, j.a.geo.Members())
	return r, n, err == nil
}

// scanSlots returns the valid partial parity records of epoch in a
// member's slotted log (buf, the log after its header) of slot-byte
// slots, in slot order: every slot that starts with one (a cleared slot,
// one of an earlier epoch, or one whose write was torn does not).
func (j *journal) scanSlots(buf []byte, epoch uint64, slot int64) []pplRecord {
	var recs []pplRecord
	for pos := int64(0); pos+slot <= int64(len(buf)); pos += slot {
		if r, _, ok := j.recordAt(buf[pos:], epoch, slot); ok {
			recs = append(recs, r)
		}
	}
	return recs
}

// replay applies partial parity records in seq order (a record found in
// two logs, RAID6's P and Q, is applied once): for each, P = P' + the
// current data of W, Q = Q' + the weighted current data of W, written to
// the parity members that are present; where records overlap, the last
// one's parity stays. The current data of W on a member that is missing
// (or being rebuilt) is what the row's parity says as the crash left it
// (every record's parity is computed before any is written), read through
// the Layout's degraded read: exact when the record's write completed and
// was made durable (nothing wrote those columns since: a later write would
// have a later record), and garbage when a crash tore the row, but W then
// holds only bytes that no FLUSH or FUA had made durable. It returns how
// many records it applied.
func (j *journal) replay(v *View, recs []pplRecord) (int64, error) {
	slices.SortFunc(recs, func(x, y pplRecord) int { return cmpSeq(x.seq, y.seq) })
	geo := v.geo
	chunk := geo.Chunk()
	dk := int64(geo.DataMembers())
	count := int64(0)
	var cur []byte
	var apply []pplRecord
	present := func(m int) bool { return v.devs[m] != nil && v.writable&(1<<uint(m)) != 0 }
	// Data is read as it is on disk, below the checksums: a torn write may
	// have left a block and its checksum disagreeing, and its bytes are
	// the current data all the same (the resync, or the first read, seals
	// the block against the parity the replay makes).
	raw := *v
	raw.devs = make([]Member, len(v.devs))
	for m, d := range v.devs {
		if d != nil {
			raw.devs[m] = rawDev(d)
		}
	}
	// A member being rebuilt holds its rows below the rebuild checkpoint
	// (rebuilt, synced, and written by every write since): its bytes there
	// are current data, as a readable member's are. Elsewhere it holds
	// nothing yet and, like a missing member, is what the parity says.
	rebuildRole, rebuilt := int(j.a.meta.RebuildRole), int64(j.a.meta.RebuildCheckpoint)/chunk
	holds := func(m int, row int64) bool {
		if raw.devs[m] == nil {
			return false
		}
		return v.readable&(1<<uint(m)) != 0 || (m == rebuildRole && v.writable&(1<<uint(m)) != 0 && row < rebuilt)
	}
	for i, r := range recs {
		if i > 0 && r.seq == recs[i-1].seq {
			continue
		}
		qm := noRole
		if geo.Level() == stripe.RAID6 {
			qm = geo.QMember(r.row)
		}
		if r.row >= geo.Rows() || r.hi > chunk || r.pm != geo.ParityMember(r.row) || r.qm != qm {
			return count, fmt.Errorf("%w: record %d (row %d, [%d, %d), parity %d and %d) does not fit the array", ErrJournal, r.seq, r.row, r.lo, r.hi, r.pm, r.qm)
		}
		for _, s := range r.spans {
			if s.index >= int(dk) || geo.DataMember(r.row, s.index) != s.role {
				return count, fmt.Errorf("%w: record %d puts data index %d of row %d on member %d", ErrJournal, r.seq, s.index, r.row, s.role)
			}
		}
		count++
		if r.flags&pplZero != 0 {
			if r.flags&pplHasP != 0 {
				r.pp = make([]byte, r.hi-r.lo)
			}
			if r.flags&pplHasQ != 0 {
				r.pq = make([]byte, r.hi-r.lo)
			}
		}
		if (r.pp == nil || !present(r.pm)) && (r.pq == nil || !present(r.qm)) {
			continue // no parity of the record to rewrite
		}
		base := v.dataOff + r.row*chunk
		for _, s := range r.spans {
			cur = slices.Grow(cur[:0], int(s.b-s.a))[:s.b-s.a]
			if holds(s.role, r.row) {
				if _, err := raw.devs[s.role].ReadAt(cur, base+s.a); err != nil {
					return count, fmt.Errorf("%w: replay record %d: read member %d: %w", ErrJournal, r.seq, s.role, err)
				}
			} else if err := j.readArray(&raw, cur, (r.row*dk+int64(s.index))*chunk+s.a); err != nil {
				return count, fmt.Errorf("%w: replay record %d: reconstruct member %d: %w", ErrJournal, r.seq, s.role, err)
			}
			if r.pp != nil {
				xorInto(r.pp[s.a-r.lo:s.b-r.lo], cur)
			}
			if r.pq != nil {
				gfMulAdd(r.pq[s.a-r.lo:s.b-r.lo], cur, gfPow2(s.index))
			}
		}
		apply = append(apply, r)
	}
	// Every record's parity is computed before any is written: a missing
	// member's bytes are read from the parity as the crash left it.
	for _, r := range apply {
		base := v.dataOff + r.row*chunk
		for _, w := range [2]struct {
			m int
			b []byte
		}{{r.pm, r.pp}, {r.qm, r.pq}} {
			if w.b == nil || !present(w.m) {
				continue
			}
			at, b := base+r.lo, w.b
			if j.a.csum != nil {
				// Whole checksum blocks, so that the parity's checksums
				// are computed afresh, whatever the crash left in them.
				lo, hi := r.lo/csumBlock*csumBlock, roundUp(r.hi, csumBlock)
				blk := make([]byte, hi-lo)
				if _, err := raw.devs[w.m].ReadAt(blk, base+lo); err != nil {
					return count, fmt.Errorf("%w: replay record %d: read member %d: %w", ErrJournal, r.seq, w.m, err)
				}
				copy(blk[r.lo-lo:], b)
				at, b = base+lo, blk
			}
			if _, err := v.devs[w.m].WriteAt(b, at); err != nil {
				return count, fmt.Errorf("%w: replay record %d on member %d: %w", ErrJournal, r.seq, w.m, err)
			}
		}
	}
	return count, nil
}

// readArray reads array bytes [off, off+len(p)) through the Layout, which
// reconstructs those of missing members from the rest of their row.
func (j *journal) readArray(v *View, p []byte, off int64) error {
	op := j.a.getOp()
	defer j.a.putOp(op)
	op.v, op.locked = v, true
	return j.a.layout.ReadAt(op, p, off)
}

func xorInto(dst, src []byte) {
	for i := range dst {
		dst[i] ^= src[i]
	}
}

// GF(2^8) with polynomial 0x11d and generator 2: the field of RAID6's Q
// (md's syndrome, raid6.Matrix: the coefficient of data index i is 2^i).
var gfExp, gfLog = func() (exp [510]byte, log [256]byte) {
	x := 1
	for i := 0; i < 255; i++ {
		exp[i], exp[i+255] = byte(x), byte(x)
		log[x] = byte(i)
		x <<= 1
		if x&0x100 != 0 {
			x ^= 0x11d
		}
	}
	return exp, log
}()

func gfPow2(i int) byte { return gfExp[i%255] }

// gfMulAdd sets dst ^= c·src over GF(2^8).
func gfMulAdd(dst, src []byte, c byte) {
	if c == 0 {
		return
	}
	lc := int(gfLog[c])
	for i, s := range src {
		if s != 0 {
			dst[i] ^= gfExp[int(gfLog[s])+lc]
		}
	}
}
