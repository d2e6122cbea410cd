package tests

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// activatedServe starts `raidd serve --control CTRL args...` the way
// systemd starts a socket-activated service: files are its descriptors 3,
// 4, ..., and LISTEN_PID, LISTEN_FDS and LISTEN_FDNAMES (names joined with
// ':') describe them. The shell exports LISTEN_PID=$$ and execs raidd,
// which keeps the shell's PID, as systemd sets it in the child it forks.
func activatedServe(t *testing.T, files []*os.File, names []string, args ...string) *server {
	t.Helper()
	requireBinary(t)
	dir := shortTempDir(t)
	s := &server{t: t, ctrl: filepath.Join(dir, "ctl.sock"), out: &logWriter{t: t, prefix: "raidd: "}, done: make(chan struct{})}
	full := append([]string{"serve", "--control", s.ctrl, "--log-level", "info"}, args...)
	script := fmt.Sprintf(`export LISTEN_PID=$$ LISTEN_FDS=%d LISTEN_FDNAMES=%s; exec "$0" "$@"`, len(files), strings.Join(names, ":"))
	s.cmd = exec.Command("/bin/sh", append([]string{"-c", script, raiddBin}, full...)...)
	s.cmd.ExtraFiles = files
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	require.NoError(t, s.cmd.Start())
	for _, f := range files {
		f.Close() // the child has them
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	return s
}

// passedSockets returns a listening TCP socket on loopback and a unix one,
// as files to pass, with their addresses. Closing the listeners here does
// not remove the unix socket's file: it belongs to whoever passes it.
func passedSockets(t *testing.T) (files []*os.File, port int, path string) {
	t.Helper()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	path = filepath.Join(shortTempDir(t), "nbd.sock")
	ul, err := net.Listen("unix", path)
	require.NoError(t, err)
	ul.(*net.UnixListener).SetUnlinkOnClose(false)
	tf, err := tl.(*net.TCPListener).File()
	require.NoError(t, err)
	uf, err := ul.(*net.UnixListener).File()
	require.NoError(t, err)
	port = tl.Addr().(*net.TCPAddr).Port
	tl.Close()
	ul.Close()
	return []*os.File{tf, uf}, port, path
}

// TestSocketActivation passes raidd a TCP and a unix listening socket as
// systemd's raidd.socket would: raidd serves NBD on them (nbdinfo over
// both), not on its listen setting, reports them in its status, and leaves
// the unix socket's file in place at exit. A passed socket with another
// name is refused.
func TestSocketActivation(t *testing.T) {
	t.Parallel()
	requireTool(t, "nbdinfo")
	a := createArray(t, "1", 2, "64K")
	files, port, path := passedSockets(t)
	unused := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	s := activatedServe(t, files, []string{"nbd", "raidd.socket"}, append([]string{"--listen", unused}, a.members...)...)
	t.Cleanup(func() { s.stop() })

	// The sockets accept connections before raidd runs (the kernel queues
	// them), so wait for the control socket instead.
	pollUntil(t, serveReadyTimeout, "raidd serving", func() bool {
		_, err := os.Stat(s.ctrl)
		return err == nil
	})
	for _, uri := range []string{
		fmt.Sprintf("nbd://127.0.0.1:%d/%s", port, a.name),
		fmt.Sprintf("nbd+unix:///%s?socket=%s", a.name, path),
	} {
		info := runNBDInfo(t, uri)
		require.Len(t, info.Exports, 1, uri)
		assert.Equal(t, a.name, info.Exports[0].Name, uri)
	}
	c, err := net.DialTimeout("tcp", unused, time.Second)
	if err == nil {
		c.Close()
	}
	assert.Error(t, err, "the listen setting is not used when sockets are passed")

	var st struct {
		Listen []string `json:"listen"`
	}
	require.NoError(t, json.Unmarshal([]byte(statusRaidd(t, "--json", "--control", s.ctrl)), &st))
	assert.Equal(t, []string{fmt.Sprintf("127.0.0.1:%d", port), "unix:" + path}, st.Listen)
	assert.Contains(t, s.out.String(), "socket activation: NBD is served on the sockets the service manager passed")
	s.stopOK(t)
	assert.FileExists(t, path, "the passed unix socket's file is the service manager's")

	files, _, _ = passedSockets(t)
	s = activatedServe(t, files, []string{"nbd", "control"}, a.members...)
	select {
	case <-s.done:
	case <-time.After(serveReadyTimeout):
		s.stop()
		t.Fatalf("raidd serve did not refuse a socket named control:\n%s", s.out)
	}
	s.out.flush()
	assert.Equal(t, 1, exitCode(s.err), s.out.String())
	assert.Contains(t, s.out.String(), `file descriptor 4 is named "control"; raidd takes only NBD listeners`)
	assert.NotContains(t, s.out.String(), "array assembled", "refused before any array is assembled")
}
