package raid

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/stripe"
)

// TestAheadRun: what a member read of a sequential stream asks its member
// to read ahead: the member's whole run of chunks in the next request,
// when it starts right after the read and is at most aheadMaxChunks long.
func TestAheadRun(t *testing.T) {
	const chunk = 64 << 10
	geo := func(lv stripe.Level, n int) stripe.Geometry {
		g, err := stripe.New(lv, n, chunk, 64<<20)
		require.NoError(t, err)
		return g
	}
	// ahead returns, per member, what the last read of each member in
	// the request [off, off+n) asks, for a next request of n bytes.
	ahead := func(g stripe.Geometry, off, n int64) []int64 {
		last := make([]int64, g.Members())
		for _, e := range g.Extents(nil, off, n) {
			last[e.Member] = max(last[e.Member], e.Off+e.Len)
		}
		out := make([]int64, g.Members())
		for m, end := range last {
			if end > 0 {
				out[m] = aheadRun(g, m, end, off+n, off+2*n)
			}
		}
		return out
	}
	r6 := geo(stripe.RAID6, 4)
	for k := int64(0); k < 4; k++ {
		// Member 2's run of rows 3-4 (mod 4) crosses every 1 MiB
		// boundary: the next request's row 0 is read ahead.
		assert.Equal(t, []int64{0, 0, chunk, 0}, ahead(r6, k<<20, 1<<20), "RAID6×4, request %d", k)
	}
	// RAID0: a member's run in the next 1 MiB request is 4 chunks, so
	// reading part of it ahead would save no read.
	assert.Equal(t, []int64{0, 0, 0, 0}, ahead(geo(stripe.RAID0, 4), 1<<20, 1<<20))
	// Requests not aligned to chunks: member 2's last read (row 7) ends
	// at a chunk boundary, and its row 8 holds chunk 17, inside the next
	// request; member 1's read of chunk 16 ends inside it.
	assert.Equal(t, []int64{0, 0, chunk, 0}, ahead(r6, 4096, 1<<20))
	assert.Zero(t, aheadRun(r6, 1, 8*chunk+4096, 1<<20+4096, 2<<20+4096))
	// The next request ends inside the chunk read ahead: only its part.
	assert.Equal(t, int64(32<<10), aheadRun(r6, 2, 8*chunk, 1<<20+chunk, 1<<20+chunk+32<<10))
	// A chunk outside the next request is not read ahead.
	assert.Zero(t, aheadRun(r6, 2, 8*chunk, 1<<20+2*chunk, 2<<20))
	// RAID5×4 1 MiB requests (5⅓ rows): runs of one or two chunks.
	for _, a := range ahead(geo(stripe.RAID5, 4), 0, 1<<20) {
		assert.LessOrEqual(t, a, int64(aheadMaxChunks*chunk))
	}
	// Parity is never read ahead: member 0 holds P of row 3, and the
	// next request's bytes elsewhere.
	assert.Zero(t, aheadRun(r6, 0, 3*chunk, 6*chunk, 12*chunk))
	// Mirrored levels never read ahead.
	assert.Zero(t, aheadRun(geo(stripe.RAID10, 4), 0, chunk, chunk, 1<<20))
	assert.Zero(t, aheadRun(geo(stripe.RAID1, 2), 0, chunk, chunk, 2*chunk))
}

// TestReadStreams: a read follows a stream when it starts where one of
// the last reads ended, interleaved streams included; the first read and
// random reads do not.
func TestReadStreams(t *testing.T) {
	var s readStreams
	s.init()
	assert.False(t, s.follows(0, 1<<20), "the first read at 0")
	assert.True(t, s.follows(1<<20, 1<<20))
	assert.False(t, s.follows(100<<20, 4096))
	assert.True(t, s.follows(2<<20, 1<<20), "after another stream's read")
	assert.True(t, s.follows(100<<20+4096, 4096))
	assert.False(t, s.follows(7<<20, 4096))
}
