package raid

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raidd/raidd/raid/superblock"
)

type jobKind uint8

const (
	jobRebuild jobKind = iota // reconstruct a missing role onto a new member
	jobReplace                // copy a working member onto its replacement (raidd replace)
)

func (k jobKind) String() string {
	if k == jobReplace {
		return "replace"
	}
	return "rebuild"
}

// recovery is the one rebuild or replace running on an array. Its fields
// other than row and the throttle state are guarded like the member table
// (written under commitMu and cfgMu, read under either).
type recovery struct {
	kind   jobKind
	role   int
	target *slot
	// extra are further roles a rebuild reconstructs in the same pass, one
	// read of each row for all of them (RAID6 with two members missing,
	// a 3-way mirror missing two copies). The superblocks record role as
	// RebuildRole; an extra target found rebuilding at assembly becomes a
	// spare again and is claimed anew.
	extra  []roleTarget
	start  time.Time
	first  int64        // row the job started at
	row    atomic.Int64 // rows below this are done (the slowest worker's position)
	cancel context.CancelFunc
	// regions, for a re-add, marks the bitmap regions whose rows are
	// resynced; the others are skipped. nil means every row.
	regions []bool
	planned int64        // rows to do
	done    atomic.Int64 // rows done
	// moved counts the bytes the job read or wrote on its busiest member
	// (what the rate limit charges): rows rebuilt as holes add nothing, so
	// on a sparse array it is well below rows × chunk.
	moved atomic.Int64
	// throttle state
	tmu      sync.Mutex
	lastOps  int64
	lastBusy time.Time
	next     time.Time // virtual clock of the rate limiter
	// limit is the rate charge applied last (0: none); a job starts at the
	// minimum rate.
	limit int64
}

// roleTarget is one role a rebuild reconstructs and the device it writes.
type roleTarget struct {
	role   int
	target *slot
}

// targets returns every role the job writes and its device: role first.
func (j *recovery) targets() []roleTarget {
	return append([]roleTarget{{j.role, j.target}}, j.extra...)
}

// hasTarget reports whether s is a device the job writes.
func (j *recovery) hasTarget(s *slot) bool {
	for _, t := range j.targets() {
		if t.target == s {
			return true
		}
	}
	return false
}

// roleList names the job's roles for events: "2" or "1 and 3".
func (j *recovery) roleList() string {
	var parts []string
	for _, t := range j.targets() {
		parts = append(parts, fmt.Sprint(t.role))
	}
	return strings.Join(parts, " and ")
}

// jobWorkers is how many rows a job works on at once: rows are independent,
// and two keep both cores of a small machine busy (one XORs while the
// other's reads are in flight).
const jobWorkers = 2

// claimSparesLocked starts a rebuild onto spares when roles are missing.
// When several roles are missing and there are spares for them, one job
// rebuilds them all in one pass (up to what the level tolerates), as md's
// recovery does; a spare that arrives while a plain rebuild runs widens it:
// the rebuild restarts from the first row with the new role too, which
// costs less than a second pass over the array after the first. Callers
// hold commitMu and cfgMu.
func (a *Array) claimSparesLocked() {
	if a.readOnly || a.closed.Load() {
		return
	}
	v := a.view.Load()
	if v.failed {
		return
	}
	var missing []int
	for r := 0; r < a.geo.Members(); r++ {
		if v.writable&(1<<uint(r)) == 0 {
			missing = append(missing, r)
		}
	}
	if len(missing) == 0 {
		return
	}
	old := a.job
	var keep []roleTarget
	if old != nil {
		if old.kind != jobRebuild || old.regions != nil || a.geo.Tolerance() < 2 {
			return // a replace or re-add finishes first
		}
		keep = old.targets()
	}
	var claims []roleTarget
	for i := range a.meta.Members {
		if len(missing) == 0 || len(keep)+len(claims) >= max(a.geo.Tolerance(), 1) {
			break
		}
		mi := &a.meta.Members[i]
		s := a.slots[mi.UUID]
		if mi.State != superblock.MemberSpare || s == nil {
			continue
		}
		role := missing[0]
		missing = missing[1:]
		mi.Role, mi.State = int32(role), superblock.MemberRebuilding
		claims = append(claims, roleTarget{role, s})
	}
	if len(claims) == 0 {
		return
	}
	all := append(keep, claims...)
	a.meta.RebuildRole, a.meta.RebuildCheckpoint = int32(all[0].role), 0
	if err := a.commitLocked(); err != nil {
		a.log.Error("cannot record spare claim", "err", err)
	}
	if old != nil {
		a.job = nil
		old.cancel()
		a.event(Event{Kind: EventRebuildStopped, Role: old.role, Path: old.target.path,
			Detail: fmt.Sprintf("restarting from row 0 to rebuild role %d too, in the same pass", claims[0].role)})
	}
	a.publishLocked()
	for _, c := range claims {
		a.event(Event{Kind: EventSpareClaimed, Role: c.role, Path: c.target.path})
	}
	j := &recovery{kind: jobRebuild, role: all[0].role, target: all[0].target, extra: all[1:], planned: a.geo.Rows()}
	detail := fmt.Sprintf("from row 0 of %d", a.geo.Rows())
	if len(all) > 1 {
		detail = fmt.Sprintf("roles %s in one pass, from row 0 of %d", j.roleList(), a.geo.Rows())
	}
	a.runJobAsyncLocked(j, detail)
}

