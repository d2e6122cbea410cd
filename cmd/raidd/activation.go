package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// listenFDsStart is the first file descriptor the service manager passes
// (SD_LISTEN_FDS_START).
const listenFDsStart = 3

// errActivation is wrapped by every problem with the sockets passed by the
// service manager.
var errActivation = errors.New("socket activation")

// activatedListener is a listening socket passed by the service manager.
type activatedListener struct {
	net.Listener
	name string // its FileDescriptorName
}

// activatedListeners returns the NBD listeners that the service manager
// passed (systemd socket activation, sd_listen_fds): LISTEN_FDS sockets
// from file descriptor first on, if LISTEN_PID is pid. It returns none
// when no sockets were passed to this process.
//
// Every passed socket must be a listening stream socket named "nbd"
// (FileDescriptorName=nbd) or left with systemd's default name, the socket
// unit's ("raidd.socket"); raidd takes no other kind, so any other name is
// refused rather than ignored. The descriptors are made close-on-exec, so
// that on_event commands do not inherit them.
func activatedListeners(getenv func(string) string, pid, first int) ([]activatedListener, error) {
	if getenv("LISTEN_PID") == "" && getenv("LISTEN_FDS") == "" {
		return nil, nil
	}
	if p, err := strconv.Atoi(getenv("LISTEN_PID")); err != nil || p != pid {
		return nil, nil // meant for another process (one that started us)
	}
	n, err := strconv.Atoi(getenv("LISTEN_FDS"))
	if err != nil || n < 0 {
		return nil, fmt.Errorf("%w: LISTEN_FDS=%q is not a number of file descriptors", errActivation, getenv("LISTEN_FDS"))
	}
	var names []string
	if s := getenv("LISTEN_FDNAMES"); s != "" {
		names = strings.Split(s, ":")
		if len(names) != n {
			return nil, fmt.Errorf("%w: LISTEN_FDNAMES names %d sockets and LISTEN_FDS says %d", errActivation, len(names), n)
		}
	}
	var (
		ls   []activatedListener
		errs []error
	)
	for i := 0; i < n; i++ {
		fd := first + i
		name := "unknown"
		if names != nil {
			name = names[i]
		}
		unix.CloseOnExec(fd)
		if name != "nbd" && name != "unknown" && !strings.HasSuffix(name, ".socket") {
			errs = append(errs, fmt.Errorf("%w: file descriptor %d is named %q; raidd takes only NBD listeners: name them FileDescriptorName=nbd (or leave the default)", errActivation, fd, name))
			_ = unix.Close(fd)
			continue
		}
		l, err := fileListener(fd, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: file descriptor %d (%s): %w", errActivation, fd, name, err))
			continue
		}
		ls = append(ls, activatedListener{Listener: l, name: name})
	}
	if len(errs) > 0 {
		for _, l := range ls {
			_ = l.Close()
		}
		return nil, errors.Join(errs...)
	}
	return ls, nil
}

// fileListener turns a passed descriptor into a listener. net.FileListener
// works on a duplicate, so the original is closed, as it is when it is
// refused; a unix socket listener
// made this way does not remove its file when closed (it belongs to the
// service manager).
func fileListener(fd int, name string) (net.Listener, error) {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("not a socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), name)
	if typ != unix.SOCK_STREAM {
		_ = f.Close()
		return nil, errors.New("not a stream socket (use ListenStream=)")
	}
	if acc, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || acc == 0 {
		_ = f.Close()
		return nil, errors.New("not a listening socket (use Accept=no)")
	}
	defer f.Close()
	return net.FileListener(f)
}

// unsetActivationEnv removes the socket activation variables, so that
// processes raidd starts (on_event) do not take them for their own.
func unsetActivationEnv() {
	for _, k := range []string{"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"} {
		_ = os.Unsetenv(k)
	}
}

// listenString renders a listener's address as a listen setting would be
// written: host:port or unix:PATH.
func listenString(a net.Addr) string {
	if u, ok := a.(*net.UnixAddr); ok {
		return "unix:" + u.Name
	}
	return a.String()
}
