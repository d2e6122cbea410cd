package nbd

import (
	"net"
	"syscall"
)

// unixSendBuffer is the kernel send buffer a unix-socket connection asks
// for once transmission starts: a 1 MiB READ reply (and its header) then
// fits in one writev. With the kernel default (net.core.wmem_default,
// 208 KiB) a large reply goes out in five or more pieces, and between them
// the writing goroutine waits for the client to drain the socket: a
// goroutine park, a poller wake-up and a thread switch each time, which
// cost more CPU than the copy itself. The kernel doubles the value for its
// bookkeeping and caps the request at net.core.wmem_max.
const unixSendBuffer = 2 << 20

// tuneSocket raises the send buffer of a unix-socket connection to
// unixSendBuffer (never lowering a larger one). TCP connections are left
// alone: setting SO_SNDBUF there would switch off the kernel's buffer
// autotuning, which already grows to net.ipv4.tcp_wmem's maximum. Errors
// are ignored: the buffer size is a matter of speed, not correctness.
func tuneSocket(nc net.Conn) {
	u, ok := nc.(*net.UnixConn)
	if !ok {
		return
	}
	if cur, err := sendBuffer(u); err != nil || cur >= 2*unixSendBuffer {
		return
	}
	_ = u.SetWriteBuffer(unixSendBuffer)
}

// sendBuffer returns the socket's SO_SNDBUF as the kernel reports it (twice
// what was set).
func sendBuffer(u *net.UnixConn) (int, error) {
	rc, err := u.SyscallConn()
	if err != nil {
		return 0, err
	}
	var v int
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	}); err != nil {
		return 0, err
	}
	return v, gerr
}
