package raid

// Filler computes the bytes of a member write (Op.WriteFill): Fill sets
// every byte of dst from src. dst may be the member's own memory, so Fill
// must not keep it. It may use op's Scratch entries (not Shards or List,
// which the Layout's call may hold), and must not queue or run member I/O.
type Filler interface {
	Fill(op *Op, dst []byte, src [][]byte)
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
	x.f.Fill(x.op, dst, src)
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
	if n > 0 && op.win == nil && op.v.repl[m] == nil && op.failed&(1<<uint(m)) == 0 && !op.Zero {
		if d, ok := op.v.devs[m].(memberFiller); ok {
			x := &op.fill
			x.op, x.f, x.abs, x.zero = op, f, op.v.dataOff+off, false
			done := d.FillAt(x.abs, n, x, src)
			x.op, x.f = nil, nil
			if done && !x.zero {
				op.touched |= 1 << uint(m)
				op.a.member.written[op.cause].Add(n)
				if op.cause == causeRebuild || op.cause == causeResync || op.cause == causeScrub {
					op.moved[m] += n
				}
				return
			}
			// Not done, or done with zero blocks Write would have
			// punched: write them the ordinary way (over what is there).
		}
	}
	b := op.Buf(n)
	f.Fill(op, b, src)
	op.Write(m, b, off)
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
