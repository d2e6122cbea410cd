package raid

import (
	"hash/crc32"

	"github.com/raidd/raidd/raid/internal/clock"
)

// WithClock returns o with the array's time source set to c (tests only):
// the rebuild rate limiter, the clean marking and the rebuild checkpoints
// then wait on c.
func WithClock(o Options, c clock.Clock) Options {
	o.clock = c
	return o
}

// FailRole marks role m failed as if an I/O error had hit it (tests only).
func (a *Array) FailRole(m int, err error) {
	a.lockConfig()
	defer a.unlockConfig()
	errs := make([]error, a.geo.Members())
	errs[m] = err
	a.markFailedLocked(a.view.Load(), 1<<uint(m), errs)
}

// Abandon stops the array as a power cut would: no sync, no clean marking,
// members left open (tests only).
func (a *Array) Abandon() {
	a.shutdown()
	close(a.reqs)
	a.workers.Wait()
	a.stopEvents()
}

// Charged returns the bytes charged to the rate limiter of background jobs
// since the array started (tests only).
func (a *Array) Charged() int64 { return a.charged.Load() }

// ChecksumVerifier returns the CopyVerifier an array with checksums
// installs for its scrubs (tests only).
func ChecksumVerifier(a *Array) CopyVerifier { return csumVerifier{a} }

// ChecksumsSummed returns how many data blocks the array's checksum
// wrappers computed a CRC for on writes (tests only).
func (a *Array) ChecksumsSummed() int64 {
	n := int64(0)
	if p := a.csum.devs.Load(); p != nil {
		for _, d := range *p {
			n += d.Stats().Summed
		}
	}
	return n
}

// LegacyPiece is one member write of a version 1 write-hole log record
// (tests only): bytes at a data-region offset of a role.
type LegacyPiece struct {
	Role int
	Off  int64
	Data []byte
}

// LegacyLog returns a log area's first bytes as the previous raidd wrote
// them (log format version 1, a redo log): the header block of epoch and
// one record of the given pieces (tests only).
func LegacyLog(uuid [16]byte, epoch, seq uint64, row int64, pieces []LegacyPiece) []byte {
	ps := make([]piece, len(pieces))
	for i, p := range pieces {
		ps[i] = piece{role: p.Role, kind: pieceData, off: p.Off, n: int64(len(p.Data)), data: p.Data}
	}
	b := append(encodeLogHeaderV1(uuid, epoch), appendRecord(nil, epoch, seq, row, ps)...)
	return append(b, make([]byte, roundUp(int64(len(b)), recAlign)-int64(len(b)))...)
}

// FutureLogHeader returns a log header block of a format version this
// build does not know (tests only).
func FutureLogHeader(uuid [16]byte, epoch uint64) []byte {
	b := encodeLogHeader(uuid, epoch, 0)
	le.PutUint32(b[36:], logV3+1)
	le.PutUint32(b[40:], crc32.Checksum(b[:40], castagnoli))
	return b
}

// LogRecordsPending returns how many write-hole log records are queued on
// the members' logs or in a batch being written (tests only).
func (a *Array) LogRecordsPending() int {
	j := a.journal
	if j == nil {
		return 0
	}
	n := 0
	for i := range j.logs {
		q := &j.logs[i]
		q.mu.Lock()
		n += len(q.queue) + len(q.batch)
		q.mu.Unlock()
	}
	return n
}

// Unsealed reports whether rows a crash left dirty are still unsealed:
// the resync, or a degraded array's reseal, has not finished (tests only).
func (a *Array) Unsealed() bool { return a.csum != nil && a.csum.unsealed.Load() != nil }
