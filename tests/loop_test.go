package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// attachLoop attaches file to a free loop device and detaches it in
// t.Cleanup. It skips the test when loop devices are not usable here.
func attachLoop(t *testing.T, file string) string {
	t.Helper()
	out, err := exec.Command("losetup", "--find", "--show", file).CombinedOutput()
	if err != nil {
		t.Skipf("loop devices not usable here (losetup --find --show: %v): %s", err, strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	require.True(t, strings.HasPrefix(dev, "/dev/loop"), "losetup printed %q", dev)
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup --detach %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

// TestLoopDevices builds a RAID5 on four loop devices and a RAID6 on five
// (block-device members) and round-trips data through nbdcopy; the RAID6
// also serves it with two of its loop devices left out.
func TestLoopDevices(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "losetup", "nbdcopy")
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	for _, lc := range []levelCase{{"5", 4}, {"6", 5}} {
		t.Run(lc.String(), func(t *testing.T) {
			t.Parallel()
			testLoopDevices(t, lc)
		})
	}
}

func testLoopDevices(t *testing.T, lc levelCase) {
	name := "loop" + lc.level
	dir := t.TempDir()
	var devs []string
	for i := range lc.members {
		f := filepath.Join(dir, fmt.Sprintf("loop%d.img", i))
		require.NoError(t, os.WriteFile(f, nil, 0o600))
		require.NoError(t, os.Truncate(f, 64<<20))
		devs = append(devs, attachLoop(t, f))
	}
	out := mustRaidd(t, append([]string{"create", "--name", name, "--level", lc.level, "--chunk", testChunk}, devs...)...)
	t.Logf("raidd create: %s", strings.TrimSpace(out))

	srv := serve(t, devs...)
	uri := srv.uri(name)
	st := srv.status(t, name)
	assert.Equal(t, "clean", st.State)
	assert.Equal(t, "raid"+lc.level, normLevel(st.Level))
	paths := map[string]bool{}
	for _, d := range st.Devices {
		paths[d.Path] = true
	}
	for _, d := range devs {
		assert.True(t, paths[d], "status lists member %s: %+v", d, st.Devices)
	}

	src, want := writeRandomFile(t, dir, 16<<20, 500)
	mustRun(t, "nbdcopy", "--flush", src, uri)
	got, total := readExport(t, uri, len(want))
	assert.Equal(t, st.Size, total)
	assertSameBytes(t, want, got, "nbdcopy round trip on loop devices")
	srv.stopOK(t)
	assertClean(t, devs...)

	// The data is on the block devices: serve again and read it back.
	srv = serve(t, devs...)
	got, _ = readExport(t, srv.uri(name), len(want))
	assertSameBytes(t, want, got, "after restart")
	srv.stopOK(t)

	if lc.level == "6" {
		// Two loop devices left out: read-only, reconstructed from P and Q.
		srv = serve(t, "--read-only", devs[0], devs[2], devs[4])
		fs := srv.status(t, name)
		assert.Equal(t, "degraded", fs.State)
		got, _ = readExport(t, srv.uri(name), len(want))
		assertSameBytes(t, want, got, "with two loop devices left out")
		srv.stopOK(t)
	}
}

// TestShrunkLoopMemberComesBackInFull: a loop device member shrinks while
// served (its backing file truncated, then 'losetup -c'): raidd fails it
// and serves from parity. Grown back and added again, it must be rebuilt
// in full: its tail was destroyed. The record that says so goes onto its
// own superblock, which used to be written for regular files only (a
// block device's fstat size is 0), so the add re-added it with a resync
// of the regions written since, trusted the zeroed tail, and the export
// then read back wrong bytes with the member serving.
func TestShrunkLoopMemberComesBackInFull(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "losetup", "nbdcopy", "truncate")
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	const name = "loopshrink"
	dir := t.TempDir()
	var devs, files []string
	for i := range 4 {
		f := filepath.Join(dir, fmt.Sprintf("loop%d.img", i))
		require.NoError(t, os.WriteFile(f, nil, 0o600))
		require.NoError(t, os.Truncate(f, 64<<20))
		files = append(files, f)
		devs = append(devs, attachLoop(t, f))
	}
	mustRaidd(t, append([]string{"create", "--name", name, "--level", "5", "--chunk", testChunk, "--bitmap-region", "4M"}, devs...)...)
	srv := serve(t, devs...)
	uri := srv.uri(name)
	st := srv.status(t, name)
	src, want := writeRandomFile(t, dir, int(st.Size), 501)
	mustRun(t, "nbdcopy", "--flush", src, uri)
	pollUntil(t, 20*time.Second, "the bitmap is cleaned after the writes", func() bool {
		rs := srv.recoveryStatus(t, name)
		return rs.Bitmap != nil && rs.Bitmap.Dirty == 0
	})

	mustRun(t, "truncate", "-s", "32M", files[1])
	mustRun(t, "losetup", "-c", devs[1])
	got, _ := readExport(t, uri, len(want)) // meets the short member and fails it
	assertSameBytes(t, want, got, "served from parity while the member is short")
	failed := false
	for _, d := range srv.status(t, name).Devices {
		failed = failed || (d.Path == devs[1] && d.State == "failed")
	}
	require.True(t, failed, "the shrunk loop member is failed")

	mustRun(t, "truncate", "-s", "64M", files[1])
	mustRun(t, "losetup", "-c", devs[1])
	mustRaidd(t, "remove", "--control", srv.ctrl, name, devs[1])
	mustRaidd(t, "add", "--control", srv.ctrl, name, devs[1])
	fin := waitRecovery(t, srv, name, nil)
	require.False(t, fin.Degraded, "%+v", fin.Devices)
	rs := srv.recoveryStatus(t, name)
	require.NotNil(t, rs.LastRecovery)
	assert.Equal(t, "rebuild", rs.LastRecovery.Kind, "a full rebuild, not a re-add")
	mustRaidd(t, "fail", "--control", srv.ctrl, name, devs[2])
	got, _ = readExport(t, uri, len(want))
	assertSameBytes(t, want, got, "the rebuilt loop member serving for a lost one")
	srv.stopOK(t)
}
