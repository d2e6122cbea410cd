package integrity_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid/internal/integrity"
)

// summingMem is a memory member whose copies sum (member.Memory's
// *Sums methods), counting the requests its copies summed; with refuse
// set it writes and reads as the plain methods and reports that it did
// not sum (a File whose copy faulted, or not held in memory).
type summingMem struct {
	*member.Memory
	refuse bool
	summed atomic.Int64
}

func (m *summingMem) count(ok bool) bool {
	if ok {
		m.summed.Add(1)
	}
	return ok
}

func (m *summingMem) WriteAtSums(p []byte, off int64, sums []uint32) (int, bool, error) {
	if m.refuse {
		n, err := m.WriteAt(p, off)
		return n, false, err
	}
	n, ok, err := m.Memory.WriteAtSums(p, off, sums)
	return n, m.count(ok), err
}

func (m *summingMem) WritevAtSums(bufs [][]byte, off int64, sums []uint32) (int, bool, error) {
	if m.refuse {
		n := 0
		for _, b := range bufs {
			k, err := m.WriteAt(b, off+int64(n))
			if n += k; err != nil {
				return n, false, err
			}
		}
		return n, false, nil
	}
	n, ok, err := m.Memory.WritevAtSums(bufs, off, sums)
	return n, m.count(ok), err
}

func (m *summingMem) ReadAtSums(p []byte, off int64, sums []uint32) (int, bool, error) {
	if m.refuse {
		n, err := m.ReadAt(p, off)
		return n, false, err
	}
	n, ok, err := m.Memory.ReadAtSums(p, off, sums)
	return n, m.count(ok), err
}

func (m *summingMem) ReadvAtSums(bufs [][]byte, off int64, sums []uint32) (int, bool, error) {
	if m.refuse {
		n := 0
		for _, b := range bufs {
			k, err := m.ReadAt(b, off+int64(n))
			if n += k; err != nil {
				return n, false, err
			}
		}
		return n, false, nil
	}
	n, ok, err := m.Memory.ReadvAtSums(bufs, off, sums)
	return n, m.count(ok), err
}

// ReadvAt and WritevAt make the Dev take its vectored paths.
func (m *summingMem) ReadvAt(bufs [][]byte, off int64) (int, error) {
	n, _, err := m.Memory.ReadvAtSums(bufs, off, make([]uint32, 1+int(total(bufs))/integrity.BlockSize))
	return n, err
}

func (m *summingMem) WritevAt(bufs [][]byte, off int64) (int, error) {
	n, _, err := m.Memory.WritevAtSums(bufs, off, make([]uint32, 1+int(total(bufs))/integrity.BlockSize))
	return n, err
}

// plainMem hides Memory's summing copies (and everything but the Member
// methods): its Dev computes every CRC.
type plainMem struct{ m *member.Memory }

func (p plainMem) ReadAt(b []byte, off int64) (int, error)  { return p.m.ReadAt(b, off) }
func (p plainMem) WriteAt(b []byte, off int64) (int, error) { return p.m.WriteAt(b, off) }
func (p plainMem) Sync() error                              { return p.m.Sync() }
func (p plainMem) Discard(off, n int64) error               { return p.m.Discard(off, n) }
func (p plainMem) Size() int64                              { return p.m.Size() }
func (p plainMem) Close() error                             { return p.m.Close() }

func total(bufs [][]byte) int64 {
	n := int64(0)
	for _, b := range bufs {
		n += int64(len(b))
	}
	return n
}

