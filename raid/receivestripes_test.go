package raid_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// recvInPlace is recvFrom that also adds to *inPlace the bytes it placed
// outside scratch, the buffer the caller passed to ReceiveAt: the bytes a
// parity array received straight into its members (its pieces of partial
// stripes go into scratch).
func recvInPlace(src []byte, cut int, calls *int, scratch []byte, inPlace *int64) func(dsts [][]byte, atLeast int) (int, error) {
	inner := recvFrom(src, cut, calls)
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(scratch)))
	hi := lo + uintptr(len(scratch))
	return func(dsts [][]byte, atLeast int) (int, error) {
		n, err := inner(dsts, atLeast)
		left := n
		for _, d := range dsts {
			k := min(left, len(d))
			if at := uintptr(unsafe.Pointer(unsafe.SliceData(d))); k > 0 && (at < lo || at >= hi) {
				*inPlace += int64(k)
			}
			left -= k
		}
		return n, err
	}
}

// TestReceiveStripesModel: RAID5 and RAID6 writes received straight into
// the members' memory (ReceiveAt: whole stripes into the data members,
// their parity computed there, the pieces at either end through the
// stripe cache) read back exactly as written, against a flat model.
// Concurrent workers receive (some receives cut short part way, the rest
// written with WriteAt as the NBD server does; some continuing the
// previous one, as a sequential stream), write, read and sync their parts
// of the array, whose stripes they share at the edges. Afterwards every
// row's parity must verify, with and without the write-hole log.
func TestReceiveStripesModel(t *testing.T) {
	seed := testSeed(t)
	for _, tc := range []struct {
		level  stripe.Level
		n      int
		policy raid.ConsistencyPolicy
	}{
		{stripe.RAID5, 3, raid.PolicyDefault},
		{stripe.RAID5, 4, raid.PolicyDefault},
		{stripe.RAID5, 4, raid.PolicyBitmap},
		{stripe.RAID6, 4, raid.PolicyDefault},
		{stripe.RAID6, 5, raid.PolicyBitmap},
	} {
		name := fmt.Sprintf("%s/members=%d/%s", tc.level, tc.n, tc.policy)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := subSeed(seed, name)
			t.Logf("seed %d (replay with -seed %d)", s, seed)
			testReceiveStripesModel(t, tc.level, tc.n, tc.policy, s)
		})
	}
}

func testReceiveStripesModel(t *testing.T, level stripe.Level, n int, policy raid.ConsistencyPolicy, seed int64) {
	const chunk = 16 << 10
	devs := tmpfsDevs(t, n, levelSizeFor(level, chunk, 256))
	a := createArray(t, devs, raid.CreateOptions{Name: "recv", Level: level, Chunk: chunk, ConsistencyPolicy: policy},
		raid.Options{CleanDelay: -1, StripeCache: 1 << 20})
	size := a.Size()
	width := a.Geometry().StripeWidth()
	ref := make([]byte, size)
	const workers = 3
	part := size / workers
	var inPlace [workers]int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(w)))
			lo := int64(w) * part
			next := lo // where a stream would continue
			for i := 0; i < 150; i++ {
				ln := 1 + rng.Int64N(min(part, 5*width))
				off := lo + rng.Int64N(part-ln+1)
				switch op := rng.IntN(8); op {
				case 0, 1, 2, 3:
					if op == 0 && next+ln <= lo+part {
						off = next
					}
					next = off + ln
					p := make([]byte, ln)
					randomBytes(p, rng.Int64())
					if rng.IntN(3) == 0 { // a run of zero blocks in it
						z := rng.Int64N(ln)
						clear(p[z:min(ln, z+2*chunk)])
					}
					if !receiveLikeServer(t, a, rng, p, off, 3*chunk, &inPlace[w]) {
						return
					}
					copy(ref[off:], p)
				case 4:
					if !writesAsModel(t, a, rng.Int64(), ref, off, ln) {
						return
					}
				case 5:
					if !assert.NoError(t, a.Sync()) {
						return
					}
				default:
					if !readsAsModel(t, a, ref, off, ln) {
						return
					}
				}
			}
		}(w)
	}
	wg.Wait()
	require.False(t, t.Failed())
	require.Positive(t, sum(inPlace[:]), "whole stripes were received into the members")
	requireWholeArray(t, a, ref, "the whole array")
	require.NoError(t, a.Sync())
	checkConsistent(t, a, "parity after received writes")
	requireWholeArray(t, a, ref, "the whole array after the sync")

	// Whole stripes of zeroes but their first byte: the data's zero
	// blocks and the parity's are punched, and every byte reads back.
	st := a.Status().Stats
	p := make([]byte, 3*width)
	p[0] = 1
	calls, in := 0, int64(0)
	done, err := a.ReceiveAt(make([]byte, len(p)), 0, nil, recvInPlace(p, -1, &calls, nil, &in))
	require.NoError(t, err)
	require.Equal(t, len(p), done)
	require.Equal(t, int64(len(p)), in, "every byte received in place")
	st2 := a.Status().Stats
	assert.Greater(t, st2.MemberBytesElided-st.MemberBytesElided, int64(len(p)), "zero blocks of data and parity punched")
	got := make([]byte, len(p))
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, p, got)
	checkConsistent(t, a, "parity after a received write of zero blocks")
}

