package nbd

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHandshakeExportName(t *testing.T) {
	for _, tc := range []struct {
		name     string
		noZeroes bool
		export   string
	}{
		{name: "zeroes", noZeroes: false, export: "disk"},
		{name: "no-zeroes", noZeroes: true, export: "disk"},
		{name: "default-export", noZeroes: true, export: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dev := newMemDev(1 << 20)
			copy(dev.data[4096:], "hello")
			ts := startServer(t, oneExport(dev))
			cl := dial(t, ts)
			flags := clientFlagFixedNewstyle
			if tc.noZeroes {
				flags |= clientFlagNoZeroes
			}
			cl.hello(flags)
			cl.sendOpt(optExportName, []byte(tc.export))
			b := cl.readFull(10)
			assert.Equal(t, uint64(1<<20), binary.BigEndian.Uint64(b))
			tf := binary.BigEndian.Uint16(b[8:])
			assert.NotZero(t, tf&tflagHasFlags)
			assert.Zero(t, tf&tflagSendDF, "DF without structured replies")
			if !tc.noZeroes {
				assert.Equal(t, make([]byte, 124), cl.readFull(124))
			}
			// The stream is in sync: a read right after works.
			assert.Equal(t, []byte("hello"), cl.read(4096, 5))
		})
	}
}

func TestHandshakeExportNameUnknownCloses(t *testing.T) {
	ts := startServer(t, oneExport(newMemDev(4096)))
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle)
	cl.sendOpt(optExportName, []byte("nope"))
	cl.expectClosedNow()
	assert.Eventually(t, func() bool { return ts.s.Stats().HandshakeFailures == 1 }, 5*time.Second, time.Millisecond)
}

func TestHandshakeInfoThenGoIdentical(t *testing.T) {
	dev := newMemDev(1 << 20)
	dev.fastZero.Store(true)
	dev.multiConn = true
	dev.bsMin, dev.bsPref, dev.bsMax = 512, 3<<19, 4<<20 // preferred 1.5 MiB: not a power of two
	ts := startServer(t, oneExport(dev))
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)

	info := cl.info(optInfo, "disk", infoName, infoDescription, infoBlockSize, 0x7fff /* unknown: ignored */)
	require.Equal(t, repAck, info.final)
	// Flip a dynamic capability between INFO and GO: the answer must not change.
	dev.fastZero.Store(false)
	gop := cl.info(optGo, "disk", infoName, infoDescription, infoBlockSize, 0x7fff)
	require.Equal(t, repAck, gop.final)

	assert.Equal(t, info.size, gop.size)
	assert.Equal(t, info.tflags, gop.tflags)
	assert.Equal(t, info.name, gop.name)
	assert.Equal(t, info.description, gop.description)
	assert.Equal(t, [3]uint32{info.minB, info.prefB, info.maxB}, [3]uint32{gop.minB, gop.prefB, gop.maxB})
	assert.ElementsMatch(t, info.infos, gop.infos)

	assert.Equal(t, uint64(1<<20), gop.size)
	assert.Equal(t, "disk", gop.name)
	assert.Equal(t, "test disk", gop.description)
	assert.Equal(t, uint32(512), gop.minB)
	assert.Equal(t, uint32(2<<20), gop.prefB, "preferred rounded up to a power of two")
	assert.Equal(t, uint32(4<<20), gop.maxB)
	assert.NotZero(t, gop.tflags&tflagSendFastZero)
	assert.NotZero(t, gop.tflags&tflagCanMultiConn)
	// Transmission works after GO.
	assert.Len(t, cl.read(0, 512), 512)
}

func TestHandshakeGoUnknownExportThenValid(t *testing.T) {
	ts := startServer(t, oneExport(newMemDev(8192)))
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	r := cl.info(optGo, "missing")
	assert.Equal(t, repErrUnknown, r.final)
	assert.Empty(t, r.infos, "no NBD_REP_INFO before ERR_UNKNOWN")
	r = cl.info(optInfo, "missing")
	assert.Equal(t, repErrUnknown, r.final)
	// Default export by empty name; NAME reports the canonical name.
	r = cl.info(optGo, "", infoName)
	require.Equal(t, repAck, r.final)
	assert.Equal(t, "disk", r.name)
	assert.Len(t, cl.read(0, 10), 10)
}

func TestHandshakeList(t *testing.T) {
	opts := Options{Exports: []Export{
		{Name: "a", Description: "first", Device: newMemDev(4096)},
		{Name: "b", Device: newMemDev(4096)},
	}}
	ts := startServer(t, opts)
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle)
	cl.sendOpt(optList, nil)
	var names, details []string
	for {
		r := cl.readOptReply()
		require.Equal(t, optList, r.opt)
		if r.typ == repAck {
			break
		}
		require.Equal(t, repServer, r.typ)
		n := binary.BigEndian.Uint32(r.data)
		require.LessOrEqual(t, int(n), len(r.data)-4)
		names = append(names, string(r.data[4:4+n]))
		details = append(details, string(r.data[4+n:]))
	}
	assert.Equal(t, []string{"a", "b"}, names)
	assert.Equal(t, []string{"first", ""}, details)

	// LIST with data is invalid, and negotiation continues.
	cl.sendOpt(optList, []byte("x"))
	assert.Equal(t, repErrInvalid, cl.readOptReply().typ)
	r := cl.info(optGo, "b")
	require.Equal(t, repAck, r.final)
}

