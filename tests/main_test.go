package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// raiddBin is the path of the binary built by TestMain; buildErr is set when
// the build failed, so that tests needing the binary fail with the build
// output while the tests that do not (the import-graph lint) still run.
var (
	raiddBin string
	buildErr error
	repoRoot string
)

// Timeouts for the server lifecycle, as the end-to-end contract states them.
const (
	serveReadyTimeout = 10 * time.Second
	serveStopTimeout  = 20 * time.Second
)

// memberSize is the size of each sparse member file of a test array.
const memberSize = "64M"

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root, err := findRepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests: cannot find the repository root:", err)
		return 1
	}
	repoRoot = root
	// RAIDD_BIN=/path/to/raidd tests a prebuilt binary instead of building one.
	if p := os.Getenv("RAIDD_BIN"); p != "" {
		raiddBin = p
		if _, err := os.Stat(p); err != nil {
			buildErr = fmt.Errorf("RAIDD_BIN: %w", err)
		}
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "raidd-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	raiddBin = filepath.Join(dir, "raidd")
	// RAIDD_TEST_RACE=1 builds the binary under test with the race detector.
	args := []string{"build", "-o", raiddBin}
	if os.Getenv("RAIDD_TEST_RACE") == "1" {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/raidd")
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		buildErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		fmt.Fprintln(os.Stderr, "tests: building raidd failed; end-to-end tests will fail:", buildErr)
	}
	return m.Run()
}

// findRepoRoot returns the directory of the main module's go.mod: from
// `go env GOMOD`, else by walking up from the working directory.
func findRepoRoot() (string, error) {
	if out, err := exec.Command("go", "env", "GOMOD").Output(); err == nil {
		if p := strings.TrimSpace(string(out)); p != "" && p != os.DevNull {
			return filepath.Dir(p), nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// requireBinary fails the test if the raidd binary could not be built.
func requireBinary(t testing.TB) {
	t.Helper()
	require.NoError(t, buildErr, "the raidd binary must build")
}

// requireTool skips the test when an external client is not installed.
func requireTool(t testing.TB, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Skipf("%s not installed (apt-get install -y qemu-utils libnbd-bin fio nbdkit): %v", n, err)
		}
	}
}

// shortTempDir returns a fresh directory with a short path, for unix sockets
// (sun_path holds ~108 bytes; t.TempDir() paths can be longer).
func shortTempDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("", "raidd")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// logWriter sends a subprocess's output to the test log, line by line, and
// keeps a copy for assertions. It is safe for concurrent use.
type logWriter struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	line   []byte
	all    bytes.Buffer
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	w.line = append(w.line, p...)
	for {
		i := bytes.IndexByte(w.line, '\n')
		if i < 0 {
			break
		}
		w.t.Logf("%s%s", w.prefix, w.line[:i])
		w.line = w.line[i+1:]
	}
	return len(p), nil
}

func (w *logWriter) flush() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.line) > 0 {
		w.t.Logf("%s%s", w.prefix, w.line)
		w.line = nil
	}
}

