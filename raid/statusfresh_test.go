package raid_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// statusProbe is a slog handler that, when the array logs an event of
// kind, records what Status says at that moment.
type statusProbe struct {
	kind  raid.EventKind
	a     atomic.Pointer[raid.Array]
	state atomic.Value
}

func (h *statusProbe) Enabled(context.Context, slog.Level) bool { return true }
func (h *statusProbe) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *statusProbe) WithGroup(string) slog.Handler            { return h }
func (h *statusProbe) Handle(_ context.Context, r slog.Record) error {
	if a := h.a.Load(); a != nil && r.Message == string(h.kind) {
		h.state.Store(a.Status().State)
	}
	return nil
}

// TestStatusShowsFailureWithTheView: by the time a member failure's View
// is published (so that requests see it and fail, or run degraded), Status
// shows it too. The array-failed event is sent right after the View is
// published, by the goroutine that recorded the failure (a rebuild that
// met it, say), before it releases the table: Status read then must
// already say failed, not the degraded of before.
func TestStatusShowsFailureWithTheView(t *testing.T) {
	probe := &statusProbe{kind: raid.EventFailed}
	var devs []raid.Device
	for i := range 2 {
		devs = append(devs, raid.Device{Path: fmt.Sprint("mem", i), Member: member.NewMemory(levelSizeFor(stripe.RAID1, 64<<10, 4))})
	}
	a, err := raid.Create(devs, raid.CreateOptions{Name: "fresh", Level: stripe.RAID1, Chunk: 64 << 10}, raid.Options{CleanDelay: -1, Logger: slog.New(probe)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	probe.a.Store(a)
	failRole(t, a, 0)
	a.FailRole(1, fmt.Errorf("failed by test"))
	assert.Equal(t, "failed", probe.state.Load(), "Status when the array-failed event went out")
	assert.Equal(t, "failed", a.Status().State)
}
