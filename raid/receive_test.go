package raid_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// tmpfsDevs opens n sparse members of size bytes on tmpfs.
func tmpfsDevs(t *testing.T, n int, size int64) []raid.Device {
	dir := membertest.TmpfsDir(t)
	var devs []raid.Device
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprint("m", i))
		require.NoError(t, member.CreateSparse(p, size))
		f, err := member.Open(p, member.Options{})
		require.NoError(t, err)
		devs = append(devs, raid.Device{Path: p, Member: f})
	}
	return devs
}

var errRecvCut = errors.New("receive cut short")

// recvFrom returns a ReceiveAt recv that places src's bytes, in order, into
// the memory it is handed, as the NBD server's receive does: what it is
// asked to wait for, or recvStep bytes if that is more (what a socket had
// when it was read), each call continuing where the last one stopped.
// With cut >= 0 it places only cut bytes in all and then fails (a
// connection that broke, or memory that faulted). calls counts its calls.
func recvFrom(src []byte, cut int, calls *int) func(dsts [][]byte, atLeast int) (int, error) {
	pos := 0 // bytes of src placed by earlier calls
	return func(dsts [][]byte, atLeast int) (int, error) {
		*calls++
		limit := max(atLeast, recvStep)
		n := 0
		for _, d := range dsts {
			want := min(len(d), limit-n)
			if cut >= 0 && pos+n+want > cut {
				n += copy(d, src[pos+n:cut])
				pos += n
				return n, errRecvCut
			}
			n += copy(d[:want], src[pos+n:])
			if n == limit {
				break
			}
		}
		pos += n
		return n, nil
	}
}

// readsAsModel reads [off, off+ln) of a and asserts that it holds what ref
// does.
func readsAsModel(t *testing.T, a *raid.Array, ref []byte, off, ln int64) bool {
	got := make([]byte, ln)
	_, err := a.ReadAt(got, off)
	return assert.NoError(t, err) && assert.Equal(t, ref[off:off+ln], got, "read [%d, +%d)", off, ln)
}

// writesAsModel writes ln random bytes (seed) at off with WriteAt, and
// into ref, the flat model.
func writesAsModel(t *testing.T, a *raid.Array, seed int64, ref []byte, off, ln int64) bool {
	p := make([]byte, ln)
	randomBytes(p, seed)
	if _, err := a.WriteAt(p, off); !assert.NoError(t, err) {
		return false
	}
	copy(ref[off:], p)
	return true
}

// requireWholeArray requires a's bytes to be ref's.
func requireWholeArray(t *testing.T, a *raid.Array, ref []byte, msg string) {
	got := make([]byte, len(ref))
	_, err := a.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, ref, got, msg)
}

func sum(ns []int64) (total int64) {
	for _, n := range ns {
		total += n
	}
	return total
}

// recvStep is how many bytes recvFrom places a call unless asked to wait
// for more.
const recvStep = 40000

// receiveLikeServer writes p at off as the NBD server writes a streamed
// WRITE to a Receiver: up to maxPre bytes (a random count, or none) as pre,
// what the reader had buffered, the rest through recv (recvInPlace, cut
// short at random), and whatever ReceiveAt did not take with WriteAt. It
// adds to *inPlace the bytes recv placed in the members, and reports
// whether every check held.
func receiveLikeServer(t *testing.T, a *raid.Array, rng *rand.Rand, p []byte, off, maxPre int64, inPlace *int64) bool {
	ln := int64(len(p))
	k := 0
	if rng.IntN(2) == 0 {
		k = rng.IntN(int(min(ln, maxPre)))
	}
	cut := -1
	if rng.IntN(4) == 0 {
		cut = rng.IntN(int(ln) - k)
	}
	calls := 0
	scratch := make([]byte, ln)
	done, err := a.ReceiveAt(scratch, off, p[:k], recvInPlace(p[k:], cut, &calls, scratch, inPlace))
	if !assert.True(t, done >= 0 && int64(done) <= ln) || !assert.True(t, calls > 0 || done <= k, "done past pre without a recv") {
		return false
	}
	if !receivedAsCut(t, err, cut, done-k) {
		return false
	}
	if int64(done) < ln { // the rest, as the server writes it
		if _, err := a.WriteAt(p[done:], off+int64(done)); !assert.NoError(t, err) {
			return false
		}
	}
	return true
}

// receivedAsCut judges the result of a ReceiveAt whose recv (recvFrom)
// fails after cut bytes (-1: never): an error must be the cut's, with
// exactly cut bytes done; without one, the receive ended before the cut
// (the members' memory it named covered less of the write: a file's last
// page is never received into), or there was no cut.
func receivedAsCut(t *testing.T, err error, cut, done int) bool {
	if err != nil {
		return assert.ErrorIs(t, err, errRecvCut) && assert.Equal(t, cut, done)
	}
	return cut < 0 || assert.LessOrEqual(t, done, cut)
}

// TestReceiveAtModel: RAID0 writes received straight into the members'
// memory (ReceiveAt) land exactly where WriteAt would put them: concurrent
// workers receive, write (WriteAt) and read their own parts of the array,
// with receives cut short part way (the caller writes the rest, as the NBD
// server does) and payloads with all-zero blocks, and every read is
// compared with a flat model. The zero blocks are punched as WriteAt
// punches them, and the member bytes written match the client's.
func TestReceiveAtModel(t *testing.T) {
	seed := testSeed(t)
	for _, n := range []int{2, 4} {
		name := fmt.Sprintf("raid0/members=%d", n)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := subSeed(seed, name)
			t.Logf("seed %d (replay with -seed %d)", s, seed)
			testReceiveModel(t, n, s)
		})
	}
}