// startJobLocked launches a recovery job from row. Once Close has begun
// it starts nothing (the table keeps the job's role and checkpoint, so the
// next assembly resumes it) and returns false. Callers hold commitMu and
// cfgMu.
func (a *Array) startJobLocked(kind jobKind, role int, target *slot, row int64) bool {
	j := &recovery{kind: kind, role: role, target: target, first: row, planned: a.geo.Rows() - row}
	return a.runJobAsyncLocked(j, fmt.Sprintf("from row %d of %d", row, a.geo.Rows()))
}

// startReAddLocked launches the rebuild of a re-added member that resyncs
// only the rows of the given bitmap regions. Callers hold commitMu and
// cfgMu.
func (a *Array) startReAddLocked(role int, target *slot, regions []int64) bool {
	j := &recovery{kind: jobRebuild, role: role, target: target, regions: make([]bool, a.bitmap.n)}
	per, rows := int64(1)<<a.bitmap.rowShift, a.geo.Rows()
	for _, r := range regions {
		j.regions[r] = true
		j.planned += min((r+1)*per, rows) - r*per
	}
	return a.runJobAsyncLocked(j, fmt.Sprintf("re-add: %d of %d rows (the write-intent bitmap's dirty regions)", j.planned, rows))
}

// runJobAsyncLocked starts j, unless Close has begun (then it returns
// false). Callers hold commitMu and cfgMu.
func (a *Array) runJobAsyncLocked(j *recovery, detail string) bool {
	ctx, cancel := context.WithCancel(a.ctx)
	j.start, j.cancel = a.clock.Now(), cancel
	j.lastOps = a.clientOps.Load() // only I/O from now on counts as clients being busy
	j.limit = a.minRate
	j.row.Store(j.first)
	prevLast := a.lastJob
	a.job, a.lastJob = j, j
	// The job's first step waits for cfgMu, so it sees the View published below.
	if !a.goBackground(func() { a.runJob(ctx, j) }) {
		a.job, a.lastJob = nil, prevLast
		cancel()
		return false
	}
	a.publishLocked()
	kindEv := EventRebuildStarted
	if j.kind == jobReplace {
		kindEv = EventReplaceStarted
	}
	a.event(Event{Kind: kindEv, Role: j.role, Path: j.target.path, Detail: detail})
	return true
}

