package nbd

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"math/big"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testCA is a certificate authority made for one test; nothing is read from
// or written to disk.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

var serialNo atomic.Int64

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serialNo.Add(1)),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

// issue makes a leaf certificate for 127.0.0.1 and localhost, usable by a
// server or a client.
func (ca *testCA) issue(t testing.TB, name string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serialNo.Add(1)),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// tlsServer starts a server in mode whose certificate is signed by the
// returned CA; with clientCA set, client certificates must be signed by it.
func tlsServer(t *testing.T, mode TLSMode, clientCA *testCA) (*testServer, *testCA) {
	t.Helper()
	ca := newTestCA(t, "server CA")
	cfg := &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "server")}}
	if clientCA != nil {
		cfg.ClientCAs = clientCA.pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	dev := newMemDev(1 << 20)
	copy(dev.data[4096:], "secret")
	opts := oneExport(dev)
	opts.TLSMode, opts.TLSConfig = mode, cfg
	return startServer(t, opts), ca
}

// startTLS sends NBD_OPT_STARTTLS, expects NBD_REP_ACK and runs the client
// side of the TLS handshake; the client then talks over TLS.
func (cl *client) startTLS(serverCA *testCA, certs ...tls.Certificate) error {
	cl.t.Helper()
	cl.sendOpt(optStartTLS, nil)
	r := cl.readOptReply()
	require.Equal(cl.t, optStartTLS, r.opt)
	require.Equal(cl.t, repAck, r.typ, "STARTTLS reply: %s", r.data)
	require.Zero(cl.t, cl.br.Buffered(), "server sent data after the STARTTLS ACK")
	tc := tls.Client(cl.c, &tls.Config{RootCAs: serverCA.pool, ServerName: "127.0.0.1", Certificates: certs})
	if err := tc.Handshake(); err != nil {
		return err
	}
	cl.c, cl.br = tc, bufio.NewReader(tc)
	return nil
}

func TestTLSStartTLSThenTransmission(t *testing.T) {
	clientCA := newTestCA(t, "client CA")
	ts, ca := tlsServer(t, TLSRequire, clientCA)
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	require.NoError(t, cl.startTLS(ca, clientCA.issue(t, "client")))
	state := cl.c.(*tls.Conn).ConnectionState()
	assert.Equal(t, uint16(tls.VersionTLS13), state.Version)

	// The whole negotiation and transmission now run over TLS.
	cl.sendOpt(optList, nil)
	r := cl.readOptReply()
	assert.Equal(t, repServer, r.typ)
	assert.Equal(t, repAck, cl.readOptReply().typ)
	cl.sendOpt(optStructuredReply, nil)
	require.Equal(t, repAck, cl.readOptReply().typ)
	cl.structured = true
	gop := cl.info(optGo, "disk")
	require.Equal(t, repAck, gop.final)
	cl.size, cl.tflags = gop.size, gop.tflags
	assert.Equal(t, []byte("secret"), cl.read(4096, 6))
	p := pattern(64<<10, 3) // a large READ reply takes the writev path
	require.Zero(t, cl.writeAt(1<<16, p, cmdFlagFUA))
	assert.Equal(t, p, cl.read(1<<16, uint32(len(p))))
	assert.Eventually(t, func() bool { return ts.s.Stats().TLSHandshakes == 1 }, 5*time.Second, time.Millisecond)
}

func TestTLSRequireRefusesBeforeStartTLS(t *testing.T) {
	ts, ca := tlsServer(t, TLSRequire, nil)
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	for _, tc := range []struct {
		opt  uint32
		data []byte
	}{
		{optInfo, infoData("disk")},
		{optGo, infoData("disk")},
		{optList, nil},
		{optStructuredReply, nil},
		{optListMetaContext, metaData("disk")},
		{optSetMetaContext, metaData("disk", metaBaseAllocation)},
		{77, []byte("unknown option")},
	} {
		cl.sendOpt(tc.opt, tc.data)
		r := cl.readOptReply()
		assert.Equal(t, tc.opt, r.opt)
		assert.Equal(t, repErrTLSReqd, r.typ, "option %d before TLS", tc.opt)
	}
	// The refusals kept the stream in sync: STARTTLS then GO works.
	require.NoError(t, cl.startTLS(ca))
	gop := cl.info(optGo, "disk")
	require.Equal(t, repAck, gop.final)
	cl.size, cl.tflags = gop.size, gop.tflags
	assert.Equal(t, []byte("secret"), cl.read(4096, 6))
}

func TestTLSRequireExportNameBeforeTLSCloses(t *testing.T) {
	ts, _ := tlsServer(t, TLSRequire, nil)
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle)
	cl.sendOpt(optExportName, []byte("disk"))
	cl.expectClosedNow()
}

