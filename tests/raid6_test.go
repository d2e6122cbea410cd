package tests

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRAID6TwoMissing: `raidd create --level 6` makes a RAID6 that examine
// and status report as such; data copied in with nbdcopy reads back with
// two member files deleted, and after two blank members are added and
// rebuilt, it reads back again with the array whole.
func TestRAID6TwoMissing(t *testing.T) {
	t.Parallel()
	requireTool(t, "nbdcopy")
	arr := createArray(t, "6", 5, testChunk)
	var ex []struct {
		Level   string `json:"level"`
		Members int    `json:"raid_members"`
	}
	require.NoError(t, json.Unmarshal([]byte(mustRaidd(t, "examine", "--json", arr.members[0])), &ex))
	require.Len(t, ex, 1)
	assert.Equal(t, "raid6", ex[0].Level)
	assert.Equal(t, 5, ex[0].Members)

	const known = 6 << 20
	src, want := writeRandomFile(t, t.TempDir(), known, 66)
	srv := serve(t, arr.members...)
	st := srv.status(t, arr.name)
	assert.Equal(t, "raid6", normLevel(st.Level))
	assert.Equal(t, 5, st.Members)
	assert.Equal(t, int64(3*4*chunkBytes)*(st.Size/int64(3*4*chunkBytes)), st.Size, "size is whole rows of 3 data chunks")
	mustRun(t, "nbdcopy", "--flush", src, srv.uri(arr.name))
	got, _ := readExport(t, srv.uri(arr.name), known)
	assertSameBytes(t, want, got, "healthy round trip")
	srv.stopOK(t)

	// A data+data, data+P, data+Q or P+Q pair, depending on the row.
	require.NoError(t, os.Remove(arr.members[1]))
	require.NoError(t, os.Remove(arr.members[3]))
	srv = serve(t, arr.members...)
	full := srv.fullStatus(t, arr.name)
	assert.Equal(t, "degraded", full.State)
	assert.False(t, full.Failed)
	got, _ = readExport(t, srv.uri(arr.name), known)
	assertSameBytes(t, want, got, "read with two members missing")
	// Degraded writes, then two members rebuilt.
	src2, want2 := writeRandomFile(t, t.TempDir(), known, 67)
	mustRun(t, "nbdcopy", "--flush", src2, srv.uri(arr.name))
	for _, name := range []string{"new1.img", "new3.img"} {
		mustRaidd(t, "add", "--control", srv.ctrl, arr.name, blankMember(t, arr.members[0], name))
	}
	// The second member widens the rebuild of the first, if it still
	// runs: both roles are then rebuilt in one pass.
	pollUntil(t, 2*recoveryTimeout, "both members rebuilt", func() bool {
		f := srv.fullStatus(t, arr.name)
		return !f.Degraded && f.Recovery == nil
	})
	got, _ = readExport(t, srv.uri(arr.name), known)
	assertSameBytes(t, want2, got, "read after the rebuild of two members")
	srv.stopOK(t)
}
