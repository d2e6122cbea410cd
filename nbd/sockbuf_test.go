package nbd

import (
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUnixSendBuffer: once transmission starts on a unix socket, the
// server's send buffer holds a 1 MiB READ reply (as much of unixSendBuffer
// as net.core.wmem_max allows), so that the reply goes out in one writev
// rather than in pieces with a wait for the client between them.
func TestUnixSendBuffer(t *testing.T) {
	want := unixSendBuffer
	if b, err := os.ReadFile("/proc/sys/net/core/wmem_max"); err == nil {
		if m, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			want = min(want, m)
		}
	}
	ts := startServer(t, oneExport(newMemDev(1<<20)), true)
	cl := connect(t, ts, "disk", true)
	assert.Len(t, cl.read(0, 1<<20), 1<<20)
	var got []int
	require.Eventually(t, func() bool {
		got = got[:0]
		ts.s.mu.Lock()
		for c := range ts.s.conns {
			u, ok := c.nc.(*net.UnixConn)
			require.True(t, ok, "server connection %T", c.nc)
			n, err := sendBuffer(u)
			require.NoError(t, err)
			got = append(got, n)
		}
		ts.s.mu.Unlock()
		return len(got) == 1
	}, 5*time.Second, 10*time.Millisecond)
	// The kernel reports twice the size set.
	assert.GreaterOrEqual(t, got[0], 2*want, "SO_SNDBUF of the server's connection")
}
