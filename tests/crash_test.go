package tests

import (
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member/membertest"
)

// TestCrashDuringWrites kills raidd with SIGKILL while fio writes to one
// region: the members must record the array as dirty, data flushed before
// the crash must read back after the next start, any resync must finish,
// and an orderly stop must leave the array clean again.
func TestCrashDuringWrites(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "nbdcopy")
	requireFioNBD(t)
	type crashCase struct {
		levelCase
		tmpfs bool // members on tmpfs: written through a mapping
	}
	for _, lc := range []crashCase{{levelCase{"0", 2}, false}, {levelCase{"1", 2}, false}, {levelCase{"5", 4}, false}, {levelCase{"10", 4}, false}, {levelCase{"5", 4}, true}} {
		name := lc.String()
		if lc.tmpfs {
			name += "/tmpfs"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if lc.tmpfs {
				dir = membertest.TmpfsDir(t)
			}
			arr := createArrayIn(t, dir, lc.level, lc.members, testChunk)
			srv := serve(t, arr.members...)
			uri := srv.uri(arr.name)
			src, want := writeRandomFile(t, t.TempDir(), 16<<20, 700)
			mustRun(t, "nbdcopy", "--flush", src, uri)

			// Keep writing [32M, 48M) until the crash.
			fio := exec.Command("fio", "--name=crash", "--ioengine=nbd", "--uri="+uri,
				"--rw=randwrite", "--bs=4k", "--iodepth=8", "--offset=32M", "--size=16M",
				"--time_based", "--runtime=30")
			require.NoError(t, fio.Start())
			fioDone := make(chan error, 1)
			go func() { fioDone <- fio.Wait() }()
			t.Cleanup(func() {
				_ = fio.Process.Kill()
				<-fioDone
			})
			require.Eventually(t, func() bool {
				return srv.status(t, arr.name).State == "dirty"
			}, 10*time.Second, 50*time.Millisecond, "the array is dirty while fio writes")
			time.Sleep(200 * time.Millisecond)
			srv.kill()
			select {
			case err := <-fioDone:
				fioDone <- err
				t.Logf("fio after the crash: %v", err)
			case <-time.After(10 * time.Second):
				t.Log("fio did not notice the crash within 10 s; killing it")
			}

			for i, s := range examineStates(t, arr.members...) {
				assert.Equal(t, "dirty", s, "superblock of %s after a crash during writes", arr.members[i])
			}

			srv = serve(t, arr.members...)
			got, _ := readExport(t, srv.uri(arr.name), len(want))
			assertSameBytes(t, want, got, "data flushed before the crash")
			var st arrayStatus
			require.Eventually(t, func() bool {
				st = srv.status(t, arr.name)
				return st.Resync == nil
			}, 30*time.Second, 100*time.Millisecond, "resync finishes")
			assert.False(t, st.Degraded || st.Failed, "state after the crash: %s", st.State)
			srv.stopOK(t)
			assertClean(t, arr.members...)
		})
	}
}
