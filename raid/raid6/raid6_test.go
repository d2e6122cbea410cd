package raid6_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/raid6"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// gfMul multiplies in GF(2^8) modulo x^8+x^4+x^3+x^2+1 (0x11d), bit by
// bit: the test's own arithmetic, independent of reedsolomon's tables.
func gfMul(a, b byte) byte {
	var r byte
	for b != 0 {
		if b&1 != 0 {
			r ^= a
		}
		hi := a & 0x80
		a <<= 1
		if hi != 0 {
			a ^= 0x1d
		}
		b >>= 1
	}
	return r
}

// mdSyndrome computes P and Q the way md's generic raid6 gen_syndrome does
// (lib/raid6/int.uc): Horner's rule from the highest data slot down,
// wq = 2·wq ^ D_z, so data slot z ends up weighted by 2^z.
func mdSyndrome(data [][]byte) (p, q []byte) {
	n := len(data[0])
	p, q = make([]byte, n), make([]byte, n)
	for b := range n {
		z0 := len(data) - 1
		wp, wq := data[z0][b], data[z0][b]
		for z := z0 - 1; z >= 0; z-- {
			wp ^= data[z][b]
			wq = gfMul(wq, 2) ^ data[z][b]
		}
		p[b], q[b] = wp, wq
	}
	return p, q
}

func TestGFMulSelfCheck(t *testing.T) {
	assert.Equal(t, byte(0x1d), gfMul(0x80, 2), "x^8 reduces to 0x1d")
	assert.Equal(t, byte(0x9d), gfMul(0x80, 3))
	// 2 generates the whole multiplicative group under 0x11d.
	seen := map[byte]bool{}
	x := byte(1)
	for range 255 {
		seen[x] = true
		x = gfMul(x, 2)
	}
	assert.Len(t, seen, 255)
	assert.Equal(t, byte(1), x)
}

func TestMatrix(t *testing.T) {
	m := raid6.Matrix(10)
	require.Len(t, m, 2)
	x := byte(1)
	for i := range 10 {
		assert.Equal(t, byte(1), m[0][i], "P coefficient %d", i)
		assert.Equal(t, x, m[1][i], "Q coefficient %d = 2^%d", i, i)
		x = gfMul(x, 2)
	}
}

// rig is n memory members of rows chunk-sized rows, used through raid.NewOp.
type rig struct {
	t     *testing.T
	g     stripe.Geometry
	l     raid.Layout
	devs  []raid.Member
	mem   []*member.Memory
	model []byte
}

func newRig(t *testing.T, n int, chunk, rows int64) *rig {
	g, err := stripe.New(stripe.RAID6, n, chunk, rows*chunk)
	require.NoError(t, err)
	l, err := raid6.New(g)
	require.NoError(t, err)
	r := &rig{t: t, g: g, l: l, model: make([]byte, g.Size())}
	for range n {
		m := member.NewMemory(rows * chunk)
		r.mem = append(r.mem, m)
		r.devs = append(r.devs, m)
	}
	return r
}

// op returns an Op with the members in missing absent and those in
// unreadable present but not readable (being rebuilt).
func (r *rig) op(missing, unreadable uint64) *raid.Op {
	devs := append([]raid.Member(nil), r.devs...)
	for m := range devs {
		if missing&(1<<uint(m)) != 0 {
			devs[m] = nil
		}
	}
	op, err := raid.NewOp(r.g, raid.OpConfig{Members: devs, Unreadable: unreadable, Locked: true})
	require.NoError(r.t, err)
	return op
}

func (r *rig) write(missing, unreadable uint64, off int64, p []byte) {
	require.NoError(r.t, r.l.WriteAt(r.op(missing, unreadable), p, off), "write [%d,+%d) missing %b", off, len(p), missing)
	copy(r.model[off:], p)
}

