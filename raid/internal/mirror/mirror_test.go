package mirror_test

import (
	"bytes"
	"errors"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/mirror"
	"github.com/raidd/raidd/stripe"
)

const chunk = 4 << 10

type rig struct {
	g      stripe.Geometry
	l      raid.Layout
	mems   []*member.Memory
	faults []*membertest.Toggle // fail reads while on
	devs   []raid.Member
}

func newRig(t *testing.T, level stripe.Level, members int, rows int64) *rig {
	t.Helper()
	g, err := stripe.New(level, members, chunk, rows*chunk)
	require.NoError(t, err)
	l, err := mirror.New(g)
	require.NoError(t, err)
	r := &rig{g: g, l: l}
	for i := 0; i < members; i++ {
		m := member.NewMemory(rows * chunk)
		tg := membertest.NewToggle(membertest.OpFilter(membertest.Always(), membertest.OpRead))
		r.mems = append(r.mems, m)
		r.faults = append(r.faults, tg)
		r.devs = append(r.devs, membertest.Inject(m, tg))
	}
	return r
}

func (r *rig) op(t *testing.T, c raid.OpConfig) *raid.Op {
	t.Helper()
	if c.Members == nil {
		c.Members = r.devs
	}
	o, err := raid.NewOp(r.g, c)
	require.NoError(t, err)
	return o
}

func random(n int64, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func TestNotMirrored(t *testing.T) {
	g, err := stripe.New(stripe.RAID5, 3, chunk, 4*chunk)
	require.NoError(t, err)
	_, err = mirror.New(g)
	assert.Error(t, err)
}

// TestCopies: every chunk lands on each of its copies (RAID1: every
// member; RAID10 with an odd member count: copies straddling rows), and
// reads back whole.
func TestCopies(t *testing.T) {
	for _, tc := range []struct {
		level   stripe.Level
		members int
	}{{stripe.RAID1, 2}, {stripe.RAID1, 3}, {stripe.RAID10, 2}, {stripe.RAID10, 3}, {stripe.RAID10, 4}} {
		t.Run(stripe.Level(tc.level).String(), func(t *testing.T) {
			r := newRig(t, tc.level, tc.members, 6)
			data := random(r.g.Size(), 1)
			require.NoError(t, r.l.WriteAt(r.op(t, raid.OpConfig{}), data, 0))
			for c := int64(0); c < r.g.Size()/chunk; c++ {
				for _, loc := range r.g.Copies(nil, c, 0) {
					assert.Equal(t, data[c*chunk:(c+1)*chunk], r.mems[loc.Member].Bytes()[loc.Off:loc.Off+chunk], "chunk %d copy on member %d", c, loc.Member)
				}
			}
			got := make([]byte, r.g.Size())
			require.NoError(t, r.l.ReadAt(r.op(t, raid.OpConfig{}), got, 0))
			assert.Equal(t, data, got)
			assert.NoError(t, r.l.Check(r.op(t, raid.OpConfig{Locked: true}), 0))
		})
	}
}

// TestReadErrorRepair: a copy that fails to read makes an unlocked read ask
// for the locks; under them the read is served from another copy and the
// bad copy is rewritten with the good bytes.
func TestReadErrorRepair(t *testing.T) {
	r := newRig(t, stripe.RAID1, 2, 4)
	data := random(r.g.Size(), 2)
	require.NoError(t, r.l.WriteAt(r.op(t, raid.OpConfig{}), data, 0))
	copy(r.mems[0].Bytes()[chunk:], make([]byte, chunk)) // what a repair must undo
	r.faults[0].On()
	got := make([]byte, 2*chunk)
	o := r.op(t, raid.OpConfig{})
	err := r.l.ReadAt(o, got, 0)
	require.Error(t, err)
	assert.True(t, errors.Is(err, o.NeedLock()), "an unlocked read that meets a failed copy asks for the locks: %v", err)

	locked := r.op(t, raid.OpConfig{Locked: true})
	require.NoError(t, r.l.ReadAt(locked, got, 0))
	assert.Equal(t, data[:2*chunk], got)
	r.faults[0].Off()
	if locked.ReadFailed(0) {
		assert.Equal(t, data[:2*chunk], r.mems[0].Bytes()[:2*chunk], "the copy that failed to read was rewritten")
		assert.False(t, locked.Failed(0), "a repaired member is not failed")
	} else {
		t.Fatal("the read never went to member 0; the test does not test repair")
	}
}

// TestDegraded: with a copy missing, reads use the others, writes go to
// what is left, and a write with no copy left fails.
func TestDegraded(t *testing.T) {
	r := newRig(t, stripe.RAID10, 4, 4)
	devs := append([]raid.Member(nil), r.devs...)
	devs[1] = nil
	data := random(r.g.Size(), 3)
	require.NoError(t, r.l.WriteAt(r.op(t, raid.OpConfig{Members: devs}), data, 0))
	got := make([]byte, r.g.Size())
	require.NoError(t, r.l.ReadAt(r.op(t, raid.OpConfig{Members: devs}), got, 0))
	assert.Equal(t, data, got)
	devs[0] = nil // members 0 and 1 hold the copies of chunk 0
	err := r.l.WriteAt(r.op(t, raid.OpConfig{Members: devs}), data[:chunk], 0)
	assert.ErrorIs(t, err, raid.ErrTooManyFailures)
}

// TestResyncAndRebuild: Resync copies a readable copy over the others;
// Rebuild writes only the target, which is writable but not readable.
func TestResyncAndRebuild(t *testing.T) {
	r := newRig(t, stripe.RAID1, 3, 4)
	data := random(r.g.Size(), 4)
	require.NoError(t, r.l.WriteAt(r.op(t, raid.OpConfig{}), data, 0))
	copy(r.mems[2].Bytes()[chunk:2*chunk], bytes.Repeat([]byte{9}, chunk))
	err := r.l.Check(r.op(t, raid.OpConfig{Locked: true}), 1)
	assert.ErrorIs(t, err, raid.ErrInconsistent)
	require.NoError(t, r.l.Resync(r.op(t, raid.OpConfig{Locked: true}), 1))
	assert.NoError(t, r.l.Check(r.op(t, raid.OpConfig{Locked: true}), 1))
	assert.Equal(t, data[chunk:2*chunk], r.mems[2].Bytes()[chunk:2*chunk])

	clear(r.mems[1].Bytes())
	for row := int64(0); row < r.g.Rows(); row++ {
		require.NoError(t, r.l.Rebuild(r.op(t, raid.OpConfig{Locked: true, Unreadable: 1 << 1}), row, 1))
	}
	assert.Equal(t, data, r.mems[1].Bytes())
}

func TestTraits(t *testing.T) {
	r := newRig(t, stripe.RAID1, 2, 2)
	tr := r.l.Traits()
	assert.True(t, tr.LockWrites, "copies must see overlapping writes in one order")
	assert.False(t, tr.LockDegradedReads)
	assert.False(t, tr.Coalesce)
	assert.True(t, tr.ResyncDegraded)
}

// countingMember counts the read calls (ReadAt or ReadvAt) it serves.
type countingMember struct {
	*member.Memory
	reads int
}

func (c *countingMember) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.Memory.ReadAt(p, off)
}

