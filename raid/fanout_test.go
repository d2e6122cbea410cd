package raid_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// concurrency counts a member set's data writes in flight and the most
// seen at once.
type concurrency struct{ now, peak atomic.Int64 }

func (c *concurrency) enter() {
	n := c.now.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
}

// pagedMember is a test member that says whether it is opened with
// O_DIRECT (as member.File does) and holds each write a little, so that
// writes issued in parallel overlap.
type pagedMember struct {
	keep
	direct bool
	c      *concurrency
}

func (m pagedMember) Direct() bool { return m.direct }

func (m pagedMember) WriteAt(p []byte, off int64) (int, error) {
	m.c.enter()
	defer m.c.now.Add(-1)
	time.Sleep(2 * time.Millisecond)
	return m.keep.WriteAt(p, off)
}

func (m pagedMember) WritevAt(bufs [][]byte, off int64) (int, error) {
	m.c.enter()
	defer m.c.now.Add(-1)
	time.Sleep(2 * time.Millisecond)
	return m.keep.WritevAt(bufs, off)
}

// fanOut creates a RAID0 of four members made by wrap (which count their
// calls in c), with per-block checksums if checksums, writes 1 MiB across
// them, runs op, and returns the most member calls that overlapped during
// op. It then checks that the array reads back what was written.
func fanOut(t *testing.T, checksums bool, wrap func(m *member.Memory, c *concurrency) raid.Member, op func(a *raid.Array, p []byte)) int64 {
	t.Helper()
	const chunk = 64 << 10
	c := &concurrency{}
	var devs []raid.Device
	for i := 0; i < 4; i++ {
		devs = append(devs, raid.Device{Path: fmt.Sprintf("m%d", i), Member: wrap(member.NewMemory(memberSizeFor(chunk, 32)), c)})
	}
	a := createArray(t, devs, raid.CreateOptions{Name: "fan", Level: stripe.RAID0, Chunk: chunk, Checksums: checksums}, raid.Options{CleanDelay: -1})
	p := make([]byte, 1<<20)
	randomBytes(p, 1)
	// The first write also marks the array dirty and the bitmap
	// (superblock writes to every member); op's calls are data only.
	_, err := a.WriteAt(p, 0)
	require.NoError(t, err)
	c.peak.Store(0)
	op(a, p)
	peak := c.peak.Load()
	got := make([]byte, len(p))
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	assert.Equal(t, p, got)
	return peak
}

// TestBufferedMemberWritesInline: a lone 1 MiB write across four members
// that go through the page cache (Direct() false) writes them one after
// the other on the request's goroutine, with no hand-off to the I/O
// workers (the copies do not wait for a device); the same write to
// O_DIRECT members still goes to all of them at once. A checksummed
// member answers for its device: its writes are page-cache writes too
// (they went to the workers, a hand-off and a wake-up per member write,
// until buffered looked through the checksum wrapper).
func TestBufferedMemberWritesInline(t *testing.T) {
	for _, checksums := range []bool{false, true} {
		for _, direct := range []bool{false, true} {
			t.Run(fmt.Sprintf("checksums=%v/direct=%v", checksums, direct), func(t *testing.T) {
				peak := fanOut(t, checksums, func(m *member.Memory, c *concurrency) raid.Member { return pagedMember{keep{m}, direct, c} },
					func(a *raid.Array, p []byte) {
						_, err := a.WriteAt(p, 0)
						require.NoError(t, err)
					})
				if direct {
					assert.Greater(t, peak, int64(1), "O_DIRECT members are written in parallel")
				} else {
					assert.Equal(t, int64(1), peak, "page-cache members are written inline, one at a time")
				}
			})
		}
	}
}

// heldMember is a test member held in memory (InMemory, as member.File on
// tmpfs says) that holds each read a little, so that reads issued in
// parallel overlap.
type heldMember struct {
	keep
	inMemory bool
	c        *concurrency
}

func (m heldMember) InMemory() bool { return m.inMemory }

func (m heldMember) ReadAt(p []byte, off int64) (int, error) {
	m.c.enter()
	defer m.c.now.Add(-1)
	time.Sleep(2 * time.Millisecond)
	return m.keep.ReadAt(p, off)
}

func (m heldMember) ReadvAt(bufs [][]byte, off int64) (int, error) {
	m.c.enter()
	defer m.c.now.Add(-1)
	time.Sleep(2 * time.Millisecond)
	return m.keep.ReadvAt(bufs, off)
}

// TestMemoryMemberReadsInline: a lone 1 MiB read across four members held
// in memory reads them one after the other on the request's goroutine,
// with no hand-off to the I/O workers (a copy out of memory waits for
// nothing); the same read of members that do not say so still goes to all
// of them at once.
func TestMemoryMemberReadsInline(t *testing.T) {
	for _, held := range []bool{true, false} {
		t.Run(fmt.Sprintf("inMemory=%v", held), func(t *testing.T) {
			peak := fanOut(t, false, func(m *member.Memory, c *concurrency) raid.Member { return heldMember{keep{m}, held, c} },
				func(a *raid.Array, p []byte) {
					got := make([]byte, len(p))
					_, err := a.ReadAt(got, 0)
					require.NoError(t, err)
					assert.Equal(t, p, got)
				})
			if held {
				assert.Equal(t, int64(1), peak, "members held in memory are read inline, one at a time")
			} else {
				assert.Greater(t, peak, int64(1), "other members are read in parallel")
			}
		})
	}
}
