package awake

import (
	"runtime"
	"testing"
	"time"
)

// TestHold: the first Hold starts the keeper and raises GOMAXPROCS by one,
// nested holds share it, a second call of a release does nothing, and the
// last release stops the keeper and gives the processor back.
func TestHold(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	r1 := Hold()
	if !Holding() || runtime.GOMAXPROCS(0) != before+1 {
		t.Fatalf("after Hold: holding %v, GOMAXPROCS %d, want true, %d", Holding(), runtime.GOMAXPROCS(0), before+1)
	}
	r2 := Hold()
	if runtime.GOMAXPROCS(0) != before+1 {
		t.Fatalf("after a nested Hold: GOMAXPROCS %d, want %d", runtime.GOMAXPROCS(0), before+1)
	}
	r1()
	r1() // a second call releases nothing
	if !Holding() {
		t.Fatal("the keeper stopped while a hold remained")
	}
	r2()
	if Holding() || runtime.GOMAXPROCS(0) != before {
		t.Fatalf("after the last release: holding %v, GOMAXPROCS %d, want false, %d", Holding(), runtime.GOMAXPROCS(0), before)
	}
}

// TestHoldLetsTheWorldStop: the keeper's sleep in the kernel, unknown to
// the scheduler, does not hold up a stop-the-world: garbage collections
// with the keeper running take about as long as without it, not a sleep
// period more each (which they would if the sleeper were stopped only
// between its sleeps: 6 s for 20 collections, against 0.1 to 0.3 s).
func TestHoldLetsTheWorldStop(t *testing.T) {
	const n = 20
	collect := func() time.Duration {
		start := time.Now()
		for range n {
			runtime.GC()
		}
		return time.Since(start)
	}
	without := collect()
	release := Hold()
	defer release()
	time.Sleep(time.Millisecond) // the keeper is asleep in the kernel
	with := collect()
	if with >= without+n*sleepPeriod {
		t.Fatalf("%d collections took %v with the keeper running, %v without", n, with, without)
	}
}
