package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
)

func TestWatchdogInterval(t *testing.T) {
	const pid = 4242
	tests := map[string]struct {
		env     map[string]string
		want    time.Duration
		wantErr string
	}{
		"none":             {env: nil},
		"half of the usec": {env: map[string]string{"WATCHDOG_USEC": "30000000"}, want: 15 * time.Second},
		"for this pid":     {env: map[string]string{"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "4242"}, want: time.Second},
		"for another pid":  {env: map[string]string{"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "1"}},
		"zero":             {env: map[string]string{"WATCHDOG_USEC": "0"}, wantErr: "not a positive number"},
		"garbage":          {env: map[string]string{"WATCHDOG_USEC": "30s"}, wantErr: `WATCHDOG_USEC="30s"`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := watchdogInterval(func(k string) string { return tt.env[k] }, pid)
			if tt.wantErr != "" {
				assert.ErrorContains(t, err, tt.wantErr)
				assert.Zero(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestServiceStatus(t *testing.T) {
	st := statusReply{Listen: []string{"127.0.0.1:10809", "unix:/run/raidd/nbd.sock"}, Arrays: []arrayStatus{
		{Status: raid.Status{Name: "data", State: "clean"}},
		{Status: raid.Status{Name: "web", State: "degraded", Recovery: &raid.Progress{Kind: "rebuild", Role: 1, Percent: 45.25}}},
		{Status: raid.Status{Name: "logs", State: "dirty", Resync: &raid.Progress{Kind: "resync", Role: -1, Percent: 10}}},
		{Status: raid.Status{Name: "home", State: "clean", Scrub: &raid.ScrubStatus{Progress: raid.Progress{Kind: "check", Role: -1, Percent: 75}}}},
		{Status: raid.Status{Name: "old", State: "failed"}, Error: "no member"},
	}}
	assert.Equal(t, "serving 4 export(s) on 127.0.0.1:10809, unix:/run/raidd/nbd.sock; data: clean; "+
		"web: DEGRADED, rebuild of role 1 45.2%; logs: dirty, resync 10.0%; home: clean, check 75.0%; old: FAILED, not assembled", serviceStatus(st))
}

// notifications collects the datagrams raidd sends to NOTIFY_SOCKET.
type notifications struct {
	c  *net.UnixConn
	ch chan string
}

func listenNotify(t *testing.T, dir string) *notifications {
	t.Helper()
	p := filepath.Join(dir, "notify.sock")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: p, Net: "unixgram"})
	require.NoError(t, err)
	t.Setenv("NOTIFY_SOCKET", p)
	n := &notifications{c: c, ch: make(chan string, 1024)}
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := c.Read(buf)
			if err != nil {
				close(n.ch)
				return
			}
			n.ch <- string(buf[:k])
		}
	}()
	t.Cleanup(func() { c.Close() })
	return n
}

// next returns the next notification that contains want, within timeout.
func (n *notifications) next(t *testing.T, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m := <-n.ch:
			if strings.Contains(m, want) {
				return m
			}
		case <-deadline:
			t.Fatalf("no notification with %q within %v", want, timeout)
			return ""
		}
	}
}

// TestServeNotifiesServiceManager runs serve under a fake service manager
// with a 200ms watchdog: it pings WATCHDOG=1 every 100ms, reports READY=1
// with the arrays' state in STATUS=, and a new STATUS= when a member fails.
func TestServeNotifiesServiceManager(t *testing.T) {
	e := newEnv(t)
	e.create(t, "data", "1", "a.img", "b.img")
	n := listenNotify(t, e.dir)
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	d := serve(t, e.config(t, "", e.array("data", "", "a.img", "b.img")))

	ready := n.next(t, "READY=1", 5*time.Second)
	assert.Contains(t, ready, "STATUS=serving 1 export(s) on unix://"+e.nbdSock+"; data: clean")
	start := time.Now()
	for range 3 {
		n.next(t, "WATCHDOG=1", 2*time.Second)
	}
	assert.Less(t, time.Since(start), 2*time.Second, "three pings at 100ms intervals")

	code, out, errOut := raidd(t, "fail", "--control", e.control, "data", e.paths("b.img")[0])
	require.Equal(t, 0, code, out+errOut)
	assert.Contains(t, n.next(t, "STATUS=", 5*time.Second), "data: DEGRADED")

	require.Equal(t, 0, d.stop(t), d.stderr.String())
	assert.Contains(t, n.next(t, "STOPPING=1", 5*time.Second), "STATUS=shutting down")
}

// TestServeNoWatchdogForOtherPID: a WATCHDOG_PID of another process (raidd
// was started by it) means no pings from raidd.
func TestServeNoWatchdogForOtherPID(t *testing.T) {
	e := newEnv(t)
	e.create(t, "data", "1", "a.img", "b.img")
	n := listenNotify(t, e.dir)
	t.Setenv("WATCHDOG_USEC", "100000")
	t.Setenv("WATCHDOG_PID", "1")
	d := serve(t, e.config(t, "", e.array("data", "", "a.img", "b.img")))
	time.Sleep(300 * time.Millisecond) // three watchdog intervals
	require.Equal(t, 0, d.stop(t), d.stderr.String())
	var got []string
	for m := range n.ch {
		got = append(got, m)
		if strings.Contains(m, "STOPPING=1") {
			break
		}
	}
	require.NotEmpty(t, got)
	assert.Contains(t, got[0], "READY=1")
	for _, m := range got {
		assert.NotContains(t, m, "WATCHDOG=1")
	}
}