func (r *rig) verify(missing uint64, what string) {
	p := make([]byte, r.g.Size())
	require.NoError(r.t, r.l.ReadAt(r.op(missing, 0), p, 0), what)
	if !bytes.Equal(p, r.model) {
		for i := range p {
			if p[i] != r.model[i] {
				r.t.Fatalf("%s: array byte %d differs (missing %b)", what, i, missing)
			}
		}
	}
}

func (r *rig) check(what string) {
	for row := range r.g.Rows() {
		require.NoError(r.t, r.l.Check(r.op(0, 0), row), "%s: row %d", what, row)
	}
}

func (r *rig) chunkOf(m int, row int64) []byte {
	b := make([]byte, r.g.Chunk())
	_, err := r.mem[m].ReadAt(b, row*r.g.Chunk())
	require.NoError(r.t, err)
	return b
}

// TestGoldenParity writes whole stripes and compares every row's P and Q
// member with md's syndrome computed by the test's own arithmetic, and
// pins two rows byte by byte.
func TestGoldenParity(t *testing.T) {
	for _, n := range []int{4, 5, 6, 9} {
		t.Run(fmt.Sprint("members=", n), func(t *testing.T) {
			const chunk = 4 << 10
			r := newRig(t, n, chunk, int64(n))
			p := make([]byte, r.g.Size())
			rand.New(rand.NewSource(int64(n))).Read(p)
			r.write(0, 0, 0, p)
			dk := n - 2
			for row := range r.g.Rows() {
				data := make([][]byte, dk)
				for i := range dk {
					off := (row*int64(dk) + int64(i)) * chunk
					data[i] = p[off : off+chunk]
					assert.Equal(t, data[i], r.chunkOf(r.g.DataMember(row, i), row), "row %d data %d", row, i)
				}
				wantP, wantQ := mdSyndrome(data)
				pm, qm := n-1-int(row)%n, (n-int(row)%n)%n // md: pd_idx, qd_idx
				assert.Equal(t, wantP, r.chunkOf(pm, row), "row %d P on member %d", row, pm)
				assert.Equal(t, wantQ, r.chunkOf(qm, row), "row %d Q on member %d", row, qm)
			}
			r.check("golden")
		})
	}
	// A hand-computed row: 4 members, row 0 (P on 3, Q on 0, data on 1, 2).
	// D0 = 0x80, D1 = 0x80: P = 0, Q = 0x80 ^ 2·0x80 = 0x80 ^ 0x1d = 0x9d.
	// D0 = 0x01, D1 = 0x53: P = 0x52, Q = 0x01 ^ 0xa6 = 0xa7.
	r := newRig(t, 4, 4<<10, 4)
	p := make([]byte, 8<<10)
	p[0], p[4<<10] = 0x80, 0x80
	p[1], p[4<<10+1] = 0x01, 0x53
	r.write(0, 0, 0, p)
	assert.Equal(t, []byte{0x00, 0x52, 0}, r.chunkOf(3, 0)[:3], "P")
	assert.Equal(t, []byte{0x9d, 0xa7, 0}, r.chunkOf(0, 0)[:3], "Q")
}

// pairKinds names what a pair of members holds in a row.
func pairKind(g stripe.Geometry, row int64, a, b int) string {
	role := func(m int) string {
		switch m {
		case g.ParityMember(row):
			return "P"
		case g.QMember(row):
			return "Q"
		}
		return "data"
	}
	ra, rb := role(a), role(b)
	if ra == "data" || (ra == "Q" && rb == "P") {
		ra, rb = rb, ra
	}
	if ra == "data" {
		return "data+data"
	}
	if rb == "data" {
		return "data+" + ra
	}
	return "P+Q"
}

