package stripe_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/stripe"
)

// propRows is odd so that odd-member RAID10 geometries leave one slot unused
// and RAID5 parity does not complete a whole rotation.
const propRows = 7

// TestExtentsProperties checks the tiling and round-trip properties of
// Extents over every geometry, for edge ranges and seeded random ranges.
func TestExtentsProperties(t *testing.T) {
	for gi, c := range geometries() {
		t.Run(c.String(), func(t *testing.T) {
			g := c.build(t, propRows)
			size, chunk := g.Size(), g.Chunk()
			type rng struct{ off, n int64 }
			ranges := []rng{
				{0, size}, {0, 1}, {size - 1, 1}, {0, chunk}, {chunk - 1, 2},
				{chunk, chunk}, {chunk + 1, chunk}, {size - chunk, chunk},
				{size - chunk - 1, chunk + 1}, {1, size - 2},
				{g.StripeWidth() - 1, g.StripeWidth() + 2},
			}
			r := rand.New(rand.NewPCG(uint64(gi), 0x5eed))
			for range 300 {
				off := r.Int64N(size)
				var n int64
				switch r.IntN(3) {
				case 0: // small, often inside one chunk
					n = 1 + r.Int64N(min(size-off, 2*chunk))
				case 1: // chunk-aligned
					off -= off % chunk
					n = chunk * (1 + r.Int64N(max(1, (size-off)/chunk)))
				default: // anything up to the end
					n = 1 + r.Int64N(size-off)
				}
				ranges = append(ranges, rng{off, n})
			}
			var ext []stripe.Extent
			for _, rg := range ranges {
				require.True(t, rg.off >= 0 && rg.n > 0 && rg.off+rg.n <= size, "bad test range %+v", rg)
				ext = checkExtents(t, g, rg.off, rg.n, ext)
				if t.Failed() {
					return
				}
			}
			ext = g.Extents(ext[:0], 0, size)
			assert.Len(t, ext, int(size/chunk), "whole array is one extent per chunk")
		})
	}
}

// TestMemberBytes enumerates every member at 4 KiB granularity and checks
// that Locate is the exact inverse of Extents/Copies: every used member
// byte is data or parity (or, on an odd RAID10, the single unused slot of
// the last row), every array block is stored exactly copiesPerByte times,
// every RAID5 row has one parity block per position, and every location
// belongs to a stripe that RowStripes reports for its row.
func TestMemberBytes(t *testing.T) {
	const step = 4 * kib
	for _, c := range geometries() {
		t.Run(c.String(), func(t *testing.T) {
			g := c.build(t, propRows)
			chunk, n := g.Chunk(), g.Members()
			data := make(map[int64]int)   // array offset -> data locations
			parity := make(map[int64]int) // parity's arrayOff -> parity locations
			var unusedSlots []stripe.Loc
			var ext []stripe.Extent
			var locs []stripe.Loc
			for m := range n {
				for off := int64(0); off < g.MemberSize(); off += step {
					row, in := off/chunk, off%chunk
					a, role := g.Locate(m, off)
					switch role {
					case stripe.RoleData:
						require.True(t, a >= 0 && a < g.Size(), "Locate(%d, %d) = %d outside the array", m, off, a)
						require.Equal(t, in, a%chunk, "Locate(%d, %d) = %d: chunk-relative offset", m, off, a)
						data[a]++
						ext = g.Extents(ext[:0], a, 1)
						require.Len(t, ext, 1)
						e := ext[0]
						here := stripe.Loc{Member: m, Off: off}
						if isMirror(g.Level()) {
							locs = g.Copies(locs[:0], e.Chunk, in)
							assert.Contains(t, locs, here, "Locate(%d, %d) = %d, but that is not one of its copies", m, off, a)
						} else {
							assert.Equal(t, here, e.Loc, "Locate(%d, %d) = %d, but Extents puts it elsewhere", m, off, a)
						}
						f, l := g.RowStripes(row)
						assert.True(t, f <= e.Stripe && e.Stripe <= l, "RowStripes(%d) = [%d, %d] misses stripe %d at member %d", row, f, l, e.Stripe, m)
					case stripe.RoleParity:
						require.Equal(t, stripe.RAID5, g.Level(), "parity on a non-parity level")
						assert.Equal(t, g.ParityMember(row), m, "parity role on a non-parity member, row %d", row)
						assert.Equal(t, row*g.StripeWidth()+in, a, "parity arrayOff at member %d off %d", m, off)
						parity[a]++
						f, l := g.RowStripes(row)
						assert.True(t, f <= g.StripeOf(a) && g.StripeOf(a) <= l, "RowStripes(%d) misses the parity's stripe", row)
					case stripe.RoleUnused:
						if in == 0 {
							unusedSlots = append(unusedSlots, stripe.Loc{Member: m, Off: off})
						}
					default:
						require.Failf(t, "bad role", "Locate(%d, %d) role %d", m, off, role)
					}
					if t.Failed() {
						return
					}
				}
			}

			// Every array block is stored exactly copiesPerByte times, and
			// nothing maps outside it (checked above): a bijection for
			// RAID0/5, n-to-1 for RAID1, 2-to-1 for RAID10.
			assert.Len(t, data, int(g.Size()/step), "distinct array blocks reached")
			for a := int64(0); a < g.Size(); a += step {
				if !assert.Equal(t, copiesPerByte(g), data[a], "locations of array offset %d", a) {
					break
				}
			}

			if g.Level() == stripe.RAID5 {
				assert.Len(t, parity, int(g.Rows()*chunk/step), "one parity block per row position")
				for a, k := range parity {
					if !assert.Equal(t, 1, k, "parity locations for arrayOff %d", a) {
						break
					}
				}
			} else {
				assert.Empty(t, parity)
			}

			// Unused member space exists only on an odd RAID10 with an odd
			// row count: the last slot of the last row.
			var wantUnused []stripe.Loc
			if g.Level() == stripe.RAID10 && (g.Rows()*int64(n))%2 == 1 {
				wantUnused = []stripe.Loc{{Member: n - 1, Off: (g.Rows() - 1) * chunk}}
			}
			assert.Equal(t, wantUnused, unusedSlots, "unused slots")
		})
	}
}