// runJob runs the job's workers; they take windows of rows in order
// (window.go). The job's position (for status and checkpoints) is the
// slowest worker's.
func (a *Array) runJob(ctx context.Context, j *recovery) {
	a.seedBitmap(j)
	rows := a.geo.Rows()
	first := j.row.Load()
	var prog [jobWorkers]atomic.Int64
	var (
		wg      sync.WaitGroup
		failMu  sync.Mutex
		failure string
		next    atomic.Int64
	)
	next.Store(first)
	low := func() int64 {
		m := rows
		for w := range prog {
			m = min(m, prog[w].Load())
		}
		return m
	}
	for w := 0; w < jobWorkers; w++ {
		prog[w].Store(first)
		wg.Add(1)
		go func() {
			defer wg.Done()
			win := newWindow(a)
			var learned uint64
			for {
				size := a.windowFor(j)
				lo := next.Add(size) - size
				if lo >= rows {
					// The limiter charges a window after it is done: the
					// last one's time is waited out here, so a limited
					// job takes the time of what it moved.
					a.throttle(ctx, j)
					prog[w].Store(rows)
					return
				}
				hi := min(lo+size, rows)
				prog[w].Store(lo)
				for lo < hi {
					if ctx.Err() != nil {
						return
					}
					if !j.wants(a, lo, hi) {
						lo = hi // a re-add skips rows the bitmap says it holds
						break
					}
					a.throttle(ctx, j)
					adv, worked, moved, err := a.jobWindow(j, win, &learned, lo, hi)
					a.charge(j, moved)
					j.moved.Add(moved)
					j.done.Add(worked)
					lo += adv
					prog[w].Store(lo)
					j.row.Store(low())
					if errors.Is(err, errJobChanged) {
						a.cfgMu.Lock()
						current := a.job == j
						a.cfgMu.Unlock()
						if current {
							continue // the job turned from replace into rebuild: redo the row
						}
						return
					}
					if errors.Is(err, ErrClosed) {
						return // the array is closing: the checkpoint below records where we were
					}
					if err != nil {
						failMu.Lock()
						failure = err.Error()
						failMu.Unlock()
						j.cancel()
						return
					}
				}
				prog[w].Store(hi)
				j.row.Store(low())
			}
		}()
	}
	// Checkpoint periodically while the workers run.
	wctx, stop := context.WithCancel(ctx)
	go func() { wg.Wait(); stop() }()
	for a.clock.Sleep(wctx, a.progressInterval) == nil {
		a.checkpoint(j, low())
	}
	wg.Wait()
	row := low()
	j.row.Store(row)
	switch {
	case failure != "":
		a.stopJob(j, row, failure)
	case row < rows:
		a.stopJob(j, row, "stopped: array closing")
	default:
		a.finishJob(j)
	}
}

// wants reports whether the job has any row of [lo, hi) to do: a re-add
// only does the rows of its bitmap regions.
func (j *recovery) wants(a *Array, lo, hi int64) bool {
	if j.regions == nil {
		return true
	}
	for r := lo >> a.bitmap.rowShift; r <= (hi-1)>>a.bitmap.rowShift; r++ {
		if j.regions[r] {
			return true
		}
	}
	return false
}