// TestReceiveStripesDeclines: a parity array receives in place only a
// write that holds a whole stripe, on a healthy array with a stripe cache
// and no checksums, whose whole stripes have nothing in the cache; its
// head piece too when it completes a stripe whose rest is cached.
// Otherwise it asks for nothing, and the write is the caller's (WriteAt).
// (A record of a whole stripe's row in the write-hole log's epoch also
// declines it, but on members held in memory records go to slots that are
// cleared when their row write ends, and keep no row in the epoch: no
// test here can hold one there.)
func TestReceiveStripesDeclines(t *testing.T) {
	const chunk = 64 << 10
	const width = 2 * chunk // RAID5 × 3
	prepBytes := make([]byte, width)
	randomBytes(prepBytes, 7)
	type setup struct {
		name  string
		co    raid.CreateOptions
		o     raid.Options
		off   int64
		n     int
		prep  func(t *testing.T, a *raid.Array)
		takes bool
	}
	cache := raid.Options{CleanDelay: -1, StripeCache: 1 << 20}
	held := raid.Options{CleanDelay: -1, StripeCache: 1 << 20, StripeCacheDelay: time.Hour}
	r5 := raid.CreateOptions{Name: "r5", Level: stripe.RAID5, Chunk: chunk}
	sums := r5
	sums.Checksums = true
	for _, tc := range []setup{
		{name: "healthy", co: r5, o: cache, off: width / 2, n: 2 * width, takes: true},
		{name: "head completes a cached stripe", co: r5, o: held,
			off: width + width/2, n: width/2 + width, takes: true, prep: func(t *testing.T, a *raid.Array) {
				// The start of the second stripe, cached (the tail of a
				// stream's write before): the head completes it in place.
				_, err := a.WriteAt(prepBytes[:width/2], width)
				require.NoError(t, err)
			}},
		{name: "no stripe cache", co: r5, o: raid.Options{CleanDelay: -1}, n: 2 * width},
		{name: "checksums", co: sums, o: cache, n: 2 * width},
		{name: "no whole stripe", co: r5, o: cache, off: width / 2, n: width},
		{name: "degraded", co: r5, o: cache, n: 2 * width, prep: func(t *testing.T, a *raid.Array) { failRole(t, a, 1) }},
		{name: "cached piece", co: r5, o: held, n: 2 * width, prep: func(t *testing.T, a *raid.Array) {
			// The start of the second stripe: cached, as the head of a
			// stream (until the flusher's deadline, an hour here: a piece
			// written out before the receive would let it take the
			// stripe, rightly).
			_, err := a.WriteAt(make([]byte, 4096), width)
			require.NoError(t, err)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devs := tmpfsDevs(t, 3, levelSizeFor(stripe.RAID5, chunk, 32))
			a := createArray(t, devs, tc.co, tc.o)
			if tc.prep != nil {
				tc.prep(t, a)
			}
			p := make([]byte, tc.n)
			randomBytes(p, int64(tc.n))
			calls, in := 0, int64(0)
			scratch := make([]byte, tc.n)
			before := a.Status().Stats
			done, err := a.ReceiveAt(scratch, tc.off, nil, recvInPlace(p, -1, &calls, scratch, &in))
			require.NoError(t, err)
			if !tc.takes {
				assert.Zero(t, done)
				assert.Zero(t, calls, "recv was called")
				return
			}
			assert.Equal(t, tc.n, done)
			after := a.Status().Stats
			assert.Equal(t, int64(tc.n), after.ClientBytesWritten-before.ClientBytesWritten)
			if tc.prep == nil {
				assert.Equal(t, int64(width), in, "the whole stripe received in place")
				assert.Equal(t, int64(width+chunk), after.MemberBytesWritten-before.MemberBytesWritten,
					"the whole stripe's data and parity written; its ends cached")
			} else {
				assert.Equal(t, int64(tc.n), in, "the head and the whole stripe received in place")
				assert.Equal(t, int64(2*(width+chunk)), after.MemberBytesWritten-before.MemberBytesWritten,
					"two stripes' data (the cached piece's too) and parity written")
				assert.Zero(t, a.Status().StripeCache.Bytes, "the completed stripe left the cache")
			}
			got := make([]byte, tc.n)
			_, err = a.ReadAt(got, tc.off)
			require.NoError(t, err)
			assert.Equal(t, p, got)
			if tc.prep != nil {
				_, err = a.ReadAt(got[:width/2], width)
				require.NoError(t, err)
				assert.Equal(t, prepBytes[:width/2], got[:width/2], "the cached piece, on the members")
			}
			require.NoError(t, a.Sync())
			checkConsistent(t, a)
		})
	}
}