func testReceiveModel(t *testing.T, n int, seed int64) {
	const chunk = 16 << 10
	devs := tmpfsDevs(t, n, levelSizeFor(stripe.RAID0, chunk, 256))
	a := createArray(t, devs, raid.CreateOptions{Name: "recv", Level: stripe.RAID0, Chunk: chunk}, raid.Options{CleanDelay: -1})
	size := a.Size()
	ref := make([]byte, size)
	const workers = 3
	part := size / workers
	var received [workers]int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(w)))
			lo := int64(w) * part
			for i := 0; i < 200; i++ {
				ln := 1 + rng.Int64N(min(part, 5*chunk))
				off := lo + rng.Int64N(part-ln+1)
				switch rng.IntN(4) {
				case 0, 1:
					p := make([]byte, ln)
					randomBytes(p, rng.Int64())
					if rng.IntN(3) == 0 { // a run of zero blocks in it
						z := rng.Int64N(ln)
						clear(p[z:min(ln, z+3*4096)])
					}
					if !receiveLikeServer(t, a, rng, p, off, 3*chunk, &received[w]) {
						return
					}
					copy(ref[off:], p)
				case 2:
					if !writesAsModel(t, a, rng.Int64(), ref, off, ln) {
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
	require.Positive(t, sum(received[:]), "writes were received in place")
	requireWholeArray(t, a, ref, "the whole array")
	st := a.Status().Stats
	assert.Positive(t, st.MemberBytesElided, "received zero blocks are punched")

	// A payload of zeroes but its first byte: every whole zero block is
	// punched, on every member it reaches.
	p := make([]byte, 4*chunk)
	p[0] = 1
	calls := 0
	done, err := a.ReceiveAt(make([]byte, len(p)), 0, nil, recvFrom(p, -1, &calls))
	require.NoError(t, err)
	require.Equal(t, len(p), done)
	st2 := a.Status().Stats
	assert.Equal(t, int64(len(p)-4096), st2.MemberBytesElided-st.MemberBytesElided, "zero blocks punched")
	assert.Equal(t, int64(4096), st2.MemberBytesWritten-st.MemberBytesWritten, "the one data block written")
	got := make([]byte, len(p))
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, p, got)
	copy(ref, p)
	st = st2
	assert.Equal(t, st.ClientBytesWritten, st.MemberBytesWritten+st.MemberBytesElided,
		"RAID0 writes each client byte once, received or not")
}

// TestReceiveAtDeclines: levels that write a byte twice, parity levels
// without a stripe cache (receivestripes_test.go has theirs), an array
// with checksums and members that are not held in memory decline before
// asking for a byte, and a write past the end is declined for WriteAt to
// refuse.
func TestReceiveAtDeclines(t *testing.T) {
	const chunk = 64 << 10
	for _, tc := range []struct {
		level stripe.Level
		n     int
		sums  bool
	}{
		{stripe.RAID1, 2, false}, {stripe.RAID10, 4, false}, {stripe.RAID5, 3, false},
		{stripe.RAID6, 4, false}, {stripe.RAID0, 2, true},
	} {
		t.Run(fmt.Sprintf("%s/checksums=%v", tc.level, tc.sums), func(t *testing.T) {
			devs := tmpfsDevs(t, tc.n, levelSizeFor(tc.level, chunk, 32))
			a := createArray(t, devs, raid.CreateOptions{Name: "no", Level: tc.level, Chunk: chunk, Checksums: tc.sums}, raid.Options{CleanDelay: -1})
			calls := 0
			done, err := a.ReceiveAt(make([]byte, 1<<20), 0, nil, recvFrom(make([]byte, 1<<20), -1, &calls))
			assert.Zero(t, done)
			assert.NoError(t, err)
			assert.Zero(t, calls, "recv was called")
		})
	}
	t.Run("memory members", func(t *testing.T) {
		r := newRig(2, memberSizeFor(chunk, 32))
		a := createArray(t, r.devs, raid.CreateOptions{Name: "mem", Level: stripe.RAID0, Chunk: chunk}, raid.Options{CleanDelay: -1})
		calls := 0
		done, _ := a.ReceiveAt(make([]byte, 256<<10), 0, nil, recvFrom(make([]byte, 256<<10), -1, &calls))
		assert.Zero(t, done)
		assert.Zero(t, calls)
	})
	t.Run("past the end", func(t *testing.T) {
		devs := tmpfsDevs(t, 2, levelSizeFor(stripe.RAID0, chunk, 32))
		a := createArray(t, devs, raid.CreateOptions{Name: "end", Level: stripe.RAID0, Chunk: chunk}, raid.Options{CleanDelay: -1})
		calls := 0
		done, _ := a.ReceiveAt(make([]byte, 256<<10), a.Size()-4096, nil, recvFrom(make([]byte, 256<<10), -1, &calls))
		assert.Zero(t, done)
		assert.Zero(t, calls)
	})
}
