package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// dataBytes returns the data region, in whole chunks, that create leaves
// on members of size bytes of an n-member array of level with chunk:
// what follows the header and, on RAID5 and RAID6 (consistency policy
// journal, the default), the write-hole log area.
func dataBytes(t *testing.T, level stripe.Level, n int, chunk, size int64) int64 {
	t.Helper()
	off, err := raid.CreateDataOffset(raid.CreateOptions{Name: "x", Level: level, Chunk: chunk}, n, size)
	require.NoError(t, err)
	return (size - off) / chunk * chunk
}

// syncBuffer is a bytes.Buffer safe for the daemon's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// raidd runs one command line in-process and returns its exit code, stdout
// and stderr.
func raidd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut syncBuffer
	code := (&cli{stdout: &out, stderr: &errOut}).run(context.Background(), args)
	return code, out.String(), errOut.String()
}

// env is a scratch directory with member files and a configuration.
type env struct {
	dir     string
	control string
	nbdSock string
}

func newEnv(t *testing.T) *env {
	// Unix socket paths are limited to 108 bytes; t.TempDir() can be long.
	dir, err := os.MkdirTemp("", "raidd")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &env{dir: dir, control: filepath.Join(dir, "ctl.sock"), nbdSock: filepath.Join(dir, "nbd.sock")}
}

func (e *env) paths(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = filepath.Join(e.dir, n)
	}
	return out
}

// create forms an array from new sparse member files of 8 MiB.
func (e *env) create(t *testing.T, name, level string, members ...string) {
	t.Helper()
	args := append([]string{"create", "--name", name, "--level", level, "--chunk", "64KiB", "--size", "8MiB", "--log-level", "warn"}, e.paths(members...)...)
	code, out, errOut := raidd(t, args...)
	require.Equal(t, 0, code, "create: %s%s", out, errOut)
	require.Contains(t, out, fmt.Sprintf("created %s array %q", "raid"+level, name))
}

// config writes a configuration serving arrays (name -> member file names).
func (e *env) config(t *testing.T, extra string, arrays ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "listen: [unix://%s]\ncontrol: %s\nshutdown_timeout: 5s\nlog: {level: debug}\n%sarrays:\n", e.nbdSock, e.control, extra)
	for _, a := range arrays {
		b.WriteString(a)
	}
	p := filepath.Join(e.dir, fmt.Sprintf("raidd-%d.yaml", time.Now().UnixNano()))
	require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o600))
	return p
}

func (e *env) array(name string, opts string, members ...string) string {
	return fmt.Sprintf("  - name: %s\n    members: [%s]\n%s", name, strings.Join(e.paths(members...), ", "), opts)
}

// daemonRun is a raidd serve running in-process.
type daemonRun struct {
	cancel context.CancelFunc
	done   chan int
	stderr *syncBuffer
}

// serve starts raidd serve --config cfg and waits until it listens.
func serve(t *testing.T, cfg string) *daemonRun {
	t.Helper()
	return start(t, "serve", "--config", cfg)
}

// start runs a raidd command line that serves (serve or demo) in-process
// and waits until it listens. Its stdout and stderr both go to stderr.
func start(t *testing.T, args ...string) *daemonRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemonRun{cancel: cancel, done: make(chan int, 1), stderr: &syncBuffer{}}
	ready := make(chan struct{})
	c := &cli{stdout: d.stderr, stderr: d.stderr, onReady: func() { close(ready) }}
	go func() { d.done <- c.run(ctx, args) }()
	select {
	case <-ready:
	case code := <-d.done:
		cancel()
		t.Fatalf("%s exited with %d before it was ready:\n%s", args[0], code, d.stderr)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatalf("%s not ready after 20s:\n%s", args[0], d.stderr)
	}
	t.Cleanup(func() { d.stop(t) })
	return d
}

// stop cancels the daemon (as SIGTERM does) and returns its exit code.
func (d *daemonRun) stop(t *testing.T) int {
	d.cancel()
	select {
	case code := <-d.done:
		d.done <- code // for a second stop, from Cleanup
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop within 30s:\n%s", d.stderr)
		return -1
	}
}

func pattern(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i*7)
	}
	return p
}

