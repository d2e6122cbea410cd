package nbd

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func encodeRequest(h requestHeader) []byte {
	b := binary.BigEndian.AppendUint32(nil, magicRequest)
	b = binary.BigEndian.AppendUint16(b, h.flags)
	b = binary.BigEndian.AppendUint16(b, h.typ)
	b = binary.BigEndian.AppendUint64(b, h.handle)
	b = binary.BigEndian.AppendUint64(b, h.offset)
	return binary.BigEndian.AppendUint32(b, h.length)
}

func TestValidateOrder(t *testing.T) {
	full := tflagHasFlags | tflagSendFlush | tflagSendFUA | tflagSendTrim | tflagSendWriteZeroes | tflagSendCache
	p := policy{size: 1 << 20, tflags: full, minBlock: 512, maxLen: 1 << 16}
	ro := p
	ro.tflags |= tflagReadOnly
	bs := p
	bs.blockStatus = true
	for _, tc := range []struct {
		name string
		p    policy
		h    requestHeader
		want uint32
	}{
		{"ok-read", p, requestHeader{typ: cmdRead, offset: 512, length: 512}, 0},
		{"ok-flush-fua", p, requestHeader{typ: cmdFlush, flags: cmdFlagFUA}, 0},
		{"ok-trim-beyond-max-len", p, requestHeader{typ: cmdTrim, length: 1 << 20}, 0},
		{"ok-write-zeroes-no-hole", p, requestHeader{typ: cmdWriteZeroes, flags: cmdFlagNoHole | cmdFlagFUA, length: 1 << 20}, 0},
		{"flags-before-read-only", ro, requestHeader{typ: cmdWrite, flags: 1 << 9, length: 512}, errnoInval},
		{"read-only-before-bounds", ro, requestHeader{typ: cmdWrite, offset: 1 << 40, length: 512}, errnoPerm},
		{"bounds-before-alignment", p, requestHeader{typ: cmdWrite, offset: 1<<20 - 1, length: 2}, errnoNoSpc},
		{"alignment-before-size", p, requestHeader{typ: cmdRead, offset: 1, length: 1<<16 + 1}, errnoInval},
		{"oversize-read", p, requestHeader{typ: cmdRead, length: 1<<16 + 512}, errnoOverflow},
		{"fast-zero-not-advertised", p, requestHeader{typ: cmdWriteZeroes, flags: cmdFlagFastZero, length: 512}, errnoInval},
		{"df-not-advertised", p, requestHeader{typ: cmdRead, flags: cmdFlagDF, length: 512}, errnoInval},
		{"trim-not-advertised", policy{size: 1 << 20, tflags: tflagHasFlags, minBlock: 1, maxLen: 1 << 16},
			requestHeader{typ: cmdTrim, length: 1}, errnoInval},
		{"resize", p, requestHeader{typ: cmdResize}, errnoInval},
		{"disc-like-unknown", p, requestHeader{typ: 0xffff}, errnoInval},
		{"max-offset", p, requestHeader{typ: cmdRead, offset: 1<<64 - 1, length: 1}, errnoInval},
		{"block-status-without-context", p, requestHeader{typ: cmdBlockStatus, length: 512}, errnoInval},
		{"ok-block-status", bs, requestHeader{typ: cmdBlockStatus, offset: 512, length: 1024}, 0},
		{"ok-block-status-req-one-fua", bs, requestHeader{typ: cmdBlockStatus, flags: cmdFlagReqOne | cmdFlagFUA, length: 512}, 0},
		{"ok-block-status-beyond-max-len", bs, requestHeader{typ: cmdBlockStatus, length: 1 << 20}, 0},
		{"ok-block-status-on-read-only", func() policy { q := bs; q.tflags |= tflagReadOnly; return q }(),
			requestHeader{typ: cmdBlockStatus, length: 512}, 0},
		{"block-status-bad-flag", bs, requestHeader{typ: cmdBlockStatus, flags: cmdFlagNoHole, length: 512}, errnoInval},
		{"block-status-past-end", bs, requestHeader{typ: cmdBlockStatus, offset: 1<<20 - 512, length: 1024}, errnoInval},
		{"block-status-bounds-before-alignment", bs, requestHeader{typ: cmdBlockStatus, offset: 1<<20 - 1, length: 2}, errnoInval},
		{"block-status-misaligned", bs, requestHeader{typ: cmdBlockStatus, offset: 1, length: 512}, errnoInval},
		{"block-status-zero-length", bs, requestHeader{typ: cmdBlockStatus, offset: 512}, errnoInval},
		{"block-status-zero-length-at-end", bs, requestHeader{typ: cmdBlockStatus, offset: 1 << 20}, errnoInval},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := tc.p.validate(&tc.h)
			assert.Equal(t, errnoName(tc.want), errnoName(got))
			assert.Equal(t, got == 0, reason == "")
		})
	}
}

