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

	"github.com/raidd/raidd/raid/internal/clock"
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

	// ctr counts I/O errors and repairs; set under cfgMu (countersLocked).
	ctr *memberCounters
}

// Array is a running RAID array: the front door for all I/O. It satisfies
// the nbd package's Device interface and its optional capabilities.
//
// Concurrency: every method may be called from many goroutines. There is no
// array-wide lock on the I/O path: reads of a healthy array take no lock,
// and writes, degraded reads, resync and rebuild steps take the locks of the
// stripes they touch, in ascending order. The member set is an immutable
// View behind an atomic pointer; changes to it are made under commitMu and
// cfgMu, persisted in the superblocks, then published. The fields are
// grouped by what guards them; the lock order is in the package doc
// (Locking). Methods named …Locked expect commitMu and cfgMu held
// (lockConfig).
type Array struct {
	// Immutable after newArray.
	geo              stripe.Geometry
	layout           Layout
	traits           Traits // the level's policies (locking, coalescing, resync)
	log              *slog.Logger
	readOnly         bool
	zeroElide        bool
	coalesce         bool
	writeBack        WriteBack  // Options.RandomWriteBack, with a stripe cache
	repairMu         sync.Mutex // held by Op.Run while it runs read-error repairs
	cleanDelay       time.Duration
	clock            clock.Clock // the time of the rate limiter, clean marking and checkpoints
	minRate, maxRate int64
	progressInterval time.Duration
	inlineAbove      int64  // above this many ops in progress, Op.Run does member I/O inline
	zero             []byte // a chunk of zeroes, never written
	bitmap           *bitmap
	csum             *csumState  // per-block checksums; nil without them
	journal          *journal    // the write-hole journal; nil without a log area or when read-only
	reqs             chan *ioReq // member I/O for the workers; closed by Close
	ctx              context.Context
	cancel           context.CancelFunc // cancels ctx: Close, the parent of background jobs
	opPool           sync.Pool
	bufPool          sync.Pool
	widthPool        sync.Pool    // stripe-width buffers for coalesced writes
	cache            *stripeCache // nil without one (see stripecache.go)

	// Lifecycle (see enter, goBackground and Close). closed is set under
	// lifeMu and read atomically; bg.Add is only called under lifeMu while
	// closed is false, so Close's bg.Wait sees every job.
	lifeMu  sync.Mutex
	closed  atomic.Bool
	calls   atomic.Int64  // calls in progress (enter/leave)
	drained chan struct{} // poked by the leave that ends the last call after Close began
	bg      sync.WaitGroup
	workers sync.WaitGroup

	// Configuration: written with commitMu and cfgMu held, read with either.
	commitMu sync.Mutex
	cfgMu    sync.Mutex
	meta     *superblock.Meta
	slots    map[[16]byte]*slot // present members by UUID
	dead     []*slot            // present devices not in use (stale, rejected)
	// released are the slots Release closed for a re-add, by path, kept
	// until the add: a refused add gives its device back to them.
	released map[string]releasedSlot
	job      *recovery                 // the running rebuild or replace
	lastJob  *recovery                 // the job started last, for status
	retired  []*slot                   // members replaced away, closed at Close
	snap     atomic.Pointer[tableSnap] // the table at the end of the last change, for Status

	// Lock-free state.
	view        atomic.Pointer[View]
	locks       stripe.Locks
	inflight    atomic.Int64 // writes in progress (dirty/clean protocol)
	dirty       atomic.Bool  // the superblocks say dirty
	lastWrite   atomic.Int64 // unix nanoseconds
	resyncing   atomic.Bool
	resyncRow   atomic.Int64 // rows done
	resyncTotal atomic.Int64
	clientOps   atomic.Int64
	active      atomic.Int64 // ops in progress
	gq          [gatherSlots]gatherQueue
	ends        [recentEnds]atomic.Int64 // recent write ends, to recognise streams
	streams     readStreams              // recent read ends, to recognise streams (readahead.go)
	ev          eventLog                 // its own mutex
	stats       struct {
		clientWritten atomic.Int64
		clientZeroed  atomic.Int64
		clientRead    atomic.Int64
		coalesced     atomic.Int64
	}
	member  byteCounters // member bytes by cause
	charged atomic.Int64 // bytes charged to the rebuild/resync rate limiter

	// Scrub (scrub.go). The schedule is immutable after newArray.
	scrubInterval time.Duration                // 0: no scrub schedule
	scrubRepair   bool                         // scheduled scrubs repair
	verifier      atomic.Pointer[CopyVerifier] // judges disagreeing mirror copies (SetCopyVerifier)
	scrubJob      atomic.Pointer[scrubJob]     // the running scrub; set and cleared under cfgMu
	lastScrub     atomic.Pointer[scrubJob]     // the scrub that ended last
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
		scrubInterval: o.ScrubInterval, scrubRepair: o.ScrubRepair,
		readOnly: o.ReadOnly, zeroElide: !o.KeepZeroes,
		traits: layout.Traits(),
		meta:   meta, slots: slots, dead: dead,
		cleanDelay: o.CleanDelay,
		clock:      o.clock,
		zero:       make([]byte, geo.Chunk()),
	}
	if a.clock == nil {
		a.clock = clock.Real{}
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
	a.streams.init()
	a.bitmap = newBitmap(int64(meta.BitmapRegion), geo.Chunk(), geo.MemberSize())
	if meta.Checksums {
		limit := o.ChecksumCache
		if limit == 0 {
			limit = DefaultChecksumCache
		}
		a.csum = &csumState{pages: int(max(1, limit/4096/int64(geo.Members())))}
		for _, s := range slots {
			if s.dev, err = a.wrapDev(s.dev); err != nil {
				return nil, fmt.Errorf("raid: %s: %w", s.path, err)
			}
		}
		a.SetCopyVerifier(csumVerifier{a})
	}
	if !a.readOnly {
		for _, s := range slots {
			a.reserveTail(s)
		}
	}
	if meta.LogLength != 0 {
		if need := logHeaderSize + maxRecord(geo.Members(), geo.Chunk()); int64(meta.LogLength) < need {
			return nil, fmt.Errorf("%w: the write-hole log area is %d bytes, less than the %d its largest record needs", ErrCorrupt, meta.LogLength, need)
		}
		if !a.readOnly {
			a.journal = newJournal(a, meta)
		}
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.drained = make(chan struct{}, 1)
	a.startEvents(o.OnEvent)
	chunk := geo.Chunk()
	a.bufPool.New = func() any { b := make([]byte, chunk); return &b }
	width := geo.StripeWidth()
	a.widthPool.New = func() any { b := make([]byte, width); return &b }
	a.coalesce = a.traits.Coalesce && !o.NoCoalesce
	if a.traits.Coalesce && o.StripeCache > 0 && !o.ReadOnly {
		limit, delay := o.StripeCache, o.StripeCacheDelay
		if delay == 0 {
			delay = DefaultStripeCacheDelay
		}
		a.cache = newStripeCache(width, limit, delay)
		a.writeBack = o.RandomWriteBack
	}
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
	a.publishLocked()
	a.snapshotLocked()
	return a, nil
}

// start launches the background jobs: clean marking, the resync after an
// unclean shutdown (of the bitmap's dirty regions, or of everything without
// a bitmap), or only the reseal of those rows' checksums (reseal: a parity
// level missing a member, which cannot resync), a rebuild to resume, and
// spare claiming.
func (a *Array) start(resync, reseal bool, resume *slot, resumeKind jobKind, resumeRow int64) {
	if a.readOnly {
		return
	}
	ctx := a.ctx
	if reseal {
		plan := a.resyncPlan()
		a.unsealForResync(plan) // before the first read
		a.goBackground(func() { a.resealRows(ctx, plan) })
	}
	if resync {
		plan := a.resyncPlan()
		a.unsealForResync(plan)
		total := int64(0)
		for _, r := range plan {
			total += r[1] - r[0]
		}
		a.resyncTotal.Store(total)
		a.resyncing.Store(true)
		a.goBackground(func() { a.resync(ctx, plan, total) })
	}
	if a.cleanDelay > 0 {
		a.goBackground(func() { a.cleaner(ctx) })
	}
	a.startScrubs(ctx)
	if a.cache != nil {
		a.goBackground(func() { a.cacheFlusher(ctx) })
	}
	a.lockConfig()
	defer a.unlockConfig()
	if resume != nil {
		a.startJobLocked(resumeKind, int(a.meta.RebuildRole), resume, resumeRow)
	}
	a.claimSparesLocked()
}

// publishLocked builds a View from the table and the present devices and
// publishes it. Callers hold cfgMu (or own a not yet shared array).
func (a *Array) publishLocked() { a.view.Store(a.viewLocked()) }

// viewLocked builds a View from the table and the present devices.
// Callers hold cfgMu (or own a not yet shared array).
func (a *Array) viewLocked() *View {
	n := a.geo.Members()
	v := &View{geo: a.geo, dataOff: int64(a.meta.DataOffset), devs: make([]Member, n), repl: make([]Member, n)}
	v.ctr, v.replCtr = make([]*memberCounters, n), make([]*memberCounters, n)
	if j := a.job; j != nil && j.kind == jobReplace {
		v.repl[j.role] = j.target.dev
		v.replCtr[j.role] = countersLocked(j.target)
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
		v.ctr[mi.Role] = countersLocked(s)
		if s.writeMostly {
			v.slow |= bit
		}
	}
	v.failed = !a.geo.Survives(^v.readable)
	if !a.geo.Mirrored() {
		for _, d := range v.devs {
			v.ahead = v.ahead || (d != nil && canReadAhead(d))
		}
	}
	v.inMemory = heldInMemory(v)
	return v
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

// lockConfig takes the locks for a change of the member table: commitMu,
// then cfgMu.
func (a *Array) lockConfig() {
	a.commitMu.Lock()
	a.cfgMu.Lock()
}

// unlockConfig records the table for Status and releases the locks.
func (a *Array) unlockConfig() {
	a.snapshotLocked()
	a.cfgMu.Unlock()
	a.commitMu.Unlock()
}

// enter and leave bracket every public call, so that Close can wait for
// them; enter fails with ErrClosed once Close has begun. A call increments
// calls before it loads closed, and Close stores closed before it loads
// calls: with sequentially consistent atomics either the call sees closed
// and backs out, or Close sees the call and waits for its leave, which then
// sees closed and wakes Close.
func (a *Array) enter() error {
	a.calls.Add(1)
	if a.closed.Load() {
		a.leave()
		return ErrClosed
	}
	return nil
}

func (a *Array) leave() {
	if a.calls.Add(-1) == 0 && a.closed.Load() {
		select {
		case a.drained <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// goBackground runs fn as a background job that Close waits for. It
// returns false, without running fn, once Close has begun.
func (a *Array) goBackground(fn func()) bool {
	a.lifeMu.Lock()
	defer a.lifeMu.Unlock()
	if a.closed.Load() {
		return false
	}
	a.bg.Add(1)
	go func() {
		defer a.bg.Done()
		fn()
	}()
	return true
}

// shutdown stops the array's activity, in this order: no new call is
// accepted and no new background job starts (closed); background work is
// told to stop (ctx); the calls in progress finish (a call may be a step of
// a background job, or start one: goBackground refuses it); then the
// background jobs end. It reports false if the array was already closed.
func (a *Array) shutdown() bool {
	a.lifeMu.Lock()
	if a.closed.Load() {
		a.lifeMu.Unlock()
		return false
	}
	a.closed.Store(true)
	a.lifeMu.Unlock()
	a.cancel()
	for a.calls.Load() != 0 {
		<-a.drained
	}
	a.bg.Wait()
	return true
}

// Size returns the array size in bytes.
func (a *Array) Size() int64 { return a.geo.Size() }

// Geometry returns the array geometry.
func (a *Array) Geometry() stripe.Geometry { return a.geo }

// Name returns the array name.
func (a *Array) Name() string { return a.meta.Name }

// ReadOnly reports whether the array rejects writes.
func (a *Array) ReadOnly() bool { return a.readOnly }

// Close stops the array: it refuses new calls, stops background work,
// waits for the calls in flight and then for the background jobs, makes
// every write durable, marks the array clean (unless a resync is
// unfinished) and closes the members. It returns the first error; the
// members are closed regardless. Calls after Close (and a second Close)
// fail with ErrClosed.
func (a *Array) Close() error {
	if !a.shutdown() {
		return ErrClosed
	}
	var errs []error
	if err := a.flushCache(); err != nil {
		errs = append(errs, err)
	}
	if !a.readOnly && !a.view.Load().failed {
		if err := a.tryClean(); err != nil {
			errs = append(errs, err)
		}
	}
	close(a.reqs)
	a.workers.Wait()
	a.lockConfig()
	defer a.unlockConfig()
	a.job = nil // a replace stopped by Close stayed for the write-out above (see stopJob)
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