// TestDegradedPairs takes every pair of members (and every single member)
// away and checks degraded reads, degraded writes of every shape, a
// two-member (or one-member) rebuild, writes while the members are being
// rebuilt, and finally a healthy read and a check of P and Q. Over the
// pairs and rows every combination occurs: data+data, data+P, data+Q, P+Q.
func TestDegradedPairs(t *testing.T) {
	kinds := map[string]bool{}
	for _, n := range []int{4, 5, 6} {
		for a := 0; a < n; a++ {
			for b := a; b < n; b++ {
				name := fmt.Sprintf("members=%d/missing=%d,%d", n, a, b)
				if a == b {
					name = fmt.Sprintf("members=%d/missing=%d", n, a)
				}
				missing := uint64(1)<<uint(a) | uint64(1)<<uint(b)
				t.Run(name, func(t *testing.T) {
					const chunk = 4 << 10
					rows := int64(n)
					r := newRig(t, n, chunk, rows)
					for row := range rows {
						if a != b {
							kinds[pairKind(r.g, row, a, b)] = true
						}
					}
					rng := rand.New(rand.NewSource(int64(n*100 + a*10 + b)))
					fill := func(k int64) []byte { p := make([]byte, k); rng.Read(p); return p }
					size, width := r.g.Size(), r.g.StripeWidth()
					r.write(0, 0, 0, fill(size))
					r.verify(missing, "degraded read")
					// Degraded writes: full stripes, whole chunks, pieces
					// inside one chunk, spans across chunks and rows.
					r.write(missing, 0, width, fill(width))
					for k := int64(0); k < int64(n-2); k++ {
						r.write(missing, 0, 2*width+k*chunk, fill(chunk))
					}
					for range 12 {
						off := rng.Int63n(size - 1)
						r.write(missing, 0, off, fill(1+rng.Int63n(min(size-off, 2*width))))
					}
					r.verify(missing, "degraded read after degraded writes")
					// Discard of whole and partial rows while degraded.
					require.NoError(t, r.l.Discard(r.op(missing, 0), width-100, width+200))
					clear(r.model[width-100 : 2*width+100])
					r.verify(missing, "after degraded discard")
					// Rebuild both members row by row. Writes land meanwhile
					// on the members being rebuilt, before and after the
					// rebuild front.
					for row := range rows {
						r.write(0, missing, rng.Int63n(size-chunk), fill(chunk))
						for _, m := range []int{a, b}[:min(2, b-a+1)] {
							require.NoError(t, r.l.Rebuild(r.op(0, missing), row, m), "rebuild row %d member %d", row, m)
						}
					}
					r.verify(0, "healthy read after rebuild")
					r.check("after rebuild")
					// And the rebuilt members alone serve reads with two others gone.
					for m := 0; m < n; m++ {
						o := (m + 1) % n
						if m != a && m != b && o != a && o != b {
							r.verify(1<<uint(m)|1<<uint(o), "rebuilt members serve")
							break
						}
					}
				})
			}
		}
	}
	for _, k := range []string{"data+data", "data+P", "data+Q", "P+Q"} {
		assert.True(t, kinds[k], "combination %s never tested", k)
	}
}

// TestThreeMissing: a third missing member is reported, not papered over.
func TestThreeMissing(t *testing.T) {
	r := newRig(t, 5, 4<<10, 5)
	p := make([]byte, r.g.Size())
	require.ErrorIs(t, r.l.ReadAt(r.op(0b111, 0), p, 0), raid.ErrTooManyFailures)
	require.ErrorIs(t, r.l.WriteAt(r.op(0b111, 0), p[:100], 0), raid.ErrTooManyFailures)
	require.ErrorIs(t, r.l.Rebuild(r.op(0b011, 0b100), 0, 2), raid.ErrTooManyFailures)
}

