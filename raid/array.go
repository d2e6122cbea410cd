package raid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// slot is one present member device and what the array knows of it.
type slot struct {
	dev         Member
	path        string
	uuid        [16]byte
	writeMostly bool
	events      uint64 // event counter last written to this member
	note        string // why the member is not in use, for status
}

// Array is a running RAID array: the front door for all I/O. It satisfies
// the nbd package's Device interface and its optional capabilities.
//
// Concurrency: every method may be called from many goroutines. There is no
// array-wide lock on the I/O path: reads of a healthy array take no lock,
// and writes, degraded reads, resync and rebuild steps take the locks of the
// stripes they touch, in ascending order. The member set is an immutable
// View behind an atomic pointer; changes to it are serialized by cfgMu,
// persisted in the superblocks, then published.
type Array struct {
	geo       stripe.Geometry
	layout    Layout
	log       *slog.Logger
	readOnly  bool
	zeroElide bool
	lockWrite bool // writes need the stripe locks (all but RAID0)
	// lockDegradedReads: a degraded array's reads take the stripe locks up
	// front (RAID5, where they reconstruct).
	lockDegradedReads bool

	view  atomic.Pointer[View]
	locks stripe.Locks

	cfgMu sync.Mutex // serializes member-state changes and superblock updates
	meta  *superblock.Meta
	slots map[[16]byte]*slot // present members by UUID
	dead  []*slot            // present devices not in use (stale, rejected)

	inflight    atomic.Int64 // writes in progress (dirty/clean protocol)
	dirty       atomic.Bool  // the superblocks say dirty
	lastWrite   atomic.Int64 // unix nanoseconds
	cleanDelay  time.Duration
	resyncing   atomic.Bool
	resyncRow   atomic.Int64 // rows done
	resyncTotal atomic.Int64
	ops         atomic.Int64 // calls in progress, for Close
	closed      atomic.Bool

	reqs    chan *ioReq
	workers sync.WaitGroup
	bg      sync.WaitGroup
	ctx     context.Context // cancelled by Close; parent of background jobs
	cancel  context.CancelFunc

	job              *recovery // guarded by cfgMu
	retired          []*slot   // members replaced away, closed at Close; guarded by cfgMu
	bitmap           *bitmap
	ev               eventLog
	minRate, maxRate int64
	progressInterval time.Duration
	clientOps        atomic.Int64
	active           atomic.Int64 // ops in progress
	inlineAbove      int64        // above this many ops in progress, Op.Run does member I/O inline

	opPool    sync.Pool
	bufPool   sync.Pool
	widthPool sync.Pool // stripe-width buffers for coalesced writes
	coalesce  bool
	gq        [gatherSlots]gatherQueue
	ends      [recentEnds]atomic.Int64 // recent write ends, to recognise streams
	endNext   atomic.Uint32
	zero      []byte

	stats struct {
		clientWritten   atomic.Int64
		clientZeroed    atomic.Int64
		memberWritten   atomic.Int64
		memberDiscarded atomic.Int64
		clientRead      atomic.Int64
		coalesced       atomic.Int64
	}
}