func TestServeEndToEnd(t *testing.T) {
	e := newEnv(t)
	e.create(t, "data", "5", "a.img", "b.img", "c.img")
	cfg := e.config(t, "", e.array("data", "", "a.img", "b.img", "c.img"))

	// Readiness and stop are announced to the service manager.
	notifyPath := filepath.Join(e.dir, "notify.sock")
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: notifyPath, Net: "unixgram"})
	require.NoError(t, err)
	defer notify.Close()
	t.Setenv("NOTIFY_SOCKET", notifyPath)

	d := serve(t, cfg)
	assert.Contains(t, readNotify(t, notify), "READY=1")

	// Two data members of 6 MiB data regions (8 MiB less the 1 MiB header
	// and the 1 MiB write-hole log area).
	size := uint64(2 * dataBytes(t, stripe.RAID5, 3, 64<<10, 8<<20))
	require.EqualValues(t, 2*6<<20, size)
	c := dialNBD(t, "unix", e.nbdSock, "data")
	require.EqualValues(t, size, c.size)
	assert.NotZero(t, c.flags&nbdFlagSendFlush, "FLUSH advertised")
	assert.NotZero(t, c.flags&nbdFlagSendTrim, "TRIM advertised")
	assert.Zero(t, c.flags&nbdFlagReadOnly)
	writes := map[uint64][]byte{
		0:              pattern(4096, 1),
		65536 - 100:    pattern(300, 2),     // across a chunk boundary
		3 << 20:        pattern(256<<10, 3), // several full stripes
		size - 512<<10: pattern(512<<10, 4), // the end of the array
	}
	for off, p := range writes {
		c.mustDo(nbdCmdWrite, off, p)
	}
	c.mustDo(nbdCmdFlush, 0, nil)
	for off, p := range writes {
		got := make([]byte, len(p))
		c.mustDo(nbdCmdRead, off, got)
		require.Equal(t, p, got, "read at %d", off)
	}
	assert.NotZero(t, c.do(nbdCmdRead, size, make([]byte, 1)), "a read past the end is an error reply")
	c.mustDo(nbdCmdRead, 0, make([]byte, 1)) // and the connection still works
	c.do(nbdCmdDisc, 0, nil)

	// The default export (empty name) is the first array.
	assert.EqualValues(t, size, dialNBD(t, "unix", e.nbdSock, "").size)

	code, out, errOut := raidd(t, "status", "--control", e.control)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, `data: raid5, `)
	assert.Contains(t, out, `export "data"`)
	for _, m := range e.paths("a.img", "b.img", "c.img") {
		assert.Regexp(t, `active\s+\d+\s+`+m, out)
	}

	code, out, errOut = raidd(t, "status", "--json", "--control", e.control, "data")
	require.Equal(t, 0, code, errOut)
	var st statusReply
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.Len(t, st.Arrays, 1)
	a := st.Arrays[0]
	assert.Equal(t, "data", a.Name)
	assert.Equal(t, "raid5", a.Level)
	assert.EqualValues(t, size, a.Size)
	assert.False(t, a.Degraded)
	assert.Len(t, a.Devices, 3)
	assert.Positive(t, a.Stats.ClientBytesWritten)
	assert.Positive(t, st.NBD.Writes)

	code, _, errOut = raidd(t, "status", "--control", e.control, "nope")
	assert.Equal(t, exitNoStatus, code)
	assert.Contains(t, errOut, `no array named "nope" is running`)

	// The control socket can also be found through the configuration.
	code, out, errOut = raidd(t, "check", "--config", cfg)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `^data: consistent \(`, out)

	f := scrape(t, e.control)
	assert.EqualValues(t, size, f.value(t, "raidd_array_size_bytes", "array=data"))
	assert.Zero(t, f.value(t, "raidd_array_degraded", "array=data"))
	assert.EqualValues(t, 4, f.value(t, "raidd_nbd_requests_total", "command=write"))

	// A second daemon on the same members is refused.
	code, _, errOut = raidd(t, "serve", "--config", cfg)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "member in use")

	require.Equal(t, 0, d.stop(t), d.stderr.String())
	assert.Contains(t, readNotifyUntil(t, notify, "STOPPING=1"), "STOPPING=1")
	assert.NoFileExists(t, e.control, "sockets are removed at exit")
	assert.NoFileExists(t, e.nbdSock)

	// The stop left the array clean, and the data is there after a restart.
	code, out, _ = raidd(t, "examine", e.paths("a.img")[0])
	require.Equal(t, 0, code)
	assert.Regexp(t, `state:\s+clean`, out)
	serve(t, cfg)
	c = dialNBD(t, "unix", e.nbdSock, "data")
	for off, p := range writes {
		got := make([]byte, len(p))
		c.mustDo(nbdCmdRead, off, got)
		require.Equal(t, p, got, "read at %d after restart", off)
	}
}