func TestParseRequestHeader(t *testing.T) {
	h := requestHeader{flags: 0x1234, typ: cmdWrite, handle: 0xdeadbeefcafef00d, offset: 1 << 62, length: 0xffffffff}
	got, ok := parseRequestHeader(encodeRequest(h))
	require.True(t, ok)
	assert.Equal(t, h, got)
	bad := encodeRequest(h)
	bad[0] ^= 1
	_, ok = parseRequestHeader(bad)
	assert.False(t, ok)
	_, ok = parseRequestHeader(encodeRequest(h)[:27])
	assert.False(t, ok)
}

// FuzzRequestParser checks that parsing and validation never panic and that
// validation results are consistent with the request and policy.
func FuzzRequestParser(f *testing.F) {
	full := tflagHasFlags | tflagSendFlush | tflagSendFUA | tflagSendTrim | tflagSendWriteZeroes | tflagSendFastZero | tflagSendCache | tflagSendDF
	for _, h := range []requestHeader{
		{typ: cmdRead, length: 4096},
		{typ: cmdWrite, offset: 1 << 63, length: 1},
		{typ: cmdWriteZeroes, flags: cmdFlagFastZero | cmdFlagNoHole, offset: 1<<64 - 1, length: 0xffffffff},
		{typ: cmdFlush, flags: cmdFlagFUA},
		{typ: cmdTrim, offset: 4095, length: 4097},
		{typ: cmdBlockStatus, flags: cmdFlagReqOne, offset: 4096, length: 1 << 20},
		{typ: cmdBlockStatus, offset: 1 << 20},
		{typ: 200},
	} {
		f.Add(encodeRequest(h), uint64(1<<20), full, uint8(9), uint32(1<<16), true)
		f.Add(encodeRequest(h), uint64(0), tflagHasFlags|tflagReadOnly, uint8(0), uint32(4096), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, size uint64, tflags uint16, minShift uint8, maxLen uint32, blockStatus bool) {
		h, ok := parseRequestHeader(data)
		if !ok {
			if len(data) >= requestHeaderLen && binary.BigEndian.Uint32(data) == magicRequest {
				t.Fatal("valid header rejected")
			}
			return
		}
		if got := encodeRequest(h); string(got) != string(data[:requestHeaderLen]) {
			t.Fatalf("round trip: %x != %x", got, data[:requestHeaderLen])
		}
		p := policy{size: size &^ (1 << 63), tflags: tflags | tflagHasFlags, minBlock: 1 << (minShift % 17), maxLen: maxLen,
			blockStatus: blockStatus}
		errno, reason := p.validate(&h)
		if (errno == 0) != (reason == "") {
			t.Fatalf("errno %d with reason %q", errno, reason)
		}
		known := h.typ <= cmdWriteZeroes && h.typ != cmdDisc || h.typ == cmdBlockStatus && blockStatus
		flagsOK := h.flags&^p.allowedFlags(h.typ) == 0
		ro := p.has(tflagReadOnly) && isWriteType(h.typ)
		end, carry := h.offset+uint64(h.length), h.offset+uint64(h.length) < h.offset
		inRange := !carry && end <= p.size
		switch errno {
		case 0:
			if !known || !flagsOK || ro {
				t.Fatalf("accepted invalid request %+v under %+v", h, p)
			}
			if h.typ == cmdFlush {
				if h.offset != 0 || h.length != 0 || !p.has(tflagSendFlush) {
					t.Fatalf("accepted bad FLUSH %+v", h)
				}
				return
			}
			if !inRange || h.offset >= 1<<63 {
				t.Fatalf("accepted out-of-range %+v (size %d)", h, p.size)
			}
			if (h.offset|uint64(h.length))%uint64(p.minBlock) != 0 {
				t.Fatalf("accepted misaligned %+v", h)
			}
			if (h.typ == cmdRead || h.typ == cmdWrite) && h.length > p.maxLen {
				t.Fatalf("accepted oversized %+v", h)
			}
			if h.typ == cmdBlockStatus && h.length == 0 {
				t.Fatalf("accepted zero-length BLOCK_STATUS %+v", h)
			}
		case errnoNoSpc:
			if h.typ != cmdWrite && h.typ != cmdWriteZeroes || inRange {
				t.Fatalf("ENOSPC for %+v", h)
			}
		case errnoPerm:
			if !ro {
				t.Fatalf("EPERM for %+v", h)
			}
		case errnoInval:
			if known && flagsOK && !ro && !inRange && (h.typ == cmdWrite || h.typ == cmdWriteZeroes) &&
				(h.typ != cmdWriteZeroes || p.has(tflagSendWriteZeroes)) {
				t.Fatalf("EINVAL instead of ENOSPC for out-of-range write %+v", h)
			}
		case errnoOverflow:
			if !known || !flagsOK || ro || !inRange || (h.typ != cmdRead && h.typ != cmdWrite) || h.length <= p.maxLen {
				t.Fatalf("EOVERFLOW for %+v under %+v", h, p)
			}
		default:
			t.Fatalf("unexpected errno %d", errno)
		}
	})
}

