package raid5_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	_ "github.com/raidd/raidd/raid/raid5"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

type keep struct{ raid.Member }

func (keep) Close() error { return nil }

// TestWritePlans pins the per-row plan choice by counting member reads and
// writes: a full stripe reads nothing, a small write reads old data and
// parity (read-modify-write), a write covering most of a row reads the rest
// (reconstruct-write), whichever needs fewer reads.
func TestWritePlans(t *testing.T) {
	const chunk = 64 << 10
	const width = 3 * chunk // 4 members
	tests := []struct {
		name          string
		off, n        int64
		reads, writes int64
		readBytes     int64
		records       int64 // journal record writes
	}{
		{"full-stripe", 0, width, 0, 4, 0, 0},
		{"two-full-stripes", width, 2 * width, 0, 8, 0, 0},
		{"4K-rmw", 4096, 4096, 2, 2, 8192, 1},
		{"two-chunks-rcw", 0, 2 * chunk, 1, 3, chunk, 1},
		{"one-chunk-tie-prefers-rmw", 0, chunk, 2, 2, 2 * chunk, 1},
		{"two-chunk-pieces-rmw-fewer-bytes", chunk - 4096, 8192, 3, 3, 4096 + 4096 + chunk, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fs []*membertest.Faulty
			var devs []raid.Device
			for i := 0; i < 4; i++ {
				f := membertest.Inject(member.NewMemory(superblock.HeaderSize+raid.JournalLength(4, chunk)+16*chunk), membertest.Never())
				fs = append(fs, f)
				devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: keep{f}})
			}
			a, err := raid.Create(devs, raid.CreateOptions{Name: "plan", Level: stripe.RAID5, Chunk: chunk, BitmapRegion: -1}, raid.Options{CleanDelay: -1, KeepZeroes: true})
			require.NoError(t, err)
			defer a.Close()
			// Mark the array dirty first so the measured write does no superblock I/O.
			_, err = a.WriteAt(make([]byte, 1), 15*width)
			require.NoError(t, err)
			for _, f := range fs {
				f.ResetStats()
			}
			_, err = a.WriteAt(make([]byte, tt.n), tt.off)
			require.NoError(t, err)
			var reads, writes, readBytes int64
			for _, f := range fs {
				s := f.Stats()
				reads += s.Reads
				writes += s.Writes
				readBytes += s.BytesRead
			}
			assert.Equal(t, tt.reads, reads, "member reads")
			if tt.name == "one-chunk-tie-prefers-rmw" {
				// The read-modify-write reads the chunk it writes and the
				// parity, not the row's two other chunks.
				g := a.Geometry()
				for _, m := range []int{g.DataMember(0, 0), g.ParityMember(0)} {
					assert.Equal(t, int64(1), fs[m].Stats().Reads, "member %d read once", m)
				}
			}
			assert.Equal(t, tt.readBytes, readBytes, "member bytes read")
			// A partial row also writes its write-hole journal record to
			// each parity member's log (one write each).
			assert.Equal(t, tt.writes+tt.records, writes, "member writes")
			res, err := a.Check()
			require.NoError(t, err)
			require.True(t, res.Consistent(), "%s", res)
		})
	}
}
