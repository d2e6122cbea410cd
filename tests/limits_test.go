package tests

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nbdRepErrPolicy is NBD_REP_ERR_POLICY, the answer to every option of a
// connection beyond nbd.max_connections.
const nbdRepErrPolicy uint32 = 1<<31 + 2

// openWhenFree enters transmission on export name, retrying while the server
// refuses the connection because its connection slots are taken.
func openWhenFree(t *testing.T, sock, name string) *rawConn {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for {
		rc := dialRaw(t, sock)
		typ, err := rc.optGo(name)
		require.NoError(t, err)
		if typ == nbdRepAck {
			return rc
		}
		require.Equal(t, nbdRepErrPolicy, typ, "NBD_OPT_GO %q", name)
		rc.c.Close()
		require.True(t, time.Now().Before(deadline), "no connection slot became free")
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServeConnectionLimitAndIOTimeout: issue 7's bounds with the real
// binary and its flags. A connection beyond --max-connections is refused
// with NBD_REP_ERR_POLICY (and a message clients show); a client that
// stops reading its READ replies is dropped after --io-timeout, which
// frees its slot; the metrics count both.
func TestServeConnectionLimitAndIOTimeout(t *testing.T) {
	a := createArray(t, "1", 2, "64K")
	s := serve(t, append([]string{"--max-connections", "1", "--io-timeout", "1s"}, a.members...)...)

	holder := openWhenFree(t, s.sock, a.name) // serve's readiness probe may still hold the slot

	refused := dialRaw(t, s.sock)
	typ, err := refused.optGo(a.name)
	require.NoError(t, err)
	assert.Equal(t, nbdRepErrPolicy, typ, "a connection beyond --max-connections")
	if _, err := exec.LookPath("qemu-img"); err == nil {
		// qemu shows the server's message (libnbd only logs it in debug).
		out, err := exec.Command("qemu-img", "info", s.uri(a.name)).CombinedOutput()
		assert.Error(t, err, "qemu-img beyond the limit: %s", out)
		assert.Contains(t, string(out), "too many connections: this server serves at most 1 at once", "the refusal reaches the user")
	}

	// The holder asks for 32 MiB and never reads: its replies cannot all
	// be written, and the server drops it after --io-timeout.
	for i := range 8 {
		_, err := holder.send(nbdCmdRead, 0, uint64(i)<<22, 4<<20, nil)
		require.NoError(t, err)
	}
	next := openWhenFree(t, s.sock, a.name)
	assert.Len(t, next.read(t, 0, 4096), 4096)

	m := controlGet(t, s.ctrl, "/metrics")
	assert.Contains(t, m, `raidd_nbd_timeouts_total{timeout="io"} 1`)
	assert.Contains(t, m, `raidd_nbd_timeouts_total{timeout="idle"} 0`)
	assert.Regexp(t, `raidd_nbd_refused_connections_total [1-9]`, m)
	assert.Contains(t, m, `raidd_nbd_active_connections 1`)
}