// FuzzHandshake feeds arbitrary client bytes to ServeConn: it must neither
// panic nor hang once the client goes away.
func FuzzHandshake(f *testing.F) {
	hello := binary.BigEndian.AppendUint32(nil, clientFlagFixedNewstyle|clientFlagNoZeroes)
	opt := func(b []byte, o uint32, data []byte) []byte {
		b = binary.BigEndian.AppendUint64(b, magicIHaveOpt)
		b = binary.BigEndian.AppendUint32(b, o)
		b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
		return append(b, data...)
	}
	goDisk := opt(append([]byte(nil), hello...), optGo, infoData("disk", infoBlockSize))
	f.Add(goDisk)
	f.Add(append(opt(append([]byte(nil), hello...), optStructuredReply, nil), opt(nil, optGo, infoData(""))...))
	f.Add(opt(append([]byte(nil), hello...), optExportName, []byte("disk")))
	f.Add(opt(opt(append([]byte(nil), hello...), optList, nil), optAbort, nil))
	f.Add(opt(append([]byte(nil), hello...), 77, []byte("junk")))
	f.Add(append(append([]byte(nil), goDisk...), encodeRequest(requestHeader{typ: cmdRead, length: 512})...))
	f.Add(append(append(append([]byte(nil), goDisk...),
		encodeRequest(requestHeader{typ: cmdWrite, offset: 10, length: 4})...), 1, 2, 3, 4))
	f.Add(append(append([]byte(nil), goDisk...), encodeRequest(requestHeader{typ: cmdWriteZeroes, length: 100, flags: cmdFlagFUA})...))
	structured := opt(append([]byte(nil), hello...), optStructuredReply, nil)
	metaGo := opt(opt(append([]byte(nil), structured...), optSetMetaContext, metaData("disk", metaBaseAllocation)),
		optGo, infoData("disk"))
	f.Add(opt(append([]byte(nil), hello...), optListMetaContext, metaData("disk")))
	f.Add(opt(append([]byte(nil), structured...), optListMetaContext, metaData("", "base:", "x-y:z", "nocolon")))
	f.Add(opt(append([]byte(nil), hello...), optSetMetaContext, metaData("disk", metaBaseAllocation)))
	f.Add(opt(append([]byte(nil), structured...), optSetMetaContext, append(metaData("disk")[:8], 0xff, 0xff, 0xff, 0xff)))
	f.Add(opt(append([]byte(nil), structured...), optSetMetaContext, metaData("nope", metaBaseAllocation)))
	f.Add(append(append([]byte(nil), metaGo...),
		encodeRequest(requestHeader{typ: cmdBlockStatus, length: 64 << 10})...))
	f.Add(append(append(append([]byte(nil), metaGo...),
		encodeRequest(requestHeader{typ: cmdBlockStatus, flags: cmdFlagReqOne, offset: 100, length: 1000})...),
		encodeRequest(requestHeader{typ: cmdBlockStatus, offset: 1 << 16, length: 1})...))
	f.Add([]byte{})
	// STARTTLS: alone, with data, twice, followed by plaintext options (which
	// the server must not take as TLS), and a TLS ClientHello's first bytes.
	startTLS := opt(append([]byte(nil), hello...), optStartTLS, nil)
	f.Add(startTLS)
	f.Add(opt(append([]byte(nil), hello...), optStartTLS, []byte("x")))
	f.Add(opt(append([]byte(nil), startTLS...), optStartTLS, nil))
	f.Add(opt(append([]byte(nil), startTLS...), optGo, infoData("disk")))
	f.Add(append(append([]byte(nil), startTLS...), 0x16, 0x03, 0x01, 0x00, 0x05, 1, 0, 0, 1, 0))
	f.Add(opt(opt(append([]byte(nil), hello...), optInfo, infoData("disk")), optExportName, []byte("disk")))

	dev := newStatusDev("HD") // 128 KiB, a BlockStatuser
	dev.fastZero.Store(true)
	ca := newTestCA(f, "fuzz CA")
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{ca.issue(f, "server")}}
	// Every input runs against a server in each TLS mode.
	var servers []*Server
	for _, mode := range []TLSMode{TLSOff, TLSOn, TLSRequire} {
		s, err := NewServer(Options{
			Exports:          []Export{{Name: "disk", Device: dev}},
			HandshakeTimeout: 2 * time.Second,
			Workers:          2,
			TLSMode:          mode,
			TLSConfig:        tlsCfg,
		})
		require.NoError(f, err)
		servers = append(servers, s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, s := range servers {
			srv, cli := net.Pipe()
			done := make(chan struct{})
			go func() { s.ServeConn(srv); close(done) }()
			go func() { _, _ = io.Copy(io.Discard, cli) }()
			_, _ = cli.Write(in)
			_ = cli.Close()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("ServeConn (TLS %s) did not return after the client closed", s.opts.TLSMode)
			}
		}
	})
}

