package tests

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member/membertest"
)

// TestStreamedWrites: on arrays whose members are all held in memory
// (tmpfs), large WRITEs run on the NBD reader and are copied into the
// array while their payload arrives (nbd/payload.go); on RAID5, those that
// hold two whole stripes (raid.Array.WritesInlineAt), whose pieces pass
// through the stripe cache where they do not fill a stripe. Real clients' data
// must round-trip byte for byte, through nbdcopy's 256 KiB requests and
// fio's verified 1 MiB writes, and raidd status must show that the
// streamed path wrote them. On RAID0, where each byte has one place on one
// member, most of them are received straight into the members' pages
// (raid.Array.ReceiveAt); on RAID5 those of whole stripes, whose parity is
// then computed in the members' memory; the mirrors, which write a byte
// twice, never are.
func TestStreamedWrites(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "nbdcopy")
	for _, lc := range []levelCase{{"0", 4}, {"10", 4}, {"1", 2}, {"5", 4}} {
		t.Run(lc.String(), func(t *testing.T) {
			t.Parallel()
			arr := createArrayIn(t, membertest.TmpfsDir(t), lc.level, lc.members, testChunk)
			srv := serve(t, arr.members...)
			uri := srv.uri(arr.name)

			src, want := writeRandomFile(t, t.TempDir(), copyDataLen, 900)
			mustRun(t, "nbdcopy", "--flush", "--request-size=1048576", src, uri)
			got, _ := readExport(t, uri, copyDataLen)
			assertSameBytes(t, want, got, "nbdcopy round trip")
			c := srv.nbdCounters(t)
			written, streamed := c.Written, c.Streamed
			assert.GreaterOrEqual(t, written, int64(copyDataLen))
			assert.Positive(t, streamed, "bytes written while they arrived, of %d", written)
			assert.LessOrEqual(t, streamed, written)
			switch lc.level {
			case "0", "5":
				// nbdcopy's requests arrive behind their headers in the
				// reader's buffer partly; the rest is received in place
				// (on RAID5, the whole stripes; their pieces of partial
				// stripes go to the stripe cache).
				assert.Greater(t, c.Received, written/2, "bytes received into the members, of %d", written)
				assert.LessOrEqual(t, c.Received, streamed)
			default:
				assert.Zero(t, c.Received, "mirrors never receive in place")
			}

			t.Run("fio-verify", func(t *testing.T) {
				requireFioNBD(t)
				out, err := run(t, "fio", "--name=seq", "--ioengine=nbd", "--uri="+uri,
					"--rw=write", "--bs=1M", "--iodepth=8", fmt.Sprintf("--offset=%d", copyDataLen), "--size=16M",
					"--verify=crc32c", "--do_verify=1", "--verify_fatal=1")
				require.NoError(t, err, "fio:\n%s", out)
				// The nbdcopy data below is untouched.
				got, _ := readExport(t, uri, copyDataLen)
				assertSameBytes(t, want, got, "after fio's writes above it")
			})
		})
	}
}
