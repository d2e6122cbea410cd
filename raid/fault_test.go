package raid_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// failureSets returns, for a geometry, sets of members whose loss the level
// survives, each as large as the level allows around a first member m.
func failureSets(g stripe.Geometry, m int) []int {
	set := []int{m}
	for k := 0; k < g.Members(); k++ {
		if k == m {
			continue
		}
		var mask uint64
		for _, s := range append(set, k) {
			mask |= 1 << uint(s)
		}
		if g.Survives(mask) {
			set = append(set, k)
		}
	}
	return set
}

// TestFaultTolerance fails every member in turn, then as many more as the
// level tolerates, then one more: reads stay correct and writes are
// acknowledged within the tolerance, the failure is on the survivors'
// superblocks before the request that hit it returns, and beyond the
// tolerance every call fails cleanly and never returns wrong data.
func TestFaultTolerance(t *testing.T) {
	shapes := map[stripe.Level]int{stripe.RAID0: 3, stripe.RAID1: 3, stripe.RAID5: 4, stripe.RAID6: 5, stripe.RAID10: 4}
	for level, n := range shapes {
		for first := 0; first < n; first++ {
			t.Run(fmt.Sprintf("%s/members=%d/first=%d", level, n, first), func(t *testing.T) {
				t.Parallel()
				testFaults(t, level, n, first)
			})
		}
	}
	t.Run("raid10/members=3/first=1", func(t *testing.T) { testFaults(t, stripe.RAID10, 3, 1) })
}

// TestFaultToleranceRAID6Pairs is TestFaultTolerance for RAID6 at every
// pair of members, with 4 and 5 members: whatever the two lost members
// hold in each row (data+data, data+P, data+Q, P+Q), reads and writes go
// on, and a third loss fails the array cleanly.
func TestFaultToleranceRAID6Pairs(t *testing.T) {
	for _, n := range []int{4, 5} {
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				t.Run(fmt.Sprintf("members=%d/pair=%d,%d", n, i, j), func(t *testing.T) {
					t.Parallel()
					testFaultSet(t, stripe.RAID6, n, func(g stripe.Geometry) []int {
						require.True(t, g.Survives(1<<uint(i)|1<<uint(j)))
						return []int{i, j}
					}, int64(n*100+i*10+j))
				})
			}
		}
	}
}

func testFaults(t *testing.T, level stripe.Level, n, first int) {
	testFaultSet(t, level, n, func(g stripe.Geometry) []int { return failureSets(g, first) }, int64(n*100+first))
}

