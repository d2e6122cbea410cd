package raid_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"sync"
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
	a, err := raid.Create(devs, raid.CreateOptions{Name: "co", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	defer checkAndClose(t, a)
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
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "content after gathered writes: %s", firstDiff(got, want, 0))
	require.NoError(t, a.Check())
	assert.Positive(t, a.Status().Stats.CoalescedWrites, "concurrent writes to one stripe should have been merged")
}
