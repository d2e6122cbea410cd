package raid_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	_ "github.com/raidd/raidd/raid/raid0"
	_ "github.com/raidd/raidd/raid/raid1"
	_ "github.com/raidd/raidd/raid/raid10"
	_ "github.com/raidd/raidd/raid/raid5"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// keep wraps a member so that closing the array does not destroy it, and a
// test can assemble the same members again.
type keep struct{ raid.Member }

func (keep) Close() error { return nil }

// ReadvAt and WritevAt make every test member look vectored, so that the
// engine's merging of back-to-back requests runs in every test; each
// buffer still goes through the wrapped member (and its fault injection).
func (k keep) ReadvAt(bufs [][]byte, off int64) (int, error) {
	done := 0
	for _, b := range bufs {
		n, err := k.ReadAt(b, off)
		done += n
		if err != nil {
			return done, err
		}
		off += int64(n)
	}
	return done, nil
}

func (k keep) WritevAt(bufs [][]byte, off int64) (int, error) {
	done := 0
	for _, b := range bufs {
		n, err := k.WriteAt(b, off)
		done += n
		if err != nil {
			return done, err
		}
		off += int64(n)
	}
	return done, nil
}

// rig is a set of fault-injectable memory members.
type rig struct {
	mem     []*member.Memory
	toggles []*membertest.Toggle
	devs    []raid.Device
}

func newRig(n int, size int64) *rig {
	r := &rig{}
	for i := 0; i < n; i++ {
		m := member.NewMemory(size)
		tg := membertest.NewToggle(membertest.Always())
		r.mem = append(r.mem, m)
		r.toggles = append(r.toggles, tg)
		r.devs = append(r.devs, raid.Device{Path: fmt.Sprintf("mem%d", i), Member: keep{membertest.Inject(m, tg)}})
	}
	return r
}

// memberSizeFor returns a member size giving rows rows of data.
func memberSizeFor(chunk, rows int64) int64 { return superblock.HeaderSize + chunk*rows }

func checkAndClose(t testing.TB, a *raid.Array) {
	t.Helper()
	st := a.Status()
	if !st.Degraded && !st.Failed {
		if err := a.Check(); err != nil {
			t.Errorf("consistency check after test: %v", err)
		}
	}
	_ = a.Close()
}

// validShapes lists member counts per level for the model test.
func validShapes() map[stripe.Level][]int {
	return map[stripe.Level][]int{
		stripe.RAID0:  {2, 3, 5},
		stripe.RAID1:  {2, 3},
		stripe.RAID5:  {3, 4, 5},
		stripe.RAID10: {2, 3, 4},
	}
}

func failRole(tb testing.TB, a *raid.Array, m int) {
	tb.Helper()
	a.FailRole(m, fmt.Errorf("failed by test"))
	require.True(tb, a.Status().Degraded)
}
