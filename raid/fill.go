package raid

// Filler computes the bytes of a member write (Op.WriteFill): Fill sets
// every byte of dst from src. dst may be the member's own memory, so Fill
// must not keep it. It may use op's Scratch entries (not Shards or List,
// which the Layout's call may hold), and must not queue or run member I/O.
type Filler interface {
	Fill(op *Op, dst []byte, src [][]byte)
}

// StreamFiller is a Filler that can also compute its bytes with
// non-temporal stores (FillStream), which write memory without reading
// its lines into the cache first and leave none there: WriteFill uses it
// for bytes that go straight into a member's memory, where nothing reads
// them soon (internal/ntcopy). A Filler whose destination lines are in the
// cache already (parity over bytes just read) should not be one.
type StreamFiller interface {
	Filler
	FillStream(op *Op, dst []byte, src [][]byte)
}

// memberFiller is a member that lets a write's bytes be computed straight
// into its memory (internal/member: File.FillAt on a mapped file held in
// memory, Memory.FillAt). FillAt reports false when it could not, having
// perhaps run Fill in part: the bytes must then be written the ordinary
// way.
type memberFiller interface {
	FillAt(off, n int64, f interface {
		Fill(dst []byte, src [][]byte)
	}, src [][]byte) bool
}

// opFill hands a Layout's Filler to a member's FillAt (one per Op, so
// that WriteFill does not allocate). zero records that the bytes hold an
// aligned all-zero block, which Write would have discarded instead.
type opFill struct {
	op   *Op
	f    Filler
	abs  int64 // the member offset of dst
	zero bool
}

func (x *opFill) Fill(dst []byte, src [][]byte) {
	if sf, ok := x.f.(StreamFiller); ok {
		sf.FillStream(x.op, dst, src)
	} else {
		x.f.Fill(x.op, dst, src)
	}
	x.zero = x.op.elides(len(dst)) && hasZeroBlock(dst, x.abs)
}

// WriteFill writes to member m, at data-region offset off, the n bytes f
// computes from src. Where the member lets it (a member held in memory
// and mapped), f computes them straight into the member: that saves the
// buffer and the copy of the bytes into the member that Write would make
// (a RAID5 full-stripe write's parity, a third of the data on 4 members).
// Such a write happens now, not at the next Run, and no other write of
// the op is ordered before it: a Layout uses WriteFill only where the
// row's writes need no order (no write-hole record must precede them).
// Otherwise (the member cannot; the write must also reach a replacement,
// go through a background job's window, or would elide zero blocks; the
// op writes zeroes) f computes them into a Buf that is queued with Write.
// Either way the member reads back exactly those bytes afterwards, and
// the write is counted and marks m touched as Write's.
func (op *Op) WriteFill(m int, off, n int64, f Filler, src [][]byte) {
	if op.fillNow(m, off, n, f, src) {
		return
	}
	b := op.Buf(n)
	f.Fill(op, b, src)
	op.Write(m, b, off)
}

// WriteHot writes p to member m at data-region offset off, where the op
// has just read the bytes it overwrites (a read-modify-write's data and
// parity), so that their lines are in the cache: into a member held in
// memory it is a plain copy, now, as WriteFill's (and ordered as that
// is: after the row's record). A Write into such a member copies with
// non-temporal stores where it is large enough (internal/ntcopy), which
// suits lines out of the cache but would evict these. Elsewhere it is
// Write.
func (op *Op) WriteHot(m int, p []byte, off int64) {
	src := op.hot[:]
	src[0] = p
	done := op.fillNow(m, off, int64(len(p)), copyFill{}, src)
	src[0] = nil
	if !done {
		op.Write(m, p, off)
	}
}

// copyFill is WriteHot's Filler: dst is a copy of src[0].
type copyFill struct{}

func (copyFill) Fill(_ *Op, dst []byte, src [][]byte) { copy(dst, src[0]) }

// fillNow has f compute the n bytes at off straight into member m (see
// WriteFill) and reports whether that wrote them. On false the caller
// must write them the ordinary way: f may have run, in part or whole.
func (op *Op) fillNow(m int, off, n int64, f Filler, src [][]byte) bool {
	if n <= 0 || op.win != nil || op.v.repl[m] != nil || op.failed&(1<<uint(m)) != 0 || op.Zero {
		return false
	}
	d, ok := op.v.devs[m].(memberFiller)
	if !ok {
		return false
	}
	x := &op.fill
	x.op, x.f, x.abs, x.zero = op, f, op.v.dataOff+off, false
	done := d.FillAt(x.abs, n, x, src)
	x.op, x.f = nil, nil
	if !done || x.zero {
		// Not done, or done with zero blocks Write would have punched:
		// the caller writes them the ordinary way (over what is there).
		return false
	}
	op.touched |= 1 << uint(m)
	op.a.member.written[op.cause].Add(n)
	if op.cause == causeRebuild || op.cause == causeResync || op.cause == causeScrub {
		op.moved[m] += n
	}
	return true
}

// elides reports whether Write would look for all-zero blocks to discard
// in a write of n bytes.
func (op *Op) elides(n int) bool {
	return !op.noElide && op.a.zeroElide && n >= elideMin
}

// hasZeroBlock reports whether p, to be written at member offset abs,
// holds an all-zero elideMin block aligned on the member (one that Write
// would discard).
func hasZeroBlock(p []byte, abs int64) bool {
	head := int((elideMin - abs%elideMin) % elideMin)
	for b := head; b+elideMin <= len(p); b += elideMin {
		if isZero(p[b : b+elideMin]) {
			return true
		}
	}
	return false
}
