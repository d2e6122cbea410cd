package raid_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// TestCloseRightAfterStartWithHook: an array with an event hook closed at
// once, before its event goroutine has done anything, is no data race
// (go test -race).
func TestCloseRightAfterStartWithHook(t *testing.T) {
	for range 20 {
		r := newRig(2, memberSizeFor(64<<10, 4))
		a, err := raid.Create(r.devs, raid.CreateOptions{Name: "h", Level: stripe.RAID1, Chunk: 64 << 10}, raid.Options{OnEvent: func(raid.Event) {}})
		require.NoError(t, err)
		require.NoError(t, a.Close())
	}
}
