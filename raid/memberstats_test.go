package raid_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// memberStatus returns the status of the member at path.
func memberStatus(t *testing.T, a *raid.Array, path string) raid.MemberStatus {
	t.Helper()
	for _, m := range a.Status().Devices {
		if m.Path == path {
			return m
		}
	}
	t.Fatalf("no member %s in %+v", path, a.Status().Devices)
	return raid.MemberStatus{}
}

// TestMemberCounters checks the per-member I/O error and repair counters
// of Status: a read error that is repaired counts a read error and a repair
// on that member only, with the repaired bytes adding up to the array's
// RepairBytesWritten; a write error that fails a member counts on that
// member, which keeps its counts while failed.
func TestMemberCounters(t *testing.T) {
	for _, level := range []stripe.Level{stripe.RAID1, stripe.RAID5} {
		t.Run(level.String(), func(t *testing.T) {
			const chunk = 16 << 10
			n := 3
			if level == stripe.RAID1 {
				n = 2
			}
			var devs []raid.Device
			readTg := make([]*membertest.Toggle, n)
			writeTg := make([]*membertest.Toggle, n)
			for i := 0; i < n; i++ {
				readTg[i] = membertest.NewToggle(membertest.OpFilter(membertest.Always(), membertest.OpRead))
				writeTg[i] = membertest.NewToggle(membertest.OpFilter(membertest.Always(), membertest.OpWrite))
				m := member.NewMemory(memberSizeFor(chunk, 8))
				devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: keep{membertest.Inject(m, membertest.Any(readTg[i], writeTg[i]))}})
			}
			a := createArray(t, devs, raid.CreateOptions{Name: "ctr", Level: level, Chunk: chunk}, raid.Options{CleanDelay: -1})
			want := fill(t, a, 21)
			for i := 0; i < n; i++ {
				m := memberStatus(t, a, devs[i].Path)
				assert.Zero(t, m.IOErrors, "m%d before any fault", i)
				assert.Zero(t, m.Repairs+m.RepairBytes, "m%d before any fault", i)
			}

			// Member 0's reads fail: every read of it is served from
			// redundancy and its range rewritten.
			readTg[0].On()
			got := make([]byte, a.Size())
			_, err := a.ReadAt(got, 0)
			readTg[0].Off()
			require.NoError(t, err)
			require.Equal(t, want, got)
			m0 := memberStatus(t, a, devs[0].Path)
			assert.Equal(t, "active", m0.State, "a repaired member stays")
			assert.Positive(t, m0.IOErrors.Read, "read errors of m0")
			assert.Zero(t, m0.IOErrors.Write+m0.IOErrors.Discard+m0.IOErrors.Sync)
			assert.Positive(t, m0.Repairs, "repairs of m0")
			assert.Equal(t, a.Status().Stats.RepairBytesWritten, m0.RepairBytes,
				"m0 holds every repaired byte of the array")
			for i := 1; i < n; i++ {
				m := memberStatus(t, a, devs[i].Path)
				assert.Zero(t, m.IOErrors, "m%d had no fault", i)
				assert.Zero(t, m.Repairs, "m%d had no fault", i)
			}

			// Member 1's writes fail: it is failed, and its count stays.
			writeTg[n-1].On()
			_, err = a.WriteAt(want[:chunk], 0)
			require.NoError(t, err, "a tolerated member failure is no error")
			mLast := memberStatus(t, a, devs[n-1].Path)
			assert.Equal(t, "failed", mLast.State)
			assert.Equal(t, int64(1), mLast.IOErrors.Write, "the write that failed m%d", n-1)
			assert.Equal(t, m0.IOErrors, memberStatus(t, a, devs[0].Path).IOErrors, "m0 unchanged")
			writeTg[n-1].Off()
		})
	}
}