// newArray builds a running array from a committed-or-to-be-committed
// table. slots holds the present members; meta is the newest table.
func newArray(meta *superblock.Meta, slots map[[16]byte]*slot, dead []*slot, o Options) (*Array, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	geo, err := stripe.New(stripe.Level(meta.Level), int(meta.RaidDisks), int64(meta.ChunkSize), int64(meta.DataSize))
	if err != nil {
		return nil, err
	}
	layout, err := newLayout(geo)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("array", meta.Name)
	a := &Array{
		geo: geo, layout: layout, log: log,
		minRate: o.RebuildMinRate, maxRate: o.RebuildMaxRate, progressInterval: o.ProgressInterval,
		readOnly: o.ReadOnly, zeroElide: !o.KeepZeroes,
		lockWrite:         geo.Level() != stripe.RAID0,
		lockDegradedReads: geo.Level() == stripe.RAID5,
		meta:              meta, slots: slots, dead: dead,
		cleanDelay: o.CleanDelay,
		zero:       make([]byte, geo.Chunk()),
	}
	if a.cleanDelay == 0 {
		a.cleanDelay = 2 * time.Second
	}
	if a.minRate == 0 {
		a.minRate = 16 << 20
	}
	if a.progressInterval <= 0 {
		a.progressInterval = 5 * time.Second
	}
	a.inlineAbove = int64(2 * runtime.GOMAXPROCS(0))
	a.bitmap = newBitmap(int64(meta.BitmapRegion), geo.Chunk(), geo.MemberSize())
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.startEvents(o.OnEvent)
	chunk := geo.Chunk()
	a.bufPool.New = func() any { b := make([]byte, chunk); return &b }
	width := geo.StripeWidth()
	a.widthPool.New = func() any { b := make([]byte, width); return &b }
	a.coalesce = geo.Level() == stripe.RAID5 && !o.NoCoalesce
	for i := range a.gq {
		a.gq[i].notify = make(chan struct{}, 1)
	}
	for i := range a.ends {
		a.ends[i].Store(-1)
	}
	n := geo.Members()
	a.opPool.New = func() any {
		return &Op{a: a, geo: geo, Shards: make([][]byte, n), Scratch: make([][]byte, n)}
	}
	workers := o.IOWorkers
	if workers == 0 {
		workers = min(16*n, 256)
	}
	a.reqs = make(chan *ioReq, workers)
	for i := 0; i < workers; i++ {
		a.workers.Add(1)
		go func() {
			defer a.workers.Done()
			for r := range a.reqs {
				r.do()
				r.wg.Done()
			}
		}()
	}
	a.publish()
	return a, nil
}

// start launches the background jobs: clean marking, the resync after an
// unclean shutdown (of the bitmap's dirty regions, or of everything without
// a bitmap), a rebuild to resume, and spare claiming.
func (a *Array) start(resync bool, resume *slot, resumeRow int64) {
	if a.readOnly {
		return
	}
	ctx := a.ctx
	if resync {
		plan := a.resyncPlan()
		total := int64(0)
		for _, r := range plan {
			total += r[1] - r[0]
		}
		a.resyncTotal.Store(total)
		a.resyncing.Store(true)
		a.bg.Add(1)
		go func() { defer a.bg.Done(); a.resync(ctx, plan, total) }()
	}
	if a.cleanDelay > 0 {
		a.bg.Add(1)
		go func() { defer a.bg.Done(); a.cleaner(ctx) }()
	}
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	if resume != nil {
		a.startJob(jobRebuild, int(a.meta.RebuildRole), resume, resumeRow)
	}
	a.claimSpares()
}

// publish builds a View from the table and the present devices. Callers hold cfgMu (or own a not yet shared array).
func (a *Array) publish() {
	n := a.geo.Members()
	v := &View{geo: a.geo, dataOff: int64(a.meta.DataOffset), devs: make([]Member, n), repl: make([]Member, n)}
	if j := a.job; j != nil && j.kind == jobReplace {
		v.repl[j.role] = j.target.dev
	}
	for _, mi := range a.meta.Members {
		s := a.slots[mi.UUID]
		if s == nil || mi.Role < 0 || int(mi.Role) >= n {
			continue
		}
		bit := uint64(1) << uint(mi.Role)
		switch mi.State {
		case superblock.MemberActive:
			v.readable |= bit
			v.writable |= bit
		case superblock.MemberRebuilding:
			v.writable |= bit
		default:
			continue
		}
		v.devs[mi.Role] = s.dev
		if s.writeMostly {
			v.slow |= bit
		}
	}
	v.failed = !a.geo.Survives(^v.readable)
	a.view.Store(v)
}