func TestOptionsValidate(t *testing.T) {
	dev := newMemDev(4096)
	badBS := newMemDev(4096)
	badBS.bsMin, badBS.bsMax = 3, 256
	for _, tc := range []struct {
		name string
		opts Options
		want []string // substrings, one per expected problem
	}{
		{"ok-defaults", Options{Exports: []Export{{Name: "a", Device: dev}}}, nil},
		{"ok-empty-default-name", Options{Exports: []Export{{Device: dev}, {Name: "b", Device: dev}}}, nil},
		{"no-exports", Options{}, []string{"no exports"}},
		{"everything-wrong", Options{
			Exports: []Export{
				{Name: "a", Device: dev},
				{Name: "a", Device: nil},
				{Name: "", Device: dev},
				{Name: "x\x00", Description: string([]byte{0xff}), Device: badBS},
			},
			MaxInFlightBytes: -1, Workers: -2, HandshakeTimeout: -time.Second, MaxPayload: 100,
			MaxTotalInFlightBytes: -3, MaxConnections: -4, IdleTimeout: -time.Second, IOTimeout: -time.Second,
		}, []string{
			"MaxInFlightBytes -1", "Workers -2", "HandshakeTimeout", "MaxPayload 100",
			"MaxTotalInFlightBytes -3", "MaxConnections -4", "IdleTimeout", "IOTimeout",
			"name already used", "nil Device", "only the first", "contains NUL", "not valid UTF-8",
			"minimum block size 3", "maximum block size 256",
		}},
		{"inflight-below-payload", Options{Exports: []Export{{Name: "a", Device: dev}}, MaxInFlightBytes: 1 << 20},
			[]string{"smaller than MaxPayload"}},
		{"total-inflight-below-payload", Options{Exports: []Export{{Name: "a", Device: dev}}, MaxTotalInFlightBytes: 16 << 20},
			[]string{"MaxTotalInFlightBytes 16777216 is smaller than MaxPayload 33554432"}},
		{"ok-limits", Options{Exports: []Export{{Name: "a", Device: dev}}, MaxTotalInFlightBytes: 1 << 20, MaxPayload: 1 << 20,
			MaxConnections: 1, IdleTimeout: time.Minute, IOTimeout: time.Second}, nil},
		{"name-too-long", Options{Exports: []Export{{Name: string(make([]byte, 5000)), Device: dev}}},
			[]string{"longer than 4096"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if tc.want == nil {
				require.NoError(t, err)
				_, err := NewServer(tc.opts)
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, ErrInvalidOptions)
			var joined interface{ Unwrap() []error }
			require.True(t, errors.As(err, &joined))
			assert.Len(t, joined.Unwrap(), len(tc.want), "%v", err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			_, nerr := NewServer(tc.opts)
			assert.ErrorIs(t, nerr, ErrInvalidOptions)
		})
	}
}

func TestNormalizeBlockSizes(t *testing.T) {
	for _, tc := range []struct {
		in, want   [3]uint32
		maxPayload int64
	}{
		{[3]uint32{1, 4096, 32 << 20}, [3]uint32{1, 4096, 32 << 20}, 32 << 20},
		{[3]uint32{1, 3 << 19, 32 << 20}, [3]uint32{1, 2 << 20, 32 << 20}, 32 << 20},      // 1.5 MiB stripe -> 2 MiB
		{[3]uint32{512, 3 << 20, 64 << 20}, [3]uint32{512, 4 << 20, 32 << 20}, 32 << 20},  // max capped by MaxPayload
		{[3]uint32{4096, 64 << 20, 64 << 20}, [3]uint32{4096, 8 << 20, 8 << 20}, 8 << 20}, // preferred lowered under max
		{[3]uint32{1, 100, 1000}, [3]uint32{1, 512, 1000}, 32 << 20},                      // preferred at least 512
		{[3]uint32{4096, 4096, 10000}, [3]uint32{4096, 4096, 8192}, 32 << 20},             // max multiple of min
		{[3]uint32{1, 3 << 20, 3 << 20}, [3]uint32{1, 2 << 20, 3 << 20}, 32 << 20},
	} {
		t.Run(fmt.Sprint(tc.in), func(t *testing.T) {
			a, b, c := normalizeBlockSizes(tc.in[0], tc.in[1], tc.in[2], tc.maxPayload)
			assert.Equal(t, tc.want, [3]uint32{a, b, c})
			assert.True(t, isPow2(b))
			assert.Zero(t, c%a)
			assert.LessOrEqual(t, b, c)
		})
	}
}

func TestIsNotSupported(t *testing.T) {
	assert.True(t, isNotSupported(fmt.Errorf("x: %w", syscall.EOPNOTSUPP)))
	assert.False(t, isNotSupported(nil))
	assert.False(t, isNotSupported(syscall.EIO))
}