func TestTLSRequireAbortBeforeTLS(t *testing.T) {
	ts, _ := tlsServer(t, TLSRequire, nil)
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle)
	cl.sendOpt(optAbort, nil)
	assert.Equal(t, repAck, cl.readOptReply().typ)
	cl.expectEOF()
}

func TestTLSStartTLSInvalid(t *testing.T) {
	ts, ca := tlsServer(t, TLSRequire, nil)
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	cl.sendOpt(optStartTLS, []byte("data"))
	r := cl.readOptReply()
	assert.Equal(t, repErrInvalid, r.typ, "STARTTLS with data")
	require.NoError(t, cl.startTLS(ca))
	cl.sendOpt(optStartTLS, nil)
	r = cl.readOptReply()
	assert.Equal(t, optStartTLS, r.opt)
	assert.Equal(t, repErrInvalid, r.typ, "STARTTLS over TLS")
	gop := cl.info(optGo, "disk")
	require.Equal(t, repAck, gop.final)
}

func TestTLSOffStartTLSUnsupported(t *testing.T) {
	ts := startServer(t, oneExport(newMemDev(4096)))
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	cl.sendOpt(optStartTLS, nil)
	r := cl.readOptReply()
	assert.Equal(t, repErrUnsup, r.typ)
	gop := cl.info(optGo, "disk")
	require.Equal(t, repAck, gop.final)
}

// TLSOn serves plaintext clients, and what a client negotiated before
// STARTTLS does not carry over into TLS.
func TestTLSOnPlaintextAndStateReset(t *testing.T) {
	ts, ca := tlsServer(t, TLSOn, nil)
	plain := dial(t, ts)
	plain.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	gop := plain.info(optGo, "disk")
	require.Equal(t, repAck, gop.final)
	plain.size, plain.tflags = gop.size, gop.tflags
	assert.Equal(t, []byte("secret"), plain.read(4096, 6))

	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	cl.sendOpt(optStructuredReply, nil)
	require.Equal(t, repAck, cl.readOptReply().typ)
	require.NoError(t, cl.startTLS(ca))
	gop = cl.info(optGo, "disk")
	require.Equal(t, repAck, gop.final)
	assert.Zero(t, gop.tflags&tflagSendDF, "structured replies negotiated before TLS carried over")
	cl.size, cl.tflags = gop.size, gop.tflags
	assert.Equal(t, []byte("secret"), cl.read(4096, 6)) // simple reply
}

// Bytes sent after STARTTLS, before the server's ACK, would be read as if
// they had come over TLS: the server closes instead.
func TestTLSDataAfterStartTLSCloses(t *testing.T) {
	ts, _ := tlsServer(t, TLSRequire, nil)
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	b := binary.BigEndian.AppendUint64(nil, magicIHaveOpt)
	b = binary.BigEndian.AppendUint32(b, optStartTLS)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, magicIHaveOpt) // injected plaintext option
	b = binary.BigEndian.AppendUint32(b, optList)
	b = binary.BigEndian.AppendUint32(b, 0)
	cl.write(b)
	assert.Equal(t, repAck, cl.readOptReply().typ)
	cl.expectEOF()
	assert.Eventually(t, func() bool { return ts.s.Stats().HandshakeFailures == 1 }, 5*time.Second, time.Millisecond)
}

// goErr sends NBD_OPT_LIST on a TLS connection whose client handshake
// succeeded and reads a reply header: under TLS 1.3 the server's verdict on the client certificate
// arrives with the first read.
func (cl *client) goErr() error {
	b := binary.BigEndian.AppendUint64(nil, magicIHaveOpt)
	b = binary.BigEndian.AppendUint32(b, optList)
	b = binary.BigEndian.AppendUint32(b, 0)
	if _, err := cl.c.Write(b); err != nil {
		return err
	}
	_, err := io.ReadFull(cl.br, make([]byte, 20))
	return err
}

func TestTLSClientCertificates(t *testing.T) {
	clientCA := newTestCA(t, "client CA")
	otherCA := newTestCA(t, "other CA")
	ts, ca := tlsServer(t, TLSRequire, clientCA)
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		ok    bool
	}{
		{"signed by the CA", []tls.Certificate{clientCA.issue(t, "client")}, true},
		{"no certificate", nil, false},
		{"signed by another CA", []tls.Certificate{otherCA.issue(t, "intruder")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ts.s.Stats().TLSFailures
			cl := dial(t, ts)
			cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
			err := cl.startTLS(ca, tc.certs...)
			if err == nil {
				err = cl.goErr()
			}
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.False(t, isTimeout(err), "server did not close")
			assert.Eventually(t, func() bool { return ts.s.Stats().TLSFailures == before+1 }, 5*time.Second, time.Millisecond)
		})
	}
}

