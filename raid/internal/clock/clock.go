// Package clock is the time source of the engine's timing-dependent
// background work: the rebuild rate limiter, the idle clean marking and
// the rebuild checkpoints. Production code uses Real; tests inject a Fake
// and move time forward themselves, so they never sleep to let the engine's
// delays pass and a run does not depend on how busy the machine is.
package clock

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Clock tells the time and waits for it to pass.
type Clock interface {
	// Now returns the current time on this clock.
	Now() time.Time
	// Sleep returns nil once d has passed on this clock, or ctx.Err() as
	// soon as ctx is done, whichever comes first. d <= 0 returns at once
	// (with ctx.Err() if ctx is already done).
	Sleep(ctx context.Context, d time.Duration) error
}

// Real is the wall clock.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// Sleep waits on a timer.
func (Real) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Fake is a clock that only moves when Advance is called. Sleepers wake
// when an Advance reaches their deadline. It is safe for concurrent use.
type Fake struct {
	mu       sync.Mutex
	now      time.Time
	sleepers []*sleeper
	changed  chan struct{} // closed and replaced whenever the sleeper set changes
}

type sleeper struct {
	at   time.Time
	wake chan struct{}
}

// NewFake returns a Fake reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Sleep blocks until Advance moves the clock to now+d or ctx is done.
func (f *Fake) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	f.mu.Lock()
	s := &sleeper{at: f.now.Add(d), wake: make(chan struct{})}
	f.sleepers = append(f.sleepers, s)
	f.notifyLocked()
	f.mu.Unlock()
	select {
	case <-s.wake:
		return nil
	case <-ctx.Done():
		f.mu.Lock()
		for i, o := range f.sleepers {
			if o == s {
				f.sleepers = append(f.sleepers[:i], f.sleepers[i+1:]...)
				f.notifyLocked()
				break
			}
		}
		f.mu.Unlock()
		return ctx.Err()
	}
}

// Advance moves the clock forward by d and wakes every sleeper whose
// deadline it reaches.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	kept := f.sleepers[:0]
	woke := false
	for _, s := range f.sleepers {
		if s.at.After(f.now) {
			kept = append(kept, s)
			continue
		}
		close(s.wake)
		woke = true
	}
	clear(f.sleepers[len(kept):])
	f.sleepers = kept
	if woke {
		f.notifyLocked()
	}
}

// AdvanceToNext moves the clock to the earliest sleeper's deadline (not
// backwards) and wakes the sleepers due then. It reports whether anyone
// was asleep.
func (f *Fake) AdvanceToNext() bool {
	f.mu.Lock()
	if len(f.sleepers) == 0 {
		f.mu.Unlock()
		return false
	}
	at := f.sleepers[0].at
	for _, s := range f.sleepers[1:] {
		if s.at.Before(at) {
			at = s.at
		}
	}
	d := max(at.Sub(f.now), 0)
	f.mu.Unlock()
	f.Advance(d)
	return true
}

// Sleepers returns the deadlines of the goroutines asleep on the clock,
// earliest first, as durations from now.
func (f *Fake) Sleepers() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	ds := make([]time.Duration, len(f.sleepers))
	for i, s := range f.sleepers {
		ds[i] = s.at.Sub(f.now)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds
}

// WaitSleepers blocks until at least n goroutines sleep on the clock, or
// until the real-time limit passes; it reports whether they did. Tests use
// it to advance the clock only once the engine has gone to sleep.
func (f *Fake) WaitSleepers(n int, limit time.Duration) bool {
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		have, changed := len(f.sleepers), f.changed
		f.mu.Unlock()
		if have >= n {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return false
		}
	}
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}
