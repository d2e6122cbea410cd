package member_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/raidd/raidd/internal/member"
)

// readCall is one read system call a test saw.
type readCall struct{ off, n int64 }

// busyMember opens a direct member of the given kind holding a known
// pattern, and fills its read queue's places in flight with ReadDepth
// reads of the first 64 KiB chunks that stay in the I/O hook until the
// returned release is called. Every read system call on the member from
// then on is recorded in calls (the held ones included).
func busyMember(t *testing.T, kind string) (f *member.File, want []byte, calls func() []readCall, release func()) {
	t.Helper()
	const size = 4 << 20
	f = openDirect(t, kind, size)
	member.SetReadDepth(f, member.ReadDepthRotational) // the test's reads are laid out for it
	depth := member.ReadDepth(f)
	want = make([]byte, size)
	rand.New(rand.NewSource(9)).Read(want)
	_, err := f.WriteAt(want, 0)
	require.NoError(t, err)

	var mu sync.Mutex
	var seen []readCall
	held := make(chan struct{})
	var entered sync.WaitGroup
	entered.Add(depth)
	restore := member.SetIOHook(func(m *member.File, write bool, off int64, n int) {
		if m != f || write {
			return
		}
		mu.Lock()
		seen = append(seen, readCall{off, int64(n)})
		mu.Unlock()
		if off < int64(depth)*64<<10 {
			entered.Done()
			<-held
		}
	})
	var wg sync.WaitGroup
	for i := 0; i < depth; i++ {
		wg.Add(1)
		go func(off int64) {
			defer wg.Done()
			p := misaligned(64<<10, 0)
			_, err := f.ReadAt(p, off)
			assert.NoError(t, err)
			assert.True(t, bytes.Equal(want[off:off+64<<10], p), "held read at %d", off)
		}(int64(i) * 64 << 10)
	}
	entered.Wait() // an idle member sent them to the device at once
	once := sync.Once{}
	release = func() { once.Do(func() { close(held); wg.Wait() }) }
	t.Cleanup(func() { release(); restore() })
	calls = func() []readCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]readCall(nil), seen[depth:]...)
	}
	return f, want, calls, release
}

