package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeConfig writes a serve configuration listing arrays (name ->
// members) and returns its path. Listen addresses and the control socket
// come from the command line (startServe).
func writeConfig(t testing.TB, extra string, arrays map[string][]string, order ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("shutdown_timeout: 5s\n" + extra + "arrays:\n")
	for _, name := range order {
		fmt.Fprintf(&b, "  - name: %s\n    members: [%s]\n", name, strings.Join(arrays[name], ", "))
	}
	p := filepath.Join(t.TempDir(), "raidd.yaml")
	require.NoError(t, os.WriteFile(p, []byte(b.String()), 0o600))
	return p
}

// controlGet does a GET on the control socket and returns the body.
func controlGet(t testing.TB, socket, path string) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	resp, err := c.Get("http://raidd" + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	return string(b)
}

// TestServeWithoutBrokenArray: one configured array that cannot be
// assembled does not keep the others from being served; status and
// metrics report it as failed, with the reason. --strict refuses to start.
func TestServeWithoutBrokenArray(t *testing.T) {
	requireTool(t, "nbdinfo")
	mirror := createArray(t, "1", 2, "64K")
	parity := createArray(t, "5", 3, "64K")
	stray := createArray(t, "0", 2, "64K") // its members are listed under another name
	dir := t.TempDir()
	arrays := map[string][]string{
		mirror.name: mirror.members,
		parity.name: parity.members,
		// "foreign" lists the members of stray: they belong to another array.
		"foreign": stray.members,
		// "gone" lists two RAID1 members that do not exist.
		"gone": {filepath.Join(dir, "gone0.img"), filepath.Join(dir, "gone1.img")},
	}
	cfg := writeConfig(t, "", arrays, mirror.name, "foreign", parity.name, "gone")

	t.Run("strict", func(t *testing.T) {
		s := startServe(t, "--config", cfg, "--strict")
		<-s.done
		s.out.flush()
		assert.Equal(t, 1, exitCode(s.err), "serve --strict must refuse to start")
		out := s.out.String()
		assert.Contains(t, out, `belongs to array "`+stray.name+`"`)
		assert.Contains(t, out, "gone0.img")
		assert.NoFileExists(t, s.ctrl, "nothing is served")
		// The healthy arrays were closed again, clean.
		assertClean(t, mirror.members...)
		assertClean(t, parity.members...)
	})

	s := serve(t, "--config", cfg)
	for _, a := range []*array{mirror, parity} {
		out := mustRun(t, "nbdinfo", s.uri(a.name))
		assert.Contains(t, out, "export-size:", "healthy array %s is served", a.name)
	}
	out, err := run(t, "nbdinfo", s.uri("foreign"))
	assert.Error(t, err, "a broken array is not exported: %s", out)

	stdout, stderr, code := raidd(t, "status", "--json", "--control", s.ctrl)
	assert.Equal(t, 2, code, "status exits 2 when an array failed: %s", stderr)
	var st struct {
		Arrays []struct {
			Name   string `json:"name"`
			State  string `json:"state"`
			Failed bool   `json:"failed"`
			Error  string `json:"error"`
		} `json:"arrays"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &st), stdout)
	got := map[string]int{}
	for i, a := range st.Arrays {
		got[a.Name] = i
	}
	require.Len(t, got, 4, stdout)
	for _, n := range []string{mirror.name, parity.name} {
		a := st.Arrays[got[n]]
		assert.False(t, a.Failed, n)
		assert.Empty(t, a.Error, n)
	}
	for n, reason := range map[string]string{"foreign": `belongs to array "` + stray.name + `"`, "gone": "gone0.img: no such file or directory"} {
		a := st.Arrays[got[n]]
		assert.True(t, a.Failed, n)
		assert.Equal(t, "failed", a.State, n)
		assert.Contains(t, a.Error, reason, n)
	}

	human, _, code := raidd(t, "status", "--control", s.ctrl, "foreign")
	assert.Equal(t, 2, code)
	assert.Contains(t, human, "foreign: FAILED, not assembled")
	assert.Contains(t, human, `reason: `)
	_, _, code = raidd(t, "status", "--control", s.ctrl, mirror.name, parity.name)
	assert.Equal(t, 0, code, "the healthy arrays alone are clean")

	metrics := controlGet(t, s.ctrl, "/metrics")
	assert.Contains(t, metrics, `raidd_array_failed{array="foreign"} 1`)
	assert.Contains(t, metrics, `raidd_array_assembled{array="gone"} 0`)
	assert.Contains(t, metrics, `raidd_array_failed{array="`+mirror.name+`"} 0`)
	assert.Contains(t, metrics, `raidd_array_assembled{array="`+parity.name+`"} 1`)

	// Member commands on the broken array say why they cannot work.
	_, stderr, code = raidd(t, "fail", "--control", s.ctrl, "gone", "0")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `array "gone" could not be assembled when raidd started`)

	s.stopOK(t)
	assertClean(t, mirror.members...)
	// The foreign members were not touched: still their own array's, clean.
	assertClean(t, stray.members...)
}
