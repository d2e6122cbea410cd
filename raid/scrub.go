package raid

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raidd/raidd/raid/superblock"
)

// Mismatch is one disagreement a check or scrub found in a row: a mirror
// copy that differs from the copy trusted, parity that does not match the
// data, or (RAID6) the chunk the P/Q syndrome locates. Layouts report them
// with Op.Mismatch from their Check.
type Mismatch struct {
	Row int64 `json:"row"`
	// Role is the member whose chunk is wrong (or, when Located is false,
	// the member that a repair rewrites: the parity, or the copy that lost
	// to the trusted one); -1 when no single member can be named.
	Role int `json:"role"`
	// Shard is what the member holds there: "copy", "parity", "P", "Q" or
	// "data N" (RAID6 data index N), or "row" when unlocated.
	Shard string `json:"shard"`
	// Offset is the member data-region offset of the first wrong byte.
	Offset int64 `json:"offset"`
	// DeviceOffset is where that byte is on the member device or file:
	// Offset past the header (the data offset), for dd and friends.
	DeviceOffset int64 `json:"device_offset"`
	// Located is true when the wrong chunk was identified from the data
	// itself (RAID6's syndrome, or a checksum); false when a rule chose it
	// (mirrors: the first readable copy wins; RAID5: parity is recomputed).
	Located bool `json:"located"`
	// Repaired is true when the repair's writes succeeded.
	Repaired bool `json:"repaired"`
	// Detail says how the wrong chunk was chosen and what a repair does.
	Detail string `json:"detail,omitempty"`
}

func (m Mismatch) String() string {
	who := "row"
	if m.Role >= 0 {
		who = fmt.Sprintf("role %d (%s)", m.Role, m.Shard)
	}
	s := fmt.Sprintf("row %d: %s wrong from data-region offset %d (device offset %d)", m.Row, who, m.Offset, m.DeviceOffset)
	if m.Repaired {
		s += ", repaired"
	}
	if m.Detail != "" {
		s += ": " + m.Detail
	}
	return s
}

// maxFindings is how many Mismatch records a check keeps for its report;
// the counts go on beyond it.
const maxFindings = 64

// Copy is one readable copy of a mirrored chunk, for CopyVerifier.
type Copy struct {
	Member int    // role holding the copy
	Off    int64  // member data-region offset of the chunk
	Data   []byte // the bytes read
}

// CopyVerifier tells a mirror check which copy of a chunk is right. It is
// the seam for per-block checksums: given the copies that disagree, Verify
// reports for each whether its stored checksum confirms it (ok) and
// whether a checksum covers it at all (known). Without a verifier, or when
// no copy is confirmed, the first readable copy wins, as in md.
type CopyVerifier interface {
	VerifyCopy(c Copy) (ok, known bool)
}

// SetCopyVerifier installs v as the judge of disagreeing mirror copies
// (nil removes it). Checks that start afterwards use it.
func (a *Array) SetCopyVerifier(v CopyVerifier) {
	if v == nil {
		a.verifier.Store(nil)
		return
	}
	a.verifier.Store(&v)
}

// Repairing reports whether the Check being served must rewrite what it
// finds wrong (raidd check --repair), under the row's exclusive stripe
// locks. Otherwise Check only reads.
func (op *Op) Repairing() bool { return op.repair }

// Mismatch records one disagreement found by the Layout's Check. The
// Layout returns an error wrapping ErrInconsistent for the row as well.
func (op *Op) Mismatch(m Mismatch) {
	m.DeviceOffset = op.v.dataOff + m.Offset
	op.found = append(op.found, m)
}

