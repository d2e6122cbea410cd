package raid_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/clock"
)

// logRecorder is a slog.Handler that keeps every message.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := r.Message
	r.Attrs(func(a slog.Attr) bool {
		m += " " + a.String()
		return true
	})
	h.msgs = append(h.msgs, m)
	return nil
}
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

// count returns how many messages since the first from contain s.
func (h *logRecorder) count(from int, s string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.msgs[from:] {
		if strings.Contains(m, s) {
			n++
		}
	}
	return n
}

func (h *logRecorder) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.msgs)
}

// TestFailedArrayLogsQuietly fails a second RAID5 member while the array is
// dirty with bitmap bits set: the cleaner, ticking on a fake clock, must
// neither retry the bitmap and warn at every tick nor mark the failed array
// clean.
func TestFailedArrayLogsQuietly(t *testing.T) {
	const chunk = 16 << 10
	const delay = 2 * time.Second
	h := &logRecorder{}
	clk := clock.NewFake(time.Unix(1e9, 0))
	_, a := newRAID5(t, 4, 0, chunk, 8, raid.WithClock(raid.Options{CleanDelay: delay, Logger: slog.New(h)}, clk))
	_, err := a.WriteAt(make([]byte, 4096), 0)
	require.NoError(t, err)
	require.True(t, a.Status().Dirty)
	mark := h.len()
	a.FailRole(0, fmt.Errorf("failed by test"))
	a.FailRole(1, fmt.Errorf("failed by test"))
	require.True(t, a.Status().Failed)
	_, err = a.WriteAt(make([]byte, 4096), 0)
	require.ErrorIs(t, err, raid.ErrFailed)
	// Twenty ticks of the cleaner, each well past the quiet interval.
	for i := 0; i < 20; i++ {
		require.True(t, clk.WaitSleepers(1, 10*time.Second), "the cleaner sleeps on the clock")
		clk.Advance(delay)
	}
	require.True(t, clk.WaitSleepers(1, 10*time.Second), "the cleaner goes back to sleep")
	assert.Zero(t, h.count(mark, "cannot clean write-intent bitmap"), "a failed array's bitmap is left alone")
	assert.Zero(t, h.count(mark, "array clean"), "a failed array is never marked clean")
	assert.Zero(t, h.count(mark, "array dirty"))
	assert.Equal(t, "failed", a.Status().State)
}