// waitQueued waits until n reads wait in f's read queue.
func waitQueued(t *testing.T, f *member.File, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); member.QueuedReads(f) < n; {
		if time.Now().After(deadline) {
			t.Fatalf("%d reads queued, want %d", member.QueuedReads(f), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestDirectReadsMerge has three reads, adjacent on the member and issued
// by different callers (ReadAt and ReadvAt), wait while the member's
// places in flight are taken: they must reach the device as one preadv of
// their 192 KiB, each caller getting exactly its bytes. Without the read
// queue's merging they cost three reads.
func TestDirectReadsMerge(t *testing.T) {
	for _, kind := range directKinds {
		t.Run(kind, func(t *testing.T) {
			f, want, calls, release := busyMember(t, kind)
			var wg sync.WaitGroup
			read := func(off int64, vec bool) {
				defer wg.Done()
				var err error
				var got []byte
				if vec {
					a, b := misaligned(32<<10, 0), misaligned(32<<10, 0)
					_, err = f.ReadvAt([][]byte{a, b}, off)
					got = append(a, b...)
				} else {
					got = misaligned(64<<10, 0)
					_, err = f.ReadAt(got, off)
				}
				assert.NoError(t, err)
				assert.True(t, bytes.Equal(want[off:off+64<<10], got), "read at %d", off)
			}
			// The oldest waiting read leads; the others extend its run
			// backwards, one after the other.
			for i, off := range []int64{640 << 10, 576 << 10, 512 << 10} {
				wg.Add(1)
				go read(off, i == 1)
				waitQueued(t, f, i+1)
			}
			release()
			wg.Wait()
			assert.Equal(t, []readCall{{512 << 10, 192 << 10}}, calls())
		})
	}
}

// TestDirectMergedReadError: when a merged read fails, each of its reads
// is issued alone, so that an error reaches only the caller whose bytes it
// covers, be it the run's leader or not; the other gets its bytes.
func TestDirectMergedReadError(t *testing.T) {
	for _, kind := range directKinds {
		for bad := 0; bad < 2; bad++ { // the read the bad block is in
			t.Run(fmt.Sprintf("%s/bad=%d", kind, bad), func(t *testing.T) {
				f, want, calls, release := busyMember(t, kind)
				badOff := int64(512+64*bad+20) << 10
				defer member.SetFaultHook(func(m *member.File, write bool, off int64, n int) error {
					if m == f && !write && off <= badOff && badOff < off+int64(n) {
						return unix.EIO
					}
					return nil
				})()
				var wg sync.WaitGroup
				errs := make([]error, 2)
				bufs := [][]byte{misaligned(64<<10, 0), misaligned(64<<10, 0)}
				offs := []int64{512 << 10, 576 << 10}
				for i, off := range offs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, errs[i] = f.ReadAt(bufs[i], off)
					}()
					waitQueued(t, f, i+1)
				}
				release()
				wg.Wait()
				good := 1 - bad
				assert.NoError(t, errs[good], "the read the bad block is not in")
				assert.True(t, bytes.Equal(want[offs[good]:offs[good]+64<<10], bufs[good]), "its bytes")
				assert.ErrorIs(t, errs[bad], unix.EIO, "the read the bad block is in")
				got := calls()
				require.Len(t, got, 3)
				assert.Equal(t, readCall{512 << 10, 128 << 10}, got[0], "the merged read")
				assert.ElementsMatch(t, []readCall{{512 << 10, 64 << 10}, {576 << 10, 64 << 10}}, got[1:], "then each alone")
			})
		}
	}
}

// TestDirectReadQueueConcurrent runs many concurrent reads, adjacent,
// overlapping and scattered, single and vectored, on a direct member
// (under -race in CI): every caller gets exactly its bytes.
func TestDirectReadQueueConcurrent(t *testing.T) {
	const size = 4 << 20
	f := openDirect(t, "file", size)
	want := make([]byte, size)
	rand.New(rand.NewSource(5)).Read(want)
	_, err := f.WriteAt(want, 0)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for i := 0; i < 40; i++ {
				n := int64(1+rng.Intn(16)) << 12
				off := int64(rng.Intn(size/4096)) << 12
				if i%2 == 0 { // a stream: the chunks after one another goroutine read
					off = int64(g+8*i) * 16 << 10 % (size - n)
					off &^= 4095
				}
				n = min(n, size-off)
				var got []byte
				if i%3 == 0 && n >= 8192 {
					a, b := misaligned(int(n/2)&^4095, 0), misaligned(int(n-int64(int(n/2)&^4095)), 0)
					_, err := f.ReadvAt([][]byte{a, b}, off)
					if !assert.NoError(t, err) {
						return
					}
					got = append(a, b...)
				} else {
					got = misaligned(int(n), 0)
					if _, err := f.ReadAt(got, off); !assert.NoError(t, err) {
						return
					}
				}
				if !assert.True(t, bytes.Equal(want[off:off+n], got), "read [%d, +%d)", off, n) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestReadDepthFollowsRotational: a member on a device that says it does
// not rotate keeps many reads in flight before it queues near reads, a
// disk (or a device sysfs does not describe) one; a partition answers for
// its disk.
func TestReadDepthFollowsRotational(t *testing.T) {
	root := t.TempDir()
	put := func(dir, rot string) {
		require.NoError(t, os.MkdirAll(filepath.Join(root, dir, "queue"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, dir, "queue", "rotational"), []byte(rot+"\n"), 0o644))
	}
	put("dev/block/259:0", "0") // an NVMe disk
	put("dev/block/8:0", "1")   // a rotating disk
	require.NoError(t, os.MkdirAll(filepath.Join(root, "dev/block/259:0/p1"), 0o755))
	assert.Equal(t, member.ReadDepthSolid, member.ReadDepthOf(root, unix.Mkdev(259, 0)))
	assert.Equal(t, member.ReadDepthRotational, member.ReadDepthOf(root, unix.Mkdev(8, 0)))
	assert.Equal(t, member.ReadDepthRotational, member.ReadDepthOf(root, unix.Mkdev(7, 3)), "no sysfs entry")
	// A partition's directory has no queue; its disk's has.
	require.NoError(t, os.Symlink(filepath.Join(root, "dev/block/259:0/p1"), filepath.Join(root, "dev/block/259:1")))
	assert.Equal(t, member.ReadDepthSolid, member.ReadDepthOf(root, unix.Mkdev(259, 1)))
	assert.Less(t, member.ReadDepthRotational, member.ReadDepthSolid)
}
