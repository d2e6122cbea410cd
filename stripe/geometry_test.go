package stripe_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/stripe"
)

// The layout tables below are written out by hand from md's definitions, not
// computed with the formulas under test.

func TestRAID5LeftSymmetric(t *testing.T) {
	tests := []struct {
		members int
		parity  []int   // parity member of rows 0, 1, ...
		data    [][]int // data member of chunk i of each row
	}{
		{
			members: 3,
			parity:  []int{2, 1, 0, 2, 1, 0},
			data:    [][]int{{0, 1}, {2, 0}, {1, 2}, {0, 1}, {2, 0}, {1, 2}},
		},
		{
			members: 4,
			parity:  []int{3, 2, 1, 0, 3, 2, 1, 0},
			data: [][]int{
				{0, 1, 2}, {3, 0, 1}, {2, 3, 0}, {1, 2, 3},
				{0, 1, 2}, {3, 0, 1}, {2, 3, 0}, {1, 2, 3},
			},
		},
	}
	for _, tc := range tests {
		for _, chunk := range []int64{4 * kib, 64 * kib} {
			c := geo{level: stripe.RAID5, members: tc.members, chunk: chunk}
			t.Run(c.String(), func(t *testing.T) {
				rows := int64(len(tc.parity))
				g := c.build(t, rows)
				dataPerRow := int64(tc.members - 1)
				require.Equal(t, tc.members-1, g.DataMembers())
				const in = 7 // a byte inside the chunk, not its first
				for r := range rows {
					p := tc.parity[r]
					assert.Equal(t, p, g.ParityMember(r), "row %d parity member", r)
					assert.Equal(t, -1, g.DataIndex(r, p), "row %d DataIndex(parity)", r)
					a, role := g.Locate(p, r*chunk+in)
					assert.Equal(t, stripe.RoleParity, role, "row %d Locate(parity)", r)
					assert.Equal(t, r*dataPerRow*chunk+in, a, "row %d Locate(parity) offset", r)
					for i, m := range tc.data[r] {
						cidx := r*dataPerRow + int64(i)
						assert.Equal(t, m, g.DataMember(r, i), "row %d DataMember(%d)", r, i)
						assert.Equal(t, i, g.DataIndex(r, m), "row %d DataIndex(%d)", r, m)
						want := stripe.Extent{
							Chunk: cidx, Stripe: r, Row: r, Index: i,
							Loc: stripe.Loc{Member: m, Off: r*chunk + in},
							Len: 1,
						}
						assert.Equal(t, []stripe.Extent{want}, g.Extents(nil, cidx*chunk+in, 1), "chunk %d", cidx)
						a, role := g.Locate(m, r*chunk+in)
						assert.Equal(t, stripe.RoleData, role, "Locate(%d, row %d)", m, r)
						assert.Equal(t, cidx*chunk+in, a, "Locate(%d, row %d)", m, r)
					}
				}
			})
		}
	}
}

