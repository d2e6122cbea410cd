package tests

import (
	"encoding/json"
	"fmt"
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

// TestRAID6TwoMemberRebuildWhileServing fails two members of a RAID6 and
// adds two blank spares while fio writes and verifies a region of the
// export: both roles are rebuilt (in one pass once the second spare
// arrives), the status shows client writes served while the rebuild ran,
// fio's verification passes, and the rebuilt members hold the right
// bytes: with two original members gone instead, the array (degraded by
// two, the rebuilt members among the three left) serves the same data.
//
// As in TestRebuildWhileServing, nothing depends on speed: fio's job has
// a fixed size, paced at 1 MiB/s, and the rebuild runs at 1 to 2 MiB/s,
// so its 7 MiB of data per member keep it running while fio writes.
func TestRAID6TwoMemberRebuildWhileServing(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "nbdcopy", "qemu-io")
	requireFioNBD(t)
	const (
		knownLen = 3 << 20  // the known data set, at offset 0
		fioLen   = 4 << 20  // fio's region, right after it
		tailLen  = 14 << 20 // more data after fio's region, to rebuild
	)
	arr := createArray(t, "6", 5, testChunk)
	src, want := writeRandomFile(t, t.TempDir(), knownLen, 960)
	srv := serve(t, append([]string{"--rebuild-min-rate", "1MiB", "--rebuild-max-rate", "2MiB"}, arr.members...)...)
	uri := srv.uri(arr.name)
	mustRun(t, "nbdcopy", "--flush", src, uri)
	qemuIO(t, uri, fmt.Sprintf("write -P 0x6b %d %d", knownLen+fioLen, tailLen))

	for _, m := range []int{1, 3} {
		mustRaidd(t, "fail", "--control", srv.ctrl, arr.name, arr.members[m])
	}
	st := srv.fullStatus(t, arr.name)
	require.Equal(t, "degraded", st.State)
	require.False(t, st.Failed)
	fioStart := st.Stats

	fio := fioWhileWriting(t, srv, arr.name, uri, knownLen, fioLen, fioStart.ClientBytesWritten)

	spares := []string{blankMember(t, arr.members[0], "spare1.img"), blankMember(t, arr.members[0], "spare3.img")}
	for _, s := range spares {
		mustRaidd(t, "add", "--control", srv.ctrl, arr.name, s)
	}
	st = srv.fullStatus(t, arr.name)
	require.NotNil(t, st.Recovery, "a rebuild runs right after raidd add (history %+v)", st.History)
	assert.Equal(t, "rebuild", st.Recovery.Kind)
	fioRes, overlap := fioOverRecovery(t, srv, arr.name, fio, st.Stats.ClientBytesWritten, nil)
	requireFioVerified(t, fioRes)
	assert.True(t, overlap, "no status showed client writes served while the rebuild ran")

	st = waitRecovery(t, srv, arr.name, nil)
	assert.False(t, st.Degraded, "degraded flag after the rebuild: %+v", st.Devices)
	assertActive(t, st, spares[0], 1)
	assertActive(t, st, spares[1], 3)
	got, _ := readExport(t, uri, knownLen+fioLen+tailLen)
	assertSameBytes(t, want, got[:knownLen], "known data after the rebuild")
	snapshot := got
	for _, m := range []int{1, 3} {
		mustRaidd(t, "remove", "--control", srv.ctrl, arr.name, arr.members[m])
	}
	srv.stopOK(t)

	// Members 0 and 2 gone: roles 0 and 2 are reconstructed from the two
	// rebuilt members and member 4, P and Q included wherever they rotate.
	moveAway(t, arr.members[0])
	moveAway(t, arr.members[2])
	ro := serve(t, "--read-only", spares[0], spares[1], arr.members[4])
	fs := ro.fullStatus(t, arr.name)
	assert.True(t, fs.Degraded, "degraded by two")
	assert.False(t, fs.Failed)
	got, _ = readExport(t, ro.uri(arr.name), knownLen+fioLen+tailLen)
	assertSameBytes(t, snapshot, got, "data read from the two rebuilt members and member 4 alone")
	ro.stopOK(t)
}