// TrustedCopy returns the index in copies (two or more readable copies of
// one chunk) of the copy to trust, whether it was confirmed by a checksum
// (located), and the rule that chose it, for the report.
func (op *Op) TrustedCopy(copies []Copy) (i int, located bool, why string) {
	if vp := op.a.verifier.Load(); vp != nil {
		v := *vp
		known := false
		for i, c := range copies {
			ok, k := v.VerifyCopy(c)
			if ok {
				return i, true, fmt.Sprintf("the copy on role %d matches its checksum", c.Member)
			}
			known = known || k
		}
		if known {
			return 0, false, fmt.Sprintf("no copy matches its checksum; the first readable copy (role %d) wins", copies[0].Member)
		}
	}
	return 0, false, fmt.Sprintf("no checksums: the first readable copy (role %d) wins, as in md", copies[0].Member)
}

// ScrubStatus describes a scrub (raidd check, with or without --repair):
// its position, pace and ETA (Progress, with Kind "check" or "repair"), and
// what it found so far (CheckResult).
type ScrubStatus struct {
	Progress
	CheckResult
	// ResumedAt is the row a scrub resumed at after a restart (0 if it
	// started at the beginning); rows before it were checked by the run
	// before the restart and are not in the counts.
	ResumedAt int64     `json:"resumed_at,omitempty"`
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished,omitzero"`
	// Error says why an ended scrub stopped early or failed, if it did.
	Error string `json:"error,omitempty"`
}

// scrubJob is one scrub of the array.
type scrubJob struct {
	repair bool
	first  int64 // the row it started (or resumed) at
	start  time.Time
	row    atomic.Int64 // rows below this are done
	moved  atomic.Int64
	cancel context.CancelFunc
	done   chan struct{}
	thr    recovery // throttle state only

	mu       sync.Mutex // guards the fields below
	res      CheckResult
	bad      []error
	other    error
	finished time.Time
	err      error
	repEv    int   // scrub-repaired events sent
	healed   int64 // the array's checksum repairs when the scrub started
}

// Scrub is a handle on a running or ended scrub.
type Scrub struct{ j *scrubJob }

// Wait waits until the scrub ends or ctx is done, and returns what it
// found (see Array.Check for the error). With ctx done first it returns
// the counts so far and ctx's error; the scrub goes on.
func (s *Scrub) Wait(ctx context.Context) (CheckResult, error) {
	select {
	case <-s.j.done:
	case <-ctx.Done():
		s.j.mu.Lock()
		defer s.j.mu.Unlock()
		return s.j.result(), ctx.Err()
	}
	s.j.mu.Lock()
	defer s.j.mu.Unlock()
	return s.j.result(), s.j.err
}

// result returns a copy of the counts, findings in row order (the
// workers find them in any order). Callers hold j.mu.
func (j *scrubJob) result() CheckResult {
	r := j.res
	r.Findings = slices.Clone(r.Findings)
	slices.SortStableFunc(r.Findings, func(a, b Mismatch) int { return cmp.Compare(a.Row, b.Row) })
	return r
}

// Done is closed when the scrub has ended.
func (s *Scrub) Done() <-chan struct{} { return s.j.done }

// StartScrub starts a scrub as a background job of the array: every row is
// read and its mirrors or parity compared (Check), at the rebuild rate
// limits, with a checkpoint in the superblocks so that a restart resumes
// it. With repair it rewrites what is wrong: mirrors from the trusted copy
// (TrustedCopy), RAID5 parity from the data, and on RAID6 the one chunk
// the P/Q syndrome locates (or, when none can be located, P and Q from the
// data, as md's repair does). Rows that are holes on every member are
// skipped: they read as zeroes everywhere and agree by construction.
//
// It fails with ErrScrubRunning while another scrub runs, ErrReadOnly for a
// repair of a read-only array, ErrFailed for a failed array and ErrClosed
// once Close has begun.
func (a *Array) StartScrub(repair bool) (*Scrub, error) {
	return a.startScrub(repair, 0)
}

