package tests

import (
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

	"github.com/raidd/raidd/internal/tlstest"
)

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// tlsSetup is a server certificate signed by serverCA, a CA for client
// certificates, and client certificate directories in libnbd's and qemu's
// layout (ca-cert.pem, client-cert.pem, client-key.pem).
type tlsSetup struct {
	cert, key, clientCA string
	good                string // trusts the server, holds a certificate signed by clientCA
	noCert              string // trusts the server, no client certificate
	wrongServerCA       string // trusts another CA, good client certificate
	foreignClient       string // trusts the server, client certificate signed by another CA
	qemu                string // good, and ca-cert.pem also holds clientCA: qemu checks its own certificate
}

func newTLSSetup(t *testing.T) *tlsSetup {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) { t.Helper(); require.NoError(t, err) }
	serverCA, err := tlstest.NewCA("raidd test server CA")
	must(err)
	clientCA, err := tlstest.NewCA("raidd test client CA")
	must(err)
	otherCA, err := tlstest.NewCA("unrelated CA")
	must(err)
	srv, err := serverCA.Issue("raidd")
	must(err)
	client, err := clientCA.Issue("client")
	must(err)
	foreign, err := otherCA.Issue("intruder")
	must(err)
	s := &tlsSetup{
		cert: filepath.Join(dir, "server-cert.pem"), key: filepath.Join(dir, "server-key.pem"),
		clientCA: filepath.Join(dir, "client-ca.pem"),
		good:     filepath.Join(dir, "good"), noCert: filepath.Join(dir, "nocert"),
		wrongServerCA: filepath.Join(dir, "wrongca"), foreignClient: filepath.Join(dir, "foreign"),
		qemu: filepath.Join(dir, "qemu"),
	}
	must(srv.Write(s.cert, s.key))
	must(clientCA.WriteCert(s.clientCA))
	must(tlstest.WriteClientDir(s.good, client, serverCA))
	must(tlstest.WriteClientDir(s.qemu, client, serverCA, clientCA))
	must(tlstest.WriteClientDir(s.noCert, nil, serverCA))
	must(tlstest.WriteClientDir(s.wrongServerCA, client, otherCA))
	must(tlstest.WriteClientDir(s.foreignClient, foreign, serverCA))
	return s
}

