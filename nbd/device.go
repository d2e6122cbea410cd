package nbd

import "math/bits"

// Device is what an export serves.
//
// ReadAt and WriteAt follow io.ReaderAt and io.WriterAt: ReadAt returns
// n < len(p) only with a non-nil error, WriteAt returns a non-nil error if
// n < len(p), and neither retains p after returning. The server calls them
// concurrently (up to Options.Workers calls per connection, from every
// connection), possibly on overlapping ranges when the client sends
// overlapping requests; ordering between overlapping in-flight requests is the
// client's business, as in the protocol. The server has already checked that
// [off, off+len(p)) lies inside [0, Size()) before calling.
//
// Size is read once when a client selects the export; it must not be
// negative.
//
// Errors are mapped to protocol errors with errors.As(err, &syscall.Errno);
// see the package documentation.
type Device interface {
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
	Size() int64
}

// Syncer is implemented by devices that have a volatile write cache. Sync
// returns once every WriteAt, Discard and WriteZeroes that returned before
// Sync was called is on stable storage. Its presence enables
// NBD_FLAG_SEND_FLUSH and NBD_FLAG_SEND_FUA.
type Syncer interface {
	Sync() error
}

// FUAWriter is an optional faster path for writes with NBD_CMD_FLAG_FUA:
// WriteAtFUA returns only once p is on stable storage. Without it the server
// calls WriteAt and then Sync. It is used only when the device is also a
// Syncer (otherwise FUA is not advertised).
type FUAWriter interface {
	WriteAtFUA(p []byte, off int64) (int, error)
}

// Discarder is implemented by devices that can deallocate a range.
// Discard(off, n) must not change any byte outside [off, off+n); the content
// of the range afterwards is unspecified. Its presence enables
// NBD_FLAG_SEND_TRIM on writable exports. An ENOTSUP/EOPNOTSUPP error is
// treated as "trim ignored" and reported to the client as success, since
// trim is advisory.
type Discarder interface {
	Discard(off, n int64) error
}

// Zeroer is implemented by devices that can zero a range more cheaply than by
// writing zero buffers. After WriteZeroes(off, n, noHole) returns nil, the
// range reads as zeroes; with noHole the range must stay allocated. Its
// presence enables NBD_FLAG_SEND_WRITE_ZEROES on writable exports. If it
// returns ENOTSUP/EOPNOTSUPP for a request without NBD_CMD_FLAG_FAST_ZERO,
// the server falls back to writing zero buffers with WriteAt (the protocol
// forbids ENOTSUP there).
type Zeroer interface {
	WriteZeroes(off, n int64, noHole bool) error
}

// FastZeroer reports whether WriteZeroes is currently faster than writing
// zero buffers. NBD_FLAG_SEND_FAST_ZERO is advertised only for a Zeroer whose
// CanFastZero returns true at negotiation. A request with
// NBD_CMD_FLAG_FAST_ZERO is failed with ENOTSUP, without touching the data,
// whenever CanFastZero returns false at the time of the request.
type FastZeroer interface {
	CanFastZero() bool
}

// FastZeroerAt refines FastZeroer per request: a FAST_ZERO request for
// [off, off+n) that CanFastZero allows is still failed with ENOTSUP, before
// the device is touched, unless FastZeroAt(off, n) is true. A device whose
// zeroing is fast only for some ranges says so here (raidd's parity
// arrays: a range inside one stripe is zeroed by a read-modify-write, the
// work of a WRITE, so only ranges that cover a whole stripe are fast).
type FastZeroerAt interface {
	FastZeroAt(off, n int64) bool
}

// FastNoHoleZeroer says whether zeroing that keeps the space allocated
// (NBD_CMD_FLAG_NO_HOLE) is also faster than writing zeroes. Without it, a
// request with both FAST_ZERO and NO_HOLE fails at once with ENOTSUP.
type FastNoHoleZeroer interface {
	CanFastZeroNoHole() bool
}

// Cacher receives NBD_CMD_CACHE hints. Cache must not change data. Without it
// the server validates CACHE requests and replies success.
type Cacher interface {
	Cache(off, n int64) error
}

