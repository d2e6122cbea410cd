package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid/internal/clock"
)

func TestFakeSleepWakesAtDeadline(t *testing.T) {
	start := time.Unix(1000, 0)
	f := clock.NewFake(start)
	done := make(chan error, 1)
	go func() { done <- f.Sleep(context.Background(), 10*time.Second) }()
	require.True(t, f.WaitSleepers(1, 5*time.Second))
	assert.Equal(t, []time.Duration{10 * time.Second}, f.Sleepers())
	f.Advance(9 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("woke before its deadline: %v", err)
	default:
	}
	f.Advance(time.Second)
	require.NoError(t, <-done)
	assert.Equal(t, start.Add(10*time.Second), f.Now())
	assert.Empty(t, f.Sleepers())
}

func TestFakeSleepCancelled(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Sleep(ctx, time.Hour) }()
	require.True(t, f.WaitSleepers(1, 5*time.Second))
	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	assert.Empty(t, f.Sleepers(), "a cancelled sleeper leaves")
	assert.ErrorIs(t, f.Sleep(ctx, time.Second), context.Canceled, "a done context returns at once")
	assert.NoError(t, f.Sleep(context.Background(), 0), "no wait for a zero duration")
}

func TestFakeAdvanceToNext(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	assert.False(t, f.AdvanceToNext(), "nobody asleep")
	woke := make(chan time.Duration, 2)
	for _, d := range []time.Duration{3 * time.Second, time.Second} {
		go func() {
			_ = f.Sleep(context.Background(), d)
			woke <- d
		}()
	}
	require.True(t, f.WaitSleepers(2, 5*time.Second))
	require.True(t, f.AdvanceToNext())
	assert.Equal(t, time.Second, <-woke, "the earliest sleeper wakes first")
	assert.Equal(t, time.Unix(1, 0), f.Now())
	require.True(t, f.AdvanceToNext())
	assert.Equal(t, 3*time.Second, <-woke)
	assert.Equal(t, time.Unix(3, 0), f.Now())
}

func TestFakeWaitSleepersTimesOut(t *testing.T) {
	f := clock.NewFake(time.Unix(0, 0))
	assert.False(t, f.WaitSleepers(1, 10*time.Millisecond))
}

func TestReal(t *testing.T) {
	var c clock.Clock = clock.Real{}
	before := time.Now()
	require.NoError(t, c.Sleep(context.Background(), time.Millisecond))
	assert.GreaterOrEqual(t, c.Now().Sub(before), time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, c.Sleep(ctx, time.Hour), context.Canceled)
}
