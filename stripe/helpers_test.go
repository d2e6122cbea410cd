package stripe_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/stripe"
)

const (
	kib = int64(1) << 10
	mib = int64(1) << 20
)

var allLevels = []stripe.Level{stripe.RAID0, stripe.RAID1, stripe.RAID5, stripe.RAID10}

// sizeName formats a byte count the way sub-test names carry it: 4K, 64K, 1M.
func sizeName(b int64) string {
	if b >= mib && b%mib == 0 {
		return fmt.Sprintf("%dM", b/mib)
	}
	if b%kib == 0 {
		return fmt.Sprintf("%dK", b/kib)
	}
	return fmt.Sprintf("%dB", b)
}

// geo is one geometry under test, without its member size.
type geo struct {
	level   stripe.Level
	members int
	chunk   int64
}

func (c geo) String() string {
	return fmt.Sprintf("%s/chunk=%s/members=%d", c.level, sizeName(c.chunk), c.members)
}

// build builds the geometry with rows whole chunks per member plus a partial
// chunk that New must round away.
func (c geo) build(t testing.TB, rows int64) stripe.Geometry {
	t.Helper()
	g, err := stripe.New(c.level, c.members, c.chunk, rows*c.chunk+c.chunk/2)
	require.NoError(t, err)
	require.Equal(t, rows, g.Rows())
	return g
}

// geometries is every level × chunk 4K/64K/1M × members 2..6 valid for the level.
func geometries() []geo {
	var out []geo
	for _, l := range allLevels {
		for _, chunk := range []int64{4 * kib, 64 * kib, mib} {
			for n := l.MinMembers(); n <= 6; n++ {
				out = append(out, geo{level: l, members: n, chunk: chunk})
			}
		}
	}
	return out
}

func isMirror(l stripe.Level) bool { return l == stripe.RAID1 || l == stripe.RAID10 }

// copiesPerByte is how many member locations hold each array byte.
func copiesPerByte(g stripe.Geometry) int {
	switch g.Level() {
	case stripe.RAID1:
		return g.Members()
	case stripe.RAID10:
		return stripe.Copies
	}
	return 1
}

// lazy defers formatting of an assertion message until it fails.
type lazy func() string

func (f lazy) String() string { return f() }