// jobWindow does member rows [lo, hi) of a job under the window's stripe
// locks (window.go): the members the rows are rebuilt or copied from are
// read once for the whole window, and the rows' writes to the job's
// targets are written once at its end. learned is the set of roles the
// previous window read (0: every readable one). It returns how many rows
// from lo are done (fewer than hi-lo when it stopped with an error), how
// many of them the job did (a re-add skips rows the bitmap says the
// member holds), and the bytes moved on the busiest device, for the rate
// limiter: a row rebuilt as a hole costs nothing.
func (a *Array) jobWindow(j *recovery, win *window, learned *uint64, lo, hi int64) (adv, worked, moved int64, err error) {
	var salvage []int64 // rows to rebuild again past lost blocks
	unlock, err := a.lockRows(lo, hi, true)
	if err != nil {
		return 0, 0, 0, err
	}
	defer unlock()
	a.cfgMu.Lock()
	current, kind := a.job == j, j.kind
	a.cfgMu.Unlock()
	if !current {
		return 0, 0, 0, errJobChanged
	}
	v := a.view.Load()
	if v.failed {
		return 0, 0, 0, ErrFailed
	}
	chunk := a.geo.Chunk()
	var targets []windowTarget
	var roles uint64
	switch kind {
	case jobRebuild:
		skip := uint64(0)
		for _, t := range j.targets() {
			targets = append(targets, windowTarget{m: t.role, dev: t.target.dev})
			skip |= 1 << uint(t.role)
		}
		roles = *learned & v.readable &^ skip
		if roles == 0 {
			roles = v.readable &^ skip
		}
	case jobReplace:
		if v.repl[j.role] != nil {
			targets = append(targets, windowTarget{m: j.role, dev: v.repl[j.role], repl: true})
		}
		roles = 1 << uint(j.role)
	}
	win.reset(lo, hi, targets)
	if hi-lo > 1 {
		// Only the rows with data are read.
		has := func(row int64) bool {
			if j.regions != nil && !j.regions[row>>a.bitmap.rowShift] {
				return false
			}
			if kind == jobReplace {
				p, ok := v.devs[j.role].(dataProber)
				return v.devs[j.role] != nil && (!ok || p.HasData(v.dataOff+row*chunk, chunk))
			}
			return a.rowHasData(v, row, j.role)
		}
		r0, r1 := lo, hi
		for r0 < r1 && !has(r0) {
			r0++
		}
		for r1 > r0 && !has(r1-1) {
			r1--
		}
		win.load(a, v, roles, r0, r1)
	}
	adv = 0
	for row := lo; row < hi; row++ {
		if j.regions != nil && !j.regions[row>>a.bitmap.rowShift] {
			adv++
			continue
		}
		op := a.windowOp(win)
		op.cause = causeRebuild
		if op.v.failed {
			err = ErrFailed
		} else {
			err = a.jobRow(op, j, row)
		}
		a.endWindowOp(win, op)
		if errors.Is(err, errSalvage) {
			salvage = append(salvage, row)
			err = nil
		}
		if err != nil {
			break
		}
		adv++
		worked++
	}
	if win.read != 0 {
		*learned = win.read
	}
	// The rows' writes to the targets, while the rows are still locked.
	op := a.getOp()
	op.locked, op.cause = true, causeRebuild
	flushed := win.flush(op)
	a.endWindowOp(win, op)
	// Rows with lost blocks are rebuilt again past them, after the
	// window's writes, so that nothing the window gathered overwrites
	// the blocks they mark lost.
	for _, row := range salvage {
		if !flushed || err != nil {
			break
		}
		var m int64
		m, err = a.salvageRow(j, row)
		moved += m
	}
	if !flushed {
		// The rows gathered for a target that is gone are not on it: the
		// job, if it goes on (a replace promoted to a rebuild), redoes
		// the window.
		return 0, 0, win.busiest(), errJobChanged
	}
	return adv, worked, win.busiest() + moved, err
}

// errSalvage: a rebuild row met blocks that failed their checksum on
// their last source; salvageRow does the row again past them.
var errSalvage = errors.New("raid: rebuild row has lost blocks")

// rebuildRow rebuilds row on the target roles.
func (a *Array) rebuildRow(op *Op, row int64, roles []int) error {
	if len(roles) == 1 {
		return a.layout.Rebuild(op, row, roles[0])
	}
	if mr, ok := a.layout.(MultiRebuilder); ok {
		return mr.RebuildMany(op, row, roles)
	}
	for _, r := range roles {
		if err := a.layout.Rebuild(op, row, r); err != nil {
			return err
		}
	}
	return nil
}

// salvageRow rebuilds row on the job's targets from what the sources hold
// and marks the target blocks that no source could provide as lost
// (checksums.go). The caller holds the row's stripe locks. It returns the
// bytes moved on the busiest device.
func (a *Array) salvageRow(j *recovery, row int64) (int64, error) {
	op := a.getOp()
	defer a.putOp(op)
	op.locked, op.cause, op.salvage = true, causeRebuild, true
	var roles []int
	for _, t := range j.targets() {
		if op.v.devs[t.role] != t.target.dev || !op.Writable(t.role) {
			return 0, errJobChanged
		}
		roles = append(roles, t.role)
	}
	if moved, ok := a.rebuildByBlocks(row, roles); ok {
		return moved, nil
	}
	err := a.rebuildRow(op, row, roles)
	if err == nil {
		err = a.poisonLost(op, row, roles)
	}
	moved := op.busiest()
	if op.settle() {
		a.handleFailures(op)
	}
	return moved, err
}

