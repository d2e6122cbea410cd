package tests

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReplaceResumesAfterRestart stops raidd while `raidd replace` copies
// a member: the replacement's superblock records the copy (state
// replacing, rebuild role and checkpoint), the next start resumes the copy
// from its checkpoint instead of row 0 and without degrading the array,
// and it completes: the replacement alone then holds every byte.
func TestReplaceResumesAfterRestart(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "nbdcopy")
	arr := createArray(t, "1", 2, testChunk)
	src, want := writeRandomFile(t, t.TempDir(), 24<<20, 930)
	// 2 MiB/s: copying the 24 MiB of data takes ~12 s (rows never written
	// cost nothing).
	slow := []string{"--rebuild-min-rate", "2MiB", "--rebuild-max-rate", "2MiB"}
	srv := serve(t, append(slow, arr.members...)...)
	mustRun(t, "nbdcopy", "--flush", src, srv.uri(arr.name))

	old, other := arr.members[0], arr.members[1]
	repl := blankMember(t, old, "replacement.img")
	mustRaidd(t, "replace", "--control", srv.ctrl, arr.name, old, repl)
	started := time.Now()
	pollUntil(t, 15*time.Second, "a checkpoint of the copy", func() bool {
		_, ok := srv.fullStatus(t, arr.name).event("rebuild-progress")
		return ok
	})
	time.Sleep(time.Until(started.Add(6 * time.Second)))
	st := srv.fullStatus(t, arr.name)
	require.NotNil(t, st.Recovery, "the slow replace still runs")
	require.Equal(t, "replace", st.Recovery.Kind)
	before := *st.Recovery
	require.Positive(t, before.Done)
	require.Less(t, before.Done, before.Total)
	srv.stopOK(t)

	ex, state := examineMember(t, repl)
	assert.Equal(t, "replacing", state, "the replacement's own state in its member table")
	assert.Equal(t, 0, ex.Role, "the role it replaces")
	assert.Equal(t, 0, ex.RebuildRole)
	ckRows := ex.RebuildCheckpoint / chunkBytes
	require.Positive(t, ckRows, "the copy's checkpoint")

	srv = serve(t, append(slow, old, other, repl)...)
	st = srv.fullStatus(t, arr.name)
	require.NotNil(t, st.Recovery, "the replace resumes (history %+v)", st.History)
	assert.Equal(t, "replace", st.Recovery.Kind)
	assert.Equal(t, 0, st.Recovery.Role)
	assert.Equal(t, repl, st.Recovery.Path)
	assert.GreaterOrEqual(t, st.Recovery.Done, ckRows, "resumed from the checkpoint, not from row 0")
	assert.False(t, st.Degraded, "a resumed replace does not degrade the array")
	assertEvent(t, st, "replace-started", 0, repl)
	srv.stopOK(t)

	// Without a rate limit the rest of the copy is quick.
	srv = serve(t, old, other, repl)
	st = waitRecovery(t, srv, arr.name, nil)
	assertEvent(t, st, "replace-finished", 0, repl)
	assertActive(t, st, repl, 0)
	_, listed := st.device(old)
	assert.False(t, listed, "the replaced member left the array")
	srv.stopOK(t)

	moveAway(t, other)
	srv = serve(t, repl)
	got, _ := readExport(t, srv.uri(arr.name), len(want))
	assertSameBytes(t, want, got, "data on the replacement alone")
	srv.stopOK(t)
}