// TestCheckFindsEveryParityFlip: Check catches a flipped byte of data, P
// or Q, also with one member missing, and calls a row with two missing
// unverifiable.
func TestCheckFindsEveryParityFlip(t *testing.T) {
	const chunk = 4 << 10
	r := newRig(t, 5, chunk, 5)
	p := make([]byte, r.g.Size())
	rand.New(rand.NewSource(5)).Read(p)
	r.write(0, 0, 0, p)
	r.check("fresh")
	const row = 2
	targets := map[string]int{"P": r.g.ParityMember(row), "Q": r.g.QMember(row), "data": r.g.DataMember(row, 1)}
	for what, m := range targets {
		off := int64(row)*chunk + 77
		b := make([]byte, 1)
		_, err := r.mem[m].ReadAt(b, off)
		require.NoError(t, err)
		b[0] ^= 0x10
		_, err = r.mem[m].WriteAt(b, off)
		require.NoError(t, err)
		require.ErrorIs(t, r.l.Check(r.op(0, 0), row), raid.ErrInconsistent, "flip in %s", what)
		// One other member missing: still verified.
		other := r.g.DataMember(row, 0)
		require.ErrorIs(t, r.l.Check(r.op(1<<uint(other), 0), row), raid.ErrInconsistent, "flip in %s, one missing", what)
		require.ErrorIs(t, r.l.Check(r.op(1<<uint(other)|1<<uint(r.g.DataMember(row, 2)), 0), row), raid.ErrUnverifiable)
		// Resync repairs a flip in P or Q.
		if what != "data" {
			require.NoError(t, r.l.Resync(r.op(0, 0), row))
			require.NoError(t, r.l.Check(r.op(0, 0), row), "resync repaired %s", what)
		} else {
			b[0] ^= 0x10
			_, err = r.mem[m].WriteAt(b, off)
			require.NoError(t, err)
		}
	}
	r.check("repaired")
}

type keep struct{ raid.Member }

func (keep) Close() error { return nil }

// TestWritePlans pins the per-row plan choice on a healthy 7-member array
// (5 data chunks per row) by counting member I/O.
func TestWritePlans(t *testing.T) {
	const chunk = 64 << 10
	const n = 7
	const width = (n - 2) * chunk
	tests := []struct {
		name          string
		off, n        int64
		reads, writes int64
		readBytes     int64
		records       int64 // journal record writes
	}{
		{"full-stripe-no-reads", 0, width, 0, n, 0, 0},
		{"two-full-stripes", width, 2 * width, 0, 2 * n, 0, 0},
		{"4K-rmw", 4096, 4096, 3, 3, 3 * 4096, 2},                    // old data, P, Q (RCW would read 4)
		{"two-chunks-rcw", 0, 2 * chunk, 3, 4, 3 * chunk, 2},         // the 3 others (RMW would read 4)
		{"four-chunks-rcw", chunk, 4 * chunk, 1, 6, chunk, 2},        // the 1 other
		{"piece-rmw", chunk - 4096, 8192, 4, 4, 2*4096 + 2*chunk, 2}, // two data pieces, P and Q over the union of both // two data pieces + P and Q over both
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fs []*membertest.Faulty
			var devs []raid.Device
			for i := range n {
				f := membertest.Inject(member.NewMemory(superblock.HeaderSize+raid.JournalLength(n, chunk)+16*chunk), membertest.Never())
				fs = append(fs, f)
				devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: keep{f}})
			}
			a, err := raid.Create(devs, raid.CreateOptions{Name: "plan", Level: stripe.RAID6, Chunk: chunk, BitmapRegion: -1}, raid.Options{CleanDelay: -1, KeepZeroes: true})
			require.NoError(t, err)
			defer a.Close()
			_, err = a.WriteAt(make([]byte, 1), 15*width)
			require.NoError(t, err)
			for _, f := range fs {
				f.ResetStats()
			}
			_, err = a.WriteAt(make([]byte, tt.n), tt.off)
			require.NoError(t, err)
			var reads, writes, readBytes int64
			for _, f := range fs {
				s := f.Stats()
				reads += s.Reads
				writes += s.Writes
				readBytes += s.BytesRead
			}
			assert.Equal(t, tt.reads, reads, "member reads")
			assert.Equal(t, tt.readBytes, readBytes, "member bytes read")
			// A partial row also writes its write-hole journal record to
			// each parity member's log (one write each).
			assert.Equal(t, tt.writes+tt.records, writes, "member writes")
			res, err := a.Check()
			require.NoError(t, err)
			require.True(t, res.Consistent(), "%s", res)
		})
	}
}