func TestHandshakeUnsupportedOptionsThenContinue(t *testing.T) {
	ts := startServer(t, oneExport(newMemDev(8192)))
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	for _, tc := range []struct {
		name string
		opt  uint32
		data []byte
	}{
		{"unknown-with-data", 0xdead, pattern(1000, 1)},
		{"unknown-empty", 12345, nil},
		{"starttls", optStartTLS, nil},
		{"peek-export", optPeekExport, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl.t = t
			cl.sendOpt(tc.opt, tc.data)
			r := cl.readOptReply()
			assert.Equal(t, tc.opt, r.opt)
			assert.Equal(t, repErrUnsup, r.typ)
		})
	}
	cl.t = t
	for _, tc := range []struct {
		name string
		opt  uint32
		data []byte
	}{
		{"structured-with-data", optStructuredReply, []byte{1}},
		{"info-short", optInfo, []byte{0, 0}},
		{"info-name-too-long", optInfo, []byte{0, 0, 1, 0, 0, 0}},
		{"info-count-mismatch", optGo, append(infoData("disk"), 0, 3)},
		{"list-meta-context-short", optListMetaContext, []byte{0, 0, 0, 4, 'd', 'i', 's', 'k', 0, 0}},
		{"set-meta-context-unstructured", optSetMetaContext, metaData("disk", metaBaseAllocation)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl.t = t
			cl.sendOpt(tc.opt, tc.data)
			assert.Equal(t, repErrInvalid, cl.readOptReply().typ)
		})
	}
	cl.t = t
	r := cl.info(optGo, "disk")
	require.Equal(t, repAck, r.final)
	assert.Len(t, cl.read(0, 100), 100)
}

func TestHandshakeAbort(t *testing.T) {
	ts := startServer(t, oneExport(newMemDev(4096)))
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle)
	cl.sendOpt(optAbort, nil)
	r := cl.readOptReply()
	assert.Equal(t, optAbort, r.opt)
	assert.Equal(t, repAck, r.typ)
	cl.expectClosedNow()
	assert.Eventually(t, func() bool { return ts.s.Stats().ActiveConnections == 0 }, 5*time.Second, time.Millisecond)
	assert.Zero(t, ts.s.Stats().HandshakeFailures, "ABORT is not a failure")
}

func TestHandshakeHugeOptionDisconnects(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  uint32
		want uint32 // the reply before the close; 0: none
	}{
		{"unknown", 0x4242, repErrTooBig},
		{"go", optGo, repErrTooBig},
		{"abort", optAbort, repAck},       // the spec: ABORT gets an ACK, its data ignored
		{"export-name", optExportName, 0}, // no error path: plain close
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, oneExport(newMemDev(4096)))
			cl := dial(t, ts)
			cl.hello(clientFlagFixedNewstyle)
			b := binary.BigEndian.AppendUint64(nil, magicIHaveOpt)
			b = binary.BigEndian.AppendUint32(b, tc.opt)
			b = binary.BigEndian.AppendUint32(b, 0xfffffff0)
			cl.write(b)
			if tc.want != 0 {
				r := cl.readOptReply()
				assert.Equal(t, tc.opt, r.opt)
				assert.Equal(t, tc.want, r.typ)
			}
			cl.expectClosedNow()
		})
	}
}

func TestHandshakeBadClientInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(cl *client)
	}{
		{"unknown-client-flags", func(cl *client) { cl.hello(clientFlagFixedNewstyle | 1<<5) }},
		{"bad-option-magic", func(cl *client) {
			cl.hello(clientFlagFixedNewstyle)
			cl.write(make([]byte, 16))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, oneExport(newMemDev(4096)))
			cl := dial(t, ts)
			tc.send(cl)
			cl.expectClosedNow()
		})
	}
}

func TestHandshakeTimeoutDoesNotBlockOthers(t *testing.T) {
	opts := oneExport(newMemDev(4096))
	opts.HandshakeTimeout = 200 * time.Millisecond
	ts := startServer(t, opts)
	stalled := dial(t, ts)
	stalled.hello(clientFlagFixedNewstyle) // then says nothing

	other := connect(t, ts, "disk", false)
	assert.Len(t, other.read(0, 1), 1)

	start := time.Now()
	stalled.expectClosedNow()
	assert.Less(t, time.Since(start), 5*time.Second)
	// A connection that entered transmission has no deadline any more.
	time.Sleep(300 * time.Millisecond)
	assert.Len(t, other.read(0, 1), 1)
}

func TestHandshakeStructuredEnablesDF(t *testing.T) {
	ts := startServer(t, oneExport(newMemDev(4096)))
	cl := connect(t, ts, "disk", true)
	assert.NotZero(t, cl.tflags&tflagSendDF)
	r := cl.do(cmdRead, cmdFlagDF, 0, 4096, nil)
	require.Zero(t, r.errno)
	assert.Equal(t, []uint16{replyTypeOffsetData}, r.chunks, "DF: exactly one content chunk")
}