// TestRAID6LeftSymmetric pins md's ALGORITHM_LEFT_SYMMETRIC for level 6
// (raid5_compute_sector: pd_idx = n-1 - stripe%n, qd_idx = pd_idx+1 mod n,
// dd_idx = pd_idx+2+i mod n), written out by hand.
func TestRAID6LeftSymmetric(t *testing.T) {
	tests := []struct {
		members int
		p, q    []int   // P and Q member of rows 0, 1, ...
		data    [][]int // data member of chunk i of each row
	}{
		{
			members: 4,
			p:       []int{3, 2, 1, 0, 3},
			q:       []int{0, 3, 2, 1, 0},
			data:    [][]int{{1, 2}, {0, 1}, {3, 0}, {2, 3}, {1, 2}},
		},
		{
			members: 5,
			p:       []int{4, 3, 2, 1, 0, 4},
			q:       []int{0, 4, 3, 2, 1, 0},
			data:    [][]int{{1, 2, 3}, {0, 1, 2}, {4, 0, 1}, {3, 4, 0}, {2, 3, 4}, {1, 2, 3}},
		},
	}
	for _, tc := range tests {
		for _, chunk := range []int64{4 * kib, 64 * kib} {
			c := geo{level: stripe.RAID6, members: tc.members, chunk: chunk}
			t.Run(c.String(), func(t *testing.T) {
				rows := int64(len(tc.p))
				g := c.build(t, rows)
				dataPerRow := int64(tc.members - 2)
				require.Equal(t, tc.members-2, g.DataMembers())
				require.Equal(t, 2, g.Tolerance())
				const in = 9
				for r := range rows {
					for _, pm := range []int{tc.p[r], tc.q[r]} {
						assert.Equal(t, -1, g.DataIndex(r, pm), "row %d DataIndex(parity %d)", r, pm)
						a, role := g.Locate(pm, r*chunk+in)
						assert.Equal(t, stripe.RoleParity, role, "row %d Locate(parity %d)", r, pm)
						assert.Equal(t, r*dataPerRow*chunk+in, a)
					}
					assert.Equal(t, tc.p[r], g.ParityMember(r), "row %d P", r)
					assert.Equal(t, tc.q[r], g.QMember(r), "row %d Q", r)
					for i, m := range tc.data[r] {
						cidx := r*dataPerRow + int64(i)
						assert.Equal(t, m, g.DataMember(r, i), "row %d DataMember(%d)", r, i)
						assert.Equal(t, i, g.DataIndex(r, m), "row %d DataIndex(%d)", r, m)
						e := g.Extents(nil, cidx*chunk+in, 1)
						require.Len(t, e, 1)
						assert.Equal(t, stripe.Loc{Member: m, Off: r*chunk + in}, e[0].Loc)
						assert.Equal(t, i, e[0].Index)
						a, role := g.Locate(m, r*chunk+in)
						assert.Equal(t, stripe.RoleData, role)
						assert.Equal(t, cidx*chunk+in, a)
					}
				}
				assert.True(t, g.Survives(0b0011), "any two missing")
				assert.True(t, g.Survives(1<<uint(tc.members-1)|1))
				assert.False(t, g.Survives(0b0111), "three missing")
			})
		}
	}
	g, err := stripe.New(stripe.RAID5, 4, 4*kib, mib)
	require.NoError(t, err)
	assert.Equal(t, -1, g.QMember(0), "RAID5 has no Q")
}

func TestRAID10Near2(t *testing.T) {
	type ml struct{ member, row int64 }
	tests := []struct {
		members int
		copies  [][2]ml // both copies of chunks 0, 1, ...
	}{
		{2, [][2]ml{{{0, 0}, {1, 0}}, {{0, 1}, {1, 1}}, {{0, 2}, {1, 2}}, {{0, 3}, {1, 3}}}},
		{3, [][2]ml{
			{{0, 0}, {1, 0}}, {{2, 0}, {0, 1}}, {{1, 1}, {2, 1}},
			{{0, 2}, {1, 2}}, {{2, 2}, {0, 3}}, {{1, 3}, {2, 3}},
		}},
		{4, [][2]ml{{{0, 0}, {1, 0}}, {{2, 0}, {3, 0}}, {{0, 1}, {1, 1}}, {{2, 1}, {3, 1}}}},
		{5, [][2]ml{
			{{0, 0}, {1, 0}}, {{2, 0}, {3, 0}}, {{4, 0}, {0, 1}},
			{{1, 1}, {2, 1}}, {{3, 1}, {4, 1}},
		}},
	}
	for _, tc := range tests {
		for _, chunk := range []int64{4 * kib, 64 * kib} {
			c := geo{level: stripe.RAID10, members: tc.members, chunk: chunk}
			t.Run(c.String(), func(t *testing.T) {
				rows := tc.copies[len(tc.copies)-1][1].row + 1
				g := c.build(t, rows)
				require.Equal(t, int64(len(tc.copies)), g.Size()/chunk, "chunks in %d rows", rows)
				const in = 100
				for ci, cp := range tc.copies {
					cidx := int64(ci)
					want := []stripe.Loc{
						{Member: int(cp[0].member), Off: cp[0].row*chunk + in},
						{Member: int(cp[1].member), Off: cp[1].row*chunk + in},
					}
					assert.Equal(t, want, g.Copies(nil, cidx, in), "Copies(chunk %d)", ci)
					wantExt := stripe.Extent{
						Chunk: cidx, Stripe: cidx, Row: cp[0].row,
						Loc: want[0], Len: 1,
					}
					assert.Equal(t, []stripe.Extent{wantExt}, g.Extents(nil, cidx*chunk+in, 1), "Extents(chunk %d)", ci)
					for k, l := range want {
						a, role := g.Locate(l.Member, l.Off)
						assert.Equal(t, stripe.RoleData, role, "Locate copy %d of chunk %d", k, ci)
						assert.Equal(t, cidx*chunk+in, a, "Locate copy %d of chunk %d", k, ci)
					}
				}
			})
		}
	}
}

