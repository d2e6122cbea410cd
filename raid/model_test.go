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
	// failed members (by rig index = role at creation).
	failed map[int]bool
	// detected members were recorded as failed by the array.
	detected map[int]bool
	geo    stripe.Geometry
}

func runModel(t *testing.T, level stripe.Level, n int, chunk int64, seed int64) {
	t.Logf("case seed %d", seed)
	rows := int64(6)
	if chunk >= 1<<20 {
		rows = 3
	}
	r := newRig(n, memberSizeFor(chunk, rows)+chunk/2) // a ragged tail is ignored
	a, err := raid.Create(r.devs, raid.CreateOptions{Name: "model", Level: level, Chunk: chunk}, raid.Options{CleanDelay: 20 * time.Millisecond})
	require.NoError(t, err)
	m := &model{t: t, rng: rand.New(rand.NewSource(seed)), level: level, chunk: chunk, r: r, a: a,
		data: make([]byte, a.Size()), failed: map[int]bool{}, detected: map[int]bool{}, geo: a.Geometry()}
	defer func() { checkAndClose(t, m.a) }()
	for i := 0; i < *modelOps; i++ {
		m.step(i)
		if t.Failed() {
			t.Fatalf("stopping at op %d (seed %d)", i, seed)
		}
	}
	m.verifyAll("end")
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
	case op < 84:
		m.failMember(i)
	case op < 88:
		m.reassemble(i)
	case op < 92:
		m.concurrent(i)
	default:
		m.verifyAll(fmt.Sprintf("op %d", i))
	}
}

// failMember makes one member return errors, if the level can survive it.
func (m *model) failMember(i int) {
	n := m.geo.Members()
	cand := m.rng.Intn(n)
	if m.failed[cand] {
		return
	}
	var mask uint64
	for f := range m.failed {
		mask |= 1 << uint(f)
	}
	if !m.geo.Survives(mask | 1<<uint(cand)) {
		return
	}
	m.failed[cand] = true
	m.r.toggles[cand].On()
	m.t.Logf("op %d: member %d starts failing", i, cand)
}

// reassemble closes the array and assembles it again. Failed members are
// either left out (a dead disk) or come back healthy (a disk that was
// unplugged): either way they must not be trusted.
func (m *model) reassemble(i int) {
	require.NoError(m.t, m.a.Close(), "op %d close", i)
	for _, d := range m.a.Status().Devices {
		for k, rd := range m.r.devs {
			if d.State != "active" && d.Path == rd.Path {
				m.detected[k] = true // recorded as failed or stale: never trusted again
			}
		}
	}
	var devs []raid.Device
	missing := false
	for k, d := range m.r.devs {
		if m.failed[k] {
			if m.rng.Intn(2) == 0 {
				missing = true
				continue
			}
			m.r.toggles[k].Off() // it comes back, with stale contents if the array noticed the failure
			if !m.detected[k] {
				delete(m.failed, k) // no I/O ever reached it: its contents are current
			} else {
				missing = true
			}
		}
		devs = append(devs, d)
	}
	m.rng.Shuffle(len(devs), func(a, b int) { devs[a], devs[b] = devs[b], devs[a] })
	a, err := raid.Assemble(devs, raid.Options{CleanDelay: 20 * time.Millisecond})
	require.NoError(m.t, err, "op %d assemble", i)
	m.a = a
	st := a.Status()
	if missing {
		assert.True(m.t, st.Degraded, "op %d: array with failed members must assemble degraded: %+v", i, st)
	}
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
