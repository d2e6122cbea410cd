package raid_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/clock"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// TestCleanAfterIdle: the array is marked clean on disk, and its
// write-intent bitmap regions cleaned, once no write has come for
// CleanDelay, and not before. The clock is fake, so the test does not
// sleep and does not depend on the machine's speed.
func TestCleanAfterIdle(t *testing.T) {
	const chunk = 16 << 10
	const delay = 2 * time.Second
	clk := clock.NewFake(time.Unix(1e9, 0))
	r := newRig(3, memberSizeFor(chunk, 16))
	a := createArray(t, r.devs, raid.CreateOptions{Name: "idle", Level: stripe.RAID5, Chunk: chunk, BitmapRegion: 4 * chunk},
		raid.WithClock(raid.Options{CleanDelay: delay}, clk))
	onDisk := func() []superblock.ArrayState {
		var s []superblock.ArrayState
		for _, m := range r.mem {
			sb, err := superblock.Read(m)
			require.NoError(t, err)
			s = append(s, sb.State)
		}
		return s
	}
	dirty := []superblock.ArrayState{superblock.StateDirty, superblock.StateDirty, superblock.StateDirty}
	clean := []superblock.ArrayState{superblock.StateClean, superblock.StateClean, superblock.StateClean}
	// tick moves the clock by d and waits until the cleaner has looked and
	// gone back to sleep.
	tick := func(d time.Duration) {
		t.Helper()
		require.True(t, clk.WaitSleepers(1, 10*time.Second), "the cleaner sleeps on the clock")
		clk.Advance(d)
		require.True(t, clk.WaitSleepers(1, 10*time.Second), "the cleaner goes back to sleep")
	}

	_, err := a.WriteAt(make([]byte, chunk), 0)
	require.NoError(t, err)
	assert.Equal(t, "dirty", a.Status().State)
	assert.Equal(t, dirty, onDisk(), "dirty on disk before the write")
	assert.Equal(t, 1, a.Status().Bitmap.Dirty)

	tick(delay / 2) // 1s after the write
	assert.Equal(t, "dirty", a.Status().State, "not idle long enough")
	_, err = a.WriteAt(make([]byte, chunk), 8*chunk) // another region, at 1s
	require.NoError(t, err)
	tick(delay / 2) // 2s after the first write, 1s after the second
	assert.Equal(t, "dirty", a.Status().State, "a write restarts the quiet interval")
	assert.Equal(t, dirty, onDisk())
	assert.Equal(t, 2, a.Status().Bitmap.Dirty)

	tick(delay / 2) // 2s after the last write
	assert.Equal(t, "clean", a.Status().State)
	assert.Equal(t, clean, onDisk(), "clean on disk after the quiet interval")
	assert.Zero(t, a.Status().Bitmap.Dirty, "bitmap regions cleaned")

	_, err = a.WriteAt(make([]byte, 1), 0)
	require.NoError(t, err)
	assert.Equal(t, dirty, onDisk(), "the next write marks the array dirty again first")
}
