package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recoveryStatus is the part of `raidd status --json` the operator
// recovery tests read: the bitmap and the last rebuild or re-add.
type recoveryStatus struct {
	Bitmap *struct {
		Dirty int `json:"dirty_regions"`
	} `json:"bitmap"`
	LastRecovery *struct {
		Kind      string `json:"kind"`
		Role      int    `json:"role"`
		Path      string `json:"path"`
		Done      int64  `json:"done_rows"`
		Total     int64  `json:"total_rows"`
		ArrayRows int64  `json:"array_rows"`
	} `json:"last_recovery"`
}

func (s *server) recoveryStatus(t testing.TB, name string) recoveryStatus {
	t.Helper()
	out := statusRaidd(t, "--json", "--control", s.ctrl)
	var st struct {
		Arrays []struct {
			Name string `json:"name"`
			recoveryStatus
		} `json:"arrays"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), "raidd status --json output:\n%s", out)
	for _, a := range st.Arrays {
		if a.Name == name {
			return a.recoveryStatus
		}
	}
	require.FailNow(t, "array missing from raidd status", "want %q in:\n%s", name, out)
	return recoveryStatus{}
}

// qemuWrite writes n bytes of pattern b at off through the export and
// records them in want.
func qemuWrite(t *testing.T, uri string, want []byte, b byte, off, n int) {
	t.Helper()
	mustRun(t, "qemu-io", "-f", "raw", uri, "-c", fmt.Sprintf("write -P %#x %d %d", b, off, n), "-c", "flush")
	for i := off; i < off+n; i++ {
		want[i] = b
	}
}

// TestRecoverFailReAdd runs 'raidd fail' then 'raidd add' of the same
// device on a running RAID5 (the daemon itself holds the failed member's
// device, which used to be refused as "in use by another raidd process").
// The member is re-added in its role and only the rows of the one bitmap
// region written while it was out are resynced: 64 of 1008, as status
// reports. With another member failed afterwards, the re-added member
// serves correct data.
func TestRecoverFailReAdd(t *testing.T) {
	t.Parallel()
	requireTool(t, "nbdcopy", "qemu-io")
	dir := t.TempDir()
	arr := &array{name: "readd", level: "5", chunk: testChunk}
	for i := range 4 {
		arr.members = append(arr.members, fmt.Sprintf("%s/m%d.img", dir, i))
	}
	// 64 MiB members: 1008 rows of 64 KiB; a 4 MiB bitmap region is 64 rows.
	mustRaidd(t, append([]string{"create", "--name", arr.name, "--level", "5", "--chunk", testChunk, "--size", memberSize, "--bitmap-region", "4M"}, arr.members...)...)
	const known = 16 << 20
	src, want := writeRandomFile(t, dir, known, 77)
	srv := serve(t, arr.members...)
	uri := srv.uri(arr.name)
	mustRun(t, "nbdcopy", "--flush", src, uri)
	pollUntil(t, 20*time.Second, "the bitmap is cleaned after the writes", func() bool {
		st := srv.recoveryStatus(t, arr.name)
		return st.Bitmap != nil && st.Bitmap.Dirty == 0
	})

	out := mustRaidd(t, "fail", "--control", srv.ctrl, arr.name, arr.members[1])
	assert.Contains(t, out, "marked failed")
	qemuWrite(t, uri, want, 0x5a, 0, 1<<20) // member rows 0-5: bitmap region 0
	time.Sleep(3 * time.Second)             // longer than clean_delay: the cleaner must keep the bit

	out = mustRaidd(t, "add", "--control", srv.ctrl, arr.name, arr.members[1])
	t.Logf("raidd add: %s", strings.TrimSpace(out))
	st := waitRecovery(t, srv, arr.name, nil)
	require.False(t, st.Degraded, "%+v", st.Devices)
	assertActive(t, st, arr.members[1], 1)
	rs := srv.recoveryStatus(t, arr.name)
	require.NotNil(t, rs.LastRecovery)
	assert.Equal(t, "re-add", rs.LastRecovery.Kind)
	assert.Equal(t, int64(64), rs.LastRecovery.Total, "rows resynced: one bitmap region")
	assert.Equal(t, int64(64), rs.LastRecovery.Done)
	assert.Equal(t, int64(976), rs.LastRecovery.ArrayRows, "the write-hole journal's log area (a 32nd of the member: 2 MiB) takes 32 of the 1008 rows")
	e, ok := st.event("member-added")
	if assert.True(t, ok) {
		assert.Contains(t, e.Detail, "re-added")
	}

	mustRaidd(t, "fail", "--control", srv.ctrl, arr.name, arr.members[2])
	got, _ := readExport(t, uri, known)
	assertSameBytes(t, want, got, "served with the re-added member standing in for another")
}

// TestRecoverForceAssembleRAID5: two operator fails on a RAID5 (the
// second needs --force) leave it failed; serve refuses it and names the
// forced assembly; 'serve --force-assemble' starts it, logging which
// member it trusted with its event counter, and every byte written before
// the second fail reads back. The member failed first is then re-added.
func TestRecoverForceAssembleRAID5(t *testing.T) {
	t.Parallel()
	requireTool(t, "nbdcopy", "qemu-io")
	arr := createArray(t, "5", 4, testChunk)
	const known = 8 << 20
	src, want := writeRandomFile(t, t.TempDir(), known, 78)
	srv := serve(t, arr.members...)
	uri := srv.uri(arr.name)
	mustRun(t, "nbdcopy", "--flush", src, uri)
	mustRaidd(t, "fail", "--control", srv.ctrl, arr.name, arr.members[1])
	qemuWrite(t, uri, want, 0xc3, 1<<20, 1<<20) // members 0, 2, 3 only
	out, errOut, code := raidd(t, "fail", "--control", srv.ctrl, arr.name, arr.members[2])
	require.NotEqual(t, 0, code, "a fail that leaves the array FAILED needs --force: %s", out)
	assert.Contains(t, errOut, "--force")
	assert.Contains(t, errOut, "FAILED")
	mustRaidd(t, "fail", "--force", "--control", srv.ctrl, arr.name, arr.members[2])
	require.Equal(t, "failed", srv.status(t, arr.name).State)
	// A re-add online is refused (its resync would need the missing
	// members), and the refusal leaves the member as it was: status still
	// shows its device. The device used to be closed before the refusal,
	// and the failed role showed no path.
	out, errOut, code = raidd(t, "add", "--control", srv.ctrl, arr.name, arr.members[2])
	require.NotEqual(t, 0, code, "re-adding to a FAILED array: %s", out)
	assert.Contains(t, errOut, "cannot be re-added online")
	if d, ok := srv.fullStatus(t, arr.name).device(arr.members[2]); assert.True(t, ok, "status still shows the refused member's device") {
		assert.Equal(t, "failed", d.State)
	}
	srv.stopOK(t)

	refused := startServe(t, arr.members...)
	<-refused.done
	refused.out.flush()
	assert.NotEqual(t, 0, exitCode(refused.err))
	assert.Contains(t, refused.out.String(), "--force-assemble", "the refusal names what works")

	forced := serve(t, append([]string{"--force-assemble"}, arr.members...)...)
	logs := forced.out.String()
	assert.Contains(t, logs, "forced assembly: trusting")
	assert.Regexp(t, `forced assembly: trusting.*path=`+arr.members[2]+`.*events=\d+`, logs)
	st := forced.fullStatus(t, arr.name)
	assert.Equal(t, "degraded", st.State)
	assertActive(t, st, arr.members[2], 2)
	if d, ok := st.device(arr.members[1]); assert.True(t, ok) {
		assert.Equal(t, "stale", d.State, "the member failed first missed a write")
	}
	got, _ := readExport(t, forced.uri(arr.name), known)
	assertSameBytes(t, want, got, "after forced assembly")

	mustRaidd(t, "add", "--control", forced.ctrl, arr.name, arr.members[1])
	st = waitRecovery(t, forced, arr.name, nil)
	require.False(t, st.Degraded)
	rs := forced.recoveryStatus(t, arr.name)
	require.NotNil(t, rs.LastRecovery)
	assert.Equal(t, "re-add", rs.LastRecovery.Kind, "the member failed first is re-added over the bitmap")
	out, _, code = raidd(t, "check", "--control", forced.ctrl, arr.name)
	assert.Equal(t, 0, code, "check after re-add: %s", out)
}

// TestRecoverRAID0MemberError: a RAID0 member truncated under a running
// array fails only the requests that touch it, with EIO; ranges on the
// other members stay readable and the array is not failed. After a
// restart it starts again (by force if the shutdown recorded the member
// as failed) with the data the member kept. A RAID0 whose member is
// recorded as failed ('raidd fail --force' here, deterministically) is
// refused with advice that works, and 'raidd assemble --force' starts it.
func TestRecoverRAID0MemberError(t *testing.T) {
	t.Parallel()
	requireTool(t, "nbdcopy", "qemu-io")
	arr := createArray(t, "0", 3, testChunk)
	const known = 3 << 20
	src, want := writeRandomFile(t, t.TempDir(), known, 79)
	srv := serve(t, arr.members...)
	uri := srv.uri(arr.name)
	mustRun(t, "nbdcopy", "--flush", src, uri)

	fi, err := os.Stat(arr.members[1])
	require.NoError(t, err)
	const header = 1 << 20
	require.NoError(t, os.Truncate(arr.members[1], header+2*chunkBytes)) // member 1 keeps rows 0 and 1
	far := 3 * 10 * chunkBytes                                           // row 10; chunk 31 is on member 1
	out, err := run(t, "qemu-io", "-f", "raw", uri, "-c", fmt.Sprintf("read %d %d", far+chunkBytes, chunkBytes))
	assert.True(t, err != nil || strings.Contains(out, "Input/output error"), "reading the lost range fails: %s", out)
	for _, c := range []int{0, 2, far / chunkBytes} { // chunks on members 0 and 2
		out = mustRun(t, "qemu-io", "-f", "raw", uri, "-c", fmt.Sprintf("read %d %d", c*chunkBytes, chunkBytes))
		assert.NotContains(t, out, "error", "chunk %d lives on a healthy member", c)
	}
	assert.NotEqual(t, "failed", srv.status(t, arr.name).State)
	require.NoError(t, os.Truncate(arr.members[1], fi.Size())) // the device comes back
	srv.stopOK(t)

	// The member that shrank under raidd stays unusable until a restart,
	// and the shutdown may have recorded it as failed when its superblock
	// write failed: then the array starts again only by force.
	out, errOut, code := raidd(t, append([]string{"assemble"}, arr.members...)...)
	if code != 0 {
		assert.Contains(t, errOut, "--force-assemble", "the refusal names what works")
		assert.NotContains(t, errOut, "raidd add", "RAID0 cannot rebuild; the advice must work")
		mustRaidd(t, append([]string{"assemble", "--force"}, arr.members...)...)
	} else {
		t.Logf("raidd assemble: %s", out)
	}
	srv = serve(t, arr.members...)
	got, _ := readExport(t, srv.uri(arr.name), 3*chunkBytes*2)
	assertSameBytes(t, want[:3*chunkBytes*2], got, "rows every member still held, after a restart")
	mustRaidd(t, "fail", "--force", "--control", srv.ctrl, arr.name, "1")
	srv.stopOK(t)

	out, errOut, code = raidd(t, append([]string{"assemble"}, arr.members...)...)
	assert.NotEqual(t, 0, code, "%s", out)
	assert.Contains(t, errOut, "--force-assemble")
	assert.NotContains(t, errOut, "raidd add", "RAID0 cannot rebuild; the advice must work")
	out = mustRaidd(t, append([]string{"assemble", "--force"}, arr.members...)...)
	t.Logf("raidd assemble --force: %s", out)
	srv = serve(t, arr.members...)
	assert.Equal(t, "clean", srv.status(t, arr.name).State)
	got, _ = readExport(t, srv.uri(arr.name), 3*chunkBytes*2)
	assertSameBytes(t, want[:3*chunkBytes*2], got, "after forced assembly")
}

// writtenArray creates an array of level on n members and writes n bytes
// of random data from seed to its start with nbdcopy, flushed, through a
// raidd serve that it then stops. It returns the array and the bytes.
func writtenArray(t *testing.T, level string, members, n int, seed uint64) (*array, []byte) {
	t.Helper()
	requireTool(t, "nbdcopy")
	arr := createArray(t, level, members, testChunk)
	src, want := writeRandomFile(t, t.TempDir(), n, seed)
	srv := serve(t, arr.members...)
	mustRun(t, "nbdcopy", "--flush", src, srv.uri(arr.name))
	srv.stopOK(t)
	return arr, want
}

// TestRecoverWipedHeaderRAID0: a RAID0 member whose first megabyte was
// zeroed (its header: a partitioning tool, a stray dd) keeps the array
// from starting, and RAID0 cannot rebuild it. The refusal names
// restore-header; run as it says, with the role, it writes the header
// back from the other members, and the array serves every byte again.
func TestRecoverWipedHeaderRAID0(t *testing.T) {
	t.Parallel()
	const known = 6 << 20
	arr, want := writtenArray(t, "0", 3, known, 83)

	f, err := os.OpenFile(arr.members[1], os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, 16<<10), 0) // the reserved block, both slots and the in-use block
	require.NoError(t, err)
	require.NoError(t, f.Close())

	_, errOut, code := raidd(t, append([]string{"assemble"}, arr.members...)...)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "raidd restore-header --role N "+arr.members[1])
	_, errOut, code = raidd(t, "restore-header", arr.members[1], arr.members[0], arr.members[2])
	assert.NotEqual(t, 0, code, "a wiped header does not say its role")
	assert.Contains(t, errOut, "roles no member given holds: 1")
	out := mustRaidd(t, "restore-header", "--role", "1", arr.members[1], arr.members[0], arr.members[2])
	assert.Contains(t, out, "header restored as role 1")
	assert.Contains(t, out, "RAID0 keeps no redundancy")

	srv := serve(t, arr.members...)
	assert.Equal(t, "clean", srv.status(t, arr.name).State)
	got, _ := readExport(t, srv.uri(arr.name), known)
	assertSameBytes(t, want, got, "after restore-header")
}

// TestRecoverMissingMemberFile: a RAID1 whose member file was deleted
// starts degraded, and the stale-member flow works: the file is recreated
// and added.
func TestRecoverMissingMemberFile(t *testing.T) {
	t.Parallel()
	const known = 4 << 20
	arr, want := writtenArray(t, "1", 2, known, 80)
	require.NoError(t, os.Remove(arr.members[1]))

	srv := serve(t, arr.members...)
	st := srv.fullStatus(t, arr.name)
	assert.Equal(t, "degraded", st.State)
	got, _ := readExport(t, srv.uri(arr.name), known)
	assertSameBytes(t, want, got, "degraded after its member file was deleted")
	blank := blankMember(t, arr.members[0], "new.img")
	mustRaidd(t, "add", "--control", srv.ctrl, arr.name, blank)
	st = waitRecovery(t, srv, arr.name, nil)
	assert.False(t, st.Degraded)
}

// TestAssembleMissingMember: 'raidd assemble' applies serve's rule to a
// member path that no longer exists (the disk is gone): it counts as
// missing, so a RAID5 that tolerates it would start degraded, rather than
// the command stopping at the path.
func TestAssembleMissingMember(t *testing.T) {
	t.Parallel()
	arr := createArray(t, "5", 3, testChunk)
	require.NoError(t, os.Remove(arr.members[2]))
	for _, force := range []bool{false, true} {
		args := []string{"assemble"}
		if force {
			args = append(args, "--force")
		}
		out, errOut, code := raidd(t, append(args, arr.members...)...)
		require.Equal(t, 0, code, "force=%v: %s%s", force, out, errOut)
		assert.Contains(t, errOut, "member not found; assembling without it")
		assert.Contains(t, out, "degraded")
		assert.Contains(t, out, "device not present")
	}
	out, errOut, code := raidd(t, "assemble", arr.members[2])
	assert.NotEqual(t, 0, code, "%s", out)
	assert.Contains(t, errOut, "none of the members exists")
}