func TestRAID10OddRowStripes(t *testing.T) {
	// members=3: row r holds slots 3r..3r+2, i.e. chunks (3r)/2 .. (3r+2)/2.
	tests := []struct {
		rows int64
		want [][2]int64 // RowStripes of rows 0, 1, ...
	}{
		{4, [][2]int64{{0, 1}, {1, 2}, {3, 4}, {4, 5}}},
		// 9 slots hold 4 chunks; slot 8 (member 2, row 2) is unused, so
		// row 2 holds only chunk 3.
		{3, [][2]int64{{0, 1}, {1, 2}, {3, 3}}},
	}
	for _, tc := range tests {
		c := geo{level: stripe.RAID10, members: 3, chunk: 64 * kib}
		t.Run(fmt.Sprintf("%v/rows=%d", c, tc.rows), func(t *testing.T) {
			g := c.build(t, tc.rows)
			for r, w := range tc.want {
				f, l := g.RowStripes(int64(r))
				assert.Equal(t, w, [2]int64{f, l}, "RowStripes(%d)", r)
			}
		})
	}
	t.Run("raid10/chunk=64K/members=3/rows=3/unused", func(t *testing.T) {
		c := geo{level: stripe.RAID10, members: 3, chunk: 64 * kib}
		g := c.build(t, 3)
		_, role := g.Locate(2, 2*c.chunk)
		assert.Equal(t, stripe.RoleUnused, role, "last slot of an odd RAID10")
		_, role = g.Locate(1, 3*c.chunk-1)
		assert.Equal(t, stripe.RoleData, role, "second-to-last slot holds chunk 3")
	})
}

func TestRAID0(t *testing.T) {
	type ml struct {
		member int
		row    int64
	}
	tests := []struct {
		members int
		chunks  []ml
	}{
		{2, []ml{{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}}},
		{3, []ml{{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}, {0, 2}}},
	}
	for _, tc := range tests {
		c := geo{level: stripe.RAID0, members: tc.members, chunk: 4 * kib}
		t.Run(c.String(), func(t *testing.T) {
			g := c.build(t, 3)
			const in = 5
			for ci, w := range tc.chunks {
				cidx := int64(ci)
				want := stripe.Extent{
					Chunk: cidx, Stripe: w.row, Row: w.row, Index: w.member,
					Loc: stripe.Loc{Member: w.member, Off: w.row*c.chunk + in}, Len: 1,
				}
				assert.Equal(t, []stripe.Extent{want}, g.Extents(nil, cidx*c.chunk+in, 1), "chunk %d", ci)
				a, role := g.Locate(w.member, w.row*c.chunk+in)
				assert.Equal(t, stripe.RoleData, role)
				assert.Equal(t, cidx*c.chunk+in, a, "Locate of chunk %d", ci)
			}
			assert.Equal(t, -1, g.ParityMember(0))
		})
	}
}