// rebuildByBlocks rebuilds parity row row on the target roles when
// sources failed their checksums, before salvageRow gives their blocks
// up: the row's data is read through the read path, which rebuilds each
// block from what is right at its own offset and rewrites the sources'
// bad blocks (a RAID6 missing one member, with a block of another rotten,
// still has two erasures there, which it solves); the targets' data
// chunks are written from it, and parity targets rebuilt from the data,
// with every parity member of the row (a rotten one is rewritten too).
// Before, a RAID6 rebuild with a source block rotten gave that block up
// as lost although P and Q could rebuild it. It reports false, having
// written nothing to the targets, when some block's offset has more bad
// chunks than the level can rebuild: salvageRow then marks exactly those
// lost. The caller holds the row's stripe locks.
func (a *Array) rebuildByBlocks(row int64, roles []int) (int64, bool) {
	if a.geo.Mirrored() {
		return 0, false
	}
	w, chunk := a.geo.StripeWidth(), a.geo.Chunk()
	buf := make([]byte, w)
	if a.readLocked(buf, row*w) != nil {
		return 0, false
	}
	op := a.getOp()
	defer a.putOp(op)
	op.locked, op.cause = true, causeRebuild
	var parity []int
	for _, r := range roles {
		i := a.geo.DataIndex(row, r)
		if i < 0 {
			parity = append(parity, r)
			continue
		}
		op.Write(r, buf[int64(i)*chunk:int64(i+1)*chunk], row*chunk)
	}
	op.Run()
	if len(parity) > 0 {
		parity = parity[:0]
		for _, m := range []int{a.geo.ParityMember(row), a.geo.QMember(row)} {
			if m >= 0 && op.Writable(m) {
				parity = append(parity, m)
			}
		}
		var err error
		if mr, ok := a.layout.(MultiRebuilder); ok {
			err = mr.RebuildMany(op, row, parity)
		} else {
			err = a.layout.Rebuild(op, row, parity[0])
		}
		if err != nil {
			return op.busiest(), false
		}
	}
	moved := op.busiest()
	if op.settle() {
		a.handleFailures(op)
	}
	return moved, op.failed == 0
}

// jobRow does one row of a job on op, which holds the row's stripe locks
// (in a window, its reads and its writes to the targets go through the
// window).
func (a *Array) jobRow(op *Op, j *recovery, row int64) error {
	a.cfgMu.Lock()
	current, kind := a.job == j, j.kind
	a.cfgMu.Unlock()
	if !current {
		return errJobChanged
	}
	v := op.v
	chunk := a.geo.Chunk()
	switch kind {
	case jobRebuild:
		roles := make([]int, 0, 1+len(j.extra))
		for _, t := range j.targets() {
			if v.devs[t.role] != t.target.dev || !op.Writable(t.role) {
				return errJobChanged
			}
			roles = append(roles, t.role)
		}
		if !a.rowHasData(v, row, j.role) {
			// Nothing was ever written here: the row reads as zeroes on
			// every source, so a hole on the targets is the rebuilt row.
			for _, r := range roles {
				op.Discard(r, row*chunk, chunk)
			}
			op.Run()
			return nil
		}
		err := a.rebuildRow(op, row, roles)
		if err != nil && a.csum != nil && op.lostOnly() {
			return errSalvage // after the window's writes: salvageRow
		}
		return err
	case jobReplace:
		if v.repl[j.role] != j.target.dev || v.devs[j.role] == nil {
			return errJobChanged
		}
		if p, ok := v.devs[j.role].(dataProber); ok && !p.HasData(v.dataOff+row*chunk, chunk) {
			op.replDiscard(j.role, row*chunk, chunk)
			op.Run()
			return nil
		}
		buf := op.Buf(chunk)
		op.Read(j.role, buf, row*chunk)
		if op.Run() != 0 {
			return errJobChanged // the old member failed: settle() promotes the replacement to a rebuild
		}
		op.replWrite(j.role, buf, row*chunk)
		op.Run()
	}
	return nil
}

// catchUp is how far the rate limiter's clock may lag the wall clock:
// two windows' time at the limit (windowFor sizes a limited window to a
// sixteenth of a second's worth).
const catchUp = time.Second / 8