// commit bumps the event counter and writes the table to every member that
// is in use, syncing each. A member whose superblock cannot be written is
// marked failed and the commit is retried without it. Callers hold cfgMu.
func (a *Array) commit() error {
	if a.readOnly {
		return nil
	}
	for {
		a.meta.Events++
		a.meta.UpdateTime = time.Now().UnixNano()
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			bad    []int
			errs   []error
			writes int
		)
		for i, mi := range a.meta.Members {
			s := a.slots[mi.UUID]
			if s == nil || (mi.State != superblock.MemberActive && mi.State != superblock.MemberRebuilding && mi.State != superblock.MemberSpare) {
				continue
			}
			m := a.meta.Clone()
			m.Role, m.MemberUUID = mi.Role, mi.UUID
			writes++
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := superblock.Write(s.dev, m)
				if err == nil {
					err = s.dev.Sync()
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					bad = append(bad, i)
					errs = append(errs, &MemberError{Op: "superblock", Member: int(mi.Role), Path: s.path, Offset: -1, Err: err})
					return
				}
				s.events = m.Events
			}()
		}
		wg.Wait()
		if len(bad) == 0 {
			return nil
		}
		for _, i := range bad {
			mi := &a.meta.Members[i]
			a.log.Error("member failed while writing superblock", "role", mi.Role, "path", a.slots[mi.UUID].path, "err", errors.Join(errs...))
			mi.State = superblock.MemberFailed
			a.slots[mi.UUID].note = "superblock write failed"
		}
		if len(bad) == writes {
			return errors.Join(errs...)
		}
	}
}

// handleFailures marks the members that failed during op as failed,
// persists that on the survivors and publishes the new View. It runs before
// the request that saw the failure is acknowledged, under its stripe locks.
func (a *Array) handleFailures(op *Op) {
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	a.markFailed(op.v, op.failed, op.errs[:])
}

// markFailed records the members in mask (roles of view v) as failed,
// commits and publishes. errs is indexed by role. Callers hold cfgMu.
func (a *Array) markFailed(v *View, mask uint64, errs []error) {
	changed := false
	for m := 0; m < a.geo.Members(); m++ {
		if mask&(1<<uint(m)) == 0 {
			continue
		}
		for i := range a.meta.Members {
			mi := &a.meta.Members[i]
			if int(mi.Role) != m || (mi.State != superblock.MemberActive && mi.State != superblock.MemberRebuilding) {
				continue
			}
			s := a.slots[mi.UUID]
			if s == nil || s.dev != v.devs[m] {
				continue
			}
			wasRebuilding := mi.State == superblock.MemberRebuilding
			mi.State = superblock.MemberFailed
			detail := ""
			if errs[m] != nil {
				s.note = errs[m].Error()
				detail = s.note
			}
			changed = true
			a.event(Event{Kind: EventMemberFailed, Role: m, Path: s.path, Detail: detail})
			if j := a.job; j != nil && j.role == m {
				switch {
				case j.kind == jobReplace && !wasRebuilding:
					a.promoteReplacement(m)
				case j.target == s:
					a.job = nil
					j.cancel()
					a.meta.RebuildRole, a.meta.RebuildCheckpoint = -1, 0
					a.event(Event{Kind: EventRebuildStopped, Role: m, Path: s.path, Detail: "the member being rebuilt failed"})
				}
			}
		}
	}
	if !changed {
		return
	}
	if err := a.commit(); err != nil {
		a.log.Error("cannot record member failure on any member", "err", err)
	}
	a.publish()
	if a.view.Load().failed {
		a.event(Event{Kind: EventFailed, Role: -1, Detail: "more members lost than " + a.geo.Level().String() + " tolerates"})
		return
	}
	a.event(Event{Kind: EventDegraded, Role: -1})
	a.claimSpares()
}

func (a *Array) getOp() *Op {
	a.active.Add(1)
	op := a.opPool.Get().(*Op)
	op.v = a.view.Load()
	return op
}

func (a *Array) putOp(op *Op) {
	op.reset()
	a.opPool.Put(op)
	a.active.Add(-1)
}

// enter and leave bracket every call, so that Close can wait for them.
func (a *Array) enter() error {
	a.ops.Add(1)
	if a.closed.Load() {
		a.ops.Add(-1)
		return ErrClosed
	}
	return nil
}

func (a *Array) leave() { a.ops.Add(-1) }

func (a *Array) checkRange(off, n int64, write bool) error {
	if off < 0 || n < 0 || off > a.geo.Size() || n > a.geo.Size()-off {
		return rangeError(write, off, n, a.geo.Size())
	}
	if write && a.readOnly {
		return ErrReadOnly
	}
	return nil
}