func (w *logWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// raidd runs the binary to completion and returns its stdout, stderr and
// exit code. A failure to start at all fails the test.
func raidd(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	requireBinary(t)
	cmd := exec.Command(raiddBin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return o.String(), e.String(), 0
	case errors.As(err, &ee):
		return o.String(), e.String(), ee.ExitCode()
	default:
		require.NoError(t, err, "running raidd %v", args)
		return "", "", -1
	}
}

// mustRaidd runs the binary, requires exit code 0 and returns its stdout.
func mustRaidd(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, code := raidd(t, args...)
	require.Equal(t, 0, code, "raidd %s:\n%s%s", strings.Join(args, " "), out, errOut)
	return out
}

// statusRaidd runs `raidd status args...` and returns its stdout. status
// exits 0, 1 or 2 for the worst array state (clean, degraded, failed);
// anything else means it could not read the status, which fails the test.
func statusRaidd(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, code := raidd(t, append([]string{"status"}, args...)...)
	require.Contains(t, []int{0, 1, 2}, code, "raidd status %s:\n%s%s", strings.Join(args, " "), out, errOut)
	return out
}

// array is an array created on sparse member files by createArray.
type array struct {
	name    string
	level   string
	chunk   string
	members []string
}

// createArray runs `raidd create` on n new sparse files of memberSize in a
// fresh temporary directory.
func createArray(t testing.TB, level string, n int, chunk string) *array {
	t.Helper()
	return createArrayIn(t, t.TempDir(), level, n, chunk)
}

// createArrayIn is createArray with the member files in dir.
func createArrayIn(t testing.TB, dir, level string, n int, chunk string) *array {
	t.Helper()
	a := &array{name: "r" + level, level: level, chunk: chunk}
	for i := range n {
		a.members = append(a.members, filepath.Join(dir, fmt.Sprintf("m%d.img", i)))
	}
	args := append([]string{"create", "--name", a.name, "--level", level, "--chunk", chunk, "--size", memberSize}, a.members...)
	out := mustRaidd(t, args...)
	t.Logf("raidd create: %s", strings.TrimSpace(out))
	return a
}

// server is a running `raidd serve` subprocess.
type server struct {
	t    testing.TB
	cmd  *exec.Cmd
	sock string // NBD unix socket
	ctrl string // control socket
	out  *logWriter
	done chan struct{}
	err  error // from cmd.Wait, valid once done is closed
	once sync.Once
	code int
	// killed is set by kill: no clean exit is expected then.
	killed bool
}

// startServe starts `raidd serve --listen unix:SOCK --control CTRL args...`
// without waiting for it to listen.
func startServe(t testing.TB, args ...string) *server {
	t.Helper()
	requireBinary(t)
	dir := shortTempDir(t)
	s := &server{
		t:    t,
		sock: filepath.Join(dir, "nbd.sock"),
		ctrl: filepath.Join(dir, "ctl.sock"),
		out:  &logWriter{t: t, prefix: "raidd: "},
		done: make(chan struct{}),
	}
	full := append([]string{"serve", "--listen", "unix:" + s.sock, "--control", s.ctrl, "--log-level", "info"}, args...)
	t.Logf("starting raidd %s", strings.Join(full, " "))
	s.cmd = exec.Command(raiddBin, full...)
	s.cmd.Stdout = s.out
	s.cmd.Stderr = s.out
	require.NoError(t, s.cmd.Start())
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	return s
}

// serve starts `raidd serve` with args (members and flags), waits until the
// NBD socket accepts connections, and registers a cleanup that stops it with
// SIGTERM and asserts exit code 0 within serveStopTimeout.
func serve(t testing.TB, args ...string) *server {
	t.Helper()
	s := startServe(t, args...)
	t.Cleanup(func() {
		if code := s.stop(); code != 0 && !s.killed {
			t.Errorf("raidd serve exited with code %d after SIGTERM, want 0", code)
		}
	})
	deadline := time.Now().Add(serveReadyTimeout)
	for {
		c, err := net.DialTimeout("unix", s.sock, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-s.done:
			s.out.flush()
			require.FailNow(t, "raidd serve exited before listening", "exit: %v\noutput:\n%s", s.err, s.out)
		default:
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "raidd serve did not accept connections in time", "socket %s: %v\noutput:\n%s", s.sock, err, s.out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return s
}

// stop sends SIGTERM and waits for the exit code. A server that does not
// exit within serveStopTimeout is killed and reported. stop is idempotent.
func (s *server) stop() int {
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(serveStopTimeout):
			s.t.Errorf("raidd serve did not exit within %v of SIGTERM; killing it", serveStopTimeout)
			_ = s.cmd.Process.Kill()
			<-s.done
		}
		s.out.flush()
		s.code = exitCode(s.err)
	})
	return s.code
}