// throttle keeps a job between the minimum and maximum rates: at the
// minimum while clients have done I/O in the last quarter second,
// otherwise up to the maximum. It is a virtual clock: charge advances it by
// the bytes a step actually moved divided by the limit, and throttle makes
// the next step wait until the clock says it may go. The rates are per
// member, so a step is charged the bytes it read or wrote on its busiest
// member (a row's chunk for a rebuild step; nothing for a row rebuilt as a
// hole).
//
// A step that took longer than its charge (its requests queued behind the
// clients' on a busy disk) leaves the clock behind the wall clock; the
// clock keeps up to catchUp of that lag, so the next steps go at once
// until the job is back on its rate. Without it every late step was lost
// time, and under bench/disks.sh's random client load a RAID5 rebuild
// held 0.88 of rebuild_min_rate, not the rate. The lag kept is bounded,
// so a job that the disks cannot serve at its rate does not bank credit
// for a burst later, and over any span the job moves at most its rate's
// worth plus catchUp's.
func (a *Array) throttle(ctx context.Context, j *recovery) {
	j.tmu.Lock()
	if j.next.IsZero() {
		j.next = a.clock.Now() // the job's clock starts with its first step, with no lag to make up
	}
	at := j.next
	j.tmu.Unlock()
	_ = a.clock.Sleep(ctx, at.Sub(a.clock.Now()))
}

// charge advances the job's rate-limiter clock by n bytes at the limit
// that applies now.
func (a *Array) charge(j *recovery, n int64) {
	j.tmu.Lock()
	defer j.tmu.Unlock()
	now := a.clock.Now()
	if ops := a.clientOps.Load(); ops != j.lastOps {
		j.lastOps, j.lastBusy = ops, now
	}
	limit := a.maxRate
	if now.Sub(j.lastBusy) < 250*time.Millisecond {
		limit = a.minRate
	}
	j.limit = limit
	if limit <= 0 {
		j.next = now
		return
	}
	if floor := now.Add(-catchUp); j.next.Before(floor) {
		j.next = floor
	}
	a.charged.Add(n)
	j.next = j.next.Add(time.Duration(float64(n) / float64(limit) * float64(time.Second)))
}