func TestRAID1(t *testing.T) {
	c := geo{level: stripe.RAID1, members: 3, chunk: 4 * kib}
	t.Run(c.String(), func(t *testing.T) {
		g := c.build(t, 4)
		chunk := c.chunk
		want := []stripe.Extent{
			{Chunk: 0, Stripe: 0, Row: 0, Loc: stripe.Loc{Member: 0, Off: chunk - 10}, Len: 10, BufOff: 0},
			{Chunk: 1, Stripe: 1, Row: 1, Loc: stripe.Loc{Member: 0, Off: chunk}, Len: 10, BufOff: 10},
		}
		assert.Equal(t, want, g.Extents(nil, chunk-10, 20))
		assert.Equal(t, []stripe.Loc{{0, chunk + 5}, {1, chunk + 5}, {2, chunk + 5}}, g.Copies(nil, 1, 5))
		for m := range 3 {
			a, role := g.Locate(m, 3*chunk+1)
			assert.Equal(t, stripe.RoleData, role)
			assert.Equal(t, 3*chunk+1, a, "member %d", m)
		}
		f, l := g.RowStripes(2)
		assert.Equal(t, [2]int64{2, 2}, [2]int64{f, l})
	})
}

// TestExtentsExact pins whole Extents results that cross rows.
func TestExtentsExact(t *testing.T) {
	const chunk = 4 * kib
	tests := []struct {
		geo
		off, n int64
		want   []stripe.Extent
	}{
		{
			geo: geo{stripe.RAID5, 4, chunk}, off: 2*chunk + 100, n: 3 * chunk,
			want: []stripe.Extent{
				{Chunk: 2, Stripe: 0, Row: 0, Index: 2, Loc: stripe.Loc{Member: 2, Off: 100}, Len: chunk - 100, BufOff: 0},
				{Chunk: 3, Stripe: 1, Row: 1, Index: 0, Loc: stripe.Loc{Member: 3, Off: chunk}, Len: chunk, BufOff: chunk - 100},
				{Chunk: 4, Stripe: 1, Row: 1, Index: 1, Loc: stripe.Loc{Member: 0, Off: chunk}, Len: chunk, BufOff: 2*chunk - 100},
				{Chunk: 5, Stripe: 1, Row: 1, Index: 2, Loc: stripe.Loc{Member: 1, Off: chunk}, Len: 100, BufOff: 3*chunk - 100},
			},
		},
		{
			geo: geo{stripe.RAID10, 3, chunk}, off: chunk / 2, n: 2 * chunk,
			want: []stripe.Extent{
				{Chunk: 0, Stripe: 0, Row: 0, Loc: stripe.Loc{Member: 0, Off: chunk / 2}, Len: chunk / 2, BufOff: 0},
				{Chunk: 1, Stripe: 1, Row: 0, Loc: stripe.Loc{Member: 2, Off: 0}, Len: chunk, BufOff: chunk / 2},
				{Chunk: 2, Stripe: 2, Row: 1, Loc: stripe.Loc{Member: 1, Off: chunk}, Len: chunk / 2, BufOff: 3 * chunk / 2},
			},
		},
		{
			geo: geo{stripe.RAID0, 2, chunk}, off: chunk - 1, n: 2 * chunk,
			want: []stripe.Extent{
				{Chunk: 0, Stripe: 0, Row: 0, Index: 0, Loc: stripe.Loc{Member: 0, Off: chunk - 1}, Len: 1, BufOff: 0},
				{Chunk: 1, Stripe: 0, Row: 0, Index: 1, Loc: stripe.Loc{Member: 1, Off: 0}, Len: chunk, BufOff: 1},
				{Chunk: 2, Stripe: 1, Row: 1, Index: 0, Loc: stripe.Loc{Member: 0, Off: chunk}, Len: chunk - 1, BufOff: chunk + 1},
			},
		},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v/off=%d/n=%d", tc.geo, tc.off, tc.n), func(t *testing.T) {
			g := tc.build(t, 4)
			prefix := []stripe.Extent{{Chunk: -1}}
			got := g.Extents(prefix, tc.off, tc.n)
			require.NotEmpty(t, got)
			assert.Equal(t, stripe.Extent{Chunk: -1}, got[0], "Extents must append, not overwrite")
			assert.Equal(t, tc.want, got[1:])
			assert.Empty(t, g.Extents(nil, tc.off, 0), "empty range")
		})
	}
}

