package stripe_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/stripe"
)

// FuzzExtents normalizes arbitrary inputs into a valid geometry and range
// and checks the tiling and round-trip properties (checkExtents), plus the
// reverse direction for one arbitrary member byte.
//
//	go test -run x -fuzz=FuzzExtents -fuzztime=30s ./stripe/
func FuzzExtents(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint8(0), int64(1<<20), int64(0), int64(1))
	f.Add(uint8(2), uint8(1), uint8(4), int64(1<<20+3), int64(12345), int64(300000))
	f.Add(uint8(3), uint8(1), uint8(0), int64(5*4096), int64(4095), int64(1<<20))
	f.Add(uint8(3), uint8(3), uint8(8), int64(-7), int64(-1), int64(-1))
	f.Add(uint8(1), uint8(200), uint8(14), int64(1<<40), int64(1<<39), int64(1<<30))
	f.Fuzz(func(t *testing.T, sel, members, shift uint8, memberSize, off, n int64) {
		level := allLevels[int(sel)%len(allLevels)]
		lo := level.MinMembers()
		const hi = 16
		nm := lo + int(members)%(hi-lo+1)
		chunk := int64(1) << (12 + uint(shift)%15) // 4 KiB .. 64 MiB
		ms := chunk + int64(uint64(memberSize)%uint64(1024*chunk))
		g, err := stripe.New(level, nm, chunk, ms)
		require.NoError(t, err, "%s members=%d chunk=%d member=%d", level, nm, chunk, ms)
		require.Positive(t, g.Size())
		require.LessOrEqual(t, g.MemberSize(), ms)
		require.Greater(t, g.MemberSize(), ms-chunk)

		o := int64(uint64(off) % uint64(g.Size()))
		l := 1 + int64(uint64(n)%uint64(min(g.Size()-o, 64*chunk)))
		checkExtents(t, g, o, l, nil)

		// Reverse: an arbitrary member byte maps to an array byte whose
		// forward mapping puts it back there.
		m := int(uint64(n) % uint64(nm))
		mo := int64(uint64(off) % uint64(g.MemberSize()))
		a, role := g.Locate(m, mo)
		switch role {
		case stripe.RoleData:
			require.True(t, a >= 0 && a < g.Size(), "Locate(%d, %d) = %d outside the array", m, mo, a)
			e := g.Extents(nil, a, 1)
			require.Len(t, e, 1)
			here := stripe.Loc{Member: m, Off: mo}
			if level == stripe.RAID1 || level == stripe.RAID10 {
				assert.Contains(t, g.Copies(nil, e[0].Chunk, a%chunk), here, "%v: Locate(%d, %d) = %d", g, m, mo, a)
			} else {
				assert.Equal(t, here, e[0].Loc, "%v: Locate(%d, %d) = %d", g, m, mo, a)
			}
		case stripe.RoleParity:
			require.Equal(t, stripe.RAID5, level)
			assert.Equal(t, g.ParityMember(mo/chunk), m)
		case stripe.RoleUnused:
			require.Equal(t, stripe.RAID10, level)
			assert.Equal(t, g.Rows()-1, mo/chunk, "unused space outside the last row")
			assert.Equal(t, nm-1, m, "unused space on a member other than the last")
		}
	})
}