// seedBitmap writes the current write-intent bitmap to the job's target (a
// claimed spare, a re-added member or a replacement). Bits set before the
// job began are on the other members only, since a bitmap update goes to
// the members writable at the time; without this, the target would lack
// them until the next bit changed, and an assembly that has the target but
// not the members holding them would resync or re-add too little. The View
// with the target as writable is published before the job's goroutine gets
// cfgMu, and every later bitmap update goes to that View's members;
// bitmap.mu orders this write with those updates.
func (a *Array) seedBitmap(j *recovery) {
	b := a.bitmap
	if b == nil {
		return
	}
	// Taking cfgMu waits for the publication of the job's View; a job that
	// was already stopped or replaced meanwhile has nothing to seed.
	a.cfgMu.Lock()
	current := a.job == j
	a.cfgMu.Unlock()
	if !current {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	snap := b.snapshot()
	for _, t := range j.targets() {
		_, err := t.target.dev.WriteAt(snap, superblock.BitmapOffset)
		if err == nil {
			err = t.target.dev.Sync()
		}
		if err != nil {
			// The job's own writes to the target fail it if its device is bad.
			a.log.Warn("cannot write the write-intent bitmap to the rebuild target", "path", t.target.path, "err", err)
		}
	}
}

// dataProber is implemented by members that can tell holes from data.
type dataProber interface{ HasData(off, n int64) bool }

// rowHasData reports whether any readable member other than skip may hold
// data in member row row, or in the rows that hold other copies of the
// row's chunks (RAID10 with an odd member count: the neighbouring rows). Members that cannot tell
// count as holding data.
func (a *Array) rowHasData(v *View, row int64, skip int) bool {
	lo, hi := a.geo.RowSpan(row)
	chunk := a.geo.Chunk()
	for m, d := range v.devs {
		if m == skip || d == nil || v.readable&(1<<uint(m)) == 0 {
			continue
		}
		p, ok := d.(dataProber)
		if !ok || p.HasData(v.dataOff+lo*chunk, (hi-lo+1)*chunk) {
			return true
		}
	}
	return false
}

// checkpoint makes the rebuilt rows durable and records the position in
// the superblocks, so a restart resumes there.
func (a *Array) checkpoint(j *recovery, row int64) {
	a.commitMu.Lock()
	defer a.unlockCommit()
	if a.job != j || a.meta.RebuildRole != int32(j.role) {
		return // the superblocks record another job, or none
	}
	if err := j.syncTargets(); err != nil { // under commitMu only: Status does not wait for it
		return // the next write to it fails it
	}
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	a.meta.RebuildCheckpoint = uint64(row * a.geo.Chunk())
	if err := a.commitLocked(); err != nil {
		a.log.Warn("cannot record rebuild checkpoint", "err", err)
	}
	done, total := row, a.geo.Rows()
	a.event(Event{Kind: EventRebuildProgress, Role: j.role, Path: j.target.path, Detail: fmt.Sprintf("%.1f%% (%d of %d rows)", 100*float64(done)/float64(total), done, total)})
}

// syncTargets makes what the job wrote durable on every target.
func (j *recovery) syncTargets() error {
	for _, t := range j.targets() {
		if err := t.target.dev.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// stopJob ends a job early, keeping its checkpoint.
func (a *Array) stopJob(j *recovery, row int64, why string) {
	a.commitMu.Lock()
	defer a.unlockCommit()
	if a.job != j {
		return
	}
	synced := j.syncTargets() == nil // under commitMu only
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	if synced && a.meta.RebuildRole == int32(j.role) {
		a.meta.RebuildCheckpoint = uint64(row * a.geo.Chunk())
		if err := a.commitLocked(); err != nil {
			a.log.Warn("cannot record rebuild checkpoint", "err", err)
		}
	}
	j.cancel()
	// A replace stopped by Close stays in the view until the members
	// close: the writes Close still makes (the stripe cache's write-out)
	// must reach the replacement too, since the checkpoint just recorded
	// says it holds every row below it.
	if !(a.closed.Load() && j.kind == jobReplace) {
		a.job = nil
		a.publishLocked()
	}
	a.event(Event{Kind: EventRebuildStopped, Role: j.role, Path: j.target.path, Detail: fmt.Sprintf("%s %s at row %d: %s", j.kind, "stopped", row, why)})
}

// finishJob makes the rebuilt or copied member a full member.
func (a *Array) finishJob(j *recovery) {
	a.commitMu.Lock()
	defer a.unlockCommit()
	if a.job != j {
		return
	}
	err := j.syncTargets() // under commitMu only
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	if err != nil {
		a.job = nil
		j.cancel()
		a.publishLocked()
		a.event(Event{Kind: EventRebuildStopped, Role: j.role, Path: j.target.path, Detail: "final sync failed: " + err.Error()})
		return
	}
	elapsed := a.clock.Now().Sub(j.start)
	moved := j.moved.Load()
	detail := fmt.Sprintf("%d rows in %s, %.1f MiB moved", j.done.Load(), elapsed.Round(time.Millisecond), float64(moved)/(1<<20))
	if elapsed > 0 {
		detail += fmt.Sprintf(" (%.1f MiB/s)", float64(moved)/(1<<20)/elapsed.Seconds())
	}
	if j.regions != nil {
		detail = fmt.Sprintf("re-add: %d of %d rows resynced in %s", j.done.Load(), a.geo.Rows(), elapsed.Round(time.Millisecond))
	}
	if len(j.extra) > 0 {
		detail = fmt.Sprintf("roles %s in one pass: ", j.roleList()) + detail
	}
	kindEv := EventRebuildFinished
	var retired *slot // the member a replace retired
	switch j.kind {
	case jobRebuild:
		// The target takes the role. Earlier holders of the role whose
		// devices are gone leave the table, as md drops them: there is
		// nothing left to remove. Failed holders still present (or
		// present but stale) stay until 'raidd remove' detaches them.
		kept := a.meta.Members[:0]
		for _, mi := range a.meta.Members {
			target, role := false, false
			for _, t := range j.targets() {
				target = target || mi.UUID == t.target.uuid
				role = role || int(mi.Role) == t.role
			}
			switch {
			case target:
				mi.State = superblock.MemberActive
			case role && (mi.State == superblock.MemberFailed || mi.State == superblock.MemberRemoved) && a.slots[mi.UUID] == nil && !a.isDeadLocked(mi.UUID):
				continue
			}
			kept = append(kept, mi)
		}
		a.meta.Members = kept
		a.meta.RebuildRole, a.meta.RebuildCheckpoint = -1, 0
	case jobReplace:
		kindEv = EventReplaceFinished
		var old *slot
		kept := a.meta.Members[:0]
		for _, mi := range a.meta.Members {
			switch {
			case mi.UUID == j.target.uuid:
				mi.Role, mi.State = int32(j.role), superblock.MemberActive
			case int(mi.Role) == j.role && mi.State == superblock.MemberActive:
				old = a.slots[mi.UUID]
				continue // the replaced member leaves the array
			}
			kept = append(kept, mi)
		}
		a.meta.Members = kept
		a.meta.RebuildRole, a.meta.RebuildCheckpoint = -1, 0
		if old != nil {
			delete(a.slots, old.uuid)
			a.retired = append(a.retired, old)
			retired = old
			detail += "; " + old.path + " retired"
		}
	}
	a.job = nil
	j.cancel()
	if err := a.commitLocked(); err != nil {
		a.log.Error("cannot record finished "+j.kind.String(), "err", err)
	} else if retired != nil {
		a.retireHeaderLocked(retired)
	}
	a.publishLocked()
	a.event(Event{Kind: kindEv, Role: j.role, Path: j.target.path, Detail: detail})
	a.claimSparesLocked()
}

// retireHeaderLocked writes the member table just committed onto the
// retired device s's own superblock, with s added to it as removed, so
// that 'raidd examine' of it says it left the array rather than showing
// the role it held, and an assembly that lists it leaves it out as
// removed, whatever its event count. It is best effort: the device's old
// superblock, older than the members', is left out as well. Callers hold
// commitMu and cfgMu, after the commit.
func (a *Array) retireHeaderLocked(s *slot) {
	meta := a.meta.Clone()
	meta.Role, meta.MemberUUID = -1, s.uuid
	meta.Members = append(meta.Members, superblock.MemberInfo{UUID: s.uuid, Role: -1, State: superblock.MemberRemoved})
	err := superblock.Write(s.dev, meta)
	if err == nil {
		err = s.dev.Sync()
	}
	if err != nil {
		a.log.Warn("cannot record on the retired member's own superblock that it left the array; 'raidd examine' of it shows the role it held", "path", s.path, "err", err)
	}
}

// isDeadLocked reports whether uuid is a present device left out of the array
// (stale or rejected). Callers hold cfgMu.
func (a *Array) isDeadLocked(uuid [16]byte) bool {
	for _, s := range a.dead {
		if s.uuid == uuid {
			return true
		}
	}
	return false
}

// replaceFailed abandons a replace whose new member failed.
func (a *Array) replaceFailed(v *View, role int, err error) {
	a.lockConfig()
	defer a.unlockConfig()
	j := a.job
	if j == nil || j.kind != jobReplace || j.role != role || v.repl[role] != j.target.dev {
		return
	}
	for i := range a.meta.Members {
		if a.meta.Members[i].UUID == j.target.uuid {
			a.meta.Members[i].Role, a.meta.Members[i].State = -1, superblock.MemberFailed
		}
	}
	if a.meta.RebuildRole == int32(role) {
		a.meta.RebuildRole, a.meta.RebuildCheckpoint = -1, 0
	}
	j.target.note = err.Error()
	a.job = nil
	j.cancel()
	if cerr := a.commitLocked(); cerr != nil {
		a.log.Error("cannot record failed replacement", "err", cerr)
	}
	a.publishLocked()
	a.event(Event{Kind: EventReplaceFailed, Role: role, Path: j.target.path, Detail: err.Error()})
}

// promoteReplacementLocked turns a replace whose old member failed into a rebuild
// of the replacement from the row the copy had reached: every row before it
// was copied, and every write since went to both. Callers hold commitMu
// and cfgMu.
func (a *Array) promoteReplacementLocked(role int) bool {
	j := a.job
	if j == nil || j.kind != jobReplace || j.role != role {
		return false
	}
	for i := range a.meta.Members {
		if a.meta.Members[i].UUID == j.target.uuid {
			a.meta.Members[i].Role, a.meta.Members[i].State = int32(role), superblock.MemberRebuilding
		}
	}
	row := j.row.Load()
	a.meta.RebuildRole, a.meta.RebuildCheckpoint = int32(role), uint64(row*a.geo.Chunk())
	j.kind = jobRebuild
	a.event(Event{Kind: EventRebuildStarted, Role: role, Path: j.target.path, Detail: fmt.Sprintf("old member failed during replace; rebuilding from row %d", row)})
	return true
}