func (a *Array) startScrub(repair bool, from int64) (*Scrub, error) {
	if repair && a.readOnly {
		return nil, fmt.Errorf("%w: a repair writes to the members", ErrReadOnly)
	}
	if a.view.Load().failed {
		return nil, ErrFailed
	}
	ctx, cancel := context.WithCancel(a.ctx)
	j := &scrubJob{repair: repair, first: from, start: a.clock.Now(), cancel: cancel, done: make(chan struct{}), healed: a.csumRepairedTotal()}
	j.res.NoRedundancy = a.geo.Tolerance() == 0
	j.row.Store(from)
	j.thr.lastOps = a.clientOps.Load()
	j.thr.limit = a.minRate
	a.cfgMu.Lock()
	if cur := a.scrubJob.Load(); cur != nil {
		a.cfgMu.Unlock()
		cancel()
		return nil, fmt.Errorf("%w: a %s started at %s is at row %d of %d", ErrScrubRunning, cur.kind(), cur.start.Format(time.RFC3339), cur.row.Load(), a.geo.Rows())
	}
	a.scrubJob.Store(j)
	a.cfgMu.Unlock()
	if !a.goBackground(func() { a.runScrub(ctx, j) }) {
		a.scrubJob.Store(nil)
		cancel()
		return nil, ErrClosed
	}
	return &Scrub{j}, nil
}

func (j *scrubJob) kind() string {
	if j.repair {
		return "repair"
	}
	return "check"
}

// runScrub is the scrub's background job: jobWorkers workers take
// windows of rows in order (window.go), so one reads its window while the
// other compares; the position is the lowest row in progress.
func (a *Array) runScrub(ctx context.Context, j *scrubJob) {
	defer close(j.done)
	defer j.cancel()
	rows := a.geo.Rows()
	detail := fmt.Sprintf("%s of %d rows", j.kind(), rows)
	if j.first > 0 {
		detail += fmt.Sprintf(", resumed at row %d", j.first)
	}
	a.event(Event{Kind: EventScrubStarted, Role: -1, Detail: detail})
	a.scrubCheckpoint(j, j.first)
	// Workers take windows in order from next; prog[w] is at most the
	// first row worker w has not done (rows when it is done), so every row
	// below the lowest is done: the position a restart resumes at.
	var next atomic.Int64
	next.Store(j.first)
	var prog [jobWorkers]atomic.Int64
	low := func() int64 {
		m := rows
		for w := range prog {
			m = min(m, prog[w].Load())
		}
		return m
	}
	var wg sync.WaitGroup
	for w := 0; w < jobWorkers; w++ {
		prog[w].Store(j.first)
		wg.Add(1)
		go func() {
			defer wg.Done()
			win := newWindow(a)
			var learned uint64
			for {
				size := a.windowFor(&j.thr)
				lo := next.Add(size) - size
				if lo >= rows {
					// The limiter charges a window after it is done: the
					// last one's time is waited out here, so a limited
					// job takes the time of what it moved.
					a.throttle(ctx, &j.thr)
					prog[w].Store(rows)
					return
				}
				hi := min(lo+size, rows)
				prog[w].Store(lo)
				if ctx.Err() != nil {
					return
				}
				a.throttle(ctx, &j.thr)
				moved, err := a.scrubWindow(j, win, &learned, lo, hi)
				a.charge(&j.thr, moved)
				j.moved.Add(moved)
				if errors.Is(err, ErrClosed) || errors.Is(err, ErrFailed) {
					j.mu.Lock()
					if j.err == nil {
						j.err = err
					}
					j.mu.Unlock()
					j.cancel()
					return
				}
				prog[w].Store(hi)
				j.row.Store(low())
			}
		}()
	}
	wctx, stop := context.WithCancel(ctx)
	go func() { wg.Wait(); stop() }()
	for a.clock.Sleep(wctx, a.progressInterval) == nil {
		a.scrubCheckpoint(j, low())
	}
	wg.Wait()
	row := low()
	j.row.Store(row)
	j.mu.Lock()
	j.finished = a.clock.Now()
	j.res.ChecksumRepaired = a.csumRepairedTotal() - j.healed
	res := j.res
	switch {
	case row < rows && j.err == nil:
		j.err = ErrClosed
	case j.err == nil:
		j.err = a.checkError(res, j.bad)
		if j.other != nil {
			j.err = errors.Join(j.err, j.other)
		}
	default:
		j.err = errors.Join(a.checkError(res, j.bad), j.err)
	}
	stopped := row < rows
	j.mu.Unlock()
	if stopped {
		a.scrubCheckpoint(j, row)
		a.event(Event{Kind: EventScrubStopped, Role: -1, Detail: fmt.Sprintf("%s stopped at row %d of %d (it resumes at the next assembly): %s", j.kind(), row, rows, res)})
	} else {
		a.scrubFinished(j)
		a.event(Event{Kind: EventScrubFinished, Role: -1, Detail: scrubSummary(j.kind(), res, a.clock.Now().Sub(j.start))})
	}
	a.cfgMu.Lock()
	a.scrubJob.Store(nil)
	a.lastScrub.Store(j)
	a.cfgMu.Unlock()
}

