package main

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// passFDs places the descriptors of files at first, first+1, ... as the
// service manager would (at 3, 4, ...), and returns first. The files
// themselves are closed.
func passFDs(t *testing.T, first int, files ...*os.File) int {
	t.Helper()
	for i, f := range files {
		require.NoError(t, unix.Dup3(int(f.Fd()), first+i, unix.O_CLOEXEC))
		require.NoError(t, f.Close())
	}
	return first
}

// sockets returns a TCP listener on loopback and a unix one, as files, and
// their addresses.
func sockets(t *testing.T) (files []*os.File, tcpAddr, unixPath string) {
	t.Helper()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	unixPath = filepath.Join(t.TempDir(), "nbd.sock")
	ul, err := net.Listen("unix", unixPath)
	require.NoError(t, err)
	ul.(*net.UnixListener).SetUnlinkOnClose(false)
	for _, l := range []interface{ File() (*os.File, error) }{tl.(*net.TCPListener), ul.(*net.UnixListener)} {
		f, err := l.File()
		require.NoError(t, err)
		files = append(files, f)
	}
	tcpAddr = tl.Addr().String()
	require.NoError(t, tl.Close())
	require.NoError(t, ul.Close())
	return files, tcpAddr, unixPath
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// firstFD is where the tests place passed descriptors: far above any the
// test process holds.
const firstFD = 300

func TestActivatedListeners(t *testing.T) {
	pid := os.Getpid()
	files, tcpAddr, unixPath := sockets(t)
	first := passFDs(t, firstFD, files...)
	ls, err := activatedListeners(envOf(map[string]string{
		"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "2", "LISTEN_FDNAMES": "nbd:raidd.socket",
	}), pid, first)
	require.NoError(t, err)
	require.Len(t, ls, 2)
	assert.Equal(t, "nbd", ls[0].name)
	assert.Equal(t, "raidd.socket", ls[1].name, "systemd's default name is the socket unit's")
	assert.Equal(t, tcpAddr, listenString(ls[0].Addr()))
	assert.Equal(t, "unix:"+unixPath, listenString(ls[1].Addr()))
	for i, l := range ls {
		flags, err := unix.FcntlInt(uintptr(first+i), unix.F_GETFD, 0)
		assert.Error(t, err, "the passed descriptor %d is closed once it is a listener (flags %v)", first+i, flags)
		go func() {
			if c, err := l.Accept(); err == nil {
				c.Close()
			}
		}()
	}
	for _, d := range []struct{ network, addr string }{{"tcp", tcpAddr}, {"unix", unixPath}} {
		c, err := net.Dial(d.network, d.addr)
		require.NoError(t, err, "the passed %s listener accepts", d.network)
		c.Close()
	}
	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	assert.FileExists(t, unixPath, "the socket file belongs to the service manager: closing does not remove it")
}

func TestActivatedListenersRefused(t *testing.T) {
	pid := os.Getpid()
	t.Run("not for this process", func(t *testing.T) {
		ls, err := activatedListeners(envOf(map[string]string{"LISTEN_PID": "1", "LISTEN_FDS": "2"}), pid, firstFD)
		assert.NoError(t, err)
		assert.Empty(t, ls)
	})
	t.Run("none passed", func(t *testing.T) {
		ls, err := activatedListeners(envOf(nil), pid, firstFD)
		assert.NoError(t, err)
		assert.Empty(t, ls)
	})
	t.Run("bad count", func(t *testing.T) {
		_, err := activatedListeners(envOf(map[string]string{"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "x"}), pid, firstFD)
		assert.ErrorIs(t, err, errActivation)
		assert.ErrorContains(t, err, `LISTEN_FDS="x"`)
	})
	t.Run("names do not match the count", func(t *testing.T) {
		_, err := activatedListeners(envOf(map[string]string{"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "2", "LISTEN_FDNAMES": "nbd"}), pid, firstFD)
		assert.ErrorIs(t, err, errActivation)
	})
	t.Run("a socket that is not for NBD", func(t *testing.T) {
		files, _, _ := sockets(t)
		first := passFDs(t, firstFD, files...)
		ls, err := activatedListeners(envOf(map[string]string{
			"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "2", "LISTEN_FDNAMES": "nbd:control",
		}), pid, first)
		assert.Empty(t, ls)
		assert.ErrorIs(t, err, errActivation)
		assert.ErrorContains(t, err, `file descriptor 301 is named "control"; raidd takes only NBD listeners: name them FileDescriptorName=nbd`)
		for i := range 2 {
			_, err := unix.FcntlInt(uintptr(first+i), unix.F_GETFD, 0)
			assert.Error(t, err, "descriptor %d is closed after the refusal", first+i)
		}
	})
	t.Run("a datagram socket", func(t *testing.T) {
		c, err := net.ListenPacket("udp", "127.0.0.1:0")
		require.NoError(t, err)
		f, err := c.(*net.UDPConn).File()
		require.NoError(t, err)
		c.Close()
		first := passFDs(t, firstFD, f)
		_, err = activatedListeners(envOf(map[string]string{"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "1"}), pid, first)
		assert.ErrorIs(t, err, errActivation)
		assert.ErrorContains(t, err, "not a stream socket (use ListenStream=)")
	})
	t.Run("a socket that does not listen", func(t *testing.T) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		require.NoError(t, err)
		first := passFDs(t, firstFD, os.NewFile(uintptr(fd), "s"))
		_, err = activatedListeners(envOf(map[string]string{"LISTEN_PID": strconv.Itoa(pid), "LISTEN_FDS": "1", "LISTEN_FDNAMES": "nbd"}), pid, first)
		assert.ErrorIs(t, err, errActivation)
		assert.ErrorContains(t, err, "not a listening socket")
	})
}