// Size returns the array size in bytes.
func (a *Array) Size() int64 { return a.geo.Size() }

// Geometry returns the array geometry.
func (a *Array) Geometry() stripe.Geometry { return a.geo }

// Name returns the array name.
func (a *Array) Name() string { return a.meta.Name }

// ReadOnly reports whether the array rejects writes.
func (a *Array) ReadOnly() bool { return a.readOnly }

// ReadAt reads len(p) bytes at array offset off. It follows io.ReaderAt:
// it returns len(p), nil or an error. p is owned by the caller and not
// retained. Reads are served around failed members; a member that fails
// during the read is marked failed before ReadAt returns. Errors: ErrRange
// (wraps EINVAL), ErrFailed (wraps EIO) joined with the member errors,
// ErrClosed.
func (a *Array) ReadAt(p []byte, off int64) (int, error) {
	if err := a.enter(); err != nil {
		return 0, err
	}
	defer a.leave()
	if err := a.checkRange(off, int64(len(p)), false); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	op := a.getOp()
	defer a.putOp(op)
	if op.v.failed {
		return 0, ErrFailed
	}
	// A read that must reconstruct runs under the stripe locks. A degraded
	// RAID5 read takes them at once; any other read takes them only if the
	// layout finds it needs them (a read error, a member lost meanwhile).
	first, last := a.geo.StripeRange(off, int64(len(p)))
	lock := func() {
		a.locks.RLock(first, last)
		op.v, op.locked = a.view.Load(), true
	}
	if a.lockDegradedReads && op.v.Degraded() {
		lock()
	}
	err := a.layout.ReadAt(op, p, off)
	if errors.Is(err, ErrNeedLock) && !op.locked {
		lock()
		err = a.layout.ReadAt(op, p, off)
	}
	if op.settle() {
		a.handleFailures(op) // before unlocking: the failure is recorded first
	}
	if op.locked {
		a.locks.RUnlock(first, last)
	}
	a.clientOps.Add(1)
	if err != nil {
		return 0, a.ioError(op, err)
	}
	a.stats.clientRead.Add(int64(len(p)))
	return len(p), nil
}

func (a *Array) ioError(op *Op, err error) error {
	if errors.Is(err, ErrTooManyFailures) || op.failed != 0 {
		return errors.Join(ErrFailed, op.memberErrors())
	}
	return err
}