func readNotify(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	require.NoError(t, err)
	return string(buf[:n])
}

// readNotifyUntil reads notifications until one contains want (array
// events, such as a check's scrub-started and scrub-finished, send STATUS
// lines in between) and returns it.
func readNotifyUntil(t *testing.T, c *net.UnixConn, want string) string {
	t.Helper()
	for {
		if m := readNotify(t, c); strings.Contains(m, want) {
			return m
		}
	}
}

func httpGet(t *testing.T, socket, path string) string {
	t.Helper()
	resp, err := newControlClient(socket).http.Get("http://raidd" + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func TestServeDegradedAndReadOnly(t *testing.T) {
	e := newEnv(t)
	e.create(t, "mirror", "1", "m0.img", "m1.img")
	e.create(t, "stripe", "0", "s0.img", "s1.img")
	// The mirror starts with one of its two members; the stripe is read-only.
	cfg := e.config(t, "",
		e.array("mirror", "", "m0.img"),
		e.array("stripe", "    export: ro\n    read_only: true\n", "s0.img", "s1.img"))
	serve(t, cfg)

	// status exits with the worst state of the arrays it shows, as mdadm
	// --detail --test does.
	code, out, errOut := raidd(t, "status", "--control", e.control)
	require.Equal(t, exitDegraded, code, "a degraded array makes status exit 1: %s", errOut)
	assert.Empty(t, errOut, "a state is not an error")
	assert.Contains(t, out, "mirror: raid1, DEGRADED")
	assert.Regexp(t, `stripe: raid0, \w+, .*export "ro", read-only`, out)
	code, _, errOut = raidd(t, "status", "--control", e.control, "stripe")
	assert.Equal(t, exitOK, code, "only the arrays shown count: %s", errOut)
	code, _, errOut = raidd(t, "status", "--json", "--control", e.control, "mirror")
	assert.Equal(t, exitDegraded, code, "--json exits the same way: %s", errOut)

	m := dialNBD(t, "unix", e.nbdSock, "mirror")
	p := pattern(8192, 9)
	m.mustDo(nbdCmdWrite, 4096, p)
	got := make([]byte, len(p))
	m.mustDo(nbdCmdRead, 4096, got)
	assert.Equal(t, p, got, "a degraded mirror serves reads and writes")

	// A check never calls a degraded array consistent: the rows it cannot
	// compare are counted and named (issue 7).
	code, out, errOut = raidd(t, "check", "--control", e.control, "mirror")
	assert.Equal(t, 1, code, "an array that cannot be fully verified fails the check: %s", errOut)
	assert.Regexp(t, `^mirror: NOT VERIFIED \(.*\): \d+ rows could not be verified because the array is degraded; 0 of \d+ rows verified consistent`, out)
	assert.NotContains(t, out, "consistent (")
	code, out, _ = raidd(t, "check", "--control", e.control, "stripe")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "rows could not be verified because the level keeps no redundancy")

	ro := dialNBD(t, "unix", e.nbdSock, "ro")
	assert.NotZero(t, ro.flags&nbdFlagReadOnly)
	assert.EqualValues(t, 1, ro.do(nbdCmdWrite, 0, p), "EPERM on a read-only export")
	ro.mustDo(nbdCmdRead, 0, got)

	metrics := httpGet(t, e.control, "/metrics")
	assert.Contains(t, metrics, `raidd_array_degraded{array="mirror"} 1`)
	assert.Contains(t, metrics, `raidd_array_read_only{array="stripe"} 1`)
}

func TestServeRefusesToStart(t *testing.T) {
	e := newEnv(t)
	e.create(t, "five", "5", "a.img", "b.img", "c.img")
	e.create(t, "other", "1", "x.img", "y.img")
	e.create(t, "third", "1", "p.img", "q.img")

	tests := map[string]struct {
		arrays []string
		want   []string
		extra  string // configuration keys
	}{
		"too many members missing": {
			[]string{e.array("five", "", "a.img")},
			[]string{"array five:", "cannot start"}, "",
		},
		"member files missing beyond tolerance": { // one missing file only starts it degraded
			[]string{e.array("five", "", "a.img", "gone.img", "gone2.img")},
			[]string{"array five:", "cannot start", "gone.img: no such file or directory", "gone2.img: no such file or directory"}, "",
		},
		"members of another array": {
			[]string{e.array("five", "", "x.img", "y.img")},
			[]string{`x.img belongs to array "other" (uuid `, `y.img belongs to array "other"`, `not "five"`}, "",
		},
		"every broken array is reported": {
			[]string{e.array("five", "", "a.img", "missing1.img"), e.array("other", "", "missing2.img", "missing3.img")},
			[]string{"missing1.img", "missing2.img", "no array could be assembled, so there is nothing to serve"}, "",
		},
		"strict: one broken array stops all": {
			[]string{e.array("third", "", "p.img", "q.img"), e.array("other", "", "missing2.img", "missing3.img")},
			[]string{"array other:", "missing2.img"}, "strict: true\n",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := raidd(t, "serve", "--config", e.config(t, tt.extra, tt.arrays...))
			assert.Equal(t, 1, code)
			for _, w := range tt.want {
				assert.Contains(t, errOut, w)
			}
			assert.NoFileExists(t, e.control)
		})
	}

	// The refusals wrote nothing: no superblock changed.
	for _, m := range []string{"a.img", "x.img", "y.img"} {
		code, out, _ := raidd(t, "examine", e.paths(m)[0])
		require.Equal(t, 0, code)
		assert.Regexp(t, `state:\s+clean, events 1\n`, out, m)
	}
	// Nothing is left locked: a good start works.
	serve(t, e.config(t, "", e.array("five", "", "a.img", "b.img", "c.img")))
}

