package raid

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/raidd/raidd/raid/internal/clock"
)

// TestThrottleCatchesUp: a job whose steps take longer than their charge
// (requests queued behind clients' on a busy disk) makes up the lost time
// with the next steps, up to catchUp, so that over the job it keeps its
// rate; a longer stall is not banked for a burst later.
func TestThrottleCatchesUp(t *testing.T) {
	const rate = 16 << 20  // bytes per second
	const step = rate / 16 // one window: 62.5 ms at the rate
	const stepTime = time.Second / 16
	clk := clock.NewFake(time.Unix(1e9, 0))
	a := &Array{minRate: rate, maxRate: rate, clock: clk}
	ctx := context.Background()

	// run runs a job of len(took) steps, step i taking took[i] of I/O,
	// and returns the rate it moved at, in MiB/s. throttle's sleeps are
	// the fake clock's; each is checked to have been waited out by
	// advancing the clock exactly as far.
	run := func(j *recovery, took []time.Duration) float64 {
		start := clk.Now()
		a.throttle(ctx, j) // sets the job's clock, and does not wait
		for _, d := range took {
			if w := j.next.Sub(clk.Now()); w > 0 {
				clk.Advance(w) // throttle's sleep
			}
			clk.Advance(d)
			a.charge(j, step)
		}
		if w := j.next.Sub(clk.Now()); w > 0 {
			clk.Advance(w) // the last step's time is waited out, as rebuild does
		}
		return float64(len(took)*step) / clk.Now().Sub(start).Seconds() / (1 << 20)
	}
	steps := func(n int, d func(i int) time.Duration) []time.Duration {
		took := make([]time.Duration, n)
		for i := range took {
			took[i] = d(i)
		}
		return took
	}

	// Fast steps: the limiter holds the job at its rate.
	got := run(&recovery{}, steps(32, func(int) time.Duration { return stepTime / 10 }))
	assert.InDelta(t, 16, got, 0.1, "fast steps held at the rate")

	// One step in four takes twice its time (queued behind clients), the
	// others a tenth: the late steps' time is made up, the rate holds.
	// Without the catch-up the job lost 62.5 ms every fourth step (12.8).
	got = run(&recovery{}, steps(32, func(i int) time.Duration {
		if i%4 == 1 {
			return 2 * stepTime
		}
		return stepTime / 10
	}))
	assert.InDelta(t, 16, got, 0.2, "a late step's time is made up")

	// Every step late: the job cannot reach its rate, and it runs back to
	// back at what the disk allows, never sleeping.
	late := stepTime + stepTime/6
	got = run(&recovery{}, steps(32, func(int) time.Duration { return late }))
	assert.InDelta(t, 16*float64(stepTime)/float64(late), got, 0.1, "late steps back to back")

	// A long stall (a second without progress) is not banked: after it at
	// most catchUp's worth of steps goes at once, then the rate holds.
	j := &recovery{}
	run(j, steps(4, func(int) time.Duration { return stepTime / 10 }))
	clk.Advance(time.Second)
	free := 0
	for free < 16 && !j.next.After(clk.Now()) {
		a.charge(j, step)
		free++
	}
	assert.Equal(t, int(catchUp/stepTime)+1, free, "steps let go at once after a stall")

	// throttle itself sleeps until the clock allows the next step.
	done := make(chan struct{})
	go func() { a.throttle(ctx, j); close(done) }()
	select {
	case <-done:
		t.Fatal("throttle returned before the step's time")
	case <-time.After(20 * time.Millisecond):
	}
	clk.Advance(j.next.Sub(clk.Now()))
	<-done
}