// BlockSizer states the block size constraints announced with
// NBD_INFO_BLOCK_SIZE. A zero value means the default for that field
// (1, 4096, 32 MiB). min must be a power of two no larger than 64 KiB; the
// server enforces it (misaligned requests get EINVAL). preferred is the size
// at which aligned requests avoid read-modify-write (raidd: the full stripe
// width); the protocol requires a power of two, so a value that is not one is
// rounded up to the next power of two, and it is lowered to fit under the
// maximum. max is additionally capped by Options.MaxPayload and rounded down
// to a multiple of min.
type BlockSizer interface {
	BlockSizes() (min, preferred, max uint32)
}

// BlockStatuser reports allocation: the length of the run of bytes starting
// at off (at most n, at least 1 byte when n > 0) that share one state, and
// whether that run is a hole that reads as zeroes.
//
// Its presence makes the server offer the base:allocation metadata context
// (NBD_OPT_LIST/SET_META_CONTEXT) and serve NBD_CMD_BLOCK_STATUS; zero runs
// are reported as NBD_STATE_HOLE|NBD_STATE_ZERO, other runs as 0 (data),
// which is always safe. zero must only be true for bytes that read as
// zeroes. The server calls BlockStatus with n > 0 and [off, off+n) inside
// [0, Size()), concurrently with each other and with ReadAt and WriteAt. A
// length above n is treated as n, a length below 1 with a nil error as a
// device error. An ENOTSUP/EOPNOTSUPP error means "cannot tell": the rest
// of the range is reported as data. Any other error fails the request.
type BlockStatuser interface {
	BlockStatus(off, n int64) (length int64, zero bool, err error)
}

// InlineWriter says whether a WRITE may run on the connection's request
// reader instead of being handed to a worker goroutine. WritesInline is
// called for every WRITE without NBD_CMD_FLAG_FUA; when it returns true the
// reader calls WriteAt itself and sends the reply before it reads the next
// request. That saves a goroutine hand-off (a wake-up, often a thread
// switch) per request, but the connection's writes then run one at a time:
// a device should say true only while its writes are CPU work that never
// waits for a device (memory, tmpfs). FUA writes, and every other command,
// always go to the workers.
type InlineWriter interface {
	WritesInline() bool
}

// InlineWriterAt is InlineWriter for a device whose answer depends on the
// write: WritesInlineAt is asked, instead of WritesInline, for every WRITE
// without NBD_CMD_FLAG_FUA, with its offset and length (a valid request
// inside the export), once its header is read and before its payload is:
// the answer also decides whether the payload is written while it
// arrives (payload.go). A RAID5 array on memory says true for writes that
// hold two whole stripes, which then go to the device as they arrive,
// and false for small ones, which gain from running side by side.
type InlineWriterAt interface {
	WritesInlineAt(off int64, n int) bool
}

// Prefetcher is told, for every WRITE the reader hands to a worker, the
// range it covers, as soon as its header is parsed and before its payload
// is received: a device whose write must first read what it overwrites
// (a parity array's read-modify-write on members held in memory) can ask
// for those bytes to be brought into the CPU's cache meanwhile. Prefetch
// must be quick and must not block: it is a hint, and may do nothing.
type Prefetcher interface {
	Prefetch(off int64, n int)
}

// InlineReader says whether a READ of n bytes may run on the connection's
// request reader instead of being handed to a worker goroutine, as
// InlineWriter does for WRITEs: the reader reads and answers it before it
// reads the next request. A device should say true only for reads that are
// CPU work which never waits for a device (a small copy out of memory);
// meanwhile the connection's later requests wait for it.
type InlineReader interface {
	ReadsInline(n int) bool
}

// Receiver is implemented by devices whose writes can be received straight
// into their memory (raidd's RAID0, RAID5 and RAID6 of members held in
// memory): a large WRITE that the reader runs itself (InlineWriter) and
// streams (payload.go) then goes from the socket into the device's pages,
// without a copy from the server's buffer.
//
// ReceiveAt writes len(p) bytes at off. pre holds the payload's first
// bytes, which the server's read buffer had already received (at most
// len(p); the buffer's memory, valid during the call): the device copies
// them where they go. It asks for the rest of the payload through recv with
// the memory that the payload's next bytes go to (dsts, in order): recv
// places bytes there and returns how many it placed, at least atLeast (all
// of dsts if they hold fewer), waiting for them, and beyond that as many as
// have arrived, without waiting; fewer only with an error. ReceiveAt may
// call it again with the rest of its memory (each call continues the
// payload where the last one stopped), but not after an error, and work on
// the bytes placed between calls (a parity array computes the parity of
// each row whose data has arrived while the client sends the next).
// ReceiveAt returns the length of the prefix of the write it received and
// wrote, pre's bytes included (0 when it declines: then it must not call
// recv, and takes nothing of pre), and an error: recv's, as returned, or
// the device's, which fails the WRITE. p is the server's buffer of the
// write's length, whose content on the call is undefined: a device may name
// parts of it among dsts, receiving those bytes of the payload there and
// writing them from there itself (raidd's parity arrays receive a write's
// pieces of partial stripes so, for the stripe cache), but must not retain
// it. Stats.BytesReceived counts only the bytes placed outside p. The
// server writes whatever ReceiveAt did not (the rest of the payload) with
// WriteAt, so a device may stop at any point, for example where recv failed
// because dsts could not be written (a fault). The server has checked the
// range, and calls ReceiveAt only for writes it would otherwise pass to
// WriteAt without FUA.
type Receiver interface {
	ReceiveAt(p []byte, off int64, pre []byte, recv func(dsts [][]byte, atLeast int) (int, error)) (int, error)
}

