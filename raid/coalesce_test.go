package raid_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// TestCoalescing hammers a few RAID5 stripes with small writes from many
// goroutines (each owning every 8th block): gathered writes must land
// exactly, parity must match, and some writes must have been merged.
func TestCoalescing(t *testing.T) {
	const chunk = 16 << 10
	const block = 4096
	// Slow members make writes to a stripe overlap, as they do on disks.
	var devs []raid.Device
	for i := 0; i < 4; i++ {
		m := membertest.Inject(member.NewMemory(memberSizeFor(chunk, 8)), membertest.Latency(200*time.Microsecond))
		devs = append(devs, raid.Device{Path: fmt.Sprint("slow", i), Member: keep{m}})
	}
	a := createArray(t, devs, raid.CreateOptions{Name: "co", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1})
	area := 2 * a.Geometry().StripeWidth() // two stripes
	want := make([]byte, area)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			p := make([]byte, block)
			for i := 0; i < 60; i++ {
				b := int64(rng.Intn(int(area/block/8)))*8 + int64(g)
				rng.Read(p)
				if _, err := a.WriteAt(p, b*block); err != nil {
					t.Error(err)
					return
				}
				copy(want[b*block:], p) // blocks are owned by one goroutine
			}
		}()
	}
	wg.Wait()
	got := make([]byte, area)
	_, err := a.ReadAt(got, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "content after gathered writes: %s", firstDiff(got, want, 0))
	checkConsistent(t, a)
	assert.Positive(t, a.Status().Stats.CoalescedWrites, "concurrent writes to one stripe should have been merged")
}

// TestCoalescingSequentialStream writes a sequential stream in 256 KiB
// pieces from 16 goroutines (a client at queue depth 16): leaders wait
// briefly for the rest of their stripe, so most stripes go out whole and
// the write amplification approaches the full-stripe 4/3 instead of the 2
// of separate partial writes.
func TestCoalescingSequentialStream(t *testing.T) {
	const chunk = 512 << 10
	const piece = 256 << 10
	var devs []raid.Device
	for i := 0; i < 4; i++ {
		m := membertest.Inject(member.NewMemory(memberSizeFor(chunk, 48)), membertest.Latency(50*time.Microsecond))
		devs = append(devs, raid.Device{Path: fmt.Sprint("s", i), Member: keep{m}})
	}
	a := createArray(t, devs, raid.CreateOptions{Name: "seq", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1})
	want := make([]byte, a.Size())
	rand.New(rand.NewSource(7)).Read(want)
	var next atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				off := next.Add(piece) - piece
				if off >= a.Size() {
					return
				}
				if _, err := a.WriteAt(want[off:min(off+piece, a.Size())], off); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	requireContent(t, a, want, "after the stream")
	st := a.Status().Stats
	t.Logf("write amplification %.3f, %d writes merged", st.WriteAmplification, st.CoalescedWrites)
	assert.Less(t, st.WriteAmplification, 1.75, "a queue-depth-16 sequential stream should mostly write whole stripes (separate partial writes give about 2)")
}
