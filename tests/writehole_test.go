package tests

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWriteHoleAfterCrash: a dirty RAID5 that comes back degraded starts
// and serves what was flushed. raidd is killed (SIGKILL) while fio writes
// 4 KiB at the start of every row of a region (partial-stripe writes, each
// journaled), one member is lost, and the array is served from the other
// three: the dirty degraded array starts (md would refuse it), the
// write-hole journal replays the records of its newest epoch, and every
// byte fio never wrote reads back what was flushed before the crash,
// including the chunks rebuilt from parity for the lost member. (A SIGKILL
// leaves the writes raidd had handed to the kernel intact, so few rows
// are really torn here; the power cuts that tear them are simulated in
// raid/crash_test.go, TestCrashWriteHole.)
func TestWriteHoleAfterCrash(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "nbdcopy")
	requireFioNBD(t)
	arr := createArray(t, "5", 4, testChunk)
	srv := serve(t, arr.members...)
	uri := srv.uri(arr.name)
	// 64 KiB chunks on 4 members: a row holds 192 KiB of data. The hot
	// region starts at the first row boundary at or after 32 MiB (32 MiB
	// itself is 128 KiB into a row: fio's writes there went to the third
	// chunk of every row, which the check below took for untouched bytes).
	const region, stride = 48 << 20, 192 << 10
	const hot = (32<<20 + stride - 1) / stride * stride
	src, want := writeRandomFile(t, t.TempDir(), region, 711)
	mustRun(t, "nbdcopy", "--flush", src, uri)
	st := srv.status(t, arr.name)
	require.Equal(t, "ppl", st.ConsistencyPolicy, "RAID5's default consistency policy")

	// 4 KiB at the start of every row of [hot, 48M), over and over.
	fio := exec.Command("fio", "--name=hole", "--ioengine=nbd", "--uri="+uri,
		"--rw=write", "--bs=4k", "--iodepth=8", fmt.Sprintf("--offset=%d", hot), fmt.Sprintf("--size=%d", region-hot),
		"--zonemode=strided", "--zonesize=4k", "--zoneskip=188k",
		"--time_based", "--runtime=30")
	require.NoError(t, fio.Start())
	fioDone := make(chan error, 1)
	go func() { fioDone <- fio.Wait() }()
	t.Cleanup(func() {
		_ = fio.Process.Kill()
		<-fioDone
	})
	// Kill it as soon as partial-stripe writes are being journaled (fio's
	// pass over the zones is short, and the array turns clean 2 s after
	// the last write).
	require.Eventually(t, func() bool {
		st = srv.status(t, arr.name)
		return st.State == "dirty" && st.Journal != nil && st.Journal.Records > 0
	}, 10*time.Second, 5*time.Millisecond, "fio's partial-stripe writes are journaled")
	t.Logf("before the crash: %d partial-stripe rows journaled, %d checkpoints", st.Journal.Records, st.Journal.Checkpoints)
	srv.kill()
	select {
	case <-fioDone:
		fioDone <- nil
	case <-time.After(10 * time.Second):
		t.Log("fio did not notice the crash within 10 s; killing it")
	}
	for i, s := range examineStates(t, arr.members...) {
		assert.Equal(t, "dirty", s, "superblock of %s after the crash", arr.members[i])
	}

	// The member holding role 1 is lost with the crash.
	require.NoError(t, os.Rename(arr.members[1], arr.members[1]+".lost"))
	srv = serve(t, arr.members[0], arr.members[2], arr.members[3])
	st = srv.status(t, arr.name)
	require.True(t, st.Degraded, "a member is missing: %+v", st)
	// (How many records the logs of the surviving members held depends on
	// when the last checkpoint ran; the bytes below are what matters.)
	if st.Journal != nil {
		t.Logf("after the crash: %d records replayed", st.Journal.Replayed)
	}
	got, _ := readExport(t, srv.uri(arr.name), region)
	untouched, bad := 0, 0
	for off := 0; off < region; off += stride {
		from, end := off, min(off+stride, region)
		if off >= hot {
			from = off + 4096 // fio wrote only the first 4 KiB of this row
		}
		if string(got[from:end]) != string(want[from:end]) {
			if bad == 0 {
				t.Errorf("bytes [%d, %d), which no write touched after the flush, read back differently", from, end)
			}
			bad++
		}
		untouched++
	}
	assert.Zero(t, bad, "of %d stretches that no write touched after the flush", untouched)
	srv.stopOK(t)
}