// scrubSummary is the detail of scrub-finished: md's mismatch count first.
func scrubSummary(kind string, res CheckResult, took time.Duration) string {
	s := fmt.Sprintf("%s: %d mismatches", kind, res.Mismatches)
	if res.Repaired > 0 || kind == "repair" {
		s += fmt.Sprintf(", %d repaired", res.Repaired)
	}
	return s + fmt.Sprintf(" in %s; %s", took.Round(time.Millisecond), res)
}

// scrubWindow checks member rows [lo, hi) for j under the window's shared
// stripe locks, reading each member once for the whole window, then, when
// j repairs, checks again each row found inconsistent as a write step of
// its own (exclusive locks) that rewrites what is wrong. learned is the
// set of roles the previous window read (0: every readable role). It
// returns the bytes moved on the busiest member, for the rate limiter, and
// ErrClosed or ErrFailed when the scrub must stop.
func (a *Array) scrubWindow(j *scrubJob, win *window, learned *uint64, lo, hi int64) (int64, error) {
	unlock, err := a.lockRows(lo, hi, false)
	if err != nil {
		return 0, err
	}
	win.reset(lo, hi, nil)
	v := a.view.Load()
	// A level without redundancy has nothing to compare (its Check reads
	// nothing), and its writes take no stripe locks: nothing is read ahead.
	if hi-lo > 1 && !v.failed && a.geo.Tolerance() > 0 && a.traits.LockWrites {
		// Rows that are holes on every member are skipped without reading.
		r0, r1 := lo, hi
		if a.geo.Tolerance() > 0 && !v.Degraded() {
			for r0 < r1 && !a.rowHasData(v, r0, -1) {
				r0++
			}
			for r1 > r0 && !a.rowHasData(v, r1-1, -1) {
				r1--
			}
		}
		roles := *learned & v.readable
		if roles == 0 {
			roles = v.readable
		}
		win.load(a, v, roles, r0, r1)
	}
	var repairs []int64
	var stop error
	for row := lo; row < hi && stop == nil; row++ {
		op := a.windowOp(win)
		res, found, err := a.checkRowOp(op, row, false)
		a.endWindowOp(win, op)
		if j.repair && res == rowInconsistent {
			repairs = append(repairs, row)
			continue
		}
		stop = a.scrubRecord(j, row, res, found, err)
	}
	if win.read != 0 {
		*learned = win.read
	}
	moved := win.busiest()
	unlock()
	for _, row := range repairs {
		if stop != nil {
			break
		}
		res, found, m2, err := a.checkRow(row, true)
		moved += m2
		stop = a.scrubRecord(j, row, res, found, err)
	}
	return moved, stop
}

