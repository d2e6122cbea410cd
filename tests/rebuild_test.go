package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recoveryTimeout bounds the wait for a rebuild or replace to finish.
const recoveryTimeout = 60 * time.Second

// fullStatus is arrayStatus plus the parts of `raidd status --json` that the
// rebuild and replace tests read: the recovery job, the event history and
// the client byte counter.
type fullStatus struct {
	arrayStatus
	Recovery *progressJSON `json:"recovery"`
	History  []eventJSON   `json:"history"`
	Stats    struct {
		ClientBytesRead    int64 `json:"client_bytes_read"`
		ClientBytesWritten int64 `json:"client_bytes_written"`
	} `json:"stats"`
}

type progressJSON struct {
	Kind    string  `json:"kind"`
	Role    int     `json:"role"`
	Path    string  `json:"path"`
	Done    int64   `json:"done_rows"`
	Total   int64   `json:"total_rows"`
	Percent float64 `json:"percent"`
}

type eventJSON struct {
	Kind   string `json:"kind"`
	Role   int    `json:"role"`
	Path   string `json:"path"`
	Detail string `json:"detail"`
}

// fullStatus runs `raidd status --json` and returns the full status of the
// array called name.
func (s *server) fullStatus(t testing.TB, name string) fullStatus {
	t.Helper()
	out := statusRaidd(t, "--json", "--control", s.ctrl)
	var st struct {
		Arrays []fullStatus `json:"arrays"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), "raidd status --json output:\n%s", out)
	for _, a := range st.Arrays {
		if a.Name == name {
			return a
		}
	}
	require.FailNow(t, "array missing from raidd status", "want %q in:\n%s", name, out)
	return fullStatus{}
}

// event returns the most recent event of kind in the status history.
func (st fullStatus) event(kind string) (eventJSON, bool) {
	for i := len(st.History) - 1; i >= 0; i-- {
		if st.History[i].Kind == kind {
			return st.History[i], true
		}
	}
	return eventJSON{}, false
}

// device returns the status of the member whose path is path.
func (st fullStatus) device(path string) (memberStatus, bool) {
	for _, d := range st.Devices {
		if d.Path == path {
			return d, true
		}
	}
	return memberStatus{}, false
}

// assertEvent checks that the history holds an event of kind for role on
// path.
func assertEvent(t *testing.T, st fullStatus, kind string, role int, path string) {
	t.Helper()
	e, ok := st.event(kind)
	if assert.True(t, ok, "event %s in the history: %+v", kind, st.History) {
		assert.Equal(t, role, e.Role, "role of %s", kind)
		assert.Equal(t, path, e.Path, "path of %s", kind)
	}
}

// assertActive checks that path is an active member in role.
func assertActive(t *testing.T, st fullStatus, path string, role int) {
	t.Helper()
	d, ok := st.device(path)
	if assert.True(t, ok, "%s in the member list: %+v", path, st.Devices) {
		assert.Equal(t, "active", d.State, "state of %s", path)
		assert.Equal(t, role, d.Role, "role of %s", path)
	}
}

// waitRecovery polls the status until no rebuild or replace runs, calling
// each (if not nil) on every status seen, and returns the last status.
func waitRecovery(t *testing.T, s *server, name string, each func(fullStatus)) fullStatus {
	t.Helper()
	deadline := time.Now().Add(recoveryTimeout)
	for {
		st := s.fullStatus(t, name)
		if each != nil {
			each(st)
		}
		if st.Recovery == nil {
			return st
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "recovery did not finish", "after %v: %+v", recoveryTimeout, *st.Recovery)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pollUntil calls cond every 50 ms, in the test's goroutine, until it
// returns true, and fails the test if that takes longer than timeout.
func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(t, "timed out waiting", "%s: not within %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// blankMember creates an empty sparse file the size of member like, next to
// it, for `raidd add` and `raidd replace`.
func blankMember(t *testing.T, like, name string) string {
	t.Helper()
	fi, err := os.Stat(like)
	require.NoError(t, err)
	p := filepath.Join(filepath.Dir(like), name)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(fi.Size()))
	require.NoError(t, f.Close())
	return p
}

// moveAway renames a member file so that nothing can open it by its path.
func moveAway(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.Rename(path, path+".away"))
}

// examined is the part of one `raidd examine --json` entry the tests read.
type examined struct {
	Role              int    `json:"role"`
	MemberUUID        string `json:"member_uuid"`
	RebuildRole       int    `json:"rebuild_role"`
	RebuildCheckpoint int64  `json:"rebuild_checkpoint"`
	Members           []struct {
		UUID  string `json:"uuid"`
		Role  int    `json:"role"`
		State string `json:"state"`
	} `json:"members"`
}

// examineMember runs `raidd examine --json` on one member and returns its
// superblock and the state its own member table records for it.
func examineMember(t *testing.T, path string) (examined, string) {
	t.Helper()
	out := mustRaidd(t, "examine", "--json", path)
	var ex []examined
	require.NoError(t, json.Unmarshal([]byte(out), &ex), "raidd examine --json output:\n%s", out)
	require.Len(t, ex, 1, "raidd examine --json output:\n%s", out)
	for _, m := range ex[0].Members {
		if m.UUID == ex[0].MemberUUID {
			return ex[0], m.State
		}
	}
	require.FailNow(t, "member missing from its own member table", "raidd examine --json %s:\n%s", path, out)
	return examined{}, ""
}

// startFio runs fio's nbd engine on [offset, offset+size) of uri: one pass of
// random 4 KiB writes, each checksummed, then a read-back of every block
// written (verify). The job has a fixed size, not a running time, so it
// always completes both its writes and its verification however slow the
// machine is. Its writes are paced at writeRate (0 = unpaced), which only
// makes the write phase last at least size/writeRate.
func startFio(t *testing.T, uri, offset, size, writeRate string) <-chan fioResult {
	t.Helper()
	args := []string{"--name=rebuild", "--ioengine=nbd", "--uri=" + uri,
		"--rw=randwrite", "--bs=4k", "--iodepth=8", "--offset=" + offset, "--size=" + size,
		"--verify=crc32c", "--do_verify=1", "--verify_fatal=1"}
	if writeRate != "" {
		args = append(args, "--rate=,"+writeRate)
	}
	t.Logf("starting fio %s", strings.Join(args, " "))
	cmd := exec.Command("fio", args...)
	cmd.Dir = t.TempDir() // fio leaves verify-state files in its working directory
	var out logWriter
	out.t, out.prefix = t, "fio: "
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	res := make(chan fioResult, 1)
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		out.flush()
		res <- fioResult{out: out.String(), err: err}
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return res
}

// fioWhileWriting starts fio over [offset, offset+size) of uri (see
// startFio) and returns once raidd counts client writes beyond those
// of before, failing the test if fio ends first.
func fioWhileWriting(t *testing.T, srv *server, name, uri string, offset, size int64, before int64) <-chan fioResult {
	t.Helper()
	fio := startFio(t, uri, fmt.Sprint(offset), fmt.Sprint(size), "1m")
	pollUntil(t, 30*time.Second, "fio starts writing", func() bool {
		select {
		case res := <-fio:
			require.FailNow(t, "fio ended before the recovery started", "fio: %v\n%s", res.err, res.out)
		default:
		}
		return srv.fullStatus(t, name).Stats.ClientBytesWritten > before
	})
	return fio
}

// fioOverRecovery waits for fio to end, checking every 50 ms the status
// of an array whose recovery was running with runningWritten client bytes
// written: each status that still shows the recovery goes to each (which
// may assert on it), and overlap reports whether one of them counted more
// client writes, which proves that client writes were served while the
// recovery ran.
func fioOverRecovery(t *testing.T, srv *server, name string, fio <-chan fioResult, runningWritten int64, each func(fullStatus)) (res fioResult, overlap bool) {
	t.Helper()
	for {
		select {
		case res = <-fio:
			return res, overlap
		case <-time.After(50 * time.Millisecond):
			st := srv.fullStatus(t, name)
			if st.Recovery == nil {
				continue
			}
			assert.True(t, st.Degraded, "degraded while the rebuild runs")
			if each != nil {
				each(st)
			}
			if st.Stats.ClientBytesWritten > runningWritten {
				overlap = true
			}
		}
	}
}

type fioResult struct {
	out string
	err error
}

// requireFioVerified requires a fio run that exited cleanly with no
// verification failure. fio exits non-zero when a verified block differs
// (--verify_fatal); that the read-back reached the server is checked by the
// caller from raidd's counters, not from fio's speed figures.
func requireFioVerified(t *testing.T, r fioResult) {
	t.Helper()
	require.NoError(t, r.err, "fio:\n%s", r.out)
	assert.NotContains(t, r.out, "verify: bad")
}

// TestRebuildWhileServing fails a RAID5 member and adds a blank spare while
// fio writes and verifies a region of the export, and checks that the
// rebuild ran while fio's I/O was being served, that fio's verification
// passed, that the data written before and during the rebuild is intact,
// and that the rebuilt member holds correct bytes: with a different
// original member gone, the degraded array still serves the same data.
//
// Nothing here depends on speed. fio's job has a fixed size, so it always
// completes its writes and its read-back; its writes are paced (1 MiB/s
// for 4 MiB), which only makes them last at least ~4 s, so fio is still
// writing when the spare is added. The rebuild runs at --rebuild-min-rate
// (1 MiB/s) while clients do I/O and at --rebuild-max-rate (2 MiB/s) in
// their pauses, so its 7 MiB of data per member keep it running at least
// 3.5 s after the spare is added, whatever fio does. The overlap is shown by raidd's own counters, not by timing: a status that
// shows the rebuild running counts more client writes than an earlier
// status that already showed it running.
func TestRebuildWhileServing(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "nbdcopy", "qemu-io")
	requireFioNBD(t)
	const (
		knownLen = 3 << 20  // the known data set, at offset 0
		fioLen   = 4 << 20  // fio's region, right after it
		tailLen  = 14 << 20 // more data after fio's region, to rebuild
	)
	arr := createArray(t, "5", 4, testChunk)
	src, want := writeRandomFile(t, t.TempDir(), knownLen, 900)
	srv := serve(t, append([]string{"--rebuild-min-rate", "1MiB", "--rebuild-max-rate", "2MiB"}, arr.members...)...)
	uri := srv.uri(arr.name)
	mustRun(t, "nbdcopy", "--flush", src, uri)
	qemuIO(t, uri, fmt.Sprintf("write -P 0x5a %d %d", knownLen+fioLen, tailLen))

	failed := arr.members[1]
	mustRaidd(t, "fail", "--control", srv.ctrl, arr.name, failed)
	st := srv.fullStatus(t, arr.name)
	require.True(t, st.Degraded, "degraded flag after raidd fail; state %s", st.State)
	require.Equal(t, "degraded", st.State)
	assert.Nil(t, st.Recovery, "no spare yet, so no rebuild")
	if d, ok := st.device(failed); assert.True(t, ok, "the failed member is listed: %+v", st.Devices) {
		assert.Equal(t, "failed", d.State)
	}
	assertEvent(t, st, "member-failed", 1, failed)
	fioStart := st.Stats

	// fio writes first, so that the rebuild starts under client I/O.
	fio := fioWhileWriting(t, srv, arr.name, uri, knownLen, fioLen, fioStart.ClientBytesWritten)

	spare := blankMember(t, arr.members[1], "spare.img")
	mustRaidd(t, "add", "--control", srv.ctrl, arr.name, spare)
	st = srv.fullStatus(t, arr.name)
	require.NotNil(t, st.Recovery, "a rebuild runs right after raidd add (history %+v)", st.History)
	assert.Equal(t, "rebuild", st.Recovery.Kind)
	assert.Equal(t, 1, st.Recovery.Role)
	assert.Equal(t, spare, st.Recovery.Path)
	// Written while the rebuild was already running: a later status that
	// still shows the rebuild and counts more client writes proves that
	// client writes were served while it ran.
	fioRes, overlap := fioOverRecovery(t, srv, arr.name, fio, st.Stats.ClientBytesWritten, func(st fullStatus) {
		if d, ok := st.device(spare); assert.True(t, ok) {
			assert.Equal(t, "rebuilding", d.State, "state of the spare during the rebuild")
		}
	})
	requireFioVerified(t, fioRes)
	fioEnd := srv.fullStatus(t, arr.name).Stats
	read, written := fioEnd.ClientBytesRead-fioStart.ClientBytesRead, fioEnd.ClientBytesWritten-fioStart.ClientBytesWritten
	t.Logf("fio wrote %d KiB and read back %d KiB", written>>10, read>>10)
	assert.GreaterOrEqual(t, written, int64(fioLen), "fio's writes reached raidd")
	assert.GreaterOrEqual(t, read, int64(fioLen), "fio's verification read back every block it wrote")
	assert.True(t, overlap, "no status showed client writes served while the rebuild ran")

	st = waitRecovery(t, srv, arr.name, nil)
	assert.False(t, st.Degraded, "degraded flag after the rebuild")
	assert.NotContains(t, []string{"degraded", "failed"}, st.State)
	assertEvent(t, st, "spare-claimed", 1, spare)
	assertEvent(t, st, "rebuild-finished", 1, spare)
	assertActive(t, st, spare, 1)

	got, _ := readExport(t, uri, knownLen+fioLen)
	assertSameBytes(t, want, got[:knownLen], "known data after the rebuild")
	snapshot := got // the known data and what fio left behind

	mustRaidd(t, "remove", "--control", srv.ctrl, arr.name, failed)
	st = srv.fullStatus(t, arr.name)
	_, listed := st.device(failed)
	assert.False(t, listed, "the removed member is gone from the status: %+v", st.Devices)
	srv.stopOK(t)

	current := []string{arr.members[0], spare, arr.members[2], arr.members[3]}
	assertClean(t, current...)
	ex, state := examineMember(t, spare)
	assert.Equal(t, 1, ex.Role, "role in the rebuilt member's superblock")
	assert.Equal(t, "active", state, "the rebuilt member's own state in its member table")
	assert.Equal(t, -1, ex.RebuildRole, "no rebuild recorded as pending")

	// The survivors alone, read-only (no superblock is written), say what
	// role 1 must hold: reconstructed from them, the export must match.
	ro := serve(t, "--read-only", arr.members[0], arr.members[2], arr.members[3])
	st = ro.fullStatus(t, arr.name)
	assert.True(t, st.Degraded, "degraded flag without the rebuilt member")
	got, _ = readExport(t, ro.uri(arr.name), knownLen+fioLen)
	assertSameBytes(t, snapshot, got, "data reconstructed without the rebuilt member")
	ro.stopOK(t)
	assertClean(t, current...)

	// Without member 2, every read of role 2 is reconstructed from the
	// other three, the rebuilt member included.
	moveAway(t, arr.members[2])
	srv = serve(t, arr.members[0], spare, arr.members[3])
	st = srv.fullStatus(t, arr.name)
	assert.Equal(t, "degraded", st.State)
	assert.True(t, st.Degraded, "degraded flag")
	assertRoleMissing(t, st.arrayStatus, 2)
	assertActive(t, st, spare, 1)
	got, _ = readExport(t, srv.uri(arr.name), knownLen+fioLen)
	assertSameBytes(t, snapshot, got, "data read with the rebuilt member and without member 2")
	srv.stopOK(t)
}

// TestReplaceWhileServing replaces a RAID1 member with raidd replace while
// data is written; the array must never report degraded, the new member
// must take the old one's role, and alone it must hold all the data.
func TestReplaceWhileServing(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "nbdcopy")
	arr := createArray(t, "1", 2, testChunk)
	data := t.TempDir()
	srcA, wantA := writeRandomFile(t, data, copyDataLen, 910)
	srcB, wantB := writeRandomFile(t, data, 8<<20, 911)
	// Rows never written are copied for free, so only srcA's 24 MiB pace
	// the replace: at 4 MiB/s it runs ~6 s, and ~3.5 s remain after the
	// copy passes 10 MiB for the overwrite below, however slow the machine.
	srv := serve(t, append([]string{"--rebuild-min-rate", "1MiB", "--rebuild-max-rate", "4MiB"}, arr.members...)...)
	uri := srv.uri(arr.name)
	mustRun(t, "nbdcopy", "--flush", srcA, uri)

	old, keep := arr.members[0], arr.members[1]
	repl := blankMember(t, old, "replacement.img")
	mustRaidd(t, "replace", "--control", srv.ctrl, arr.name, old, repl)

	seen := 0
	check := func(st fullStatus) {
		assert.False(t, st.Degraded, "degraded flag during the replace")
		assert.NotContains(t, []string{"degraded", "failed"}, st.State, "state during the replace")
		if r := st.Recovery; r != nil {
			seen++
			assert.Equal(t, "replace", r.Kind)
			assert.Equal(t, 0, r.Role)
			assert.Equal(t, repl, r.Path)
			assertActive(t, st, old, 0)
		}
	}
	// Overwrite the first 8 MiB once the copy is past it: those writes must
	// reach the replacement as well as the old member.
	deadline := time.Now().Add(recoveryTimeout)
	for {
		st := srv.fullStatus(t, arr.name)
		check(st)
		require.NotNil(t, st.Recovery, "the replace finished before the copy was seen past 10 MiB: %+v", st.History)
		if st.Recovery.Done*chunkBytes > 10<<20 {
			break
		}
		require.False(t, time.Now().After(deadline), "the replace makes no progress: %+v", *st.Recovery)
		time.Sleep(50 * time.Millisecond)
	}
	mustRun(t, "nbdcopy", "--flush", srcB, uri)
	st := srv.fullStatus(t, arr.name)
	check(st)
	require.NotNil(t, st.Recovery, "the replace still runs after the overwrite, so the two overlapped")

	st = waitRecovery(t, srv, arr.name, check)
	assert.GreaterOrEqual(t, seen, 2, "status polls that saw the replace")
	assertEvent(t, st, "replace-finished", 0, repl)
	assertActive(t, st, repl, 0)
	assertActive(t, st, keep, 1)
	_, listed := st.device(old)
	assert.False(t, listed, "the replaced member leaves the array: %+v", st.Devices)
	// raidd keeps the retired device open (requests begun before the end
	// of the replace may use it) until 'raidd remove' releases it.
	assert.Contains(t, mustRaidd(t, "examine", old), "in use by")
	mustRaidd(t, "remove", "--control", srv.ctrl, arr.name, old)
	assert.NotContains(t, mustRaidd(t, "examine", old), "in use by", "released without a restart")
	want := slices.Concat(wantB, wantA[len(wantB):])
	got, _ := readExport(t, uri, len(want))
	assertSameBytes(t, want, got, "data after the replace")
	srv.stopOK(t)
	assertClean(t, keep, repl)
	// The retired member's own superblock says it left the array, at the
	// members' event count, and an array started with it listed leaves it
	// out.
	ex := mustRaidd(t, "examine", old)
	assert.Contains(t, ex, "removed: it left the array (retired by a replace)")
	assert.Regexp(t, `(?m)^\s+-\s+removed\s+\S+ \(this member\)$`, ex)
	srv = serve(t, old, keep, repl)
	st = srv.fullStatus(t, arr.name)
	assert.False(t, st.Degraded, "degraded flag with the retired member listed first")
	d, listed := st.device(old)
	require.True(t, listed, "the retired member is shown: %+v", st.Devices)
	assert.Equal(t, "stale", d.State)
	assert.Contains(t, d.Note, "not in the newest member table")
	srv.stopOK(t)

	require.NoError(t, os.Remove(old))
	srv = serve(t, keep, repl)
	st = srv.fullStatus(t, arr.name)
	assert.Equal(t, "clean", st.State)
	assert.False(t, st.Degraded, "degraded flag with the old member gone")
	got, _ = readExport(t, srv.uri(arr.name), len(want))
	assertSameBytes(t, want, got, "data without the old member")
	srv.stopOK(t)

	// The replacement alone holds every byte.
	moveAway(t, keep)
	srv = serve(t, repl)
	st = srv.fullStatus(t, arr.name)
	assert.Equal(t, "degraded", st.State)
	assertRoleMissing(t, st.arrayStatus, 1)
	got, _ = readExport(t, srv.uri(arr.name), len(want))
	assertSameBytes(t, want, got, "data on the replacement alone")
	srv.stopOK(t)
}

// TestStatusHumanShowsRecovery checks that the human status shows a running
// rebuild with its percentage, and that a rebuild stopped by a restart
// resumes from its checkpoint instead of from row 0, and then completes.
func TestStatusHumanShowsRecovery(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "nbdcopy")
	arr := createArray(t, "1", 2, testChunk)
	src, want := writeRandomFile(t, t.TempDir(), 24<<20, 920)
	// 2 MiB/s: rebuilding the 24 MiB of data takes ~12 s (rows that were
	// never written cost nothing).
	slow := []string{"--rebuild-min-rate", "2MiB", "--rebuild-max-rate", "2MiB"}
	srv := serve(t, append(slow, arr.members...)...)
	mustRun(t, "nbdcopy", "--flush", src, srv.uri(arr.name))

	mustRaidd(t, "fail", "--control", srv.ctrl, arr.name, arr.members[1])
	spare := blankMember(t, arr.members[1], "spare.img")
	mustRaidd(t, "add", "--control", srv.ctrl, arr.name, spare)
	started := time.Now()

	out := statusRaidd(t, "--control", srv.ctrl)
	assertHumanRebuild(t, out, spare)
	assert.Contains(t, out, "DEGRADED")

	// Let at least one periodic checkpoint (every 5 s) happen.
	pollUntil(t, 15*time.Second, "a rebuild-progress checkpoint event", func() bool {
		_, ok := srv.fullStatus(t, arr.name).event("rebuild-progress")
		return ok
	})
	time.Sleep(time.Until(started.Add(6 * time.Second)))
	st := srv.fullStatus(t, arr.name)
	require.NotNil(t, st.Recovery, "the slow rebuild still runs")
	before := *st.Recovery
	require.Positive(t, before.Done, "rows rebuilt in 6 s")
	require.Less(t, before.Done, before.Total, "the rebuild is not done yet")
	srv.stopOK(t)

	ex, state := examineMember(t, spare)
	assert.Equal(t, 1, ex.Role, "role in the spare's superblock")
	assert.Equal(t, "rebuilding", state, "the spare's own state in its member table")
	assert.Equal(t, 1, ex.RebuildRole, "rebuild role in the superblock")
	assert.GreaterOrEqual(t, ex.RebuildCheckpoint, before.Done*chunkBytes, "checkpoint at or after the last reported position")
	ckRows := ex.RebuildCheckpoint / chunkBytes
	require.Positive(t, ckRows, "rebuild checkpoint")

	srv = serve(t, append(slow, arr.members[0], spare)...)
	st = srv.fullStatus(t, arr.name)
	require.NotNil(t, st.Recovery, "the rebuild resumes when serving again (history %+v)", st.History)
	assert.Equal(t, "rebuild", st.Recovery.Kind)
	assert.Equal(t, 1, st.Recovery.Role)
	assert.Equal(t, spare, st.Recovery.Path)
	assert.GreaterOrEqual(t, st.Recovery.Done, ckRows, "the rebuild resumed from its checkpoint, not from row 0")
	assertEvent(t, st, "rebuild-started", 1, spare)
	assertHumanRebuild(t, statusRaidd(t, "--control", srv.ctrl), spare)
	srv.stopOK(t)

	// Without a rate limit the rest of the rebuild is quick.
	srv = serve(t, arr.members[0], spare)
	st = waitRecovery(t, srv, arr.name, nil)
	assertEvent(t, st, "rebuild-finished", 1, spare)
	assert.False(t, st.Degraded, "degraded flag after the rebuild")
	assertActive(t, st, spare, 1)
	srv.stopOK(t)

	moveAway(t, arr.members[0])
	srv = serve(t, spare)
	assert.Equal(t, "degraded", srv.fullStatus(t, arr.name).State)
	got, _ := readExport(t, srv.uri(arr.name), len(want))
	assertSameBytes(t, want, got, "data on the rebuilt member alone")
	srv.stopOK(t)
}

// rebuildLine matches a line of the human status about a rebuild (not an
// event such as rebuild-started, nor a member's "rebuilding" state).
var rebuildLine = regexp.MustCompile(`\brebuild\b([^-]|$)`)

// assertHumanRebuild checks that the human status has a line about the
// rebuild of role 1 onto path, with a percentage.
func assertHumanRebuild(t *testing.T, out, path string) {
	t.Helper()
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if rebuildLine.MatchString(l) && strings.Contains(l, path) {
			lines = append(lines, l)
		}
	}
	if assert.Len(t, lines, 1, "one line of raidd status shows the rebuild onto %s:\n%s", path, out) {
		assert.Regexp(t, `\b\d+(\.\d+)?%`, lines[0], "the rebuild line has a percentage")
		assert.Regexp(t, `\brole 1\b`, lines[0], "the rebuild line names the role")
	}
}