// checkExtents asserts every documented property of g.Extents(off, n): the
// extents tile [off, off+n) in order, each is a maximal piece of one chunk
// inside the member data region, Locate maps both ends back (for every
// copy), the Stripe field agrees with StripeOf/StripeRange, and RowStripes of
// every copy's row covers the stripe. It reuses and returns ext.
func checkExtents(t *testing.T, g stripe.Geometry, off, n int64, ext []stripe.Extent) []stripe.Extent {
	t.Helper()
	ext = g.Extents(ext[:0], off, n)
	chunk := g.Chunk()
	wantLen := (off+n-1)/chunk - off/chunk + 1
	require.Len(t, ext, int(wantLen), "%v: Extents(%d, %d)", g, off, n)

	first, last := g.StripeRange(off, n)
	assert.Equal(t, first, ext[0].Stripe, "%v: StripeRange(%d, %d) first", g, off, n)
	assert.Equal(t, last, ext[len(ext)-1].Stripe, "%v: StripeRange(%d, %d) last", g, off, n)

	// RowRange is the tightest row range holding every copy of the bytes.
	rowLo, rowHi := g.RowRange(off, n)
	minRow, maxRow := int64(1)<<62, int64(-1)
	for _, e := range ext {
		rows := []int64{e.Row}
		if isMirror(g.Level()) {
			rows = rows[:0]
			for _, l := range g.Copies(nil, e.Chunk, e.Off%chunk) {
				rows = append(rows, l.Off/chunk)
			}
		}
		for _, r := range rows {
			minRow, maxRow = min(minRow, r), max(maxRow, r)
		}
	}
	assert.Equal(t, minRow, rowLo, "%v: RowRange(%d, %d) first", g, off, n)
	assert.Equal(t, maxRow, rowHi, "%v: RowRange(%d, %d) last", g, off, n)

	var locs []stripe.Loc
	var sum int64
	for i, e := range ext {
		ctx := lazy(func() string { return fmt.Sprintf("%v: Extents(%d, %d)[%d] = %+v", g, off, n, i, e) })
		p := off + e.BufOff // array offset of the extent's first byte
		in := p % chunk
		ok := assert.Equal(t, sum, e.BufOff, "BufOff not contiguous: %s", ctx) &&
			assert.Positive(t, e.Len, "%s", ctx) &&
			assert.Equal(t, p/chunk, e.Chunk, "chunk index: %s", ctx) &&
			assert.LessOrEqual(t, in+e.Len, chunk, "crosses a chunk: %s", ctx) &&
			// Maximal: only the first may start, and only the last may end, inside a chunk.
			assert.True(t, i == 0 || in == 0, "interior extent not chunk-aligned: %s", ctx) &&
			assert.True(t, i == len(ext)-1 || in+e.Len == chunk, "interior extent short: %s", ctx) &&
			assert.True(t, e.Member >= 0 && e.Member < g.Members(), "member out of range: %s", ctx) &&
			assert.True(t, e.Off >= 0 && e.Off+e.Len <= g.MemberSize(), "outside MemberSize %d: %s", g.MemberSize(), ctx) &&
			assert.Equal(t, in, e.Off%chunk, "chunk-relative offset differs: %s", ctx) &&
			assert.Equal(t, e.Off/chunk, e.Row, "Row is not the member row: %s", ctx) &&
			assert.Equal(t, g.StripeOf(p), e.Stripe, "Stripe vs StripeOf(first byte): %s", ctx) &&
			assert.Equal(t, g.StripeOf(p+e.Len-1), e.Stripe, "Stripe vs StripeOf(last byte): %s", ctx) &&
			assert.True(t, e.Stripe >= 0 && e.Stripe < g.Stripes(), "stripe out of range: %s", ctx)
		if !ok {
			return ext
		}
		sum += e.Len

		// The primary location and, for mirrors, every copy Locate back.
		locs = append(locs[:0], e.Loc)
		if isMirror(g.Level()) {
			locs = g.Copies(locs[:0], e.Chunk, in)
			require.Len(t, locs, copiesPerByte(g), "%s", ctx)
			assert.Equal(t, e.Loc, locs[0], "Extent.Loc is not the first copy: %s", ctx)
			assert.Equal(t, 0, e.Index, "%s", ctx)
			seen := map[int]bool{}
			for _, l := range locs {
				assert.False(t, seen[l.Member], "two copies on member %d: %s", l.Member, ctx)
				seen[l.Member] = true
			}
		} else {
			assert.Equal(t, e.Member, g.DataMember(e.Row, e.Index), "DataMember: %s", ctx)
			assert.Equal(t, e.Index, g.DataIndex(e.Row, e.Member), "DataIndex: %s", ctx)
			if g.Level() == stripe.RAID5 {
				assert.NotEqual(t, g.ParityMember(e.Row), e.Member, "data on the parity member: %s", ctx)
			}
		}
		for _, l := range locs {
			if !assert.True(t, l.Off >= 0 && l.Off+e.Len <= g.MemberSize(), "copy %+v outside MemberSize: %s", l, ctx) {
				return ext
			}
			a, role := g.Locate(l.Member, l.Off)
			assert.Equal(t, stripe.RoleData, role, "Locate(%+v) role: %s", l, ctx)
			assert.Equal(t, p, a, "Locate(%+v) first byte: %s", l, ctx)
			a, role = g.Locate(l.Member, l.Off+e.Len-1)
			assert.Equal(t, stripe.RoleData, role, "Locate(%+v) last-byte role: %s", l, ctx)
			assert.Equal(t, p+e.Len-1, a, "Locate(%+v) last byte: %s", l, ctx)
			rf, rl := g.RowStripes(l.Off / chunk)
			assert.True(t, rf <= e.Stripe && e.Stripe <= rl,
				"RowStripes(%d) = [%d, %d] misses stripe of copy %+v: %s", l.Off/chunk, rf, rl, l, ctx)
		}
	}
	assert.Equal(t, n, sum, "%v: Extents(%d, %d) lengths", g, off, n)
	return ext
}