// WriteAt writes p at array offset off on every member that needs it and
// returns len(p), nil once the data is on all writable members (not
// necessarily durable: see Sync and WriteAtFUA). p is owned by the caller
// and not retained. Errors: ErrRange (wraps ENOSPC), ErrReadOnly (EPERM),
// ErrFailed (EIO), ErrClosed.
func (a *Array) WriteAt(p []byte, off int64) (int, error) {
	if err := a.write(p, off, int64(len(p)), wkData, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteAtFUA is WriteAt that returns only once the data, its parity and
// the superblock state are durable on every member written.
func (a *Array) WriteAtFUA(p []byte, off int64) (int, error) {
	if err := a.write(p, off, int64(len(p)), wkData, true); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Discard makes [off, off+n) read as zeroes, releasing member space where
// the members can (punched holes), and keeps mirrors and parity consistent
// with what the range now reads as. Whole parity stripes are discarded on
// every member; partial ones are written as zeroes, whose aligned all-zero
// pieces become holes.
func (a *Array) Discard(off, n int64) error {
	return a.write(nil, off, n, wkDiscard, false)
}

// DiscardFUA is Discard followed by making the result durable.
func (a *Array) DiscardFUA(off, n int64) error {
	return a.write(nil, off, n, wkDiscard, true)
}

// WriteZeroes makes [off, off+n) read as zeroes. With noHole the space
// stays allocated (zeroes are written); without it holes are allowed and
// it behaves like Discard.
func (a *Array) WriteZeroes(off, n int64, noHole bool) error {
	if noHole {
		return a.write(nil, off, n, wkZeroesNoHole, false)
	}
	return a.write(nil, off, n, wkDiscard, false)
}

// WriteZeroesFUA is WriteZeroes followed by making the result durable.
func (a *Array) WriteZeroesFUA(off, n int64, noHole bool) error {
	if noHole {
		return a.write(nil, off, n, wkZeroesNoHole, true)
	}
	return a.write(nil, off, n, wkDiscard, true)
}

type writeKind uint8

const (
	wkData writeKind = iota
	wkDiscard
	wkZeroesNoHole
)

func (a *Array) write(p []byte, off, n int64, kind writeKind, fua bool) error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	if err := a.checkRange(off, n, true); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if err := a.beginWrite(); err != nil {
		return err
	}
	defer a.endWrite()
	a.clientOps.Add(1)
	rowLo, rowHi := a.geo.RowRange(off, n)
	if err := a.markWrite(rowLo, rowHi); err != nil {
		return err
	}
	defer a.doneWrite(rowLo, rowHi)
	first, last := a.geo.StripeRange(off, n)
	if kind == wkData {
		a.stats.clientWritten.Add(n)
		if a.coalescable(off, n, first, last) {
			return a.writeGathered(p, off, first, fua)
		}
	}
	if a.lockWrite {
		a.locks.Lock(first, last)
		defer a.locks.Unlock(first, last)
	}
	op := a.getOp()
	defer a.putOp(op)
	op.locked = true
	if op.v.failed {
		return ErrFailed
	}
	var err error
	switch kind {
	case wkData:
		err = a.layout.WriteAt(op, p, off)
	case wkDiscard:
		err = a.layout.Discard(op, off, n)
		a.stats.clientZeroed.Add(n)
	case wkZeroesNoHole:
		op.Zero, op.noElide = true, true
		err = a.writeZeroes(op, off, n)
		a.stats.clientZeroed.Add(n)
	}
	if err == nil && fua {
		a.syncTouched(op)
	}
	return a.finishWrite(op, err)
}

// syncTouched makes the members op wrote durable (FUA).
func (a *Array) syncTouched(op *Op) {
	for m := 0; m < a.geo.Members(); m++ {
		if op.touched&(1<<uint(m)) != 0 && op.Writable(m) {
			op.queue(ioSync, m, nil, 0, 0)
		}
	}
	op.Run()
}

// finishWrite records member failures seen by a write (before it is
// acknowledged) and returns the write's result.
func (a *Array) finishWrite(op *Op, err error) error {
	if op.settle() {
		a.handleFailures(op)
		if a.view.Load().failed {
			return errors.Join(ErrFailed, op.memberErrors())
		}
	}
	if err != nil {
		return a.ioError(op, err)
	}
	return nil
}

// writeZeroes writes zeroes chunk by chunk from the shared zero buffer.
func (a *Array) writeZeroes(op *Op, off, n int64) error {
	chunk := a.geo.Chunk()
	for n > 0 {
		k := min(n, chunk-off%chunk)
		if err := a.layout.WriteAt(op, a.zero[:k], off); err != nil {
			return err
		}
		off += k
		n -= k
	}
	return nil
}

// beginWrite marks the array dirty on disk before the first write after a
// clean state. See cleaner for the protocol that keeps this race-free
// without a lock on the fast path.
func (a *Array) beginWrite() error {
	a.inflight.Add(1)
	if a.dirty.Load() {
		return nil
	}
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	if !a.dirty.Load() {
		a.meta.State = superblock.StateDirty
		if err := a.commit(); err != nil {
			a.inflight.Add(-1)
			return errors.Join(ErrFailed, err)
		}
		a.dirty.Store(true)
		a.log.Info("array dirty")
	}
	return nil
}

func (a *Array) endWrite() {
	a.lastWrite.Store(time.Now().UnixNano())
	a.inflight.Add(-1)
}

// tryClean marks the array clean if no write is in flight: it syncs every
// member, then writes the clean state. A writer increments inflight before
// it loads dirty; tryClean stores dirty=false before it loads inflight. With
// sequentially consistent atomics, either tryClean sees the writer and backs
// off, or the writer sees dirty=false and takes the slow path, which waits
// for cfgMu and marks the array dirty again before writing.
func (a *Array) tryClean() error {
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	if !a.dirty.Load() || a.resyncing.Load() {
		return nil
	}
	a.dirty.Store(false)
	if a.inflight.Load() != 0 {
		a.dirty.Store(true)
		return nil
	}
	if err := a.syncMembers(); err != nil {
		a.dirty.Store(true)
		return err
	}
	a.meta.State = superblock.StateClean
	if err := a.commit(); err != nil {
		a.dirty.Store(true)
		return err
	}
	a.log.Info("array clean")
	return nil
}

func (a *Array) cleaner(ctx context.Context) {
	t := time.NewTicker(a.cleanDelay / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(time.Unix(0, a.lastWrite.Load())) < a.cleanDelay {
			continue
		}
		if n, err := a.cleanBitmap(); err != nil {
			a.log.Warn("cannot clean write-intent bitmap", "err", err)
		} else if n > 0 {
			a.log.Debug("write-intent bitmap regions cleaned", "regions", n)
		}
		if a.dirty.Load() {
			if err := a.tryClean(); err != nil {
				a.log.Warn("cannot mark array clean", "err", err)
			}
		}
	}
}

// syncMembers fdatasyncs every writable member in parallel. A member that
// fails to sync is marked failed; the error is returned only if the array
// has failed. Callers hold cfgMu.
func (a *Array) syncMembers() error {
	v := a.view.Load()
	var wg sync.WaitGroup
	errs := make([]error, len(v.devs))
	var mask uint64
	for m, d := range v.devs {
		if d == nil || v.writable&(1<<uint(m)) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[m] = d.Sync()
			if r := v.repl[m]; r != nil {
				_ = r.Sync() // a replacement that cannot sync fails on its next write
			}
		}()
	}
	wg.Wait()
	for m, err := range errs {
		if err != nil {
			mask |= 1 << uint(m)
			errs[m] = &MemberError{Op: "sync", Member: m, Offset: -1, Err: err}
		}
	}
	if mask == 0 {
		return nil
	}
	a.markFailed(v, mask, errs)
	if a.view.Load().failed {
		return errors.Join(ErrFailed, errors.Join(errs...))
	}
	return nil
}

// Sync returns once every write acknowledged before it was called is
// durable on every member that holds it. A member that fails to sync is
// marked failed; Sync fails only if the array has failed.
func (a *Array) Sync() error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	op := a.getOp()
	defer a.putOp(op)
	if op.v.failed {
		return ErrFailed
	}
	for m, d := range op.v.devs {
		if d != nil && op.Writable(m) {
			op.queue(ioSync, m, nil, 0, 0)
		}
	}
	op.Run()
	if op.failed != 0 {
		a.handleFailures(op)
		if a.view.Load().failed {
			return errors.Join(ErrFailed, op.memberErrors())
		}
	}
	return nil
}

