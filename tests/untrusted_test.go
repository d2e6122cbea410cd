package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// promptly is how long a command given a FIFO may take to refuse it. open(2)
// of a FIFO blocks until a writer appears, so a command that opens it hangs
// until this runs out.
const promptly = 10 * time.Second

// raiddWithin runs the binary like raidd, but kills it after limit and
// reports whether it finished in time.
func raiddWithin(t *testing.T, limit time.Duration, args ...string) (out string, code int, inTime bool) {
	t.Helper()
	requireBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, raiddBin, args...)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), exitCode(err), ctx.Err() == nil
}

// TestFIFOMember gives a FIFO to add, serve and examine. Each must refuse it
// at once, naming the path and its type, and a daemon that was asked to add
// one must still stop promptly on SIGTERM.
func TestFIFOMember(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, unix.Mkfifo(fifo, 0o600))
	refused := func(t *testing.T, what, out string, code int, inTime bool) {
		t.Helper()
		require.True(t, inTime, "%s with a FIFO did not finish within %v: %s", what, promptly, out)
		assert.NotEqual(t, 0, code, "%s with a FIFO must fail: %s", what, out)
		assert.Contains(t, out, fifo, "%s: the error names the path", what)
		assert.Contains(t, out, "FIFO", "%s: the error names the file type", what)
	}

	t.Run("add", func(t *testing.T) {
		arr := createArray(t, "1", 2, "64K")
		srv := serve(t, arr.members...)
		out, code, inTime := raiddWithin(t, promptly, "add", "--control", srv.ctrl, arr.name, fifo)
		refused(t, "raidd add", out, code, inTime)
		assert.Equal(t, "clean", srv.status(t, arr.name).State, "the array is unaffected")
		start := time.Now()
		srv.stopOK(t)
		assert.Less(t, time.Since(start), promptly, "SIGTERM after a refused add")
	})
	t.Run("serve", func(t *testing.T) {
		arr := createArray(t, "1", 2, "64K")
		dir := shortTempDir(t)
		out, code, inTime := raiddWithin(t, promptly, "serve", "--listen", "unix:"+filepath.Join(dir, "nbd.sock"),
			"--control", filepath.Join(dir, "ctl.sock"), "--name", arr.name, arr.members[0], fifo)
		refused(t, "raidd serve", out, code, inTime)
	})
	t.Run("examine", func(t *testing.T) {
		out, code, inTime := raiddWithin(t, promptly, "examine", fifo)
		refused(t, "raidd examine", out, code, inTime)
	})
}

// TestLoopDeviceAlias serves an array, then tries to serve it a second time
// through loop devices over the same member files: raidd's flock on a
// member path does not cover a loop device over it. The second serve must
// refuse, naming the holder, while the first keeps serving. In the "marker"
// case the member files are also unlinked, so the loop devices' backing
// files cannot be opened and locked; the in-use block in the members'
// headers must then catch it.
func TestLoopDeviceAlias(t *testing.T) {
	t.Parallel()
	requireTool(t, "losetup")
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root")
	}
	for _, unlink := range []bool{false, true} {
		name := "flock"
		if unlink {
			name = "marker"
		}
		t.Run(name, func(t *testing.T) {
			arr := createArray(t, "1", 2, "64K")
			srv := serve(t, arr.members...)
			var loops []string
			for _, m := range arr.members {
				loops = append(loops, attachLoop(t, m))
			}
			if unlink {
				for _, m := range arr.members {
					require.NoError(t, os.Remove(m))
				}
			}
			dir := shortTempDir(t)
			out, code, inTime := raiddWithin(t, promptly, append([]string{"serve", "--strict",
				"--listen", "unix:" + filepath.Join(dir, "nbd.sock"), "--control", filepath.Join(dir, "ctl.sock")}, loops...)...)
			require.True(t, inTime, "a second serve through loop devices started serving: %s", out)
			assert.NotEqual(t, 0, code, "a second serve through loop devices must fail: %s", out)
			assert.Contains(t, out, "in use", out)
			if unlink {
				assert.Contains(t, out, fmt.Sprintf("raidd pid %d", srv.cmd.Process.Pid), "the message names the holder: %s", out)
				assert.Contains(t, out, "stop it first", out)
			} else {
				assert.Contains(t, out, "loop device over "+arr.members[0], out)
			}
			assert.Equal(t, "clean", srv.status(t, arr.name).State, "the first serve is unaffected")
			srv.stopOK(t)
			if unlink {
				return
			}
			// The other way round: held through the loop devices, the
			// files themselves are refused.
			lsrv := serve(t, loops...)
			out, code, inTime = raiddWithin(t, promptly, append([]string{"serve", "--strict",
				"--listen", "unix:" + filepath.Join(dir, "nbd2.sock"), "--control", filepath.Join(dir, "ctl2.sock")}, arr.members...)...)
			require.True(t, inTime, "serving the files of an array served through loop devices started: %s", out)
			assert.NotEqual(t, 0, code, out)
			assert.Contains(t, out, fmt.Sprintf("in use by raidd pid %d", lsrv.cmd.Process.Pid), "the message names the holder: %s", out)
			lsrv.stopOK(t)
		})
	}
}
