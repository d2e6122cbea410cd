package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dataOffset returns the data offset `raidd examine --json` reports for a
// member.
func dataOffset(t testing.TB, member string) int64 {
	t.Helper()
	out := mustRaidd(t, "examine", "--json", member)
	var one struct {
		DataOffset int64 `json:"data_offset"`
	}
	var many []struct {
		DataOffset int64 `json:"data_offset"`
	}
	if err := json.Unmarshal([]byte(out), &many); err == nil && len(many) == 1 {
		one.DataOffset = many[0].DataOffset
	} else {
		require.NoError(t, json.Unmarshal([]byte(out), &one), "raidd examine --json:\n%s", out)
	}
	require.Positive(t, one.DataOffset, "raidd examine --json:\n%s", out)
	return one.DataOffset
}

// flipOnDisk inverts n bytes of a member file at offset off of its data
// region, behind raidd's back, as bit rot would.
func flipOnDisk(t testing.TB, member string, off int64, n int) {
	t.Helper()
	f, err := os.OpenFile(member, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	off += dataOffset(t, member)
	b := make([]byte, n)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	for i := range b {
		b[i] ^= 0xff
	}
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
}

// TestScrubRepairsFlippedBytes: with the real binary and clients, bytes
// flipped on disk in members of a RAID6 (data, P or Q: whatever the member
// holds in that row), in RAID5 parity chunks and in a RAID1 are found by
// `raidd check`, which
// exits 1 and names the member and offset of each; `raidd check --repair`
// rewrites them and exits 0; a second check is consistent, and the export
// reads back what was written.
func TestScrubRepairsFlippedBytes(t *testing.T) {
	t.Parallel()
	requireTool(t, "nbdcopy")
	const chunk = 64 << 10
	type flip struct {
		role int
		off  int64
		n    int
	}
	for _, c := range []struct {
		level string
		n     int
		flips []flip
		rule  string // how the report says the wrong chunk was chosen
	}{
		// Rows 3 and 10 of the last member; row 20 of the second.
		{"6", 5, []flip{{4, 3*chunk + 100, 5}, {4, 10*chunk + 7, 1}, {1, 20*chunk + chunk - 16, 16}}, "located by the syndromes"},
		{"1", 2, []flip{{1, 3*chunk + 100, 5}, {1, 10*chunk + 7, 1}, {1, 20*chunk + chunk - 16, 16}}, "first readable copy (role 0) wins"},
		// Parity chunks: role 3 holds row r's parity when r%4 == 0, role 1
		// when r%4 == 2 (left-symmetric).
		{"5", 4, []flip{{3, 4*chunk + 100, 5}, {3, 8*chunk + 7, 1}, {1, 10*chunk + chunk - 16, 16}}, "RAID5 cannot tell which chunk is wrong"},
	} {
		t.Run("raid"+c.level, func(t *testing.T) {
			arr := createArray(t, c.level, c.n, testChunk)
			const known = 8 << 20
			src, want := writeRandomFile(t, t.TempDir(), known, 91)
			srv := serve(t, arr.members...)
			uri := srv.uri(arr.name)
			mustRun(t, "nbdcopy", "--flush", src, uri)

			flips := c.flips
			for _, f := range flips {
				flipOnDisk(t, arr.members[f.role], f.off, f.n)
			}

			out, errOut, code := raidd(t, "check", "--control", srv.ctrl, arr.name)
			require.Equal(t, 1, code, "mismatches without --repair exit 1:\n%s%s", out, errOut)
			assert.Contains(t, out, "INCONSISTENT")
			assert.Regexp(t, `3 of \d+ rows inconsistent \(3 mismatches`, out)
			for _, f := range flips {
				assert.Contains(t, out, fmt.Sprintf("row %d: role %d (", f.off/chunk, f.role))
				assert.Contains(t, out, fmt.Sprintf("wrong from data-region offset %d (device offset %d)", f.off, f.off+dataOffset(t, arr.members[f.role])))
			}
			assert.Contains(t, out, c.rule)

			out, errOut, code = raidd(t, "check", "--repair", "--control", srv.ctrl, arr.name)
			require.Equal(t, 0, code, "a repair that fixed everything exits 0:\n%s%s", out, errOut)
			assert.Contains(t, out, "REPAIRED")
			assert.Contains(t, out, "3 mismatches, 3 repaired")

			out, errOut, code = raidd(t, "check", "--control", srv.ctrl, arr.name)
			require.Equal(t, 0, code, "%s%s", out, errOut)
			assert.Contains(t, out, ": consistent")

			got, _ := readExport(t, uri, known)
			assertSameBytes(t, want, got, "after the repair")
			st := statusRaidd(t, "--control", srv.ctrl)
			assert.Contains(t, st, "last scrub: check finished")
			srv.stopOK(t)
		})
	}
}
