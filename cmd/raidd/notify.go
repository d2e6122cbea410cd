package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sdNotify sends state (for example "READY=1") to the service manager when
// raidd runs as a systemd Type=notify service, and does nothing otherwise.
// A leading '@' in NOTIFY_SOCKET names an abstract socket, which the net
// package handles.
func sdNotify(state string) error {
	sock := os.Getenv("NOTIFY_SOCKET")
	if sock == "" {
		return nil
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(state))
	return err
}

// watchdogInterval returns how often to send WATCHDOG=1: half the
// WATCHDOG_USEC the service manager set (WatchdogSec=), as sd_watchdog_enabled
// advises, or 0 when no watchdog is asked of this process (WATCHDOG_USEC
// unset or not a positive number, or WATCHDOG_PID naming another process).
func watchdogInterval(getenv func(string) string, pid int) (time.Duration, error) {
	us := getenv("WATCHDOG_USEC")
	if us == "" {
		return 0, nil
	}
	if p := getenv("WATCHDOG_PID"); p != "" && p != strconv.Itoa(pid) {
		return 0, nil // meant for another process (we were started by it)
	}
	n, err := strconv.ParseUint(us, 10, 63)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("WATCHDOG_USEC=%q is not a positive number of microseconds; the watchdog is not served", us)
	}
	return time.Duration(n) * time.Microsecond / 2, nil
}

// statusRefresh is how often the STATUS= line is recomputed between
// events, so that rebuild and resync percentages move.
const statusRefresh = 5 * time.Second

// serviceNotifier keeps the service manager informed while serve runs:
// WATCHDOG=1 every interval when a watchdog is set, and a STATUS= line
// with the arrays' state whenever it changes (checked after every array
// event and every statusRefresh).
type serviceNotifier struct {
	log      *slog.Logger
	watchdog time.Duration
	kickCh   chan struct{}
	stop     chan struct{}
	done     chan struct{}

	mu     sync.Mutex
	status func() string // nil until serving starts
	last   string
}

// newServiceNotifier starts the watchdog at once (before the arrays are
// assembled, which can take a while); STATUS= lines begin with serving.
func newServiceNotifier(log *slog.Logger) *serviceNotifier {
	n := &serviceNotifier{log: log, kickCh: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	wd, err := watchdogInterval(os.Getenv, os.Getpid())
	if err != nil {
		log.Warn("systemd watchdog", "err", err)
	}
	n.watchdog = wd
	if wd > 0 {
		log.Info("systemd watchdog enabled", "ping_every", wd)
	}
	go n.run()
	return n
}

// serving sets the function that describes the arrays for STATUS= and
// sends the first line, together with READY=1.
func (n *serviceNotifier) serving(status func() string) {
	n.mu.Lock()
	n.status = status
	s := status()
	n.last = s
	n.mu.Unlock()
	if err := sdNotify("READY=1\nSTATUS=" + s); err != nil {
		n.log.Warn("cannot notify the service manager", "err", err)
	}
}

// stopping stops STATUS= updates and reports the stop; the watchdog
// goes on until close, since a graceful stop can take a while.
func (n *serviceNotifier) stopping() {
	n.mu.Lock()
	n.status = nil
	n.mu.Unlock()
	_ = sdNotify("STOPPING=1\nSTATUS=shutting down")
}

// kick asks for the STATUS= line to be recomputed; it never blocks (it is
// called from the arrays' event goroutines).
func (n *serviceNotifier) kick() {
	select {
	case n.kickCh <- struct{}{}:
	default:
	}
}

// close stops the notifier and waits for it.
func (n *serviceNotifier) close() {
	close(n.stop)
	<-n.done
}

func (n *serviceNotifier) run() {
	defer close(n.done)
	var wd <-chan time.Time
	if n.watchdog > 0 {
		t := time.NewTicker(n.watchdog)
		defer t.Stop()
		wd = t.C
		n.ping()
	}
	refresh := time.NewTicker(statusRefresh)
	defer refresh.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-wd:
			n.ping()
		case <-n.kickCh:
			n.update()
		case <-refresh.C:
			n.update()
		}
	}
}

func (n *serviceNotifier) ping() {
	if err := sdNotify("WATCHDOG=1"); err != nil {
		n.log.Warn("cannot notify the service manager's watchdog", "err", err)
	}
}

// update sends STATUS= if the arrays' description changed.
func (n *serviceNotifier) update() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.status == nil {
		return
	}
	s := n.status()
	if s == n.last {
		return
	}
	n.last = s
	if err := sdNotify("STATUS=" + s); err != nil {
		n.log.Warn("cannot notify the service manager", "err", err)
	}
}

// serviceStatus is the one-line summary systemctl status shows: the
// exports, then each array's state with any rebuild, replace or resync
// and its progress.
func serviceStatus(st statusReply) string {
	served := 0
	var parts []string
	for _, a := range st.Arrays {
		if a.Error == "" {
			served++
		}
	}
	parts = append(parts, fmt.Sprintf("serving %d export(s) on %s", served, strings.Join(st.Listen, ", ")))
	for _, a := range st.Arrays {
		if a.Error != "" {
			parts = append(parts, a.Name+": FAILED, not assembled")
			continue
		}
		s := a.Name + ": " + a.State
		if a.State == "degraded" || a.State == "failed" {
			s = a.Name + ": " + strings.ToUpper(a.State)
		}
		if r := a.Recovery; r != nil {
			s += fmt.Sprintf(", %s of role %d %.1f%%", r.Kind, r.Role, r.Percent)
		}
		if r := a.Resync; r != nil {
			s += fmt.Sprintf(", resync %.1f%%", r.Percent)
		}
		if r := a.Scrub; r != nil {
			s += fmt.Sprintf(", check %.1f%%", r.Percent)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