func TestCLIErrors(t *testing.T) {
	e := newEnv(t)
	bad := filepath.Join(e.dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("listen: [':1']\nlisten_adress: x\n"), 0o600))
	good := filepath.Join(e.dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, []byte("arrays: [{name: a, members: [/a.img]}]\n"), 0o600))
	tests := map[string]struct {
		args []string
		code int
		want string
	}{
		"no command":                 {nil, exitUsage, "no command given"},
		"unknown command":            {[]string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		"unknown flag":               {[]string{"serve", "--frob"}, exitUsage, "unknown flag: --frob"},
		"array flags need members":   {[]string{"serve", "--read-only", "--listen", "unix:/x"}, exitUsage, "--read-only applies to the array given by MEMBER arguments"},
		"config and members":         {[]string{"serve", "--config", good, "/x.img"}, exitUsage, "both MEMBER arguments and arrays in the configuration"},
		"write-mostly not a member":  {[]string{"serve", "--write-mostly", "/y.img", "/x.img"}, exitUsage, "--write-mostly /y.img is not one of the MEMBER arguments"},
		"bad rebuild rate":           {[]string{"serve", "--rebuild-max-rate", "fast", "/x.img"}, exitUsage, "--rebuild-max-rate"},
		"random writes need members": {[]string{"serve", "--config", good, "--stripe-cache-random-writes", "bogus"}, exitUsage, "--stripe-cache-random-writes applies to the array given by MEMBER arguments"},
		"bad flag value":             {[]string{"serve", "--config", good, "--max-connections", "-1"}, exitUsage, "--max-connections: config: nbd.max_connections: -1 is negative"},
		"bad flag size":              {[]string{"serve", "--config", good, "--max-total-in-flight", "12QB"}, exitUsage, `--max-total-in-flight: config:`},
		"bad flag mode":              {[]string{"serve", "--config", good, "--tls", "bogus"}, exitUsage, `"bogus" is not off, on or require`},
		"members without superblock": {[]string{"serve", "--control", "", bad}, 1, "no MEMBER carries a readable raidd superblock"},
		"remote listen":              {[]string{"serve", "--config", good, "--listen", "0.0.0.0:10809"}, 1, "needs --allow-remote"},
		"remote listen without TLS":  {[]string{"serve", "--config", good, "--listen", "0.0.0.0:10809", "--allow-remote"}, 1, "or pass --allow-remote-plaintext (allow_remote_plaintext: true)"},
		"interval without watch":     {[]string{"status", "--interval", "2s"}, exitUsage, "--interval applies to --watch"},
		"fail needs two args":        {[]string{"fail", "data"}, exitUsage, "accepts 2 arg(s)"},
		"spare on raid0":             {[]string{"create", "--name", "a", "--level", "0", "--spare", "/s", "/x"}, exitUsage, "raid0 array has no redundancy"},
		"bad bitmap region":          {[]string{"create", "--name", "a", "--level", "1", "--bitmap-region", "3KiB", "/x"}, exitUsage, "BitmapRegion 3072"},
		"create needs members":       {[]string{"create", "--name", "a", "--level", "1"}, exitUsage, "requires at least 1 arg"},
		"create needs a level":       {[]string{"create", "--name", "a", "/x"}, exitUsage, "--level is required"},
		"bad level and chunk":        {[]string{"create", "--name", "a", "--level", "7", "--chunk", "3KiB", "/x"}, exitUsage, "--level"},
		"bad chunk":                  {[]string{"create", "--name", "a", "--level", "5", "--chunk", "3KiB", "/x"}, exitUsage, "Chunk 3072"},
		"unknown config key":         {[]string{"serve", "--config", bad}, 1, "listen_adress"},
		"status without daemon":      {[]string{"status", "--control", filepath.Join(e.dir, "none.sock")}, exitNoStatus, "raidd is not running"},
		"watch without daemon":       {[]string{"status", "--watch", "--control", filepath.Join(e.dir, "none.sock")}, exitNoStatus, "raidd is not running"},
		"examine a non-member":       {[]string{"examine", bad}, 1, "no raidd superblock"},
		"bad log level":              {[]string{"create", "--name", "a", "--level", "1", "--log-level", "loud", "/x"}, exitUsage, `"loud" is not debug`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := raidd(t, tt.args...)
			assert.Equal(t, tt.code, code, errOut)
			assert.Contains(t, errOut, tt.want)
			for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
				if !strings.HasPrefix(line, "Run 'raidd --help'") {
					assert.True(t, strings.HasPrefix(line, "raidd: "), "every error line is prefixed: %q", line)
				}
			}
		})
	}
}

