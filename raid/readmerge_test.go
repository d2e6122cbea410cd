package raid_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// TestParityReadOneRequestPerRun: a healthy parity array reads each
// member's back-to-back data chunks of one client read with one request
// (a member's data run across rows, its parity skipped), for RAID5 and
// RAID6 alike. On RAID6×4 with 64 KiB chunks a member's data lies in 2
// consecutive rows of every 4, so a 1 MiB read (8 rows) costs members 0,
// 1 and 3 two requests of 128 KiB each; member 2's run of rows 3–4
// crosses the 4-row boundary where the read starts and ends, so it costs
// 3 (rows 0, 3–4 and 7). That third request is what held RAID6×4
// sequential 1 MiB reads at 0.84 of the ideal on bench/disks.sh's
// 1000-IOPS disks (bench/README.md, "disks.sh: RAID6 sequential reads")
// until a direct member merged it with the next request's adjacent read
// (internal/member's read queue).
func TestParityReadOneRequestPerRun(t *testing.T) {
	const chunk = 64 << 10
	const rows = 32
	for _, lv := range []struct {
		level   stripe.Level
		members int
	}{{stripe.RAID5, 4}, {stripe.RAID6, 4}, {stripe.RAID6, 5}} {
		t.Run(fmt.Sprintf("%s/members=%d", lv.level, lv.members), func(t *testing.T) {
			devs, ctrs := countedMembers(lv.level, lv.members, chunk, rows)
			a := createArray(t, devs, raid.CreateOptions{Name: "rm", Level: lv.level, Chunk: chunk}, raid.Options{CleanDelay: -1})
			g := a.Geometry()
			dk := int64(g.DataMembers())
			p := make([]byte, 1<<20)
			for _, off := range []int64{0, 1 << 20, 3 * chunk, 5*chunk + 4096} {
				if off+int64(len(p)) > a.Size() {
					continue
				}
				// want[m]: the runs of member m's chunks in the read, each
				// contiguous on the member.
				want := make([]int64, lv.members)
				next := make([]int64, lv.members) // member offset where m's last run ends
				for i := range next {
					next[i] = -1
				}
				for c := off / chunk; c*chunk < off+int64(len(p)); c++ {
					row, idx := c/dk, int(c%dk)
					m := g.DataMember(row, idx)
					lo := row*chunk + max(off-c*chunk, 0)
					hi := row*chunk + min(off+int64(len(p))-c*chunk, chunk)
					if lo != next[m] {
						want[m]++
					}
					next[m] = hi
				}
				for _, c := range ctrs {
					c.reads.Store(0)
				}
				_, err := a.ReadAt(p, off)
				require.NoError(t, err)
				got := make([]int64, lv.members)
				for i, c := range ctrs {
					got[i] = c.reads.Load()
				}
				assert.Equal(t, want, got, "member requests of a 1 MiB read at %d", off)
				if lv.level == stripe.RAID6 && lv.members == 4 && off%(1<<20) == 0 {
					assert.Equal(t, []int64{2, 2, 3, 2}, got, "RAID6×4, 1 MiB at %d", off)
				}
			}
		})
	}
}
