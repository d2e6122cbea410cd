package raid_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// TestJournalPartialWritesOfOneRow: whole-chunk writes to one row, one
// after another with no FLUSH between them, each with a write-hole record.
// The second write's W holds the first's bytes, not yet durable:
//   - "cached": it read-modify-writes, its partial parity computed from the
//     first record's, kept in memory, and the old bytes it reads anyway;
//     without that it had to reconstruct-write, reading the first write's
//     chunk (and on a degraded RAID5 the whole row) to know its bytes;
//   - "zero": the write that completes the row (a record of zero partial
//     parity) needs no byte of W and read-modify-writes too.
//
// A degraded RAID6 reconstruct-writes such rows all the same
// ("raid6/degraded"), but computes the second record's partial parities
// from the first's too.
//
// Then the power fails with the parity writes of the row lost and its data
// writes kept, and the array is assembled without members whose chunks of
// the row were not written: they read their old bytes, so the records (the
// second one's partial parity computed from the first's) were right.
func TestJournalPartialWritesOfOneRow(t *testing.T) {
	for _, c := range []struct {
		name  string
		level stripe.Level
		n     int
		// failed: data indexes (of row 2) failed before the writes;
		// writes: the data indexes written, in order; check: the write
		// that must not read the first one's chunk (-1: none); missing:
		// data indexes absent after the crash (failed ones included).
		failed  []int
		writes  []int
		check   int
		missing []int
	}{
		{"raid5/cached", stripe.RAID5, 4, []int{2}, []int{0, 1}, 1, []int{2}},
		{"raid5/zero", stripe.RAID5, 4, []int{1}, []int{0, 1, 2}, 2, []int{1}},
		{"raid6/cached", stripe.RAID6, 8, nil, []int{0, 1}, 1, []int{4, 5}},
		{"raid6/degraded", stripe.RAID6, 6, []int{2, 3}, []int{0, 1}, -1, []int{2, 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			const chunk, row = 16 << 10, 2
			cs := make([]*membertest.Crashable, c.n)
			fs := make([]*membertest.Faulty, c.n)
			devs := make([]raid.Device, c.n)
			power := membertest.NewToggle(membertest.Always())
			for i := range cs {
				cs[i] = membertest.NewCrashable(memberSizeFor(chunk, 8))
				fs[i] = membertest.Inject(cs[i], power)
				devs[i] = raid.Device{Path: fmt.Sprint("c", i), Member: keep{fs[i]}}
			}
			opts := raid.Options{CleanDelay: -1}
			a, err := raid.Create(devs, raid.CreateOptions{Name: "c", Level: c.level, Chunk: chunk}, opts)
			require.NoError(t, err)
			geo := a.Geometry()
			dk := int64(geo.DataMembers())
			old := make([]byte, 4*geo.StripeWidth())
			rand.New(rand.NewSource(1)).Read(old)
			_, err = a.WriteAt(old, 0)
			require.NoError(t, err)
			require.NoError(t, a.Sync())
			for _, i := range c.failed {
				failRole(t, a, geo.DataMember(row, i))
			}
			want := bytes.Clone(old)
			for k, i := range c.writes {
				off := (row*dk + int64(i)) * chunk
				p := make([]byte, chunk)
				rand.New(rand.NewSource(int64(10 + k))).Read(p)
				copy(want[off:], p)
				for _, f := range fs {
					f.ResetStats()
				}
				_, err = a.WriteAt(p, off)
				require.NoError(t, err)
				if k == c.check {
					m := geo.DataMember(row, c.writes[0])
					require.Zero(t, fs[m].Stats().Reads, "write %d of data index %d read data index %d (member %d): a reconstruct-write", k, i, c.writes[0], m)
				}
			}
			require.EqualValues(t, len(c.writes), a.Status().Journal.Records, "every write of the row was recorded")

			power.On()
			a.Abandon()
			parities := []int{geo.ParityMember(row)}
			if c.level == stripe.RAID6 {
				parities = append(parities, geo.QMember(row))
			}
			for m, cr := range cs {
				if slices.Contains(parities, m) {
					cr.CrashKeep(0, 0) // the row's last parity writes are lost
				} else {
					cr.CrashKeep(0, 1)
				}
			}
			power.Off()
			var keepDevs []raid.Device
			var gone []int
			for _, i := range c.missing {
				gone = append(gone, geo.DataMember(row, i))
			}
			for m := range devs {
				if !slices.Contains(gone, m) {
					keepDevs = append(keepDevs, devs[m])
				}
			}
			b := assembleArray(t, keepDevs, opts)
			got := make([]byte, len(want))
			_, err = b.ReadAt(got, 0)
			require.NoError(t, err)
			for i := range dk {
				if slices.Contains(c.missing, int(i)) && slices.Contains(c.writes, int(i)) {
					continue // written to a missing member, not flushed: may read anything
				}
				off := (row*dk + i) * chunk
				require.True(t, bytes.Equal(want[off:off+chunk], got[off:off+chunk]), "data index %d of row %d reads wrong after the crash", i, row)
			}
		})
	}
}