// scrubRecord adds one row's outcome to j's counts and sends the
// scrub-repaired events. It returns err when it must stop the scrub
// (ErrClosed, ErrFailed).
func (a *Array) scrubRecord(j *scrubJob, row int64, res rowResult, found []Mismatch, err error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	a.tally(&j.res, &j.bad, &j.other, row, res, found, err)
	for _, f := range found {
		if f.Repaired && j.repEv < maxFindings {
			j.repEv++
			a.event(Event{Kind: EventScrubRepaired, Role: f.Role, Detail: f.String()})
		}
	}
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrFailed) {
		return err
	}
	return nil
}

type rowResult uint8

const (
	rowVerified rowResult = iota
	rowSkipped            // a hole on every member: verified without reading
	rowInconsistent
	rowUnverifiable
	// rowUnverifiableChecksum: unverifiable because blocks failed their
	// checksums and could not be rebuilt, not for a missing member.
	rowUnverifiableChecksum
	rowError
)

// checkRow checks one row: under its shared stripe locks when only
// reading, or as a write step (exclusive locks, the array marked dirty)
// when repairing. It returns what the Layout found.
func (a *Array) checkRow(row int64, repair bool) (res rowResult, found []Mismatch, moved int64, err error) {
	err = a.rowStep(row, repair, func(op *Op) error {
		defer func() { moved = op.busiest() }()
		var err error
		res, found, err = a.checkRowOp(op, row, repair)
		return err
	})
	if res != rowSkipped && res != rowUnverifiableChecksum {
		res = classifyCheck(err)
	}
	return res, found, moved, err
}

// checkRowOp checks one row on op, which holds the row's stripe locks.
func (a *Array) checkRowOp(op *Op, row int64, repair bool) (rowResult, []Mismatch, error) {
	op.cause, op.repair = causeScrub, repair
	if op.v.failed {
		return rowError, nil, ErrFailed
	}
	if a.geo.Tolerance() > 0 && !op.v.Degraded() && !a.rowHasData(op.v, row, -1) {
		return rowSkipped, nil, nil
	}
	err := a.layout.Check(op, row)
	if err != nil && a.csum != nil && errors.Is(err, ErrUnverifiable) && op.lostOnly() {
		return a.recheckHealed(op, row, repair)
	}
	return classifyCheck(err), slices.Clone(op.found), err
}

// recheckHealed handles a row that op could not verify because blocks of
// its members failed their checksums (and nothing else went wrong): it
// heals them, as reads do, and checks the row again with a fresh Op.
//
// A mirror's Check has already rewritten each bad block from a copy that
// passes its checksum; only its comparison was left undone. A parity
// level's Check stops at the first member read that fails, so the row is
// healed here: its data read through the read path (which rebuilds and
// rewrites data blocks that fail their checksums, block by block where
// several members are bad), then its parity members that failed rebuilt
// from that data (Rebuild, as onto a new member). Before, such a row was
// reported unverifiable, "because the array is degraded", check after
// check, and the bad parity stayed until a member failure needed it.
//
// It runs under the row's locks, shared when the check only reads: like
// a read's repair, a heal writes what the row's redundancy already says.
// A row whose bad blocks cannot be rebuilt (more bad at one offset than
// the level tolerates) stays unverifiable, its blocks reported lost.
func (a *Array) recheckHealed(op *Op, row int64, repair bool) (rowResult, []Mismatch, error) {
	if !a.geo.Mirrored() {
		if !a.healParityRow(op, row) {
			return rowUnverifiableChecksum, nil, fmt.Errorf("%w: row %d: blocks failed their checksums and could not be rebuilt", ErrUnverifiable, row)
		}
		// Healed, and reported, by the heal's own Ops: nothing left
		// for rowStep to settle. (A mirror's Check repaired through op,
		// whose settling reports it.)
		op.readErr = 0
	}
	again := a.getOp()
	defer a.putOp(again)
	again.locked, again.cause, again.repair = true, causeScrub, repair
	err := a.layout.Check(again, row)
	found := slices.Clone(again.found)
	res := classifyCheck(err)
	if res == rowUnverifiable && again.lostOnly() {
		res = rowUnverifiableChecksum
	}
	if again.settle() {
		a.handleFailures(again)
	}
	return res, found, err
}