// CanFastZero reports whether WriteZeroes without NO_HOLE is cheaper than
// writing: true when every member can punch holes.
func (a *Array) CanFastZero() bool {
	v := a.view.Load()
	for _, d := range v.devs {
		if d == nil {
			continue
		}
		if z, ok := d.(interface{ CanDiscard() bool }); !ok || !z.CanDiscard() {
			return false
		}
	}
	return true
}

// CanMultiConn is true: Sync flushes every member, so a FLUSH on any
// connection makes every acknowledged write durable.
func (a *Array) CanMultiConn() bool { return true }

// BlockSizes returns the NBD block size constraints: minimum 1 byte (any
// alignment works), preferred the largest power of two not above the full
// stripe width (the protocol requires a power of two), maximum 32 MiB.
func (a *Array) BlockSizes() (minimum, preferred, maximum uint32) {
	w := a.geo.StripeWidth()
	pref := int64(4096)
	for pref*2 <= w && pref*2 <= 32<<20 {
		pref *= 2
	}
	return 1, uint32(pref), 32 << 20
}

// resync makes rows consistent after an unclean shutdown, in the
// background, taking each row's stripe locks in turn: the rows of the
// regions the write-intent bitmap marked, or every row without a bitmap.
func (a *Array) resync(ctx context.Context, rows [][2]int64, total int64) {
	start := time.Now()
	a.event(Event{Kind: EventResyncStarted, Role: -1, Detail: fmt.Sprintf("%d of %d rows (%d dirty bitmap regions)", total, a.geo.Rows(), len(rows))})
	j := &recovery{}
	j.lastOps = a.clientOps.Load()
	done := int64(0)
	for _, r := range rows {
		for row := r[0]; row < r[1]; row++ {
			if ctx.Err() != nil {
				a.log.Info("resync interrupted; it restarts at the next assembly", "row", row)
				return
			}
			a.throttle(ctx, j)
			if err := a.resyncRowStep(row); err != nil {
				a.log.Error("resync stopped", "row", row, "err", err)
				return
			}
			done++
			a.resyncRow.Store(done)
		}
	}
	a.resyncing.Store(false)
	a.event(Event{Kind: EventResyncFinished, Role: -1, Detail: fmt.Sprintf("%d rows in %s", done, time.Since(start).Round(time.Millisecond))})
}