// kill simulates a crash: SIGKILL, no shutdown path at all.
func (s *server) kill() {
	s.once.Do(func() {
		s.killed = true
		_ = s.cmd.Process.Kill()
		<-s.done
		s.out.flush()
		s.code = exitCode(s.err)
	})
}

// stopOK stops the server and requires exit code 0.
func (s *server) stopOK(t testing.TB) {
	t.Helper()
	require.Equal(t, 0, s.stop(), "raidd serve must exit 0 on SIGTERM; output:\n%s", s.out)
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode() // -1 if killed by a signal
	}
	return -1
}

// uri is the NBD URI of export name on this server.
func (s *server) uri(name string) string {
	return "nbd+unix:///" + name + "?socket=" + s.sock
}

// statusJSON mirrors the documented JSON of `raidd status --json`. It is a
// copy on purpose: the JSON is the contract, not the Go type.
type statusJSON struct {
	Arrays []arrayStatus `json:"arrays"`
}

type arrayStatus struct {
	Name     string `json:"name"`
	UUID     string `json:"uuid"`
	Level    string `json:"level"`
	Chunk    int64  `json:"chunk"`
	Size     int64  `json:"size"`
	Members  int    `json:"raid_members"`
	State    string `json:"state"`
	Degraded bool   `json:"degraded"`
	Failed   bool   `json:"failed"`
	Dirty    bool   `json:"dirty"`
	ReadOnly bool   `json:"read_only"`
	Resync   *struct {
		Percent float64 `json:"percent"`
	} `json:"resync"`
	Devices           []memberStatus `json:"members"`
	ConsistencyPolicy string         `json:"consistency_policy"`
	Journal           *struct {
		Records     int64 `json:"records"`
		Checkpoints int64 `json:"checkpoints"`
		Replayed    int64 `json:"replayed"`
	} `json:"journal"`
}

type memberStatus struct {
	Role  int    `json:"role"`
	Path  string `json:"path"`
	UUID  string `json:"uuid"`
	State string `json:"state"`
	Note  string `json:"note"`
}

// status runs `raidd status --json` against the server's control socket and
// returns the status of the array called name.
func (s *server) status(t testing.TB, name string) arrayStatus {
	t.Helper()
	out := statusRaidd(t, "--json", "--control", s.ctrl)
	var st statusJSON
	require.NoError(t, json.Unmarshal([]byte(out), &st), "raidd status --json output:\n%s", out)
	for _, a := range st.Arrays {
		if a.Name == name {
			return a
		}
	}
	require.FailNow(t, "array missing from raidd status", "want %q in:\n%s", name, out)
	return arrayStatus{}
}

// nbdCounters are the server's NBD payload counters (`raidd status
// --json`, "nbd").
type nbdCounters struct {
	Read     int64 `json:"bytes_read"`
	Spliced  int64 `json:"bytes_spliced"` // of Read, sent from member files
	Written  int64 `json:"bytes_written"`
	Streamed int64 `json:"bytes_streamed"` // of Written, written while they arrived
	Received int64 `json:"bytes_received"` // of Streamed, received straight into the members
}