// TestRows checks per-row structure: RAID5 has exactly one parity member
// per row and DataMember/DataIndex are inverse; RowStripes is exactly the
// set of stripes that have data or parity in the row.
func TestRows(t *testing.T) {
	for _, c := range geometries() {
		t.Run(c.String(), func(t *testing.T) {
			g := c.build(t, propRows)
			chunk, n := g.Chunk(), g.Members()
			for row := range g.Rows() {
				parityMembers := 0
				stripes := map[int64]bool{}
				for m := range n {
					a, role := g.Locate(m, row*chunk)
					switch role {
					case stripe.RoleParity:
						parityMembers++
						assert.Equal(t, g.ParityMember(row), m, "row %d", row)
						stripes[g.StripeOf(a)] = true
					case stripe.RoleData:
						stripes[g.StripeOf(a)] = true
					}
				}
				f, l := g.RowStripes(row)
				require.LessOrEqual(t, f, l, "RowStripes(%d)", row)
				want := map[int64]bool{}
				for s := f; s <= l; s++ {
					want[s] = true
				}
				assert.Equal(t, want, stripes, "RowStripes(%d) = [%d, %d]", row, f, l)

				switch g.Level() {
				case stripe.RAID5:
					assert.Equal(t, 1, parityMembers, "row %d parity members", row)
					p := g.ParityMember(row)
					assert.Equal(t, -1, g.DataIndex(row, p), "row %d", row)
					seen := map[int]bool{p: true}
					for i := range g.DataMembers() {
						m := g.DataMember(row, i)
						assert.False(t, seen[m], "row %d: member %d used twice", row, m)
						seen[m] = true
						assert.Equal(t, i, g.DataIndex(row, m), "row %d: DataIndex(DataMember(%d))", row, i)
					}
					assert.Len(t, seen, n, "row %d covers every member", row)
				case stripe.RAID0:
					for i := range g.DataMembers() {
						assert.Equal(t, i, g.DataIndex(row, g.DataMember(row, i)), "row %d", row)
					}
					assert.Zero(t, parityMembers)
				default:
					assert.Zero(t, parityMembers)
					assert.Equal(t, -1, g.ParityMember(row))
				}
			}
		})
	}
}
