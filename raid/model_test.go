package raid_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

var (
	seedFlag  = flag.Int64("seed", 0, "replay the model test with this seed (0 = time-based)")
	modelOps  = flag.Int("model.ops", 120, "operations per model-test case")
	chunkList = []int64{4 << 10, 64 << 10, 1 << 20}
)

// TestModel runs a seeded random sequence of writes, reads, syncs, discards,
// write-zeroes, member failures, concurrent writers and reassembly against
// every level, comparing every read with a flat in-memory model. To replay a
// failure: go test ./raid -run 'TestModel/<case>' -seed=<seed printed>.
func TestModel(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("model seed %d (replay with -seed=%d)", seed, seed)
	for level, counts := range validShapes() {
		for _, n := range counts {
			for _, chunk := range chunkList {
				name := fmt.Sprintf("%s/chunk=%dK/members=%d", level, chunk>>10, n)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					caseSeed := seed ^ int64(level)<<32 ^ int64(n)<<40 ^ chunk
					runModel(t, level, n, chunk, caseSeed)
				})
			}
		}
	}
}

type model struct {
	t     *testing.T
	rng   *rand.Rand
	level stripe.Level
	chunk int64
	r     *rig
	a     *raid.Array
	data  []byte
	geo   stripe.Geometry
	// Rig indexes: inArray were handed to the array (members, spares, failed
	// ones still attached); failing have their fault toggle on; next is the
	// first rig member never used.
	inArray map[int]bool
	failing map[int]bool
	next    int
}

const poolSize = 6 // spare devices beyond the initial members

func runModel(t *testing.T, level stripe.Level, n int, chunk int64, seed int64) {
	t.Logf("case seed %d", seed)
	rows := int64(6)
	if chunk >= 1<<20 {
		rows = 3
	}
	r := newRig(n+poolSize, memberSizeFor(chunk, rows)+chunk/2) // a ragged tail is ignored
	a, err := raid.Create(r.devs[:n], raid.CreateOptions{Name: "model", Level: level, Chunk: chunk, BitmapRegion: 2 * chunk},
		modelOptions(chunk))
	require.NoError(t, err)
	m := &model{t: t, rng: rand.New(rand.NewSource(seed)), level: level, chunk: chunk, r: r, a: a,
		data: make([]byte, a.Size()), geo: a.Geometry(), inArray: map[int]bool{}, failing: map[int]bool{}, next: n}
	for k := 0; k < n; k++ {
		m.inArray[k] = true
	}
	defer func() {
		m.waitRecovery(-1)
		st := m.a.Status()
		checkAndClose(t, m.a)
		// An orderly close leaves every member in use marked clean.
		for _, d := range st.Devices {
			if k := m.rigIndex(d.Path); k >= 0 && d.State == "active" && !m.failing[k] {
				sb, err := superblock.Read(m.r.mem[k])
				if assert.NoError(t, err, "superblock of %s", d.Path) {
					assert.Equal(t, superblock.StateClean, sb.State, "%s after close", d.Path)
				}
			}
		}
	}()
	for i := 0; i < *modelOps; i++ {
		m.step(i)
		if t.Failed() {
			t.Fatalf("stopping at op %d (seed %d)", i, seed)
		}
	}
	m.waitRecovery(*modelOps)
	m.verifyAll("end")
}

// modelOptions slows rebuilds to a few tens of milliseconds, so that model
// operations run while rows are being rebuilt.
func modelOptions(chunk int64) raid.Options {
	return raid.Options{CleanDelay: 20 * time.Millisecond, ProgressInterval: 5 * time.Millisecond,
		RebuildMinRate: 200 * chunk, RebuildMaxRate: 400 * chunk}
}

// rigIndex maps a status path back to the rig.
func (m *model) rigIndex(path string) int {
	for k, d := range m.r.devs {
		if d.Path == path {
			return k
		}
	}
	return -1
}

// missingRoles returns the roles without an active member, counting members
// whose faults are on but not yet noticed as missing.
func (m *model) missingRoles(st raid.Status) uint64 {
	var held uint64
	for _, d := range st.Devices {
		if d.State == "active" && d.Role >= 0 && !m.failing[m.rigIndex(d.Path)] {
			held |= 1 << uint(d.Role)
		}
	}
	return ^held & (1<<uint(m.geo.Members()) - 1)
}