func (c *countingMember) ReadvAt(bufs [][]byte, off int64) (int, error) {
	c.reads++
	return c.Memory.ReadvAt(bufs, off)
}

// TestLargeReadOneRunPerMember reads 16 chunks from a 4-member RAID1 and
// RAID10: each member must serve one run of back-to-back chunks, one read
// call, rather than every fourth (RAID1) or every other (RAID10) chunk of
// the request as four separate reads. A 1-chunk read still rotates over
// the copies.
func TestLargeReadOneRunPerMember(t *testing.T) {
	for _, level := range []stripe.Level{stripe.RAID1, stripe.RAID10} {
		t.Run(level.String(), func(t *testing.T) {
			const members, rows = 4, 64
			g, err := stripe.New(level, members, chunk, rows*chunk)
			require.NoError(t, err)
			l, err := mirror.New(g)
			require.NoError(t, err)
			var cms []*countingMember
			var devs []raid.Member
			for i := 0; i < members; i++ {
				cm := &countingMember{Memory: member.NewMemory(rows * chunk)}
				cms = append(cms, cm)
				devs = append(devs, cm)
			}
			want := random(16*chunk, 1)
			op, err := raid.NewOp(g, raid.OpConfig{Members: devs, Locked: true})
			require.NoError(t, err)
			require.NoError(t, l.WriteAt(op, want, 4*chunk))
			for _, at := range []int64{4 * chunk, 5 * chunk} { // row-aligned and not
				for _, cm := range cms {
					cm.reads = 0
				}
				got := make([]byte, 16*chunk)
				op, err = raid.NewOp(g, raid.OpConfig{Members: devs})
				require.NoError(t, err)
				require.NoError(t, l.ReadAt(op, got, at))
				if at == 4*chunk {
					assert.Equal(t, want, got)
				}
				for m, cm := range cms {
					assert.Equal(t, 1, cm.reads, "member %d, 16-chunk read at %d", m, at)
				}
			}
			// Single-chunk reads of consecutive chunks visit every member.
			for _, cm := range cms {
				cm.reads = 0
			}
			for c := int64(0); c < 8; c++ {
				op, err = raid.NewOp(g, raid.OpConfig{Members: devs})
				require.NoError(t, err)
				require.NoError(t, l.ReadAt(op, make([]byte, chunk), c*chunk))
			}
			for m, cm := range cms {
				assert.Equal(t, 2, cm.reads, "member %d, eight 1-chunk reads", m)
			}
		})
	}
}
