package stripe

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deadlockTimeout bounds every wait that must finish; a correct table
// finishes in milliseconds.
const deadlockTimeout = 10 * time.Second

// within runs f in a goroutine and fails the test if it does not return in time.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not finish within %v (deadlock?)", what, d)
	}
}

// heldSlots reports which slots are write-locked, using TryRLock.
func heldSlots(t *Locks) []int {
	var held []int
	for i := range t.slots {
		if t.slots[i].TryRLock() {
			t.slots[i].RUnlock()
		} else {
			held = append(held, i)
		}
	}
	return held
}

func span(a, b int) []int {
	var s []int
	for i := a; i <= b; i++ {
		s = append(s, i)
	}
	return s
}

// TestLockSlots pins which slots Lock takes, including wrapped ranges and
// ranges as long as or longer than the table, and that Unlock releases
// exactly those.
func TestLockSlots(t *testing.T) {
	const n = lockSlots
	tests := []struct {
		first, last int64
		want        []int
	}{
		{0, 0, []int{0}},
		{5, 7, []int{5, 6, 7}},
		{n - 1, n - 1, []int{n - 1}},
		{n, n + 2, []int{0, 1, 2}},
		{n - 2, n + 1, []int{0, 1, n - 2, n - 1}},
		{2*n - 1, 2 * n, []int{0, n - 1}},
		{100, 100 + n - 2, append(span(0, 98), span(100, n-1)...)},
		{100, 100 + n - 1, span(0, n-1)},
		{0, n - 1, span(0, n-1)},
		{7, 3*n + 5, span(0, n-1)},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("stripes=%d-%d", tc.first, tc.last), func(t *testing.T) {
			var l Locks
			l.Lock(tc.first, tc.last)
			assert.Equal(t, tc.want, heldSlots(&l), "slots held by Lock")
			l.Unlock(tc.first, tc.last)
			require.Empty(t, heldSlots(&l), "slots still held after Unlock")

			l.RLock(tc.first, tc.last)
			for _, i := range tc.want {
				if !assert.False(t, l.slots[i].TryLock(), "slot %d writable under RLock", i) {
					l.slots[i].Unlock()
				}
			}
			l.RUnlock(tc.first, tc.last)
			require.Empty(t, heldSlots(&l), "slots still held after RUnlock")
			for i := range l.slots {
				require.True(t, l.slots[i].TryLock(), "slot %d not free after RUnlock", i)
				l.slots[i].Unlock()
			}
		})
	}
}

// TestLocksSerialize hammers overlapping exclusive and shared ranges from
// many goroutines and detects any two holders that should have excluded
// each other with per-stripe atomic counters.
func TestLocksSerialize(t *testing.T) {
	tests := []struct {
		name string
		base int64 // first stripe of the contended window
	}{
		{"window=0", 0},
		{"window=wraps-table", lockSlots - 8},
		{"window=aliased", 5*lockSlots - 3},
	}
	const (
		window     = 16
		goroutines = 32
		iterations = 300
	)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l Locks
			var writers, readers [window]atomic.Int32
			var violations atomic.Int32
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 1))
					for range iterations {
						lo := r.IntN(window)
						hi := lo + r.IntN(min(4, window-lo))
						first, last := tc.base+int64(lo), tc.base+int64(hi)
						if r.IntN(3) == 0 {
							l.RLock(first, last)
							for s := lo; s <= hi; s++ {
								readers[s].Add(1)
								if writers[s].Load() != 0 {
									violations.Add(1)
								}
							}
							runtime.Gosched()
							for s := lo; s <= hi; s++ {
								readers[s].Add(-1)
							}
							l.RUnlock(first, last)
							continue
						}
						l.Lock(first, last)
						for s := lo; s <= hi; s++ {
							if writers[s].Add(1) != 1 || readers[s].Load() != 0 {
								violations.Add(1)
							}
						}
						runtime.Gosched()
						for s := lo; s <= hi; s++ {
							writers[s].Add(-1)
						}
						l.Unlock(first, last)
					}
				}()
			}
			within(t, deadlockTimeout, "contended lockers", wg.Wait)
			assert.Zero(t, violations.Load(), "holders of overlapping stripes ran concurrently")
		})
	}
}