func TestSizes(t *testing.T) {
	tests := []struct {
		level      stripe.Level
		members    int
		chunk      int64
		memberSize int64

		rows, usedMember, size, stripes int64
		dataMembers, tolerance          int
	}{
		{stripe.RAID0, 2, 64 * kib, mib, 16, mib, 2 * mib, 16, 2, 0},
		{stripe.RAID0, 3, 64 * kib, mib + 100, 16, mib, 3 * mib, 16, 3, 0},
		{stripe.RAID1, 2, 64 * kib, mib, 16, mib, mib, 16, 1, 1},
		{stripe.RAID1, 3, 4 * kib, mib + 4*kib - 1, 256, mib, mib, 256, 1, 2},
		{stripe.RAID5, 3, 64 * kib, mib, 16, mib, 2 * mib, 16, 2, 1},
		{stripe.RAID5, 4, 64 * kib, mib, 16, mib, 3 * mib, 16, 3, 1},
		{stripe.RAID5, 5, 64 * kib, mib + 64*kib - 1, 16, mib, 4 * mib, 16, 4, 1},
		{stripe.RAID5, 3, 4 * kib, 4 * kib, 1, 4 * kib, 8 * kib, 1, 2, 1},
		{stripe.RAID10, 2, 64 * kib, mib, 16, mib, mib, 16, 1, 1},
		{stripe.RAID10, 3, 64 * kib, mib, 16, mib, 3 * mib / 2, 24, 1, 1},
		// Odd member count and odd row count: 9 slots, 4 chunks, one slot unused.
		{stripe.RAID10, 3, 64 * kib, 3*64*kib + 5, 3, 3 * 64 * kib, 4 * 64 * kib, 4, 1, 1},
		{stripe.RAID10, 3, 4 * kib, 4 * kib, 1, 4 * kib, 4 * kib, 1, 1, 1},
		{stripe.RAID10, 4, 64 * kib, mib, 16, mib, 2 * mib, 32, 2, 1},
		{stripe.RAID10, 5, 64 * kib, 3 * 64 * kib, 3, 3 * 64 * kib, 7 * 64 * kib, 7, 2, 1},
		{stripe.RAID0, stripe.MaxMembers, stripe.MaxChunk, stripe.MaxChunk, 1, stripe.MaxChunk, 64 * stripe.MaxChunk, 1, 64, 0},
	}
	for _, tc := range tests {
		name := fmt.Sprintf("%s/chunk=%s/members=%d/member=%d", tc.level, sizeName(tc.chunk), tc.members, tc.memberSize)
		t.Run(name, func(t *testing.T) {
			g, err := stripe.New(tc.level, tc.members, tc.chunk, tc.memberSize)
			require.NoError(t, err)
			assert.Equal(t, tc.level, g.Level())
			assert.Equal(t, tc.members, g.Members())
			assert.Equal(t, tc.chunk, g.Chunk())
			assert.Equal(t, tc.rows, g.Rows(), "Rows")
			assert.Equal(t, tc.usedMember, g.MemberSize(), "MemberSize")
			assert.Equal(t, tc.size, g.Size(), "Size")
			assert.Equal(t, tc.stripes, g.Stripes(), "Stripes")
			assert.Equal(t, tc.dataMembers, g.DataMembers(), "DataMembers")
			assert.Equal(t, int64(tc.dataMembers)*tc.chunk, g.StripeWidth(), "StripeWidth")
			assert.Equal(t, tc.tolerance, g.Tolerance(), "Tolerance")
			assert.Equal(t, fmt.Sprintf("%s members=%d chunk=%d size=%d", tc.level, tc.members, tc.chunk, tc.size), g.String())
		})
	}
}