// pickActive returns a random active member that is not failing, with its role.
func (m *model) pickActive(st raid.Status) (int, raid.MemberStatus) {
	var c []raid.MemberStatus
	for _, d := range st.Devices {
		if d.State == "active" && d.Path != "" && !m.failing[m.rigIndex(d.Path)] {
			c = append(c, d)
		}
	}
	if len(c) == 0 {
		return -1, raid.MemberStatus{}
	}
	d := c[m.rng.Intn(len(c))]
	return m.rigIndex(d.Path), d
}

func (m *model) randRange(maxLen int64) (off, n int64) {
	size := int64(len(m.data))
	switch m.rng.Intn(4) {
	case 0: // chunk aligned
		n = (1 + m.rng.Int63n(4)) * m.chunk
		off = m.rng.Int63n(size/m.chunk) * m.chunk
	case 1: // full stripes
		w := m.geo.StripeWidth()
		n = w * (1 + m.rng.Int63n(2))
		off = m.rng.Int63n(size/w) * w
	default: // anything
		n = 1 + m.rng.Int63n(maxLen)
		off = m.rng.Int63n(size)
	}
	if off+n > size {
		n = size - off
	}
	return off, n
}

func (m *model) step(i int) {
	t := m.t
	maxLen := 3 * m.geo.StripeWidth()
	switch op := m.rng.Intn(100); {
	case op < 35:
		off, n := m.randRange(maxLen)
		p := make([]byte, n)
		m.rng.Read(p)
		if m.rng.Intn(8) == 0 { // some zero blocks, for zero elision
			clear(p[:n/2])
		}
		var err error
		if m.rng.Intn(5) == 0 {
			_, err = m.a.WriteAtFUA(p, off)
		} else {
			_, err = m.a.WriteAt(p, off)
		}
		require.NoError(t, err, "op %d write [%d,+%d)", i, off, n)
		copy(m.data[off:], p)
	case op < 65:
		off, n := m.randRange(maxLen)
		p := make([]byte, n)
		_, err := m.a.ReadAt(p, off)
		require.NoError(t, err, "op %d read [%d,+%d)", i, off, n)
		if !bytes.Equal(p, m.data[off:off+n]) {
			t.Fatalf("op %d read [%d,+%d): %s", i, off, n, firstDiff(p, m.data[off:off+n], off))
		}
	case op < 70:
		require.NoError(t, m.a.Sync(), "op %d sync", i)
	case op < 76:
		off, n := m.randRange(maxLen)
		require.NoError(t, m.a.Discard(off, n), "op %d discard [%d,+%d)", i, off, n)
		clear(m.data[off : off+n])
	case op < 80:
		off, n := m.randRange(maxLen)
		require.NoError(t, m.a.WriteZeroes(off, n, m.rng.Intn(2) == 0), "op %d write zeroes [%d,+%d)", i, off, n)
		clear(m.data[off : off+n])
	case op < 82:
		m.failMember(i, m.rng.Intn(2) == 0)
	case op < 84:
		m.addSpare(i)
	case op < 85:
		m.replace(i)
	case op < 86:
		m.remove(i)
	case op < 88:
		m.reassemble(i)
	case op < 91:
		m.concurrent(i)
	case op < 92:
		m.waitRecovery(i)
	default:
		m.verifyAll(fmt.Sprintf("op %d", i))
	}
}

// failMember makes an active member fail, if the level survives it: either
// its device starts returning errors (noticed at its next I/O) or the
// operator fails it.
func (m *model) failMember(i int, viaFaults bool) {
	st := m.a.Status()
	k, d := m.pickActive(st)
	if k < 0 || !m.geo.Survives(m.missingRoles(st)|1<<uint(d.Role)) {
		return
	}
	if viaFaults {
		m.failing[k] = true
		m.r.toggles[k].On()
		m.t.Logf("op %d: %s (role %d) starts failing", i, d.Path, d.Role)
		return
	}
	require.NoError(m.t, m.a.FailMember(d.Path), "op %d: fail %s", i, d.Path)
	m.t.Logf("op %d: %s (role %d) failed by operator", i, d.Path, d.Role)
}

// addSpare hands the array a fresh device; a degraded array rebuilds onto it
// in the background while the model keeps going.
func (m *model) addSpare(i int) {
	if m.level == stripe.RAID0 || m.next >= len(m.r.devs) {
		return
	}
	k := m.next
	m.next++
	require.NoError(m.t, m.a.AddMember(m.r.devs[k], false), "op %d: add %s", i, m.r.devs[k].Path)
	m.inArray[k] = true
	m.t.Logf("op %d: added %s", i, m.r.devs[k].Path)
}

