package raid

import (
	"context"
	"errors"
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
	traits    Traits // the level's policies (locking, coalescing, resync)

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
	clock       clock.Clock // the time of the rate limiter, clean marking and checkpoints
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
	lastJob          *recovery // the job started last, for status; guarded by cfgMu
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
		clientWritten atomic.Int64
		clientZeroed  atomic.Int64
		clientRead    atomic.Int64
		coalesced     atomic.Int64
	}
	member  byteCounters // member bytes by cause
	charged atomic.Int64 // bytes charged to the rebuild/resync rate limiter
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
	a.bitmap = newBitmap(int64(meta.BitmapRegion), geo.Chunk(), geo.MemberSize())
	a.ctx, a.cancel = context.WithCancel(context.Background())
	a.startEvents(o.OnEvent)
	chunk := geo.Chunk()
	a.bufPool.New = func() any { b := make([]byte, chunk); return &b }
	width := geo.StripeWidth()
	a.widthPool.New = func() any { b := make([]byte, width); return &b }
	a.coalesce = a.traits.Coalesce && !o.NoCoalesce
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
		a.startJobLocked(jobRebuild, int(a.meta.RebuildRole), resume, resumeRow)
	}
	a.claimSparesLocked()
}

// publishLocked builds a View from the table and the present devices. Callers hold cfgMu (or own a not yet shared array).
func (a *Array) publishLocked() {
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

// Size returns the array size in bytes.
func (a *Array) Size() int64 { return a.geo.Size() }

// Geometry returns the array geometry.
func (a *Array) Geometry() stripe.Geometry { return a.geo }

// Name returns the array name.
func (a *Array) Name() string { return a.meta.Name }

// ReadOnly reports whether the array rejects writes.
func (a *Array) ReadOnly() bool { return a.readOnly }

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
