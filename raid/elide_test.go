package raid_test

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// alternating returns n bytes of 4 KiB blocks alternating random data and zeroes.
func alternating(n int64, seed int64) []byte {
	p := make([]byte, n)
	rng := rand.New(rand.NewSource(seed))
	for b := int64(0); b < n; b += 8192 {
		rng.Read(p[b:min(n, b+4096)])
	}
	return p
}

// TestZeroElisionAlternatingBlocks writes full RAID5 stripes of 4 KiB
// data blocks alternating with 4 KiB zero blocks: every member's zero
// blocks (and parity blocks over zero blocks, which are zero) are punched
// and the rest written, and the write amplification stays 4/3.
func TestZeroElisionAlternatingBlocks(t *testing.T) {
	const chunk = 16 << 10
	_, a := newRAID5(t, 4, 0, chunk, 8, raid.Options{CleanDelay: -1})
	w := 4 * a.Geometry().StripeWidth()
	alt := alternating(w, 2)
	_, err := a.WriteAt(alt, 0)
	require.NoError(t, err)
	st := a.Status().Stats
	assert.Equal(t, w, st.ClientBytesWritten)
	assert.Equal(t, w*4/3/2, st.MemberBytesWritten, "half of the blocks hold data")
	assert.Equal(t, w*4/3/2, st.MemberBytesElided, "the other half are punched")
	assert.InDelta(t, 4.0/3.0, st.WriteAmplification, 1e-9)
	got := make([]byte, w)
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, alt, got)
}

// TestZeroElisionPerBlock checks on every level that member writes are
// elided block by block: unaligned writes punch their aligned all-zero
// blocks and write the rest, and the array reads back exactly what was
// written, with redundancy consistent.
func TestZeroElisionPerBlock(t *testing.T) {
	for _, s := range []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID0, 2}, {stripe.RAID1, 2}, {stripe.RAID5, 3}, {stripe.RAID10, 3}} {
		t.Run(s.level.String(), func(t *testing.T) {
			const chunk = 64 << 10
			r := newRig(s.n, memberSizeFor(chunk, 8))
			a := createArray(t, r.devs, raid.CreateOptions{Name: "elide", Level: s.level, Chunk: chunk}, raid.Options{CleanDelay: -1})
			model := make([]byte, a.Size())
			rng := rand.New(rand.NewSource(7))
			rng.Read(model)
			_, err := a.WriteAt(model, 0)
			require.NoError(t, err)
			for i := 0; i < 40; i++ {
				off := rng.Int63n(a.Size() - 1)
				n := 1 + rng.Int63n(min(a.Size()-off, 3*chunk))
				p := alternating(n, int64(i))
				if i%3 == 0 {
					// zero blocks at unaligned offsets too
					p = make([]byte, n)
					rng.Read(p[:min(n, 100)])
				}
				_, err := a.WriteAt(p, off)
				require.NoError(t, err)
				copy(model[off:], p)
			}
			requireContent(t, a, model, "after elided writes")
			st := a.Status().Stats
			assert.Positive(t, st.MemberBytesElided, "zero blocks must be punched")
		})
	}
}

// TestUnalignedDiscardPunchesInterior discards an unaligned range inside
// one RAID5 row: the aligned interior of the data chunk is punched, only
// the unaligned edges and the parity are written.
func TestUnalignedDiscardPunchesInterior(t *testing.T) {
	const chunk = 16 << 10
	_, a := newRAID5(t, 4, 0, chunk, 4, raid.Options{CleanDelay: -1})
	want := fill(t, a, 3)
	before := a.Status().Stats
	// Data chunk 0 of row 0 is zeroed over [100, 16384) and chunk 1 over
	// [0, 3716): one row, read-modify-write (or reconstruct-write) with
	// parity over [0, 16384).
	const off, n = 100, 20000
	require.NoError(t, a.Discard(off, n))
	clear(want[off : off+n])
	requireContent(t, a, want, "after the discard")
	st := a.Status().Stats
	assert.Equal(t, int64(n), st.ClientBytesZeroed-before.ClientBytesZeroed)
	assert.Equal(t, int64(chunk-4096), st.MemberBytesDiscarded-before.MemberBytesDiscarded, "the aligned interior of chunk 0 is punched")
	assert.Equal(t, int64((4096-off)+(off+n-chunk)+chunk), st.MemberBytesZeroWritten-before.MemberBytesZeroWritten, "edges and parity are written")
	assert.Equal(t, before.MemberBytesWritten, st.MemberBytesWritten, "a discard is not a client write")
}
