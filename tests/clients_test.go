package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// levelCase is one array shape used by the client tests.
type levelCase struct {
	level   string
	members int
}

func (c levelCase) String() string { return fmt.Sprintf("raid%s/members=%d", c.level, c.members) }

var clientLevels = []levelCase{{"0", 2}, {"1", 2}, {"5", 4}, {"6", 5}, {"10", 3}}

const (
	testChunk   = "64K"
	chunkBytes  = 64 << 10
	copyDataLen = 24 << 20
)

// nbdInfo is the part of `nbdinfo --json` output the tests check.
type nbdInfo struct {
	Exports []struct {
		Name         string `json:"export-name"`
		Size         int64  `json:"export-size"`
		IsReadOnly   bool   `json:"is_read_only"`
		CanFlush     bool   `json:"can_flush"`
		CanFUA       bool   `json:"can_fua"`
		CanTrim      bool   `json:"can_trim"`
		CanZero      bool   `json:"can_zero"`
		CanMultiConn bool   `json:"can_multi_conn"`
		BlockMin     int64  `json:"block_size_minimum"`
		BlockPref    int64  `json:"block_size_preferred"`
		BlockMax     int64  `json:"block_size_maximum"`
	} `json:"exports"`
}

func runNBDInfo(t *testing.T, uri string) nbdInfo {
	t.Helper()
	out, err := exec.Command("nbdinfo", "--json", uri).Output()
	require.NoError(t, err, "nbdinfo --json %s", uri)
	var info nbdInfo
	require.NoError(t, json.Unmarshal(out, &info), "nbdinfo output:\n%s", out)
	require.Len(t, info.Exports, 1, "nbdinfo output:\n%s", out)
	return info
}

// requireFioNBD skips unless fio has its nbd engine.
func requireFioNBD(t *testing.T) {
	t.Helper()
	requireTool(t, "fio")
	out, err := exec.Command("fio", "--enghelp=nbd").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "uri") {
		t.Skipf("fio has no nbd ioengine (fio --enghelp=nbd: %v): %s", err, strings.TrimSpace(string(out)))
	}
}

// qemuIO runs qemu-io on uri with the given -c commands and requires
// success; qemu-io exits non-zero when a command (e.g. a pattern check) fails.
func qemuIO(t *testing.T, uri string, cmds ...string) string {
	t.Helper()
	args := []string{"-f", "raw", uri}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	out, err := run(t, "qemu-io", args...)
	require.NoError(t, err, "qemu-io %s:\n%s", strings.Join(args, " "), out)
	assert.NotContains(t, out, "Pattern verification failed", "qemu-io output")
	assert.NotRegexp(t, `(?i)\b(error|failed)\b`, out, "qemu-io output")
	return out
}

// clientCase is a shape for TestClients, with members left out: a
// degraded array must serve the clients as a healthy one does.
type clientCase struct {
	levelCase
	missing []int // roles whose member files are deleted before serving
}

func (c clientCase) String() string {
	if len(c.missing) == 0 {
		return c.levelCase.String()
	}
	return fmt.Sprintf("%s/missing=%d", c.levelCase, len(c.missing))
}