// TestReceiveStripesDeclineRecord: a row with a write-hole record in the
// log's current epoch is not received in place. Such a row records every
// later write, whole stripes too, so that replay never ends on a record
// whose partial parities are stale; the receive writes none. Only a log
// that appends its records keeps a row in the epoch: on members held in
// memory the log is slotted unless its area holds fewer than 8 slots, as
// RAID5 × 3 with 1 MiB chunks gives. The write then goes the usual way
// (the NBD server's WriteAt), recorded, and reads back.
func TestReceiveStripesDeclineRecord(t *testing.T) {
	const chunk = 1 << 20
	const width = 2 * chunk // RAID5 × 3
	devs := tmpfsDevs(t, 3, levelSizeFor(stripe.RAID5, chunk, 8))
	a := createArray(t, devs, raid.CreateOptions{Name: "r5", Level: stripe.RAID5, Chunk: chunk},
		raid.Options{CleanDelay: -1, StripeCache: 16 << 20})
	st := a.Status()
	require.NotNil(t, st.Journal)
	require.Zero(t, st.Journal.SlotBytes, "the log appends its records (fewer than 8 slots)")

	// A partial write of row 1, written out by Sync: its record stays in
	// the epoch (Sync does not checkpoint).
	_, err := a.WriteAt(make([]byte, 4096), width+8192)
	require.NoError(t, err)
	require.NoError(t, a.Sync())
	require.Zero(t, a.Status().StripeCache.Bytes, "nothing cached")
	records := a.Status().Journal.Records
	require.Positive(t, records)

	p := make([]byte, 2*width)
	randomBytes(p, 5)
	calls, in := 0, int64(0)
	scratch := make([]byte, len(p))
	done, err := a.ReceiveAt(scratch, width, nil, recvInPlace(p, -1, &calls, scratch, &in))
	require.NoError(t, err)
	assert.Zero(t, done, "declined")
	assert.Zero(t, calls, "recv was called")

	_, err = a.WriteAt(p, width)
	require.NoError(t, err)
	assert.Greater(t, a.Status().Journal.Records, records, "row 1's whole-stripe write is recorded")
	got := make([]byte, len(p))
	_, err = a.ReadAt(got, width)
	require.NoError(t, err)
	assert.Equal(t, p, got)

	// A row with no record (row 3) is still received in place.
	q := make([]byte, width)
	randomBytes(q, 6)
	calls, in = 0, 0
	done, err = a.ReceiveAt(scratch[:width], 3*width, nil, recvInPlace(q, -1, &calls, scratch[:width], &in))
	require.NoError(t, err)
	assert.Equal(t, width, done)
	assert.Equal(t, int64(width), in, "received in place")
	_, err = a.ReadAt(got[:width], 3*width)
	require.NoError(t, err)
	assert.Equal(t, q, got[:width])
	require.NoError(t, a.Sync())
	checkConsistent(t, a)
}

