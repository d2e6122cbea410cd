package tests

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDegraded removes one member of a redundant array between two runs of
// serve: the array must start degraded, serve the old data, accept new
// writes, and keep them across another degraded restart.
func TestDegraded(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "nbdcopy")
	for _, tc := range []struct {
		levelCase
		remove int // member index (= role at creation) to delete
	}{
		{levelCase{"1", 2}, 0},
		{levelCase{"5", 4}, 1},
		{levelCase{"10", 4}, 2},
	} {
		t.Run(fmt.Sprintf("%s/missing=%d", tc.levelCase, tc.remove), func(t *testing.T) {
			t.Parallel()
			arr := createArray(t, tc.level, tc.members, testChunk)
			data := t.TempDir()
			src, want := writeRandomFile(t, data, copyDataLen, 400)

			srv := serve(t, arr.members...)
			mustRun(t, "nbdcopy", "--flush", src, srv.uri(arr.name))
			srv.stopOK(t)
			assertClean(t, arr.members...)

			gone := arr.members[tc.remove]
			require.NoError(t, os.Remove(gone))
			rest := slices.Delete(slices.Clone(arr.members), tc.remove, tc.remove+1)

			srv = serve(t, rest...)
			uri := srv.uri(arr.name)
			got, _ := readExport(t, uri, copyDataLen)
			assertSameBytes(t, want, got, "data read back from the degraded array")

			st := srv.status(t, arr.name)
			assert.Equal(t, "degraded", st.State)
			assert.True(t, st.Degraded, "degraded flag")
			assert.False(t, st.Failed, "failed flag")
			assertRoleMissing(t, st, tc.remove)

			// Writes while degraded land and survive a degraded restart.
			src2, want2 := writeRandomFile(t, data, 8<<20, 401)
			mustRun(t, "nbdcopy", "--flush", src2, uri)
			got, _ = readExport(t, uri, 8<<20)
			assertSameBytes(t, want2, got, "degraded write round trip")
			srv.stopOK(t)

			srv = serve(t, rest...)
			uri = srv.uri(arr.name)
			want = append(want2, want[len(want2):]...)
			got, _ = readExport(t, uri, copyDataLen)
			assertSameBytes(t, want, got, "after a degraded restart")
			assert.Equal(t, "degraded", srv.status(t, arr.name).State)
			srv.stopOK(t)
		})
	}
}

// assertRoleMissing checks that the status reports role as missing, failed
// or removed (or at least without a device).
func assertRoleMissing(t *testing.T, st arrayStatus, role int) {
	t.Helper()
	found := false
	for _, d := range st.Devices {
		if d.Role != role {
			continue
		}
		if slices.Contains([]string{"missing", "failed", "removed"}, d.State) || d.Path == "" && d.Note != "" {
			found = true
		}
	}
	assert.True(t, found, "role %d must be reported missing or failed; members: %+v", role, st.Devices)
	active := 0
	for _, d := range st.Devices {
		if d.State == "active" {
			active++
		}
	}
	assert.Equal(t, st.Members-1, active, "active members; members: %+v", st.Devices)
}

// TestRAID0MissingMemberRefused checks that a RAID0 with a member missing
// does not start, and that the error names the missing role.
func TestRAID0MissingMemberRefused(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	for _, remove := range []int{0, 2} {
		t.Run(fmt.Sprintf("raid0/members=3/missing=%d", remove), func(t *testing.T) {
			arr := createArray(t, "0", 3, testChunk)
			require.NoError(t, os.Remove(arr.members[remove]))
			rest := slices.Delete(slices.Clone(arr.members), remove, remove+1)

			s := startServe(t, rest...)
			select {
			case <-s.done:
			case <-time.After(serveReadyTimeout):
				s.stop()
				require.FailNow(t, "raidd serve kept running with a RAID0 member missing")
			}
			s.out.flush()
			code := exitCode(s.err)
			assert.NotEqual(t, 0, code, "exit code")
			out := s.out.String()
			assert.Regexp(t, regexp.MustCompile(fmt.Sprintf(`(?i)\broles?\s*\[?%d\b`, remove)), out, "the error names the missing role")
			assert.Contains(t, strings.ToLower(out), "missing")
			_, err := os.Stat(s.sock)
			assert.True(t, os.IsNotExist(err), "no NBD socket is left behind: %v", err)
		})
	}
}