// A client that does not trust the server's CA refuses it.
func TestTLSWrongServerCA(t *testing.T) {
	ts, _ := tlsServer(t, TLSRequire, nil)
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	err := cl.startTLS(newTestCA(t, "unrelated CA"))
	var uerr x509.UnknownAuthorityError
	require.ErrorAs(t, err, &uerr)
}

func TestTLSOptionsValidate(t *testing.T) {
	ca := newTestCA(t, "ca")
	base := oneExport(newMemDev(4096))
	for _, tc := range []struct {
		name string
		mode TLSMode
		cfg  *tls.Config
		ok   bool
	}{
		{"off", TLSOff, nil, true},
		{"on without config", TLSOn, nil, false},
		{"require without certificate", TLSRequire, &tls.Config{}, false},
		{"require", TLSRequire, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "s")}}, true},
		{"unknown mode", TLSMode(7), nil, false},
	} {
		o := base
		o.TLSMode, o.TLSConfig = tc.mode, tc.cfg
		err := o.Validate()
		if tc.ok {
			assert.NoError(t, err, tc.name)
		} else {
			assert.ErrorIs(t, err, ErrInvalidOptions, tc.name)
		}
	}
	for _, s := range []string{"off", "on", "require"} {
		m, err := ParseTLSMode(s)
		require.NoError(t, err)
		assert.Equal(t, s, m.String())
	}
	_, err := ParseTLSMode("yes")
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

// A server asked for TLS 1.0 still refuses anything below 1.2.
func TestTLSMinVersion(t *testing.T) {
	ca := newTestCA(t, "ca")
	opts := oneExport(newMemDev(4096))
	opts.TLSMode = TLSOn
	opts.TLSConfig = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "s")}, MinVersion: tls.VersionTLS10}
	ts := startServer(t, opts)
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	cl.sendOpt(optStartTLS, nil)
	require.Equal(t, repAck, cl.readOptReply().typ)
	tc := tls.Client(cl.c, &tls.Config{RootCAs: ca.pool, ServerName: "localhost", MaxVersion: tls.VersionTLS11, MinVersion: tls.VersionTLS10})
	require.Error(t, tc.Handshake())
}

// A client that stops after STARTTLS, before its ClientHello, is closed
// by the handshake deadline like any other stalled handshake.
func TestTLSStalledHandshakeTimesOut(t *testing.T) {
	ca := newTestCA(t, "ca")
	opts := oneExport(newMemDev(4096))
	opts.TLSMode, opts.HandshakeTimeout = TLSRequire, 200*time.Millisecond
	opts.TLSConfig = &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "s")}}
	ts := startServer(t, opts)
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	cl.sendOpt(optStartTLS, nil)
	require.Equal(t, repAck, cl.readOptReply().typ)
	start := time.Now()
	cl.expectEOF()
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Eventually(t, func() bool { return ts.s.Stats().TLSFailures == 1 }, 5*time.Second, time.Millisecond)
}

// TestTLSNeedsFixedNewstyle: a client that did not set
// NBD_FLAG_C_FIXED_NEWSTYLE is in the spec's NOTLS mode on a server with
// TLS: STARTTLS is refused by policy and no option is answered
// NBD_REP_ERR_TLS_REQD. A server that requires TLS serves it nothing
// (NBD_REP_ERR_POLICY to every option, the end at EXPORT_NAME); one that
// offers TLS serves it in the clear.
func TestTLSNeedsFixedNewstyle(t *testing.T) {
	t.Run("require", func(t *testing.T) {
		ts, _ := tlsServer(t, TLSRequire, nil)
		cl := dial(t, ts)
		cl.hello(clientFlagNoZeroes)
		for _, opt := range []uint32{optStartTLS, optList, optGo, optStartTLS} {
			var data []byte
			if opt == optGo {
				data = infoData("disk")
			}
			cl.sendOpt(opt, data)
			r := cl.readOptReply()
			assert.Equal(t, opt, r.opt)
			assert.Equal(t, repErrPolicy, r.typ, "option %d without fixed newstyle", opt)
		}
		cl.sendOpt(optExportName, []byte("disk"))
		cl.expectClosedNow()
	})
	t.Run("on", func(t *testing.T) {
		ts, _ := tlsServer(t, TLSOn, nil)
		cl := dial(t, ts)
		cl.hello(0)
		cl.sendOpt(optStartTLS, nil)
		r := cl.readOptReply()
		assert.Equal(t, repErrPolicy, r.typ, "STARTTLS without fixed newstyle")
		gop := cl.info(optGo, "disk")
		require.Equal(t, repAck, gop.final, "served in the clear")
	})
}