// TestTLSRequire serves an array with --tls=require and a client CA, and
// drives it with libnbd's nbdinfo and nbdcopy over nbds:// and with
// qemu-img's tls-creds-x509: only clients that use TLS, trust the server and
// present a certificate signed by the CA get the export.
func TestTLSRequire(t *testing.T) {
	requireTool(t, "nbdinfo", "nbdcopy")
	a := createArray(t, "1", 2, "64K")
	ts := newTLSSetup(t)
	port := freePort(t)
	args := append([]string{"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--tls=require",
		"--tls-cert", ts.cert, "--tls-key", ts.key, "--tls-ca", ts.clientCA}, a.members...)
	s := serve(t, args...)
	assert.Eventually(t, func() bool {
		return strings.Contains(s.out.String(), fmt.Sprintf("export nbds://127.0.0.1:%d/%s", port, a.name))
	}, 5*time.Second, 10*time.Millisecond, "the logged URI asks for TLS")
	tlsURI := func(dir string) string {
		return fmt.Sprintf("nbds://127.0.0.1:%d/%s?tls-certificates=%s", port, a.name, dir)
	}

	info := runNBDInfo(t, tlsURI(ts.good))
	assert.Equal(t, a.name, info.Exports[0].Name)
	assert.Positive(t, info.Exports[0].Size)

	// Data goes in and comes back out over TLS.
	src, want := writeRandomFile(t, t.TempDir(), 4<<20, 12)
	mustRun(t, "nbdcopy", src, tlsURI(ts.good))
	got, total := readExport(t, tlsURI(ts.good), len(want))
	assertSameBytes(t, want, got, "export read back over TLS")
	assert.Equal(t, info.Exports[0].Size, total)

	// libnbd's debug log shows the server's message of the
	// NBD_REP_ERR_TLS_REQD reply to a plaintext client.
	const tlsRequired = "TLS is required: send NBD_OPT_STARTTLS first"
	for _, tc := range []struct{ name, uri, why, want string }{
		{"plaintext over unix", s.uri(a.name), "a plaintext client of a require server", tlsRequired},
		{"plaintext over TCP", fmt.Sprintf("nbd://127.0.0.1:%d/%s", port, a.name), "a plaintext client of a require server", tlsRequired},
		{"no client certificate", tlsURI(ts.noCert), "a client without certificate when tls.ca is set", "TLS"},
		{"client certificate of another CA", tlsURI(ts.foreignClient), "a client certificate not signed by tls.ca", "TLS"},
		{"server not trusted", tlsURI(ts.wrongServerCA), "a client that does not trust the server's CA", "certificate verification"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("nbdinfo", "--json", tc.uri)
			cmd.Env = append(os.Environ(), "LIBNBD_DEBUG=1")
			b, err := cmd.CombinedOutput()
			out := string(b)
			require.Error(t, err, "nbdinfo must fail for %s; output:\n%s", tc.why, out)
			assert.NotContains(t, out, `"export-size"`, "export details leaked")
			assert.Contains(t, out, tc.want)
		})
	}

	// The three refused TLS clients show in the metrics (the counter is
	// bumped after the server's alert, hence Eventually).
	assert.Eventually(t, func() bool {
		return strings.Contains(controlGet(t, s.ctrl, "/metrics"), `raidd_nbd_tls_handshakes_total{result="failed"} 3`)
	}, 5*time.Second, 20*time.Millisecond, "failed TLS handshakes in /metrics")
	assert.Regexp(t, `raidd_nbd_tls_handshakes_total\{result="ok"\} [1-9]`, controlGet(t, s.ctrl, "/metrics"))

	t.Run("qemu-img", func(t *testing.T) {
		requireTool(t, "qemu-img")
		opts := func(dir string) []string {
			return []string{"info", "--output=json",
				"--object", "tls-creds-x509,id=tls0,endpoint=client,dir=" + dir,
				"--image-opts", fmt.Sprintf("driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=%d,export=%s,tls-creds=tls0", port, a.name)}
		}
		out := mustRun(t, "qemu-img", opts(ts.qemu)...)
		assert.Contains(t, out, fmt.Sprintf(`"virtual-size": %d`, info.Exports[0].Size))
		out, err := run(t, "qemu-img", opts(ts.noCert)...)
		require.Error(t, err, "qemu-img without client certificate must fail:\n%s", out)
		out, err = run(t, "qemu-img", "info", "--image-opts",
			fmt.Sprintf("driver=nbd,server.type=inet,server.host=127.0.0.1,server.port=%d,export=%s", port, a.name))
		require.Error(t, err, "qemu-img in plaintext must fail:\n%s", out)
	})
	s.stopOK(t)
}

// TestTLSOn offers TLS without requiring it or client certificates: both a
// plaintext and a TLS client get the export.
func TestTLSOn(t *testing.T) {
	requireTool(t, "nbdinfo")
	a := createArray(t, "1", 2, "64K")
	ts := newTLSSetup(t)
	port := freePort(t)
	args := append([]string{"--listen", fmt.Sprintf("127.0.0.1:%d", port), "--tls=on",
		"--tls-cert", ts.cert, "--tls-key", ts.key}, a.members...)
	s := serve(t, args...)
	plain := runNBDInfo(t, s.uri(a.name))
	secure := runNBDInfo(t, fmt.Sprintf("nbds://127.0.0.1:%d/%s?tls-certificates=%s", port, a.name, ts.noCert))
	assert.Equal(t, plain.Exports[0].Size, secure.Exports[0].Size)
	s.stopOK(t)
}

// TestTLSBadCertificate: a missing key file stops serve before it opens
// any member, naming the key.
func TestTLSBadCertificate(t *testing.T) {
	a := createArray(t, "1", 2, "64K")
	ts := newTLSSetup(t)
	missing := filepath.Join(t.TempDir(), "nope.pem")
	_, stderr, code := raidd(t, append([]string{"serve", "--listen", "unix:" + filepath.Join(shortTempDir(t), "s"),
		"--control", "", "--tls=require", "--tls-cert", ts.cert, "--tls-key", missing}, a.members...)...)
	assert.NotZero(t, code)
	assert.Contains(t, stderr, "tls.key: open "+missing)
}