// TestReceiveStripesFault: a member file shrunk behind raidd's back. When
// the member holds data in the first whole row, the receive stops at the
// first page it cannot write (the kernel's EFAULT); when it holds the
// row's parity, computing the parity into it faults. Either way the row's
// parity cannot be computed in memory, so the row is resynced through the
// members' reads, which fail the member, and the receive stops there; the
// caller writes the rest degraded, and every byte reads back as written.
func TestReceiveStripesFault(t *testing.T) {
	const chunk = 64 << 10
	for _, holds := range []string{"data", "parity"} {
		t.Run(holds, func(t *testing.T) {
			devs := tmpfsDevs(t, 3, levelSizeFor(stripe.RAID5, chunk, 32))
			a := createArray(t, devs, raid.CreateOptions{Name: "shrunk", Level: stripe.RAID5, Chunk: chunk},
				raid.Options{CleanDelay: -1, StripeCache: 1 << 20})
			geo := a.Geometry()
			width := geo.StripeWidth()
			size := a.Size()
			ref := make([]byte, size)
			randomBytes(ref, 1)
			_, err := a.WriteAt(ref, 0)
			require.NoError(t, err)
			require.NoError(t, a.Sync())

			// Member 1 loses its second half; the write's first whole
			// row is in it, with member 1 holding its first data chunk
			// or its parity.
			fi, err := os.Stat(devs[1].Path)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(devs[1].Path, fi.Size()/2))
			row := geo.Rows() - 4
			for (holds == "data") != (geo.DataMember(row, 0) == 1) || (holds == "parity") != (geo.ParityMember(row) == 1) {
				row++
			}
			off := row*width - width/2
			ln := 3 * width
			if holds == "parity" {
				ln = width/2 + width // the row alone: no data on member 1
			}
			p := make([]byte, ln)
			randomBytes(p, 2)
			calls := 0
			done, err := a.ReceiveAt(make([]byte, len(p)), off, nil, recvFaulting(p, &calls))
			require.Positive(t, calls)
			if holds == "data" {
				require.ErrorIs(t, err, errRecvFault)
			} else {
				require.NoError(t, err)
			}
			require.Greater(t, done, 0)
			if holds == "data" {
				require.Less(t, done, len(p))
			}
			_, err = a.WriteAt(p[done:], off+int64(done))
			require.NoError(t, err)
			copy(ref[off:], p)
			require.True(t, a.Status().Degraded, "the shrunk member is failed")
			got := make([]byte, size)
			_, err = a.ReadAt(got, 0)
			require.NoError(t, err)
			require.Equal(t, ref, got)
		})
	}
}

var errRecvFault = fmt.Errorf("bad address (EFAULT)")

// recvFaulting is recvFrom for memory that may fault, as the kernel's
// receive treats it: it copies a page at a time, as recvFrom places
// bytes, and stops at the first page it cannot write, returning what it
// placed and errRecvFault.
func recvFaulting(src []byte, calls *int) func(dsts [][]byte, atLeast int) (int, error) {
	pos := 0 // bytes of src placed by earlier calls
	return func(dsts [][]byte, atLeast int) (n int, err error) {
		*calls++
		limit := max(atLeast, recvStep)
		old := debug.SetPanicOnFault(true)
		defer func() {
			debug.SetPanicOnFault(old)
			if recover() != nil {
				err = errRecvFault
			}
			pos += n
		}()
		for _, d := range dsts {
			for len(d) > 0 && n < limit {
				k := min(len(d), 4096, limit-n)
				copy(d[:k], src[pos+n:])
				n += k
				d = d[k:]
			}
		}
		return n, nil
	}
}
