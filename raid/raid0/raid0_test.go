package raid0_test

import (
	"bytes"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/raid0"
	"github.com/raidd/raidd/stripe"
)

const chunk = 4 << 10

func setup(t *testing.T, members int, rows int64) (stripe.Geometry, raid.Layout, []*member.Memory) {
	t.Helper()
	g, err := stripe.New(stripe.RAID0, members, chunk, rows*chunk)
	require.NoError(t, err)
	l, err := raid0.New(g)
	require.NoError(t, err)
	var mems []*member.Memory
	for i := 0; i < members; i++ {
		mems = append(mems, member.NewMemory(rows*chunk))
	}
	return g, l, mems
}

func op(t *testing.T, g stripe.Geometry, devs []raid.Member, c raid.OpConfig) *raid.Op {
	t.Helper()
	c.Members = devs
	o, err := raid.NewOp(g, c)
	require.NoError(t, err)
	return o
}

func asMembers(mems []*member.Memory) []raid.Member {
	out := make([]raid.Member, len(mems))
	for i, m := range mems {
		out[i] = m
	}
	return out
}

// TestStriping: array chunk c is on member c mod n at row c div n, and a
// write that crosses chunks reads back whole.
func TestStriping(t *testing.T) {
	g, l, mems := setup(t, 3, 4)
	devs := asMembers(mems)
	data := make([]byte, g.Size())
	rand.New(rand.NewSource(1)).Read(data)
	require.NoError(t, l.WriteAt(op(t, g, devs, raid.OpConfig{}), data, 0))
	for c := int64(0); c < g.Size()/chunk; c++ {
		m, row := int(c%3), c/3
		assert.Equal(t, data[c*chunk:(c+1)*chunk], mems[m].Bytes()[row*chunk:(row+1)*chunk], "chunk %d on member %d row %d", c, m, row)
	}
	// An unaligned range over three chunks.
	off, n := int64(chunk-100), int64(2*chunk+200)
	patch := bytes.Repeat([]byte{0x5a}, int(n))
	require.NoError(t, l.WriteAt(op(t, g, devs, raid.OpConfig{}), patch, off))
	copy(data[off:], patch)
	got := make([]byte, g.Size())
	require.NoError(t, l.ReadAt(op(t, g, devs, raid.OpConfig{}), got, 0))
	assert.Equal(t, data, got)
}

// TestDiscard makes the range read as zeroes on the members holding it.
func TestDiscard(t *testing.T) {
	g, l, mems := setup(t, 2, 4)
	devs := asMembers(mems)
	data := bytes.Repeat([]byte{1}, int(g.Size()))
	require.NoError(t, l.WriteAt(op(t, g, devs, raid.OpConfig{}), data, 0))
	require.NoError(t, l.Discard(op(t, g, devs, raid.OpConfig{}), chunk, 2*chunk))
	got := make([]byte, g.Size())
	require.NoError(t, l.ReadAt(op(t, g, devs, raid.OpConfig{}), got, 0))
	copy(data[chunk:3*chunk], make([]byte, 2*chunk))
	assert.Equal(t, data, got)
}

// TestNoRedundancy: a missing or failing member fails every request that
// touches it, and there is nothing to rebuild from.
func TestNoRedundancy(t *testing.T) {
	g, l, mems := setup(t, 2, 4)
	devs := asMembers(mems)
	devs[1] = nil
	buf := make([]byte, 2*chunk)
	assert.ErrorIs(t, l.ReadAt(op(t, g, devs, raid.OpConfig{}), buf, 0), raid.ErrTooManyFailures)
	assert.ErrorIs(t, l.WriteAt(op(t, g, devs, raid.OpConfig{}), buf, 0), raid.ErrTooManyFailures)
	// Chunk 0 is on member 0 alone: it is still served.
	assert.NoError(t, l.ReadAt(op(t, g, devs, raid.OpConfig{}), buf[:chunk], 0))

	devs = asMembers(mems)
	devs[0] = membertest.Inject(mems[0], membertest.OpFilter(membertest.Always(), membertest.OpRead))
	o := op(t, g, devs, raid.OpConfig{})
	assert.ErrorIs(t, l.ReadAt(o, buf, 0), raid.ErrTooManyFailures)
	assert.True(t, o.ReadFailed(0), "the failed read is recorded on the op")
	assert.ErrorIs(t, l.Rebuild(op(t, g, asMembers(mems), raid.OpConfig{Locked: true}), 0, 1), raid.ErrTooManyFailures)
	assert.ErrorIs(t, l.Check(op(t, g, asMembers(mems), raid.OpConfig{Locked: true}), 0), raid.ErrUnverifiable, "raid0 has nothing to compare")
	assert.Equal(t, raid.Traits{}, l.Traits(), "raid0 locks nothing, coalesces nothing, resyncs nothing")
}
