package tests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestShrunkMember replays the fault attack of issue 7: 64 KiB chunks,
// 9 MiB members, 8 MiB written with nbdcopy --flush, then `truncate` of a
// member file while raidd serves it, and reads in 64 KiB requests over 4
// connections. Before the fix whole chunks read back as zeroes, because the
// read-error repair rewrote past the end of the file and left holes below.
// Now the short member is failed at once, the data comes from redundancy,
// status shows the member failed and the array degraded, and a restart
// assembles degraded, also when the truncation took the superblock.
func TestShrunkMember(t *testing.T) {
	t.Parallel()
	requireTool(t, "nbdcopy", "truncate")
	cases := []struct {
		level string
		n     int
		cut   string
	}{
		{"1", 2, "1M"}, {"10", 4, "1M"}, {"5", 3, "1M"},
		{"1", 2, "0"}, // the superblock goes too
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("raid%s/members=%d/truncate=%s", c.level, c.n, c.cut), func(t *testing.T) {
			t.Parallel()
			testShrunk(t, c.level, c.n, c.cut)
		})
	}
}

func testShrunk(t *testing.T, level string, n int, cut string) {
	const chunk, written = 64 << 10, 8 << 20
	dir := t.TempDir()
	name := "shrink" + level
	var members []string
	for i := range n {
		members = append(members, filepath.Join(dir, fmt.Sprintf("m%d", i)))
	}
	mustRaidd(t, append([]string{"create", "--name", name, "--level", level, "--chunk", "64K", "--size", "9M"}, members...)...)
	srv := serve(t, members...)
	uri := srv.uri(name)
	src, want := writeRandomFile(t, dir, written, 77)
	mustRun(t, "nbdcopy", "--flush", src, uri)

	mustRun(t, "truncate", "-s", cut, members[1])

	read := func(uri, what string) {
		t.Helper()
		out := filepath.Join(dir, "out.raw")
		_ = os.Remove(out)
		mustRun(t, "nbdcopy", "--connections=4", "--request-size=65536", uri, out)
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		require.GreaterOrEqual(t, len(got), written)
		var bad []string
		for off := 0; off < written; off += chunk {
			if !bytes.Equal(want[off:off+chunk], got[off:off+chunk]) {
				kind := "wrong"
				if bytes.Equal(got[off:off+chunk], make([]byte, chunk)) {
					kind = "zeroes"
				}
				bad = append(bad, fmt.Sprintf("%d:%s", off/chunk, kind))
			}
		}
		assert.Empty(t, bad, "%s: %d of %d chunks read back wrong", what, len(bad), written/chunk)
	}
	read(uri, "first read")
	read(uri, "second read")

	st := srv.status(t, name)
	assert.True(t, st.Degraded, "the array is degraded: %+v", st)
	assert.Equal(t, "degraded", st.State)
	found := false
	for _, d := range st.Devices {
		if d.Path == members[1] {
			found = true
			assert.Equal(t, "failed", d.State, "the truncated member is failed: %+v", d)
			assert.True(t, strings.Contains(d.Note, "shrank") || strings.Contains(d.Note, "EOF"), "the note says why: %q", d.Note)
		}
	}
	assert.True(t, found, "status lists %s: %+v", members[1], st.Devices)
	fi, err := os.Stat(members[1])
	require.NoError(t, err)
	assert.Equal(t, cutBytes(cut), fi.Size(), "nothing was written past the end of the truncated member")
	srv.stopOK(t)

	// The next start assembles degraded and serves the same data.
	srv = serve(t, members...)
	st = srv.status(t, name)
	assert.True(t, st.Degraded, "restart: degraded: %+v", st)
	read(srv.uri(name), "after restart")
	srv.stopOK(t)
}

func cutBytes(s string) int64 {
	if s == "1M" {
		return 1 << 20
	}
	return 0
}
