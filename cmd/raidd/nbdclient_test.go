package main

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
)

// nbdClient is the smallest NBD client that exercises an export end to end:
// fixed newstyle handshake with NBD_OPT_EXPORT_NAME, then one request at a
// time with simple replies. Protocol conformance is tested in package nbd;
// this only proves that raidd serve wires arrays to the server.
type nbdClient struct {
	t     testing.TB
	c     net.Conn
	size  uint64
	flags uint16
	seq   uint64
}

const (
	nbdCmdRead  = 0
	nbdCmdWrite = 1
	nbdCmdDisc  = 2
	nbdCmdFlush = 3

	nbdFlagReadOnly  = 1 << 1
	nbdFlagSendFlush = 1 << 2
	nbdFlagSendTrim  = 1 << 5
)

func dialNBD(t testing.TB, network, addr, export string) *nbdClient {
	t.Helper()
	c, err := net.Dial(network, addr)
	if err != nil {
		t.Fatalf("dial %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { c.Close() })
	var hello struct {
		Magic, Opt uint64
		Flags      uint16
	}
	if err := binary.Read(c, binary.BigEndian, &hello); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	if hello.Magic != 0x4e42444d41474943 || hello.Opt != 0x49484156454f5054 {
		t.Fatalf("handshake: bad magic %#x %#x", hello.Magic, hello.Opt)
	}
	// Client flags: FIXED_NEWSTYLE | NO_ZEROES, then NBD_OPT_EXPORT_NAME.
	msg := binary.BigEndian.AppendUint32(nil, 3)
	msg = binary.BigEndian.AppendUint64(msg, 0x49484156454f5054)
	msg = binary.BigEndian.AppendUint32(msg, 1)
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(export)))
	msg = append(msg, export...)
	if _, err := c.Write(msg); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	var info struct {
		Size  uint64
		Flags uint16
	}
	if err := binary.Read(c, binary.BigEndian, &info); err != nil {
		t.Fatalf("export %q: %v", export, err)
	}
	return &nbdClient{t: t, c: c, size: info.Size, flags: info.Flags}
}

// do sends one request and returns the reply's error code (0 on success).
func (n *nbdClient) do(cmd uint16, off uint64, p []byte) uint32 {
	n.t.Helper()
	n.seq++
	length := uint32(len(p))
	req := binary.BigEndian.AppendUint32(nil, 0x25609513)
	req = binary.BigEndian.AppendUint16(req, 0)
	req = binary.BigEndian.AppendUint16(req, cmd)
	req = binary.BigEndian.AppendUint64(req, n.seq)
	req = binary.BigEndian.AppendUint64(req, off)
	req = binary.BigEndian.AppendUint32(req, length)
	if cmd == nbdCmdWrite {
		req = append(req, p...)
	}
	if _, err := n.c.Write(req); err != nil {
		n.t.Fatalf("request: %v", err)
	}
	if cmd == nbdCmdDisc {
		return 0
	}
	var rep struct {
		Magic, Errno uint32
		Handle       uint64
	}
	if err := binary.Read(n.c, binary.BigEndian, &rep); err != nil {
		n.t.Fatalf("reply: %v", err)
	}
	if rep.Magic != 0x67446698 || rep.Handle != n.seq {
		n.t.Fatalf("reply: magic %#x handle %d, want simple reply to %d", rep.Magic, rep.Handle, n.seq)
	}
	if cmd == nbdCmdRead && rep.Errno == 0 {
		if _, err := io.ReadFull(n.c, p); err != nil {
			n.t.Fatalf("read payload: %v", err)
		}
	}
	return rep.Errno
}

func (n *nbdClient) mustDo(cmd uint16, off uint64, p []byte) {
	n.t.Helper()
	if e := n.do(cmd, off, p); e != 0 {
		n.t.Fatalf("%s at %d: error %d", cmdName(cmd), off, e)
	}
}

func cmdName(cmd uint16) string {
	return [...]string{"read", "write", "disc", "flush"}[cmd]
}