// healParityRow rewrites the blocks of parity row row that failed their
// checksums in op: data through the read path, then the parity members
// rebuilt from the data. It reports whether every bad block was rebuilt.
func (a *Array) healParityRow(op *Op, row int64) bool {
	w := a.geo.StripeWidth()
	if a.readLocked(make([]byte, w), row*w) != nil {
		return false
	}
	var targets []int
	for _, m := range []int{a.geo.ParityMember(row), a.geo.QMember(row)} {
		if m >= 0 && op.ReadFailed(m) {
			targets = append(targets, m)
		}
	}
	if len(targets) == 0 {
		return true
	}
	sub := a.getOp()
	defer a.putOp(sub)
	sub.locked, sub.cause = true, causeScrub
	var err error
	if mr, ok := a.layout.(MultiRebuilder); ok {
		err = mr.RebuildMany(sub, row, targets)
	} else {
		err = a.layout.Rebuild(sub, row, targets[0])
	}
	if sub.settle() {
		a.handleFailures(sub)
	}
	if err != nil || sub.failed != 0 || sub.readErr != 0 {
		return false
	}
	for _, m := range targets {
		if me, ok := mismatch(op.errs[m]); ok {
			a.csumRepaired(m, me)
		}
	}
	return true
}

// classifyCheck sorts a row check's error.
func classifyCheck(err error) rowResult {
	switch {
	case err == nil:
		return rowVerified
	case errors.Is(err, ErrInconsistent):
		return rowInconsistent
	case errors.Is(err, ErrUnverifiable), errors.Is(err, ErrTooManyFailures):
		return rowUnverifiable
	default:
		return rowError
	}
}

// tally adds one row's outcome to res.
func (a *Array) tally(res *CheckResult, bad *[]error, other *error, row int64, r rowResult, found []Mismatch, err error) {
	res.Rows++
	switch r {
	case rowSkipped:
		res.Verified++
		res.Skipped++
	case rowVerified:
		res.Verified++
	case rowInconsistent:
		res.Inconsistent++
		fixed := len(found) > 0
		for _, f := range found {
			fixed = fixed && f.Repaired
		}
		if fixed {
			res.RepairedRows++
		} else if len(*bad) < 8 {
			*bad = append(*bad, err)
		}
	case rowUnverifiable:
		res.Unverifiable++
	case rowUnverifiableChecksum:
		res.Unverifiable++
		res.ChecksumUnverifiable++
	default:
		res.Unverifiable++
		if *other == nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrFailed) {
			*other = fmt.Errorf("raid: check of row %d: %w", row, err)
		}
	}
	for _, f := range found {
		res.Mismatches++
		if f.Repaired {
			res.Repaired++
		}
		if len(res.Findings) < maxFindings {
			res.Findings = append(res.Findings, f)
		}
	}
}

// scrubCheckpoint records in the superblocks that j runs and the row it
// resumes at after a restart (not for a read-only array, which writes no
// superblock).
func (a *Array) scrubCheckpoint(j *scrubJob, row int64) {
	if a.readOnly {
		return
	}
	v := superblock.ScrubRunning | uint64(row)
	if j.repair {
		v |= superblock.ScrubRepair
	}
	a.setScrubField(v)
}

// scrubFinished records the time the scrub finished, for the schedule.
func (a *Array) scrubFinished(j *scrubJob) {
	if a.readOnly {
		return
	}
	a.setScrubField(uint64(max(a.clock.Now().Unix(), 1)))
}

func (a *Array) setScrubField(v uint64) {
	a.lockConfig()
	defer a.unlockConfig()
	if a.meta.Scrub == v || a.view.Load().failed {
		return
	}
	a.meta.Scrub = v
	if err := a.commitLocked(); err != nil {
		a.log.Warn("cannot record the scrub state", "err", err)
	}
}

