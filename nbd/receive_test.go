package nbd

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// recvDev is a pieceDev that receives WRITEs in place (Receiver): it hands
// the server its memory for the write in three pieces. upto > 0 takes only
// that prefix; faultAfter > 0 puts a read-only page after that many bytes,
// where the kernel's receive fails with EFAULT; devErr fails the write
// after receiving it; decline takes nothing. viaBuf > 0 receives that
// many bytes at the start into the server's buffer p, and copies them into
// its memory itself, as a parity array does with a piece of a stripe.
type recvDev struct {
	*pieceDev
	upto, faultAfter int
	viaBuf           int
	devErr           error
	decline          bool
	ro               []byte // the read-only page
	calls            int
	pre              int   // the bytes the server had buffered (pre)
	pres             []int // pre of every call
}

func (d *recvDev) ReceiveAt(p []byte, off int64, pre []byte, recv func(dsts [][]byte, atLeast int) (int, error)) (int, error) {
	d.calls++
	if d.decline {
		return 0, nil
	}
	n := len(p)
	if d.upto > 0 {
		n = d.upto
	}
	d.mu.Lock() // the pieceDev's: no WriteAt meanwhile
	defer d.mu.Unlock()
	d.memDev.mu.Lock()
	defer d.memDev.mu.Unlock()
	mem := d.data[off : off+int64(n)]
	var dsts [][]byte
	switch {
	case d.faultAfter > 0:
		dsts = [][]byte{mem[:d.faultAfter], d.ro, mem[d.faultAfter:]}
	case d.viaBuf > 0:
		dsts = [][]byte{p[:d.viaBuf], mem[d.viaBuf:]}
	default:
		// Empty pieces between and after the others are skipped.
		dsts = [][]byte{mem[:n/3], nil, mem[n/3 : 2*n/3], mem[2*n/3:], {}}
	}
	step := n
	if d.viaBuf > 0 {
		step = 64 << 10 // and whatever has arrived besides
	}
	d.pre = len(pre)
	d.pres = append(d.pres, len(pre))
	got, err := recvAll(recv, dsts, pre, step)
	copy(mem[:min(got, d.viaBuf)], p)
	if d.faultAfter > 0 && got > d.faultAfter {
		return 0, fmt.Errorf("bytes placed past the fault: %d", got)
	}
	if err == nil && d.devErr != nil {
		return got, d.devErr
	}
	return got, err
}

// recvAll fills dsts with pre, then calls recv until dsts are full or it
// fails, asking it to wait for step bytes at a time at least (it returns
// what has arrived besides), and returns the bytes it placed, pre's
// included.
func recvAll(recv func(dsts [][]byte, atLeast int) (int, error), dsts [][]byte, pre []byte, step int) (got int, err error) {
	rest := append([][]byte(nil), dsts...)
	left := 0
	for _, d := range dsts {
		left += len(d)
	}
	advance := func(n int) {
		for n > 0 {
			if k := min(n, len(rest[0])); k > 0 {
				rest[0], n = rest[0][k:], n-k
			}
			if len(rest[0]) == 0 {
				rest = rest[1:]
			}
		}
	}
	for _, d := range rest {
		if got == len(pre) {
			break
		}
		got += copy(d, pre[got:])
	}
	left -= got
	advance(got)
	for left > 0 {
		var n int
		n, err = recv(rest, min(step, left))
		got, left = got+n, left-n
		if err != nil {
			return got, err
		}
		if n < min(step, left+n) {
			return got, fmt.Errorf("recv placed %d bytes, asked to wait for %d", n, min(step, left+n))
		}
		advance(n)
	}
	return got, nil
}

