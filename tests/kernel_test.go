package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// kernelNBD returns a free /dev/nbdX, or skips with the reason the kernel
// client cannot be used here.
func kernelNBD(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kernel nbd module not available: attaching /dev/nbdX needs root")
	}
	if _, err := os.Stat("/dev/nbd0"); err != nil {
		out, merr := exec.Command("modprobe", "nbd").CombinedOutput()
		if merr != nil {
			t.Skipf("kernel nbd module not available: /dev/nbd0 missing and `modprobe nbd` failed: %v %s", merr, strings.TrimSpace(string(out)))
		}
		for i := 0; i < 20; i++ {
			if _, err = os.Stat("/dev/nbd0"); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Skipf("kernel nbd module not available: `modprobe nbd` succeeded but /dev/nbd0 is missing: %v", err)
		}
	}
	for i := 0; i < 16; i++ {
		dev := fmt.Sprintf("/dev/nbd%d", i)
		if _, err := os.Stat(dev); err != nil {
			break
		}
		// A connected device has a pid file in sysfs.
		if _, err := os.Stat(fmt.Sprintf("/sys/block/nbd%d/pid", i)); os.IsNotExist(err) {
			return dev
		}
	}
	t.Skip("kernel nbd module loaded but every /dev/nbdX is in use")
	return ""
}

// TestKernelClient attaches an array with nbd-client and does a dd round
// trip through /dev/nbdX. Without the kernel module it skips.
func TestKernelClient(t *testing.T) {
	dev := kernelNBD(t)
	requireBinary(t)
	requireTool(t, "nbd-client", "dd")
	arr := createArray(t, "5", 4, testChunk)
	srv := serve(t, arr.members...)

	out, err := exec.Command("nbd-client", "-unix", srv.sock, dev, "-N", arr.name).CombinedOutput()
	require.NoError(t, err, "nbd-client: %s", out)
	t.Cleanup(func() {
		if out, err := exec.Command("nbd-client", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("nbd-client -d %s: %v: %s", dev, err, out)
		}
	})

	dir := t.TempDir()
	src, want := writeRandomFile(t, dir, 4<<20, 600)
	mustRun(t, "dd", "if="+src, "of="+dev, "bs=1M", "oflag=direct", "conv=fsync")
	back := filepath.Join(dir, "back.bin")
	mustRun(t, "dd", "if="+dev, "of="+back, "bs=1M", "count=4", "iflag=direct")
	got, err := os.ReadFile(back)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "dd round trip through %s", dev)
}