// replace copies an active member onto a fresh device, while I/O goes on.
func (m *model) replace(i int) {
	st := m.a.Status()
	if m.level == stripe.RAID0 || m.next >= len(m.r.devs) || st.Recovery != nil {
		return
	}
	k, d := m.pickActive(st)
	if k < 0 {
		return
	}
	n := m.next
	m.next++
	require.NoError(m.t, m.a.ReplaceMember(d.Path, m.r.devs[n], false), "op %d: replace %s", i, d.Path)
	m.inArray[n] = true
	m.t.Logf("op %d: replacing %s (role %d) with %s", i, d.Path, d.Role, m.r.devs[n].Path)
}

// remove detaches a failed member.
func (m *model) remove(i int) {
	for _, d := range m.a.Status().Devices {
		if (d.State == "failed" || d.State == "stale") && d.Path != "" {
			require.NoError(m.t, m.a.RemoveMember(d.Path), "op %d: remove %s", i, d.Path)
			k := m.rigIndex(d.Path)
			delete(m.inArray, k)
			if m.failing[k] {
				delete(m.failing, k)
				m.r.toggles[k].Off()
			}
			m.t.Logf("op %d: removed %s", i, d.Path)
			return
		}
	}
}

// waitRecovery waits until no rebuild, replace or resync runs.
func (m *model) waitRecovery(i int) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := m.a.Status()
		if st.Recovery == nil && st.Resync == nil {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("op %d: recovery did not finish: %+v", i, st.Recovery)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// reassemble closes the array and assembles it again. A member whose faults
// are on is either left out (a dead disk) or comes back healthy (a disk
// that was unplugged); the array must not trust it if it noticed the failure.
func (m *model) reassemble(i int) {
	require.NoError(m.t, m.a.Close(), "op %d close", i)
	var devs []raid.Device
	for k := range m.inArray {
		if m.failing[k] {
			delete(m.failing, k)
			if m.rng.Intn(2) == 0 {
				delete(m.inArray, k)
				continue
			}
			m.r.toggles[k].Off()
		}
		devs = append(devs, m.r.devs[k])
	}
	m.rng.Shuffle(len(devs), func(a, b int) { devs[a], devs[b] = devs[b], devs[a] })
	a, err := raid.Assemble(devs, modelOptions(m.chunk))
	require.NoError(m.t, err, "op %d assemble", i)
	m.a = a
	st := a.Status()
	assert.False(m.t, st.Failed, "op %d: reassembled array failed", i)
	assert.Equal(m.t, st.Degraded, m.missingRoles(st) != 0, "op %d: degraded flag vs roles: %+v", i, st.Devices)
	m.t.Logf("op %d: reassembled, state %s", i, st.State)
}

// concurrent runs writers on disjoint ranges, each verifying its own range.
func (m *model) concurrent(i int) {
	const workers = 4
	size := int64(len(m.data))
	part := size / workers
	var wg sync.WaitGroup
	errs := make([]error, workers)
	seeds := make([]int64, workers)
	for w := range seeds {
		seeds[w] = m.rng.Int63()
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seeds[w]))
			base := int64(w) * part
			for k := 0; k < 6; k++ {
				n := 1 + rng.Int63n(min(part, 2*m.geo.StripeWidth()))
				off := base + rng.Int63n(part-n+1)
				p := make([]byte, n)
				rng.Read(p)
				if _, err := m.a.WriteAt(p, off); err != nil {
					errs[w] = err
					return
				}
				copy(m.data[off:], p) // disjoint per worker
				q := make([]byte, n)
				if _, err := m.a.ReadAt(q, off); err != nil {
					errs[w] = err
					return
				}
				if !bytes.Equal(p, q) {
					errs[w] = fmt.Errorf("worker %d read back differs at [%d,+%d): %s", w, off, n, firstDiff(q, p, off))
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(m.t, errors.Join(errs...), "op %d concurrent", i)
}

func (m *model) verifyAll(when string) {
	p := make([]byte, len(m.data))
	_, err := m.a.ReadAt(p, 0)
	require.NoError(m.t, err, "%s: read all", when)
	if !bytes.Equal(p, m.data) {
		m.t.Fatalf("%s: whole-array read: %s", when, firstDiff(p, m.data, 0))
	}
}

func firstDiff(got, want []byte, base int64) string {
	for i := range got {
		if got[i] != want[i] {
			j := i
			for j < len(got) && got[j] != want[j] {
				j++
			}
			return fmt.Sprintf("first difference at array offset %d (%d bytes differ from there): got %#x want %#x", base+int64(i), j-i, got[i], want[i])
		}
	}
	return "no difference"
}