// TestReceivedWrite: a large streamed WRITE to a device that receives in
// place goes from the socket into the device's memory: what the reader had
// buffered is written with WriteAt, the rest received, counted in
// BytesReceived, and acknowledged once. A device that takes only a prefix,
// or whose memory faults part way (EFAULT), gets the rest through WriteAt,
// with the bytes where they belong; a device error fails the WRITE with
// EIO; a device that declines is streamed as before. The connection goes
// on after each.
func TestReceivedWrite(t *testing.T) {
	ro, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON)
	require.NoError(t, err)
	t.Cleanup(func() { _ = unix.Munmap(ro) })
	const size = 1 << 20
	for _, tc := range []struct {
		name     string
		dev      recvDev
		errno    uint32
		received int64 // of the part the reader had not buffered; -1: all of it
	}{
		{name: "whole", received: -1},
		{name: "prefix", dev: recvDev{upto: size / 2}, received: -2},
		{name: "fault", dev: recvDev{faultAfter: 300 << 10}, received: -2},
		{name: "device error", dev: recvDev{devErr: errors.New("injected")}, errno: errnoIO},
		{name: "decline", dev: recvDev{decline: true}},
		{name: "partly into the buffer", dev: recvDev{viaBuf: 100 << 10}, received: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := tc.dev
			dev.pieceDev = &pieceDev{memDev: newMemDev(4 << 20), inline: true}
			dev.ro = ro
			ts := startServer(t, oneExport(&dev), true)
			cl := connect(t, ts, "disk", true)
			payload := pattern(size, 11)
			off := uint64(8192)
			h := sendTrickled(t, cl, dev.pieceDev, off, payload, 128<<10, false)
			r := cl.readReply()
			require.Equal(t, h, r.handle)
			require.Equal(t, tc.errno, r.errno)
			require.Equal(t, 1, dev.calls, "ReceiveAt is asked once")
			st := ts.s.Stats()
			if tc.errno != 0 {
				assert.Zero(t, st.BytesWritten)
			} else {
				assert.Equal(t, payload, dev.snapshot(int64(off), size))
				assert.Equal(t, int64(size), st.BytesStreamed)
				// What WriteAt wrote and what was received tile the
				// payload.
				var viaWriteAt int64
				for _, w := range dev.writes() {
					viaWriteAt += w[1]
				}
				assert.Equal(t, int64(size), viaWriteAt+st.BytesReceived+int64(max(dev.viaBuf, dev.pre)),
					"the bytes received into the buffer, and those the reader had buffered, are not counted as received in place")
				switch tc.received {
				case -1:
					assert.Greater(t, st.BytesReceived, int64(size/2))
					assert.Zero(t, viaWriteAt, "the device took what the reader had buffered too")
				case -2:
					assert.Positive(t, st.BytesReceived)
					assert.Positive(t, viaWriteAt)
				default:
					assert.Zero(t, st.BytesReceived)
				}
			}
			require.Zero(t, cl.writeAt(0, pattern(4096, 2), 0))
			assert.Equal(t, pattern(4096, 2), cl.read(0, 4096))
		})
	}
}

// TestReceivedWriteHeaderAlone: after a large streamed WRITE the reader
// reads the next header alone, so a large WRITE whose payload is already
// waiting in the socket is received from the socket whole, with nothing
// buffered before it (pre), not partly from the reader's buffer; the small
// requests after them are served as ever, and every byte is where it
// belongs.
func TestReceivedWriteHeaderAlone(t *testing.T) {
	dev := recvDev{pieceDev: &pieceDev{memDev: newMemDev(4 << 20), inline: true}}
	ts := startServer(t, oneExport(&dev), true)
	cl := connect(t, ts, "disk", true)
	const size = 256 << 10
	var all []byte
	var handles []uint64
	for i := range 3 {
		h, b := cl.request(cmdWrite, 0, uint64(i*size), size, pattern(size, byte(20+i)))
		all, handles = append(all, b...), append(handles, h)
	}
	h, b := cl.request(cmdWrite, 0, 3*size, 4096, pattern(4096, 30))
	all, handles = append(all, b...), append(handles, h)
	cl.write(all) // every request is in the socket before most are read
	for _, h := range handles {
		r := cl.readReply()
		require.Equal(t, h, r.handle)
		require.Zero(t, r.errno)
	}
	require.Equal(t, 3, dev.calls, "the three large WRITEs are received")
	assert.Equal(t, []int{0, 0}, dev.pres[1:], "after a large WRITE the next header is read alone")
	assert.Equal(t, int64(3*size-dev.pres[0]), ts.s.Stats().BytesReceived)
	for i := range 3 {
		assert.Equal(t, pattern(size, byte(20+i)), dev.snapshot(int64(i*size), size))
	}
	assert.Equal(t, pattern(4096, 30), cl.read(3*size, 4096))
	assert.Equal(t, pattern(size, 21), cl.read(size, size))
}

// TestReceivedWriteOff: with NoReceive a device that could receive in
// place is never asked.
func TestReceivedWriteOff(t *testing.T) {
	dev := recvDev{pieceDev: &pieceDev{memDev: newMemDev(4 << 20), inline: true}}
	opts := oneExport(&dev)
	opts.NoReceive = true
	ts := startServer(t, opts, true)
	cl := connect(t, ts, "disk", true)
	payload := pattern(1<<20, 12)
	h := sendTrickled(t, cl, dev.pieceDev, 0, payload, 128<<10, false)
	r := cl.readReply()
	require.Equal(t, h, r.handle)
	require.Zero(t, r.errno)
	assert.Zero(t, dev.calls)
	assert.Equal(t, payload, dev.snapshot(0, 1<<20))
	assert.Zero(t, ts.s.Stats().BytesReceived)
}
