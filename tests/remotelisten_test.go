package tests

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRemoteListenNeedsTLS runs the real binary on a listen address that
// is not loopback (every IPv4 address; the clients connect through
// 127.0.0.1): with TLS off it refuses to start, naming
// --allow-remote-plaintext; with --tls=require it serves libnbd over
// nbds://; with --allow-remote-plaintext it serves plaintext.
func TestRemoteListenNeedsTLS(t *testing.T) {
	t.Parallel()
	requireTool(t, "nbdinfo")
	a := createArray(t, "1", 2, "64K")
	port := freePort(t)
	remote := fmt.Sprintf("0.0.0.0:%d", port)

	_, errOut, code := raidd(t, append([]string{"serve", "--control", "", "--listen", remote, "--allow-remote"}, a.members...)...)
	assert.Equal(t, 1, code, errOut)
	assert.Contains(t, errOut, fmt.Sprintf("%q is not a loopback address and TLS is off", remote))
	assert.Contains(t, errOut, "--allow-remote-plaintext")
	assert.Contains(t, errOut, "--tls=require")

	_, errOut, code = raidd(t, append([]string{"serve", "--control", "", "--listen", remote, "--allow-remote-plaintext"}, a.members...)...)
	assert.Equal(t, 1, code, errOut)
	assert.Contains(t, errOut, "needs --allow-remote", "the plaintext switch does not replace allow_remote")

	ts := newTLSSetup(t)
	s := serve(t, append([]string{"--listen", remote, "--allow-remote", "--tls=require",
		"--tls-cert", ts.cert, "--tls-key", ts.key, "--tls-ca", ts.clientCA}, a.members...)...)
	info := runNBDInfo(t, fmt.Sprintf("nbds://127.0.0.1:%d/%s?tls-certificates=%s", port, a.name, ts.good))
	require.Len(t, info.Exports, 1)
	assert.Equal(t, a.name, info.Exports[0].Name)
	s.stopOK(t)

	s = serve(t, append([]string{"--listen", remote, "--allow-remote", "--allow-remote-plaintext"}, a.members...)...)
	info = runNBDInfo(t, fmt.Sprintf("nbd://127.0.0.1:%d/%s", port, a.name))
	require.Len(t, info.Exports, 1)
	assert.Positive(t, info.Exports[0].Size)
	s.stopOK(t)
}