// MultiConner reports whether NBD_FLAG_CAN_MULTI_CONN may be advertised: a
// FLUSH or FUA completed on one connection makes every write completed on any
// connection durable, and every connection sees the same data.
type MultiConner interface {
	CanMultiConn() bool
}

// Default block size constraints.
const (
	DefaultMinBlock       = 1
	DefaultPreferredBlock = 4096
	DefaultMaxBlock       = 32 << 20
	maxMinBlock           = 64 << 10
)

// caps holds the optional interfaces of one export's device, discovered once.
type caps struct {
	syncer     Syncer
	fuaWriter  FUAWriter
	discarder  Discarder
	zeroer     Zeroer
	fastZeroer FastZeroer
	fastZeroAt FastZeroerAt
	cacher     Cacher
	multiConn  MultiConner
	statuser   BlockStatuser
	inline     InlineWriter
	inlineAt   InlineWriterAt
	inlineRead InlineReader
	prefetcher Prefetcher
	receiver   Receiver
}

func discoverCaps(d Device) caps {
	var c caps
	c.syncer, _ = d.(Syncer)
	if c.syncer != nil {
		c.fuaWriter, _ = d.(FUAWriter)
	}
	c.discarder, _ = d.(Discarder)
	c.zeroer, _ = d.(Zeroer)
	if c.zeroer != nil {
		c.fastZeroer, _ = d.(FastZeroer)
		c.fastZeroAt, _ = d.(FastZeroerAt)
	}
	c.cacher, _ = d.(Cacher)
	c.multiConn, _ = d.(MultiConner)
	c.statuser, _ = d.(BlockStatuser)
	c.inline, _ = d.(InlineWriter)
	c.inlineAt, _ = d.(InlineWriterAt)
	c.inlineRead, _ = d.(InlineReader)
	c.prefetcher, _ = d.(Prefetcher)
	c.receiver, _ = d.(Receiver)
	return c
}

// rawBlockSizes returns the device's block sizes with zero fields defaulted.
func rawBlockSizes(d Device) (minB, pref, maxB uint32) {
	minB, pref, maxB = DefaultMinBlock, DefaultPreferredBlock, DefaultMaxBlock
	if bs, ok := d.(BlockSizer); ok {
		a, b, c := bs.BlockSizes()
		if a != 0 {
			minB = a
		}
		if b != 0 {
			pref = b
		}
		if c != 0 {
			maxB = c
		}
	}
	return minB, pref, maxB
}

func isPow2(v uint32) bool { return v != 0 && v&(v-1) == 0 }

// normalizeBlockSizes turns validated raw sizes into values that satisfy the
// protocol's constraints: min a power of two <= 64 KiB; max a multiple of min
// and <= maxPayload; preferred a power of two >= max(min, 512) and <= max
// whenever possible.
func normalizeBlockSizes(minB, pref, maxB uint32, maxPayload int64) (uint32, uint32, uint32) {
	if int64(maxB) > maxPayload {
		maxB = uint32(maxPayload)
	}
	maxB -= maxB % minB
	pref = min(pref, maxB)
	if !isPow2(pref) {
		pref = 1 << bits.Len32(pref) // next power of two; maxB <= 1 GiB so no overflow
	}
	if pref < 512 {
		pref = 512
	}
	if pref < minB {
		pref = minB
	}
	for pref > maxB && pref/2 >= max(minB, 512) {
		pref /= 2
	}
	return minB, pref, maxB
}