// nbdCounters returns the server's NBD payload counters so far.
func (s *server) nbdCounters(t testing.TB) nbdCounters {
	t.Helper()
	out := statusRaidd(t, "--json", "--control", s.ctrl)
	var st struct {
		NBD nbdCounters `json:"nbd"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), "raidd status --json output:\n%s", out)
	return st.NBD
}

// nbdBytes returns the server's NBD READ payload bytes so far, and the part
// of them spliced from member files.
func (s *server) nbdBytes(t testing.TB) (read, spliced int64) {
	t.Helper()
	c := s.nbdCounters(t)
	return c.Read, c.Spliced
}

// writeRandomFile writes size bytes from a generator seeded with seed to a
// new file in dir and returns its path and content.
func writeRandomFile(t testing.TB, dir string, size int, seed uint64) (string, []byte) {
	t.Helper()
	b := make([]byte, size)
	r := rand.New(rand.NewChaCha8(seedBytes(seed)))
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	p := filepath.Join(dir, fmt.Sprintf("data-%d.bin", seed))
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p, b
}

func seedBytes(seed uint64) [32]byte {
	var s [32]byte
	for i := range 8 {
		s[i] = byte(seed >> (8 * i))
	}
	return s
}

// run runs an external command and returns its combined output and error.
func run(t testing.TB, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = t.TempDir() // fio leaves verify-state files in its working directory
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mustRun runs an external command and requires success.
func mustRun(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := run(t, name, args...)
	require.NoError(t, err, "%s %s:\n%s", name, strings.Join(args, " "), out)
	return out
}

// readExport streams the whole export with `nbdcopy URI -` and returns its
// first n bytes and the total number of bytes the export produced.
func readExport(t testing.TB, uri string, n int) ([]byte, int64) {
	t.Helper()
	cmd := exec.Command("nbdcopy", uri, "-")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	buf := make([]byte, n)
	got, rerr := io.ReadFull(stdout, buf)
	rest, _ := io.Copy(io.Discard, stdout)
	werr := cmd.Wait()
	require.NoError(t, werr, "nbdcopy %s -: %s", uri, stderr.String())
	require.NoError(t, rerr, "nbdcopy produced only %d bytes", got)
	return buf, int64(got) + rest
}

// assertSameBytes compares two buffers and reports the first difference
// instead of dumping megabytes.
func assertSameBytes(t testing.TB, want, got []byte, what string) bool {
	t.Helper()
	if !assert.Equal(t, len(want), len(got), "%s: length", what) {
		return false
	}
	if bytes.Equal(want, got) {
		return true
	}
	for i := range want {
		if want[i] != got[i] {
			return assert.Fail(t, what+": data differs", "first difference at byte %d: want %#02x, got %#02x", i, want[i], got[i])
		}
	}
	return false
}

// examineStates runs `raidd examine --json` on members and returns the array
// state recorded by each member's superblock ("clean" or "dirty"). It
// accepts the JSON as a list of per-member objects or as an object holding
// such a list, and reads the state from a "state" or "array_state" key.
func examineStates(t testing.TB, members ...string) []string {
	t.Helper()
	out := mustRaidd(t, append([]string{"examine", "--json"}, members...)...)
	var v any
	require.NoError(t, json.Unmarshal([]byte(out), &v), "raidd examine --json output:\n%s", out)
	var objs []map[string]any
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if m, ok := e.(map[string]any); ok {
				objs = append(objs, m)
			}
		}
	case map[string]any:
		for _, key := range []string{"members", "devices", "superblocks"} {
			if l, ok := x[key].([]any); ok {
				for _, e := range l {
					if m, ok := e.(map[string]any); ok {
						objs = append(objs, m)
					}
				}
				break
			}
		}
		if objs == nil {
			objs = append(objs, x)
		}
	}
	var states []string
	for _, m := range objs {
		states = append(states, findArrayState(m))
	}
	require.Len(t, states, len(members), "one superblock per member in:\n%s", out)
	return states
}

// findArrayState returns the clean/dirty state of one examine object, looking
// one level down (e.g. under "superblock") when the object nests it.
func findArrayState(m map[string]any) string {
	for _, k := range []string{"array_state", "state"} {
		if s, ok := m[k].(string); ok && (s == "clean" || s == "dirty") {
			return s
		}
	}
	for _, v := range m {
		if sub, ok := v.(map[string]any); ok {
			if s := findArrayState(sub); s != "" {
				return s
			}
		}
	}
	return ""
}

// assertClean checks that every member's superblock records a clean array.
func assertClean(t testing.TB, members ...string) {
	t.Helper()
	for i, s := range examineStates(t, members...) {
		assert.Equal(t, "clean", s, "superblock state of %s", members[i])
	}
}