// TestClients drives every level with the real NBD clients: nbdinfo,
// nbdcopy, qemu-img, qemu-io and fio's nbd engine; RAID6 also degraded by
// one member and by two.
func TestClients(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "nbdinfo", "nbdcopy", "qemu-img", "qemu-io")
	cases := []clientCase{}
	for _, lc := range clientLevels {
		cases = append(cases, clientCase{levelCase: lc})
	}
	cases = append(cases, clientCase{levelCase{"6", 5}, []int{2}}, clientCase{levelCase{"6", 5}, []int{0, 3}})
	for _, lc := range cases {
		t.Run(lc.String(), func(t *testing.T) {
			t.Parallel()
			arr := createArray(t, lc.level, lc.members, testChunk)
			wantState := "clean"
			for _, m := range lc.missing {
				require.NoError(t, os.Remove(arr.members[m]))
				wantState = "degraded"
			}
			arr.members = slices.DeleteFunc(arr.members, func(p string) bool {
				_, err := os.Stat(p)
				return err != nil
			})
			srv := serve(t, arr.members...)
			uri := srv.uri(arr.name)
			st := srv.status(t, arr.name)
			require.Positive(t, st.Size)
			assert.Equal(t, "raid"+lc.level, normLevel(st.Level))
			assert.Equal(t, int64(chunkBytes), st.Chunk)
			assert.Equal(t, lc.members, st.Members)
			assert.Equal(t, wantState, st.State, "a fresh array is %s before any write", wantState)
			data := t.TempDir()

			t.Run("nbdinfo", func(t *testing.T) {
				e := runNBDInfo(t, uri).Exports[0]
				assert.Equal(t, arr.name, e.Name)
				assert.Equal(t, st.Size, e.Size, "export size = raidd status size")
				assert.False(t, e.IsReadOnly, "is_read_only")
				assert.True(t, e.CanFlush, "can_flush")
				assert.True(t, e.CanFUA, "can_fua")
				assert.True(t, e.CanTrim, "can_trim")
				assert.True(t, e.CanZero, "can_zero")
				assert.True(t, e.CanMultiConn, "can_multi_conn (FLUSH syncs every member)")
				if e.BlockPref > 0 {
					assert.Zero(t, e.BlockPref&(e.BlockPref-1), "preferred block size is a power of two")
					assert.LessOrEqual(t, e.BlockPref, e.BlockMax)
				}
			})

			t.Run("nbdcopy", func(t *testing.T) {
				src, want := writeRandomFile(t, data, copyDataLen, 100)
				mustRun(t, "nbdcopy", "--flush", src, uri)
				read0, spliced0 := srv.nbdBytes(t)
				got, total := readExport(t, uri, copyDataLen)
				assert.Equal(t, st.Size, total, "nbdcopy reads the whole export")
				assertSameBytes(t, want, got, "nbdcopy round trip")
				// The members are files in the page cache: a healthy
				// array's large reads are spliced from them.
				read1, spliced1 := srv.nbdBytes(t)
				assert.LessOrEqual(t, spliced1-spliced0, read1-read0)
				if len(lc.missing) == 0 {
					assert.Positive(t, spliced1-spliced0, "bytes spliced of %d read", read1-read0)
				}
			})

			t.Run("qemu-img", func(t *testing.T) {
				// Same length as the nbdcopy data, so the rest of the
				// export is still the never-written zeroes that
				// qemu-img compare checks for in the larger image.
				src, want := writeRandomFile(t, data, copyDataLen, 200)
				mustRun(t, "qemu-img", "convert", "-n", "-f", "raw", "-O", "raw", src, uri)
				out := mustRun(t, "qemu-img", "compare", "-f", "raw", "-F", "raw", src, uri)
				assert.Contains(t, out, "identical")
				got, _ := readExport(t, uri, copyDataLen)
				assertSameBytes(t, want, got, "qemu-img convert round trip")
			})

			t.Run("qemu-io", func(t *testing.T) {
				// Writes spanning chunk (and stripe) boundaries, checked with
				// their neighbours, plain, FUA (write -f) and after a flush.
				base := int64(32 << 20)
				if base+8<<20 > st.Size {
					base = st.Size - 8<<20
				}
				for _, w := range []struct {
					off, n int64
					fua    bool
				}{
					{12345, 70000, false},
					{chunkBytes - 1, 2, true},
					{3*chunkBytes - 4096, chunkBytes + 8192, false},
					{5*chunkBytes + 511, 4 * chunkBytes, true},
				} {
					off := base + w.off
					wflag := ""
					if w.fua {
						wflag = "-f "
					}
					qemuIO(t, uri,
						fmt.Sprintf("write -P 0x11 %d %d", off-8192, w.n+16384),
						fmt.Sprintf("write %s-P 0xab %d %d", wflag, off, w.n),
						"flush",
						fmt.Sprintf("read -P 0xab %d %d", off, w.n),
						fmt.Sprintf("read -P 0x11 %d 8192", off-8192),
						fmt.Sprintf("read -P 0x11 %d 8192", off+w.n),
					)
					// A new connection (a new qemu-io process) sees the same.
					qemuIO(t, uri,
						fmt.Sprintf("read -P 0x11 %d 8192", off-8192),
						fmt.Sprintf("read -P 0xab %d %d", off, w.n),
						fmt.Sprintf("read -P 0x11 %d 8192", off+w.n),
					)
				}
				// Zeroing and discard through qemu-io.
				qemuIO(t, uri,
					fmt.Sprintf("write -P 0x22 %d %d", base, 3*chunkBytes),
					fmt.Sprintf("write -z %d %d", base+4096, chunkBytes),
					fmt.Sprintf("read -P 0x22 %d 4096", base),
					fmt.Sprintf("read -P 0 %d %d", base+4096, chunkBytes),
					fmt.Sprintf("read -P 0x22 %d %d", base+4096+chunkBytes, 2*chunkBytes-4096),
				)
			})

			t.Run("fio-verify", func(t *testing.T) {
				requireFioNBD(t)
				// Two jobs on disjoint regions (offset_increment = size).
				jobSize := min(int64(32<<20), st.Size/2/(1<<20)*(1<<20))
				out, err := run(t, "fio", "--name=verify", "--ioengine=nbd", "--uri="+uri,
					"--rw=randwrite", "--bs=4k", fmt.Sprintf("--size=%d", jobSize),
					"--numjobs=2", "--iodepth=8", "--verify=crc32c", "--do_verify=1",
					"--verify_fatal=1", fmt.Sprintf("--offset_increment=%d", jobSize),
					"--group_reporting")
				require.NoError(t, err, "fio:\n%s", out)
				assert.NotContains(t, out, "verify: bad")
			})

			st = srv.status(t, arr.name)
			assert.Equal(t, len(lc.missing) > 0, st.Degraded, "state after the clients: %s", st.State)
			assert.False(t, st.Failed, "state after the clients: %s", st.State)
			srv.stopOK(t)
			assertClean(t, arr.members...)

			t.Run("read-only", func(t *testing.T) {
				ro := serve(t, append([]string{"--read-only"}, arr.members...)...)
				rouri := ro.uri(arr.name)
				e := runNBDInfo(t, rouri).Exports[0]
				assert.True(t, e.IsReadOnly, "is_read_only")
				assert.Equal(t, st.Size, e.Size)
				before, _ := readExport(t, rouri, 1<<20)

				src, _ := writeRandomFile(t, data, 1<<20, 300)
				out, err := run(t, "nbdcopy", src, rouri)
				assert.Error(t, err, "nbdcopy to a read-only export must fail:\n%s", out)
				out, err = run(t, "qemu-io", "-f", "raw", rouri, "-c", "write -P 0xcd 0 65536")
				assert.Error(t, err, "qemu-io write to a read-only export must fail:\n%s", out)

				after, _ := readExport(t, rouri, 1<<20)
				assertSameBytes(t, before, after, "data unchanged by refused writes")
				assert.True(t, ro.status(t, arr.name).ReadOnly, "status read_only")
				ro.stopOK(t)
				assertClean(t, arr.members...)
			})
		})
	}
}

// TestServeReportsURI checks that serve prints the NBD URI of each export.
func TestServeReportsURI(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	arr := createArray(t, "1", 2, testChunk)
	srv := serve(t, arr.members...)
	srv.stopOK(t)
	assert.Contains(t, srv.out.String(), srv.uri(arr.name), "serve output names the export's URI")
	_, err := os.Stat(srv.sock)
	assert.True(t, os.IsNotExist(err), "the unix socket is removed on shutdown: %v", err)
}
