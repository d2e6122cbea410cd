package raid_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
)

// TestStatusForgetsAbsentMemberAfterRebuild assembles a RAID5 without one
// member and rebuilds onto a new device: the absent member's "failed -
// device not present" row goes away, as md drops it.
func TestStatusForgetsAbsentMemberAfterRebuild(t *testing.T) {
	const chunk = 16 << 10
	r, a := newRAID5(t, 3, 0, chunk, 8, raid.Options{CleanDelay: -1})
	want := fill(t, a, 6)
	require.NoError(t, a.Close())
	// Role 0's device is gone.
	b := assembleArray(t, r.devs[1:3], raid.Options{CleanDelay: -1})
	st := b.Status()
	require.True(t, st.Degraded)
	absent := 0
	for _, d := range st.Devices {
		if d.Note == "device not present" {
			absent++
		}
	}
	require.NotZero(t, absent, "before the rebuild the absent member shows: %+v", st.Devices)
	fresh := newRig(1, memberSizeFor(chunk, 8))
	fresh.devs[0].Path = "new"
	require.NoError(t, b.AddMember(fresh.devs[0], false))
	st = waitIdle(t, b)
	require.False(t, st.Degraded)
	requireContent(t, b, want, "after the rebuild")
	for _, d := range st.Devices {
		assert.NotEqual(t, "device not present", d.Note, "row left over after the rebuild: %+v", d)
		assert.Equal(t, "active", d.State, "%+v", d)
	}
	assert.Len(t, st.Devices, 3)
}
