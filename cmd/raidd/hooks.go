package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/raidd/raidd/raid"
)

// hookTimeout bounds one run of the on_event command; the command and
// everything it started are killed after it.
const hookTimeout = 30 * time.Second

// hookQueue is how many events may wait for the hook before new ones are
// dropped (and logged). Events arrive from the arrays' own event
// goroutines, which must never wait for a hook.
const hookQueue = 1024

// hookRunner runs the on_event command once per array event, one run at a
// time, in the order the events were reported (mdadm --monitor --program).
type hookRunner struct {
	command string
	log     *slog.Logger
	timeout time.Duration

	mu     sync.Mutex
	closed bool
	ch     chan raid.Event

	ctx    context.Context // cancelled when close gives up waiting
	cancel context.CancelFunc
	done   chan struct{}
}

func newHookRunner(command string, log *slog.Logger) *hookRunner {
	ctx, cancel := context.WithCancel(context.Background())
	h := &hookRunner{
		command: command, log: log, timeout: hookTimeout,
		ch: make(chan raid.Event, hookQueue), ctx: ctx, cancel: cancel, done: make(chan struct{}),
	}
	go h.loop()
	return h
}

// enqueue queues e for the hook without blocking. It is the arrays'
// raid.Options.OnEvent.
func (h *hookRunner) enqueue(e raid.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		h.log.Warn("on_event: event after shutdown not run", "event", e.Kind, "array", e.Array)
		return
	}
	select {
	case h.ch <- e:
	default:
		h.log.Warn("on_event: too many events waiting for the hook; event dropped", "event", e.Kind, "array", e.Array)
	}
}

// close stops accepting events and waits up to wait for the queued ones
// to run; then it kills the running hook and drops the rest.
func (h *hookRunner) close(wait time.Duration) {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.ch)
	}
	h.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-h.done:
	case <-t.C:
		h.log.Warn("on_event: hooks still running at shutdown; stopping them", "waited", wait)
		h.cancel()
		<-h.done
	}
	h.cancel()
}

func (h *hookRunner) loop() {
	defer close(h.done)
	dropped := 0
	for e := range h.ch {
		if h.ctx.Err() != nil {
			dropped++
			continue
		}
		h.run(e)
	}
	if dropped > 0 {
		h.log.Warn("on_event: events not run at shutdown", "count", dropped)
	}
}

// hookEnv is the environment the command sees for e, on top of raidd's own.
func hookEnv(e raid.Event) []string {
	return []string{
		"RAIDD_EVENT=" + string(e.Kind),
		"RAIDD_ARRAY=" + e.Array,
		"RAIDD_ROLE=" + strconv.Itoa(e.Role),
		"RAIDD_MEMBER=" + e.Path,
		"RAIDD_DETAIL=" + e.Detail,
		"RAIDD_TIME=" + e.Time.Format(time.RFC3339),
	}
}

// run runs the command for one event and logs its failure, with the end
// of its output.
func (h *hookRunner) run(e raid.Event) {
	ctx, cancel := context.WithTimeout(h.ctx, h.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", h.command)
	cmd.Env = append(os.Environ(), hookEnv(e)...)
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group, so that a timeout kills what it started too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	attrs := []any{"event", e.Kind, "array", e.Array, "role", e.Role, "member", e.Path, "elapsed", time.Since(start).Round(time.Millisecond)}
	if o := strings.TrimSpace(out.String()); o != "" {
		attrs = append(attrs, "output", o)
	}
	switch {
	case err == nil:
		h.log.Debug("on_event ran", attrs...)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		h.log.Warn("on_event: command killed after timeout", append(attrs, "timeout", h.timeout)...)
	default:
		h.log.Warn("on_event: command failed", append(attrs, "err", err)...)
	}
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

const tailMax = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b.Write(p)
	if t.b.Len() > tailMax {
		keep := append([]byte(nil), t.b.Bytes()[t.b.Len()-tailMax:]...)
		t.b.Reset()
		t.b.Write(keep)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}