// scrubStatus describes j for Status.
func (a *Array) scrubStatus(j *scrubJob, running bool) *ScrubStatus {
	rows := a.geo.Rows()
	s := &ScrubStatus{ResumedAt: j.first, Started: j.start}
	s.Progress = Progress{Kind: j.kind(), Role: -1, Done: j.row.Load(), Total: rows, ArrayRows: rows, BytesMoved: j.moved.Load()}
	s.Percent = 100
	if rows > 0 {
		s.Percent = 100 * float64(s.Done) / float64(rows)
	}
	j.mu.Lock()
	s.CheckResult = j.result()
	s.Finished = j.finished
	if !running && j.err != nil {
		s.Error = j.err.Error()
	}
	j.mu.Unlock()
	if el := a.clock.Now().Sub(j.start).Seconds(); running && el > 0 && s.Done > j.first {
		s.BytesPerSec = float64(s.BytesMoved) / el
		s.RowsPerSec = float64(s.Done-j.first) / el
		s.ETASeconds = float64(rows-s.Done) / s.RowsPerSec
	}
	return s
}

// startScrubs resumes the scrub the superblocks say was running, and
// starts the scrub schedule. Called by start, without locks.
func (a *Array) startScrubs(ctx context.Context) {
	a.cfgMu.Lock()
	st := a.meta.Scrub
	a.cfgMu.Unlock()
	if st&superblock.ScrubRunning != 0 && !a.view.Load().failed {
		from := min(int64(st&superblock.ScrubRowMask), a.geo.Rows())
		if _, err := a.startScrub(st&superblock.ScrubRepair != 0, from); err != nil {
			a.log.Warn("cannot resume the interrupted scrub", "row", from, "err", err)
		}
	}
	if iv := a.scrubInterval; iv > 0 {
		a.goBackground(func() { a.scrubScheduler(ctx, iv, a.scrubRepair) })
	}
}

// scrubScheduler starts a scrub every interval, counted from the end of
// the last one (recorded in the superblocks, so a restart does not scrub
// again at once) or, for an array never scrubbed, from its creation.
func (a *Array) scrubScheduler(ctx context.Context, interval time.Duration, repair bool) {
	for ctx.Err() == nil {
		if j := a.scrubJob.Load(); j != nil {
			select {
			case <-j.done:
			case <-ctx.Done():
				return
			}
			continue
		}
		a.cfgMu.Lock()
		last, created := a.meta.Scrub, a.meta.CreateTime
		a.cfgMu.Unlock()
		base := time.Unix(0, created)
		if last != 0 && last&superblock.ScrubRunning == 0 {
			base = time.Unix(int64(last), 0)
		}
		if wait := base.Add(interval).Sub(a.clock.Now()); wait > 0 {
			if a.clock.Sleep(ctx, wait) != nil {
				return
			}
			continue // the time recorded may have changed meanwhile
		}
		s, err := a.StartScrub(repair)
		switch {
		case errors.Is(err, ErrScrubRunning):
			continue
		case err != nil:
			// A failed array: try again an interval later.
			a.log.Warn("scheduled scrub not started", "err", err)
			if a.clock.Sleep(ctx, interval) != nil {
				return
			}
			continue
		}
		_, _ = s.Wait(ctx)
	}
}

// checkResultString is CheckResult.String's tail for scrub counts.
func (r CheckResult) scrubCounts() string {
	var parts []string
	if r.Mismatches > 0 {
		parts = append(parts, fmt.Sprintf("%d mismatches", r.Mismatches))
	}
	if r.Repaired > 0 {
		parts = append(parts, fmt.Sprintf("%d repaired", r.Repaired))
	}
	if r.Skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d hole rows skipped", r.Skipped))
	}
	return strings.Join(parts, ", ")
}
