// Package awake keeps the Go runtime's system monitor out of its deep
// sleep while a server is busy with I/O.
//
// The runtime's system monitor (sysmon) goes into a deep sleep whenever it
// finds every processor (P) idle, and the next system call a goroutine
// makes wakes it again; woken that way it polls every 20 µs for a
// millisecond or more before it backs off. A server that moves data
// between a socket and files goes idle many times per request (every time
// it waits for the client's next piece of payload), so the monitor cycles
// between the two: on raidd serving RAID0 over tmpfs (bench/nbd-ab.sh, 1 MiB
// sequential writes) it took about a fifth of the server's CPU time, and
// with it the server made 8 to 11 context switches per request instead of
// about 5.5; a 4 KiB RAID5 random write cost 36 CPU s/GiB instead of 12 to
// 15 (bench/README.md, "CPU per byte"). The same server with the
// monitor kept awake (GODEBUG=schedtrace set to a period longer than the
// machine's uptime, which keeps it out of deep sleep and changes nothing
// else) used 20 to 30% less CPU per byte on sequential writes.
//
// Hold keeps one processor occupied by a goroutine that sleeps in the
// kernel without telling the scheduler (a raw nanosleep), so the runtime
// never finds every processor idle, and raises GOMAXPROCS by one so that
// the other goroutines keep the processors they had. The sleeper costs
// one wake-up per sleepPeriod; the runtime's preemption signal (every
// 10 ms from the monitor, or at once for a stop-the-world) ends a sleep
// early, and the sleeper is preempted at its next function call like any
// goroutine, so garbage collection is not held up.
package awake

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sleepPeriod is how long the keeper sleeps between looks at its stop
// flag: the most a Release waits for it.
const sleepPeriod = 5 * time.Millisecond

var (
	mu    sync.Mutex
	holds int
	k     *keeper
	// procs is GOMAXPROCS before the keeper raised it.
	procs int
)

type keeper struct {
	stop atomic.Bool
	done chan struct{}
}

// Hold keeps the system monitor awake until every Hold has been released.
// The returned function releases this hold; calling it again does nothing.
func Hold() (release func()) {
	mu.Lock()
	holds++
	if holds == 1 {
		procs = runtime.GOMAXPROCS(0)
		runtime.GOMAXPROCS(procs + 1)
		k = &keeper{done: make(chan struct{})}
		go k.run()
	}
	mu.Unlock()
	var once sync.Once
	return func() { once.Do(releaseOne) }
}

func releaseOne() {
	mu.Lock()
	defer mu.Unlock()
	holds--
	if holds > 0 {
		return
	}
	k.stop.Store(true)
	<-k.done
	k = nil
	// Setting GOMAXPROCS switched off the runtime's own choice of it
	// (which follows the CPU limit of the process's cgroup); hand it back
	// unless the environment had fixed it.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.SetDefaultGOMAXPROCS()
	} else {
		runtime.GOMAXPROCS(procs)
	}
}

// Holding reports whether a keeper runs (for tests).
func Holding() bool {
	mu.Lock()
	defer mu.Unlock()
	return k != nil
}

func (k *keeper) run() {
	defer close(k.done)
	ts := unix.NsecToTimespec(int64(sleepPeriod))
	for !k.stop.Load() {
		rawSleep(&ts)
	}
}

// rawSleep sleeps for *ts in nanosleep(2) made as a raw system call: the
// processor stays with this goroutine. A signal ends it early (EINTR).
//
//go:noinline
func rawSleep(ts *unix.Timespec) {
	_, _, _ = unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(ts)), 0, 0)
}