func TestNewErrors(t *testing.T) {
	const ok = 64 * kib
	tests := []struct {
		name       string
		level      stripe.Level
		members    int
		chunk      int64
		memberSize int64
		want       error // nil: New must succeed
	}{
		{"level=2", stripe.Level(2), 3, ok, mib, stripe.ErrLevel},
		{"level=7", stripe.Level(7), 4, ok, mib, stripe.ErrLevel},
		{"raid6/3-members", stripe.RAID6, 3, ok, mib, stripe.ErrMembers},
		{"level=-1", stripe.Level(-1), 4, ok, mib, stripe.ErrLevel},
		{"chunk=0", stripe.RAID0, 2, 0, mib, stripe.ErrChunk},
		{"chunk=-4K", stripe.RAID0, 2, -4 * kib, mib, stripe.ErrChunk},
		{"chunk=2K/too-small", stripe.RAID0, 2, 2 * kib, mib, stripe.ErrChunk},
		{"chunk=4K-1/too-small", stripe.RAID0, 2, 4*kib - 1, mib, stripe.ErrChunk},
		{"chunk=12K/not-pow2", stripe.RAID5, 3, 12 * kib, mib, stripe.ErrChunk},
		{"chunk=48K/not-pow2", stripe.RAID5, 3, 48 * kib, mib, stripe.ErrChunk},
		{"chunk=64K+1/not-pow2", stripe.RAID5, 3, ok + 1, mib, stripe.ErrChunk},
		{"chunk=128M/too-big", stripe.RAID1, 2, 128 * mib, 1 << 30, stripe.ErrChunk},
		{"chunk=64M+4K/too-big", stripe.RAID1, 2, 64*mib + 4*kib, 1 << 30, stripe.ErrChunk},
		{"chunk=4K/min", stripe.RAID1, 2, stripe.MinChunk, mib, nil},
		{"chunk=64M/max", stripe.RAID1, 2, stripe.MaxChunk, stripe.MaxChunk, nil},
		{"raid0/members=1", stripe.RAID0, 1, ok, mib, stripe.ErrMembers},
		{"raid0/members=0", stripe.RAID0, 0, ok, mib, stripe.ErrMembers},
		{"raid0/members=-1", stripe.RAID0, -1, ok, mib, stripe.ErrMembers},
		{"raid0/members=2", stripe.RAID0, 2, ok, mib, nil},
		{"raid1/members=1", stripe.RAID1, 1, ok, mib, stripe.ErrMembers},
		{"raid1/members=2", stripe.RAID1, 2, ok, mib, nil},
		{"raid5/members=2", stripe.RAID5, 2, ok, mib, stripe.ErrMembers},
		{"raid5/members=3", stripe.RAID5, 3, ok, mib, nil},
		{"raid10/members=1", stripe.RAID10, 1, ok, mib, stripe.ErrMembers},
		{"raid10/members=2", stripe.RAID10, 2, ok, mib, nil},
		{"raid10/members=3", stripe.RAID10, 3, ok, mib, nil},
		{"raid5/members=64", stripe.RAID5, stripe.MaxMembers, ok, mib, nil},
		{"raid5/members=65", stripe.RAID5, stripe.MaxMembers + 1, ok, mib, stripe.ErrMembers},
		{"raid10/members=65", stripe.RAID10, stripe.MaxMembers + 1, ok, mib, stripe.ErrMembers},
		{"member=chunk-1", stripe.RAID5, 3, ok, ok - 1, stripe.ErrTooSmall},
		{"member=0", stripe.RAID10, 2, ok, 0, stripe.ErrTooSmall},
		{"member=-1", stripe.RAID0, 2, ok, -1, stripe.ErrTooSmall},
		{"member=chunk", stripe.RAID5, 3, ok, ok, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := stripe.New(tc.level, tc.members, tc.chunk, tc.memberSize)
			if tc.want == nil {
				require.NoError(t, err)
				assert.Positive(t, g.Size())
				return
			}
			require.ErrorIs(t, err, tc.want)
			for _, other := range []error{stripe.ErrLevel, stripe.ErrChunk, stripe.ErrMembers, stripe.ErrTooSmall} {
				if other != tc.want {
					assert.NotErrorIs(t, err, other)
				}
			}
			assert.Equal(t, stripe.Geometry{}, g, "a failed New returns the zero Geometry")
		})
	}
}