// TestLocksWrapAndLongNoDeadlock runs many goroutines taking ranges that
// wrap the table, cover it exactly, or are longer than it, mixed with short
// ranges and readers: ascending slot order must keep them deadlock-free.
func TestLocksWrapAndLongNoDeadlock(t *testing.T) {
	ranges := [][2]int64{
		{lockSlots - 3, lockSlots + 2},         // wraps
		{2*lockSlots - 1, 2 * lockSlots},       // wraps, two slots
		{0, 5000},                              // longer than the table
		{100, 100 + lockSlots - 1},             // exactly the table
		{100, 100 + lockSlots - 2},             // wraps, all but one slot
		{lockSlots + 50, 3 * lockSlots},        // longer, unaligned
		{1, 1}, {lockSlots - 1, lockSlots - 1}, // single slots at both ends
		{2000, 2100},
	}
	var l Locks
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 60 {
				rg := ranges[(g+i*5)%len(ranges)]
				if (g+i)%4 == 0 {
					l.RLock(rg[0], rg[1])
					runtime.Gosched()
					l.RUnlock(rg[0], rg[1])
				} else {
					l.Lock(rg[0], rg[1])
					runtime.Gosched()
					l.Unlock(rg[0], rg[1])
				}
			}
		}()
	}
	within(t, deadlockTimeout, "wrapped and long ranges", wg.Wait)
	assert.Empty(t, heldSlots(&l), "slots still held at the end")
}

// shortWait is how long a locker that must block is watched. A correct
// table blocks it forever, so a slow machine cannot make a test fail.
const shortWait = 50 * time.Millisecond

// blocked reports whether f is still blocked after wait; it returns a
// channel closed when f finally returns.
func blocked(f func(), wait time.Duration) (stillBlocked bool, done <-chan struct{}) {
	ch := make(chan struct{})
	go func() { defer close(ch); f() }()
	select {
	case <-ch:
		return false, ch
	case <-time.After(wait):
		return true, ch
	}
}

func TestLocksExclusion(t *testing.T) {
	tests := []struct {
		name         string
		held         [2]int64 // taken with Lock first
		other        [2]int64
		shouldBlock  bool
		otherIsRLock bool
	}{
		{"overlap", [2]int64{10, 12}, [2]int64{12, 14}, true, false},
		{"disjoint", [2]int64{10, 12}, [2]int64{13, 14}, false, false},
		{"disjoint/rlock", [2]int64{10, 12}, [2]int64{13, 13}, false, true},
		{"overlap/rlock", [2]int64{10, 12}, [2]int64{11, 11}, true, true},
		{"wrapped/tail", [2]int64{lockSlots - 2, lockSlots + 1}, [2]int64{lockSlots - 1, lockSlots - 1}, true, false},
		{"wrapped/head", [2]int64{lockSlots - 2, lockSlots + 1}, [2]int64{1, 1}, true, false},
		{"wrapped/gap", [2]int64{lockSlots - 2, lockSlots + 1}, [2]int64{2, lockSlots - 3}, false, false},
		{"long/any", [2]int64{0, 5000}, [2]int64{2048, 2048}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l Locks
			l.Lock(tc.held[0], tc.held[1])
			take, release := l.Lock, l.Unlock
			if tc.otherIsRLock {
				take, release = l.RLock, l.RUnlock
			}
			// A locker that must not block gets the long timeout, so a slow
			// machine cannot fail the test either way.
			wait := deadlockTimeout
			if tc.shouldBlock {
				wait = shortWait
			}
			stillBlocked, done := blocked(func() { take(tc.other[0], tc.other[1]) }, wait)
			assert.Equal(t, tc.shouldBlock, stillBlocked, "held %v, then %v", tc.held, tc.other)
			l.Unlock(tc.held[0], tc.held[1])
			select {
			case <-done:
			case <-time.After(deadlockTimeout):
				t.Fatal("second locker never got the lock after Unlock")
			}
			release(tc.other[0], tc.other[1])
			assert.Empty(t, heldSlots(&l))
		})
	}
}

// TestRLockShared checks that readers of overlapping ranges hold the
// stripes together and that a writer waits for all of them.
func TestRLockShared(t *testing.T) {
	var l Locks
	l.RLock(5, 10)
	// A second reader of an overlapping range, and one that wraps, get in
	// while the first still holds its stripes.
	within(t, deadlockTimeout, "second reader", func() { l.RLock(8, 12) })
	within(t, deadlockTimeout, "wrapping reader", func() { l.RLock(lockSlots-1, lockSlots+6) })

	stillBlocked, done := blocked(func() { l.Lock(9, 9) }, shortWait)
	require.True(t, stillBlocked, "writer got in while readers hold the stripe")
	l.RUnlock(5, 10)
	l.RUnlock(lockSlots-1, lockSlots+6)
	select {
	case <-done:
		t.Fatal("writer got in while one reader still holds the stripe")
	case <-time.After(shortWait):
	}
	l.RUnlock(8, 12)
	select {
	case <-done:
	case <-time.After(deadlockTimeout):
		t.Fatal("writer never got in after every reader left")
	}
	l.Unlock(9, 9)
	assert.Empty(t, heldSlots(&l))
}
