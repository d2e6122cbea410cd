package raid_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// countingMember counts the reads and writes that reach a member's data
// region (from dataOff on) and their bytes.
type countingMember struct {
	raid.Member
	dataOff               int64
	reads, writes         atomic.Int64
	readBytes, writeBytes atomic.Int64
}

func (c *countingMember) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.dataOff {
		c.reads.Add(1)
		c.readBytes.Add(int64(len(p)))
	}
	return c.Member.ReadAt(p, off)
}

func (c *countingMember) WriteAt(p []byte, off int64) (int, error) {
	if off >= c.dataOff {
		c.writes.Add(1)
		c.writeBytes.Add(int64(len(p)))
	}
	return c.Member.WriteAt(p, off)
}

func (c *countingMember) reset() {
	c.reads.Store(0)
	c.writes.Store(0)
	c.readBytes.Store(0)
	c.writeBytes.Store(0)
}

// TestJobsReadManyRowsPerRequest: a scrub, a rebuild and a replace read
// (and write) each member in requests of many rows (a job window of 1 MiB
// per member), not one chunk per row: every row's data is read or written
// once, in at most a few requests per window. Before windows, each of the
// rows cost one request per member (TestJobsReadManyRowsPerRequest saw
// 256 reads per member where it now allows 8).
func TestJobsReadManyRowsPerRequest(t *testing.T) {
	const chunk = 16 << 10
	const rows = 256 // 4 windows of 64 rows (1 MiB / 16 KiB)
	const maxReqs = 2 * rows * chunk / (1 << 20)
	for _, c := range []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID1, 2}, {stripe.RAID5, 4}, {stripe.RAID6, 5}} {
		t.Run(fmt.Sprintf("%s/members=%d", c.level, c.n), func(t *testing.T) {
			cms, devs := countingDevs(c.level, c.n, c.n+2, chunk, rows)
			// No rate limit: every window is whole.
			opts := raid.Options{CleanDelay: -1, RebuildMinRate: 1 << 40, ProgressInterval: time.Hour}
			a := createArray(t, devs[:c.n], raid.CreateOptions{Name: "win", Level: c.level, Chunk: chunk}, opts)
			want := fill(t, a, 77)
			require.NoError(t, a.Sync())

			for _, cm := range cms {
				cm.reset()
			}
			s, err := a.StartScrub(false)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := s.Wait(ctx)
			require.NoError(t, err)
			require.EqualValues(t, rows, res.Verified, "%s", res)
			for i, cm := range cms[:c.n] {
				assert.EqualValues(t, rows*chunk, cm.readBytes.Load(), "scrub: member %d's rows are each read once", i)
				assert.LessOrEqual(t, cm.reads.Load(), int64(maxReqs), "scrub: member %d read in windows, not row by row", i)
			}

			// A rebuild onto a fresh member: the survivors it reads, and the
			// new member, see a few large requests.
			for _, cm := range cms {
				cm.reset()
			}
			require.NoError(t, a.FailMember("mem0"))
			require.NoError(t, a.AddMember(devs[c.n], false))
			st := waitIdle(t, a)
			require.False(t, st.Degraded, "%+v", st.Devices)
			target := cms[c.n]
			assert.EqualValues(t, rows*chunk, target.writeBytes.Load(), "rebuild: every row written once")
			assert.LessOrEqual(t, target.writes.Load(), int64(maxReqs), "rebuild: the new member written in windows")
			for i, cm := range cms[1:c.n] {
				assert.LessOrEqual(t, cm.reads.Load(), int64(maxReqs), "rebuild: member %d read in windows", i+1)
			}
			requireContent(t, a, want, "after the rebuild")

			// A replace copies role 1 onto another fresh member the same way.
			for _, cm := range cms {
				cm.reset()
			}
			require.NoError(t, a.ReplaceMember("mem1", devs[c.n+1], false))
			waitIdle(t, a)
			repl := cms[c.n+1]
			assert.EqualValues(t, rows*chunk, repl.writeBytes.Load(), "replace: every row written once")
			assert.LessOrEqual(t, repl.writes.Load(), int64(maxReqs), "replace: the new member written in windows")
			assert.EqualValues(t, rows*chunk, cms[1].readBytes.Load(), "replace: the old member read once")
			assert.LessOrEqual(t, cms[1].reads.Load(), int64(maxReqs), "replace: the old member read in windows")
			requireContent(t, a, want, "after the replace")
			checkConsistent(t, a, "after the rebuild and the replace")
		})
	}
}

// countingDevs returns k counting memory members (mem0, mem1, ...) sized
// for an array of level over n members of rows rows of chunk.
func countingDevs(level stripe.Level, n, k int, chunk, rows int64) ([]*countingMember, []raid.Device) {
	dataOff := dataOffsetOf(level, n, chunk)
	size := levelSizeFor(level, chunk, rows)
	var cms []*countingMember
	var devs []raid.Device
	for i := 0; i < k; i++ {
		cm := &countingMember{Member: keepNoVec{member.NewMemory(size)}, dataOff: dataOff}
		cms = append(cms, cm)
		devs = append(devs, raid.Device{Path: fmt.Sprintf("mem%d", i), Member: cm})
	}
	return cms, devs
}

// keepNoVec is keep without the vectored calls: each request the engine
// makes is one ReadAt or WriteAt, which countingMember counts.
type keepNoVec struct{ raid.Member }

func (keepNoVec) Close() error { return nil }

// TestResyncReadsManyRowsPerRequest: the resync after a crash reads each
// member in job windows, as a scrub does, not one chunk per row: every
// dirty row is read once, in a few large requests per member, and rows
// whose copies or parity agree are not written. Row by row, RAID5 over 256
// rows cost 256 reads per member here, and a mirror's resync wrote every
// chunk of every copy but the first.
func TestResyncReadsManyRowsPerRequest(t *testing.T) {
	const chunk = 16 << 10
	const rows = 256 // 4 windows of 64 rows (1 MiB / 16 KiB)
	const maxReqs = 2 * rows * chunk / (1 << 20)
	for _, c := range []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID1, 2}, {stripe.RAID5, 4}, {stripe.RAID6, 5}} {
		t.Run(fmt.Sprintf("%s/members=%d", c.level, c.n), func(t *testing.T) {
			cms, devs := countingDevs(c.level, c.n, c.n, chunk, rows)
			opts := raid.Options{CleanDelay: -1, RebuildMinRate: 1 << 40, ProgressInterval: time.Hour}
			a, err := raid.Create(devs, raid.CreateOptions{Name: "rs", Level: c.level, Chunk: chunk}, opts)
			require.NoError(t, err)
			want := fill(t, a, 78) // every bitmap region dirty, never marked clean
			a.Abandon()

			for _, cm := range cms {
				cm.reset()
			}
			b := assembleArray(t, devs, opts)
			st := waitIdle(t, b)
			require.True(t, hasEvent(st, raid.EventResyncFinished), "the crash left every row to resync: %+v", st.History)
			for i, cm := range cms {
				assert.LessOrEqual(t, cm.reads.Load(), int64(maxReqs), "member %d read in windows, not row by row", i)
				assert.EqualValues(t, rows*chunk, cm.readBytes.Load(), "member %d's rows are each read once", i)
				// The copies and the parity agree already: nothing to write.
				assert.Zero(t, cm.writes.Load(), "member %d: a resync of consistent rows writes nothing", i)
			}
			requireContent(t, b, want, "after the resync")
			checkConsistent(t, b, "after the resync")
		})
	}
}
