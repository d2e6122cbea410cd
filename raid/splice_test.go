package raid_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// preadInto returns a SpliceReadAt send function that reads each named
// file range into dst, in turn, with pread on the descriptor it names (what
// the NBD server's splice moves, as bytes), and the count of bytes placed.
func preadInto(dst []byte) (func(src syscall.RawConn, off int64, n int) error, *int) {
	at := new(int)
	return func(src syscall.RawConn, off int64, n int) error {
		if n <= 0 || *at+n > len(dst) {
			return fmt.Errorf("range of %d bytes at %d of %d", n, *at, len(dst))
		}
		var err error
		cerr := src.Control(func(fd uintptr) {
			var k int
			k, err = unix.Pread(int(fd), dst[*at:*at+n], off)
			if err == nil && k != n {
				err = fmt.Errorf("short pread: %d of %d", k, n)
			}
		})
		if cerr != nil {
			return cerr
		}
		*at += n
		return err
	}, at
}

// TestSpliceReadModel: reads planned for splicing (SpliceReadAt) name the
// member file ranges that hold exactly the bytes written, at every level,
// with the stripe cache and degraded: concurrent workers write and read
// their own parts of the array and compare every read with a flat model.
// A read that declines is served by ReadAt and compared too; healthy
// arrays must splice most reads, and RAID5 and RAID6 must decline reads
// that would reconstruct or that hit bytes held in the stripe cache.
func TestSpliceReadModel(t *testing.T) {
	seed := testSeed(t)
	for _, level := range []stripe.Level{stripe.RAID0, stripe.RAID1, stripe.RAID5, stripe.RAID6, stripe.RAID10} {
		shapes := validShapes()[level]
		for _, cache := range []bool{false, true} {
			if cache && level != stripe.RAID5 && level != stripe.RAID6 {
				continue
			}
			n := shapes[len(shapes)-1]
			name := fmt.Sprintf("%s/members=%d/cache=%v", level, n, cache)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s := subSeed(seed, name)
				t.Logf("seed %d (replay with -seed %d)", s, seed)
				testSpliceModel(t, level, n, cache, s)
			})
		}
	}
}

func testSpliceModel(t *testing.T, level stripe.Level, n int, cache bool, seed int64) {
	const chunk = 16 << 10
	devs := tmpfsDevs(t, n, levelSizeFor(level, chunk, 256))
	o := raid.Options{CleanDelay: -1}
	if cache {
		o.StripeCache = 4 << 20
		o.RandomWriteBack = raid.WriteBackOn
	}
	a := createArray(t, devs, raid.CreateOptions{Name: "splice", Level: level, Chunk: chunk}, o)
	size := a.Size()
	ref := make([]byte, size)
	const workers = 3
	part := size / workers
	var spliced, declined [workers]int
	phase := func(ops int, degraded bool) {
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(seed), uint64(w)<<1|b2u(degraded)))
				lo := int64(w) * part
				for i := 0; i < ops; i++ {
					ln := 1 + rng.Int64N(min(part, 6*chunk))
					off := lo + rng.Int64N(part-ln+1)
					if rng.IntN(3) == 0 {
						p := make([]byte, ln)
						randomBytes(p, rng.Int64())
						_, err := a.WriteAt(p, off)
						if !assert.NoError(t, err) {
							return
						}
						copy(ref[off:], p)
						continue
					}
					got := make([]byte, ln)
					send, placed := preadInto(got)
					if a.SpliceReadAt(got, off, send) {
						if !assert.Equal(t, int(ln), *placed) || !assert.Equal(t, ref[off:off+ln], got, "spliced read [%d, +%d)", off, ln) {
							return
						}
						spliced[w]++
						continue
					}
					declined[w]++
					clear(got)
					_, err := a.ReadAt(got, off)
					if !assert.NoError(t, err) || !assert.Equal(t, ref[off:off+ln], got, "read [%d, +%d)", off, ln) {
						return
					}
				}
			}(w)
		}
		wg.Wait()
	}
	phase(150, false)
	require.False(t, t.Failed())
	total := func(c [workers]int) (s int) {
		for _, v := range c {
			s += v
		}
		return s
	}
	healthy := total(spliced)
	t.Logf("healthy: %d spliced, %d declined", healthy, total(declined))
	if !cache {
		require.Zero(t, total(declined), "a healthy array without a stripe cache splices every read")
	} else {
		require.Positive(t, total(declined), "reads of bytes in the stripe cache are copied")
	}
	require.Positive(t, healthy)
	if level == stripe.RAID0 {
		return
	}
	require.NoError(t, a.Sync())
	failRole(t, a, 1)
	spliced, declined = [workers]int{}, [workers]int{}
	phase(150, true)
	t.Logf("degraded: %d spliced, %d declined", total(spliced), total(declined))
	if level == stripe.RAID1 || level == stripe.RAID10 {
		require.Zero(t, total(declined), "a degraded mirror reads the survivors")
	} else {
		require.Positive(t, total(declined), "reads of the failed member reconstruct")
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// TestSpliceReadDeclines: arrays whose reads cannot be spliced decline
// before naming any range: checksums (the bytes must be verified), and
// members that are not page-cache files (memory members).
func TestSpliceReadDeclines(t *testing.T) {
	const chunk = 64 << 10
	devs := tmpfsDevs(t, 3, levelSizeFor(stripe.RAID5, chunk, 64))
	a := createArray(t, devs, raid.CreateOptions{Name: "sums", Level: stripe.RAID5, Chunk: chunk, Checksums: true}, raid.Options{CleanDelay: -1})
	never := func(syscall.RawConn, int64, int) error { t.Fatal("a range was named"); return nil }
	require.False(t, a.SpliceReadAt(make([]byte, 256<<10), 0, never))

	r := newRig(3, memberSizeFor(chunk, 64))
	b := createArray(t, r.devs, raid.CreateOptions{Name: "mem", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.False(t, b.SpliceReadAt(make([]byte, 256<<10), 0, never))
}
