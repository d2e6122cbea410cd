package tests

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/stripe"
)

// csumStatus is the part of `raidd status --json` the checksum tests read.
type csumStatus struct {
	Arrays []struct {
		Name      string `json:"name"`
		Checksums *struct {
			Repaired     int64 `json:"repaired_blocks"`
			Lost         int64 `json:"lost_blocks"`
			PagesRebuilt int64 `json:"pages_rebuilt"`
		} `json:"checksums"`
		Devices []memberStatus `json:"members"`
		History []struct {
			Kind   string `json:"kind"`
			Role   int    `json:"role"`
			Detail string `json:"detail"`
		} `json:"history"`
	} `json:"arrays"`
}

func (s *server) csumStatus(t *testing.T) (repaired, lost, pages int64, events map[string][]int, states []string) {
	t.Helper()
	var st csumStatus
	out := statusRaidd(t, "--json", "--control", s.ctrl)
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Len(t, st.Arrays, 1)
	a := st.Arrays[0]
	require.NotNil(t, a.Checksums, "status shows the checksums")
	events = map[string][]int{}
	for _, e := range a.History {
		if strings.HasPrefix(e.Kind, "checksum-") {
			events[e.Kind] = append(events[e.Kind], e.Role)
		}
	}
	for _, d := range a.Devices {
		states = append(states, d.State)
	}
	return a.Checksums.Repaired, a.Checksums.Lost, a.Checksums.PagesRebuilt, events, states
}

// firstCopy returns the member and member offset that a single-block read
// at array offset off is served from first (internal/mirror's firstCopy).
func firstCopy(g stripe.Geometry, off int64) (int, int64) {
	e := g.Extents(nil, off, 1)[0]
	if g.Level() != stripe.RAID1 && g.Level() != stripe.RAID10 {
		return e.Member, e.Off
	}
	locs := g.Copies(nil, e.Chunk, off%g.Chunk())
	start := e.Chunk
	if g.Level() == stripe.RAID10 {
		start /= int64((g.Members() + 1) / 2)
	}
	l := locs[start%int64(len(locs))]
	return l.Member, l.Off
}

// flipByte xors one byte of a member file behind raidd's back.
func flipByte(t *testing.T, path string, off int64, x byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 1)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	b[0] ^= x
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// TestChecksumBitRot flips bytes on disk in a member's data region while
// raidd serves an array created with --checksums, under every level, and
// reads through NBD with qemu-io: the original bytes come back, the repair
// is counted and reported with the member, a second read needs no repair
// and no member is failed. RAID0 has no other copy: the read fails with
// EIO and the event names the block. A flip in the checksum area itself
// (seen after a restart) is detected and never trusted.
func TestChecksumBitRot(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	requireTool(t, "qemu-io")
	for _, lc := range []levelCase{{"0", 3}, {"1", 2}, {"5", 4}, {"6", 5}, {"10", 4}} {
		t.Run(lc.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			name := "c" + lc.level
			var members []string
			for i := range lc.members {
				members = append(members, filepath.Join(dir, fmt.Sprintf("m%d.img", i)))
			}
			mustRaidd(t, append([]string{"create", "--name", name, "--level", lc.level, "--chunk", testChunk, "--size", "16M", "--checksums"}, members...)...)
			var ex []struct {
				DataOffset int64 `json:"data_offset"`
				DataSize   int64 `json:"data_size"`
				Checksums  *struct {
					Offset int64 `json:"offset"`
				} `json:"checksums"`
			}
			out := mustRaidd(t, "examine", "--json", members[0])
			require.NoError(t, json.Unmarshal([]byte(out), &ex), out)
			require.Len(t, ex, 1)
			require.NotNil(t, ex[0].Checksums, "examine shows the checksum area")
			human := mustRaidd(t, "examine", members[0])
			assert.Contains(t, human, "CRC32C per 4KiB block")
			level, err := stripe.ParseLevel(lc.level)
			require.NoError(t, err)
			g, err := stripe.New(level, lc.members, chunkBytes, ex[0].DataSize)
			require.NoError(t, err)

			srv := serve(t, members...)
			uri := srv.uri(name)
			qemuIO(t, uri, "write -P 0xab 0 2M", "flush")

			const off = 3*chunkBytes + 2*4096
			m, mo := firstCopy(g, off)
			flipByte(t, members[m], ex[0].DataOffset+mo+100, 0x5a)
			read := fmt.Sprintf("read -P 0xab %d 4096", off)
			if lc.level == "0" {
				out, _ := run(t, "qemu-io", "-f", "raw", uri, "-c", read)
				assert.Contains(t, out, "Input/output error", "RAID0 has no good copy: EIO")
				_, lost, _, ev, states := srv.csumStatus(t)
				assert.Equal(t, int64(1), lost)
				assert.Equal(t, []int{m}, ev["checksum-lost"])
				for _, s := range states {
					assert.Equal(t, "active", s)
				}
				qemuIO(t, uri, fmt.Sprintf("write -P 0xab %d 4096", off), read) // a rewrite heals it
				srv.stopOK(t)
				return
			}
			qemuIO(t, uri, read)
			repaired, _, _, ev, states := srv.csumStatus(t)
			assert.Equal(t, int64(1), repaired)
			assert.Equal(t, []int{m}, ev["checksum-repaired"])
			for _, s := range states {
				assert.Equal(t, "active", s, "a checksum mismatch never fails a member")
			}
			qemuIO(t, uri, read, "read -P 0xab 0 2M")
			repaired, _, _, _, _ = srv.csumStatus(t)
			assert.Equal(t, int64(1), repaired, "the second read is served without repair")
			srv.stopOK(t)

			// The block's entry in the checksum area.
			b := mo / 4096
			entry := ex[0].Checksums.Offset + b/1023*4096 + (b%1023)*4
			raw, err := os.ReadFile(members[m])
			require.NoError(t, err)
			want := binary.LittleEndian.Uint32(raw[entry:])
			flipByte(t, members[m], entry+1, 0x04)
			srv = serve(t, members...)
			qemuIO(t, srv.uri(name), read)
			repaired, _, pages, ev, _ := srv.csumStatus(t)
			assert.Equal(t, int64(1), pages, "the damaged checksum page is detected")
			assert.Equal(t, []int{m}, ev["checksum-page-rebuilt"])
			assert.Equal(t, int64(1), repaired, "its damaged entry is not trusted: the block is rebuilt")
			srv.stopOK(t)
			raw, err = os.ReadFile(members[m])
			require.NoError(t, err)
			assert.Equal(t, want, binary.LittleEndian.Uint32(raw[entry:]), "the entry is rewritten")
		})
	}
}