// TestBrokenArrayReported: an array that cannot be assembled is listed in
// the configuration's order, with an empty member list (not null), and
// reported to on_event as array-failed with the reason.
func TestBrokenArrayReported(t *testing.T) {
	e := newEnv(t)
	e.create(t, "m", "1", "a.img", "b.img")
	hookLog := filepath.Join(e.dir, "hook.log")
	hook := fmt.Sprintf("on_event: 'echo \"$RAIDD_EVENT|$RAIDD_ARRAY|$RAIDD_DETAIL\" >> %s'\n", hookLog)
	d := serve(t, e.config(t, hook, e.array("first", "", "x.img", "y.img"), e.array("m", "", "a.img", "b.img")))

	body := httpGet(t, e.control, "/v1/status")
	var st statusReply
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	require.Len(t, st.Arrays, 2)
	assert.Equal(t, "first", st.Arrays[0].Name, "configuration order")
	assert.True(t, st.Arrays[0].Failed)
	assert.Contains(t, st.Arrays[0].Error, "x.img: no such file or directory")
	assert.Equal(t, "m", st.Arrays[1].Name)
	assert.Regexp(t, `"members": \[\]`, body, "an empty list, so that jq '.arrays[].members[]' works")

	waitFor(t, "the array-failed hook", func() bool {
		b, _ := os.ReadFile(hookLog)
		return strings.Contains(string(b), "array-failed|first|not assembled: ")
	})
	assert.Equal(t, 0, d.stop(t))
	assert.Contains(t, d.stderr.String(), "array not assembled; serving the others")
}