// TestCopySums: a Dev over a device whose copies sum (a member held in
// memory) has the copies compute the checksums of large whole-block
// writes and reads (WriteAt, WritevAt, WriteShared, ReadAt, ReadvAt), and
// stores and checks the same entries as a Dev that computes them itself:
// everything written reads back through a fresh Dev, a flipped bit is a
// mismatch, a hole reads as zeroes. Shared writes mix a summing device
// (whose copy computes every CRC for the others), one that computes
// pieces, and one whose copy declines to sum. It fails if the Dev stops
// handing its large writes and reads to the summing copy.
func TestCopySums(t *testing.T) {
	const size = 4 << 20
	seed := uint64(1201)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	newMem := func() *member.Memory { return member.NewMemory(dataOff + size) }
	cfg := integrity.Config{DataOffset: dataOff, DataSize: size, AreaOffset: areaOff}
	sm, refusing := &summingMem{Memory: newMem()}, &summingMem{Memory: newMem(), refuse: true}
	pm := plainMem{newMem()}
	var devs []*integrity.Dev
	for _, m := range []integrity.Member{sm, pm, refusing} {
		d, err := integrity.New(m, cfg)
		require.NoError(t, err)
		devs = append(devs, d)
	}
	want := make([][]byte, len(devs))
	for i := range want {
		want[i] = make([]byte, size)
	}
	random := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	var s integrity.Shared
	for round := range 60 {
		nb := 8 + rng.IntN(200) // copySumsMin or more
		off := int64(rng.IntN(size/4096-nb)) * 4096
		switch round % 3 {
		case 0: // WriteAt on each device
			p := random(nb * 4096)
			for i, d := range devs {
				_, err := d.WriteAt(p, dataOff+off)
				require.NoError(t, err)
				copy(want[i][off:], p)
			}
		case 1: // WritevAt
			p := random(nb * 4096)
			cut := rng.IntN(nb) * 4096
			bufs := [][]byte{p[:cut], p[cut:]}
			if cut == 0 {
				bufs = bufs[1:]
			}
			for i, d := range devs {
				_, err := d.WritevAt(bufs, dataOff+off)
				require.NoError(t, err)
				copy(want[i][off:], p)
			}
		default: // WriteShared by all three at once
			p := random(nb * 4096)
			require.True(t, s.Reset([][]byte{p}))
			var wg sync.WaitGroup
			for i, d := range devs {
				wg.Go(func() {
					_, err := d.WriteShared(dataOff+off, &s)
					assert.NoError(t, err)
				})
				copy(want[i][off:], p)
			}
			wg.Wait()
			s.Release()
		}
	}
	// A hole in the middle of what the reads cover.
	for i, d := range devs {
		require.NoError(t, d.Discard(dataOff+size/2, 8*4096))
		clear(want[i][size/2 : size/2+8*4096])
	}
	before := sm.summed.Load()
	require.Positive(t, before, "the summing device's copies computed no checksum of a write")
	for i, d := range devs {
		got := make([]byte, size)
		_, err := d.ReadAt(got, dataOff)
		require.NoError(t, err, "device %d", i)
		require.True(t, bytes.Equal(want[i], got), "device %d", i)
		got2 := make([]byte, size)
		_, err = d.ReadvAt([][]byte{got2[:size/2], got2[size/2:]}, dataOff)
		require.NoError(t, err, "device %d", i)
		require.True(t, bytes.Equal(want[i], got2), "device %d", i)
		require.NoError(t, d.Sync())
	}
	assert.Greater(t, sm.summed.Load(), before, "the summing device's copies computed no checksum of a read")
	// The entries on the members are the ones a Dev that computes them
	// itself checks against.
	for i, m := range []*member.Memory{sm.Memory, pm.m, refusing.Memory} {
		fresh, err := integrity.New(plainMem{m}, cfg)
		require.NoError(t, err)
		_, err = fresh.ReadAt(make([]byte, size), dataOff)
		require.NoError(t, err, "device %d", i)
	}
	// A flipped bit is found by a summed read.
	sm.Bytes()[dataOff+size/4+100] ^= 4
	_, err := devs[0].ReadvAt([][]byte{make([]byte, 64<<10), make([]byte, 64<<10)}, dataOff+size/4-64<<10)
	var me *integrity.MismatchError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, int64(size/4), me.Offset, fmt.Sprint(me))
	_, err = devs[0].ReadAt(make([]byte, 128<<10), dataOff+size/4)
	require.ErrorAs(t, err, &me)
}