// resyncPlan returns the row ranges [from, to) to resync.
func (a *Array) resyncPlan() [][2]int64 {
	rows := a.geo.Rows()
	if a.bitmap == nil {
		return [][2]int64{{0, rows}}
	}
	var out [][2]int64
	per := int64(1) << a.bitmap.rowShift
	for _, r := range a.bitmap.dirtyRegions() {
		lo, hi := r*per, min((r+1)*per, rows)
		if n := len(out); n > 0 && out[n-1][1] == lo {
			out[n-1][1] = hi
		} else {
			out = append(out, [2]int64{lo, hi})
		}
	}
	return out
}

func (a *Array) resyncRowStep(row int64) error {
	return a.rowStep(row, func(op *Op) error {
		op.noElide = true
		return a.layout.Resync(op, row)
	})
}

// rowStep runs fn on one member row as background work that writes: the
// array must be open, it is marked dirty, the row's stripes are locked, and
// the member failures fn runs into are recorded before rowStep returns.
func (a *Array) rowStep(row int64, fn func(op *Op) error) error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	if err := a.beginWrite(); err != nil {
		return err
	}
	defer a.endWrite()
	first, last := a.geo.RowStripes(row)
	a.locks.Lock(first, last)
	defer a.locks.Unlock(first, last)
	op := a.getOp()
	defer a.putOp(op)
	op.locked = true
	if op.v.failed {
		return ErrFailed
	}
	err := fn(op)
	if op.settle() {
		a.handleFailures(op)
	}
	return err
}

// Check verifies every row: mirrors identical, parity matching data. It
// returns nil or an error wrapping ErrInconsistent listing the first bad rows.
func (a *Array) Check() error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	var errs []error
	for row := int64(0); row < a.geo.Rows(); row++ {
		if a.closed.Load() {
			return errors.Join(append(errs, ErrClosed)...)
		}
		first, last := a.geo.RowStripes(row)
		a.locks.RLock(first, last)
		op := a.getOp()
		op.locked = true
		err := a.layout.Check(op, row)
		if op.settle() {
			a.handleFailures(op)
		}
		a.putOp(op)
		a.locks.RUnlock(first, last)
		if err != nil {
			errs = append(errs, err)
			if len(errs) >= 8 {
				break
			}
		}
	}
	return errors.Join(errs...)
}

// Close stops background work, waits for calls in flight, makes every
// write durable, marks the array clean (unless a resync is unfinished) and
// closes the members. It returns the first error; the members are closed
// regardless.
func (a *Array) Close() error {
	if a.closed.Swap(true) {
		return ErrClosed
	}
	if a.cancel != nil {
		a.cancel()
	}
	a.bg.Wait()
	for a.ops.Load() != 0 {
		time.Sleep(time.Millisecond)
	}
	var errs []error
	if !a.readOnly && !a.view.Load().failed {
		if err := a.tryClean(); err != nil {
			errs = append(errs, err)
		}
	}
	close(a.reqs)
	a.workers.Wait()
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	for _, s := range a.slots {
		if err := s.dev.Close(); err != nil && !errors.Is(err, io.EOF) {
			errs = append(errs, err)
		}
	}
	for _, s := range a.dead {
		_ = s.dev.Close()
	}
	for _, s := range a.retired {
		_ = s.dev.Close()
	}
	a.stopEvents()
	return errors.Join(errs...)
}