// testFaultSet fails the members pick returns for the array's geometry
// (the first only, for RAID0) one after the other, then one more; see
// TestFaultTolerance.
func testFaultSet(t *testing.T, level stripe.Level, n int, pick func(stripe.Geometry) []int, seed int64) {
	const chunk = 16 << 10
	r := newRig(n, memberSizeFor(chunk, 8))
	a := createArray(t, r.devs, raid.CreateOptions{Name: "faults", Level: level, Chunk: chunk}, raid.Options{CleanDelay: -1})
	rng := rand.New(rand.NewSource(seed))
	want := make([]byte, a.Size())
	rng.Read(want)
	_, err := a.WriteAt(want, 0)
	require.NoError(t, err)

	readAll := func() ([]byte, error) {
		got := make([]byte, a.Size())
		_, err := a.ReadAt(got, 0)
		return got, err
	}
	set := pick(a.Geometry())
	first := set[0]
	if level == stripe.RAID0 {
		set = nil
	}
	for i, m := range set {
		r.toggles[m].On()
		// A write that hits the failing member is acknowledged...
		off := int64(rng.Intn(int(a.Size()) - 3*chunk))
		p := make([]byte, 3*chunk+123)
		if off+int64(len(p)) > a.Size() {
			p = p[:a.Size()-off]
		}
		rng.Read(p)
		_, err := a.WriteAt(p, off)
		require.NoError(t, err, "write with %d failed member(s)", i+1)
		copy(want[off:], p)
		got, err := readAll()
		require.NoError(t, err, "read with members %v failed", set[:i+1])
		require.True(t, bytes.Equal(got, want), "data differs with members %v failed", set[:i+1])
		// ...and by then the survivors' superblocks record the failure.
		st := a.Status()
		assert.True(t, st.Degraded)
		for k := 0; k < n; k++ {
			if contains(set[:i+1], k) {
				continue
			}
			sb, err := superblock.Read(r.mem[k])
			require.NoError(t, err)
			for _, f := range set[:i+1] {
				assert.Equal(t, superblock.MemberFailed, roleState(sb, f), "survivor %d's superblock must record member %d failed", k, f)
			}
		}
	}
	// One more failure than the level tolerates.
	beyond := -1
	for k := 0; k < n; k++ {
		if !contains(set, k) {
			beyond = k
			break
		}
	}
	if beyond < 0 { // RAID1 with every member but one failed: fail the last one
		beyond = n - 1
		for contains(set, beyond) && len(set) < n {
			beyond--
		}
	}
	r.toggles[beyond].On()
	if level == stripe.RAID0 {
		r.toggles[first].On()
	}
	got, err := readAll()
	if level == stripe.RAID0 {
		// md's RAID0: the affected range fails with EIO, nothing is
		// recorded as failed, and the array keeps running.
		require.ErrorIs(t, err, raid.ErrIO)
		assert.NotErrorIs(t, err, raid.ErrFailed)
		assert.NotEqual(t, "failed", a.Status().State)
		return
	}
	if err == nil {
		// Reads that happen to avoid the lost member may succeed, but only with the right data.
		require.True(t, bytes.Equal(got, want), "read beyond tolerance returned wrong data")
		_, err = a.WriteAt(make([]byte, a.Size()), 0)
	}
	require.Error(t, err, "an array beyond its tolerance must fail")
	assert.True(t, errors.Is(err, raid.ErrFailed), "error must wrap raid.ErrFailed: %v", err)
	// Every later call fails the same way, never with wrong data.
	q := make([]byte, 4096)
	_, err = a.ReadAt(q, 0)
	assert.ErrorIs(t, err, raid.ErrFailed)
	assert.Equal(t, "failed", a.Status().State)
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func roleState(sb *superblock.Meta, role int) superblock.MemberState {
	st := superblock.MemberRemoved
	for _, mi := range sb.Members {
		if int(mi.Role) == role {
			if mi.State == superblock.MemberActive {
				return mi.State
			}
			st = mi.State
		}
	}
	return st
}

// TestSuperblockWriteFailureDegrades: a member that cannot take a superblock
// update (here, the one marking the array dirty before the first write) is
// failed, and the array must stop reading from it and say it is degraded at
// once, not only at the next failure that republishes the member set.
func TestSuperblockWriteFailureDegrades(t *testing.T) {
	const chunk = 16 << 10
	var devs []raid.Device
	var tgs []*membertest.Toggle
	for i := 0; i < 3; i++ {
		tg := membertest.NewToggle(membertest.InRange(superblock.SlotOffset(0), 2*superblock.SlotSize, membertest.OpFilter(membertest.Always(), membertest.OpWrite)))
		tgs = append(tgs, tg)
		devs = append(devs, raid.Device{Path: fmt.Sprint("s", i), Member: keep{membertest.Inject(member.NewMemory(memberSizeFor(chunk, 8)), tg)}})
	}
	a := createArray(t, devs, raid.CreateOptions{Name: "sbw", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1})
	want := make([]byte, a.Size())
	rand.New(rand.NewSource(6)).Read(want)
	tgs[1].On()
	_, err := a.WriteAt(want, 0) // marks the array dirty first: member 1's superblock write fails
	require.NoError(t, err)
	st := a.Status()
	require.Equal(t, "failed", st.Devices[1].State, "%+v", st.Devices)
	assert.True(t, st.Degraded, "a member recorded as failed degrades the array")
	assert.Equal(t, "degraded", st.State)
	got := make([]byte, len(want))
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	require.Equal(t, want, got)
}