func TestParseLevel(t *testing.T) {
	tests := []struct {
		in   string
		want stripe.Level
		err  bool
	}{
		{in: "0", want: stripe.RAID0},
		{in: "raid0", want: stripe.RAID0},
		{in: "RAID0", want: stripe.RAID0},
		{in: "1", want: stripe.RAID1},
		{in: "raid1", want: stripe.RAID1},
		{in: "mirror", want: stripe.RAID1},
		{in: "Mirror", want: stripe.RAID1},
		{in: "5", want: stripe.RAID5},
		{in: "raid5", want: stripe.RAID5},
		{in: " Raid5\n", want: stripe.RAID5},
		{in: "10", want: stripe.RAID10},
		{in: "raid10", want: stripe.RAID10},
		{in: "", err: true},
		{in: "raid", err: true},
		{in: "2", err: true},
		{in: "4", err: true},
		{in: "6", want: stripe.RAID6},
		{in: "raid6", want: stripe.RAID6},
		{in: "7", err: true},
		{in: "11", err: true},
		{in: "raid 5", err: true},
		{in: "5.0", err: true},
		{in: "five", err: true},
		{in: "99999999999999999999", err: true},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.in), func(t *testing.T) {
			got, err := stripe.ParseLevel(tc.in)
			if tc.err {
				require.ErrorIs(t, err, stripe.ErrLevel)
				assert.Contains(t, err.Error(), fmt.Sprintf("%q", tc.in), "the error names the input")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			// The canonical name parses back to the same level.
			back, err := stripe.ParseLevel(got.String())
			require.NoError(t, err)
			assert.Equal(t, got, back)
		})
	}
}

func TestLevelAndRoleStrings(t *testing.T) {
	tests := []struct {
		level stripe.Level
		name  string
		valid bool
		min   int
	}{
		{stripe.RAID0, "raid0", true, 2},
		{stripe.RAID1, "raid1", true, 2},
		{stripe.RAID5, "raid5", true, 3},
		{stripe.RAID10, "raid10", true, 2},
		{stripe.RAID6, "raid6", true, 4},
		{stripe.Level(7), "level(7)", false, 2},
		{stripe.Level(-1), "level(-1)", false, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.name, tc.level.String())
			assert.Equal(t, tc.valid, tc.level.Valid())
			assert.Equal(t, tc.min, tc.level.MinMembers())
		})
	}
	assert.Equal(t, "data", stripe.RoleData.String())
	assert.Equal(t, "parity", stripe.RoleParity.String())
	assert.Equal(t, "unused", stripe.RoleUnused.String())
}

func TestWrongLevelPanics(t *testing.T) {
	for _, l := range []stripe.Level{stripe.RAID1, stripe.RAID10} {
		c := geo{level: l, members: 2, chunk: 4 * kib}
		t.Run(c.String(), func(t *testing.T) {
			g := c.build(t, 2)
			assert.Panics(t, func() { g.DataMember(0, 0) })
			assert.Panics(t, func() { g.DataIndex(0, 0) })
		})
	}
	for _, l := range []stripe.Level{stripe.RAID0, stripe.RAID5} {
		c := geo{level: l, members: 3, chunk: 4 * kib}
		t.Run(c.String(), func(t *testing.T) {
			g := c.build(t, 2)
			assert.Panics(t, func() { g.Copies(nil, 0, 0) })
		})
	}
}
