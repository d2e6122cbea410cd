package raid_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

func waitIdle(t *testing.T, a *raid.Array) raid.Status {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := a.Status()
		if st.Recovery == nil && st.Resync == nil {
			return st
		}
		require.True(t, time.Now().Before(deadline), "recovery did not finish: %+v", st.Recovery)
		time.Sleep(time.Millisecond)
	}
}

func fill(t *testing.T, a *raid.Array, seed int64) []byte {
	t.Helper()
	want := make([]byte, a.Size())
	rand.New(rand.NewSource(seed)).Read(want)
	_, err := a.WriteAt(want, 0)
	require.NoError(t, err)
	return want
}

func requireContent(t *testing.T, a *raid.Array, want []byte, msg string) {
	t.Helper()
	got := make([]byte, len(want))
	_, err := a.ReadAt(got, 0)
	require.NoError(t, err, msg)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %s", msg, firstDiff(got, want, 0))
	}
}

func hasEvent(st raid.Status, kind raid.EventKind) bool {
	for _, e := range st.History {
		if e.Kind == kind {
			return true
		}
	}
	return false
}

// TestRebuildOntoSpare fails a member, lets the spare take its place, then
// fails a different original member: the data must still be intact, which
// proves the rebuilt member holds the right bytes.
func TestRebuildOntoSpare(t *testing.T) {
	for _, s := range []struct {
		level        stripe.Level
		n            int
		first, other int
	}{{stripe.RAID1, 2, 0, 1}, {stripe.RAID5, 4, 1, 2}, {stripe.RAID5, 3, 2, 0}, {stripe.RAID10, 4, 0, 1}, {stripe.RAID10, 3, 1, 2}} {
		t.Run(fmt.Sprintf("%s/members=%d", s.level, s.n), func(t *testing.T) {
			const chunk = 16 << 10
			r := newRig(s.n+1, memberSizeFor(chunk, 24))
			a := createArray(t, r.devs[:s.n], raid.CreateOptions{Name: "rb", Level: s.level, Chunk: chunk, Spares: r.devs[s.n:]}, raid.Options{CleanDelay: -1})
			want := fill(t, a, 5)
			require.NoError(t, a.FailMember(r.devs[s.first].Path))
			st := waitIdle(t, a)
			require.False(t, st.Degraded, "the spare must have been rebuilt: %+v", st.Devices)
			assert.True(t, hasEvent(st, raid.EventSpareClaimed))
			assert.True(t, hasEvent(st, raid.EventRebuildFinished))
			checkConsistent(t, a)
			r.toggles[s.other].On() // a different original member dies
			requireContent(t, a, want, "after losing another original member")
			assert.True(t, a.Status().Degraded)
		})
	}
}

// TestRebuildUnderLoad rebuilds while writers and readers run, with the
// rebuild slowed down so that they really overlap.
func TestRebuildUnderLoad(t *testing.T) {
	for _, level := range []stripe.Level{stripe.RAID1, stripe.RAID5, stripe.RAID10} {
		t.Run(level.String(), func(t *testing.T) {
			const chunk = 8 << 10
			n := 4
			r := newRig(n+1, memberSizeFor(chunk, 64))
			a := createArray(t, r.devs[:n], raid.CreateOptions{Name: "load", Level: level, Chunk: chunk}, raid.Options{CleanDelay: -1, RebuildMinRate: 64 * chunk * 4, RebuildMaxRate: 64 * chunk * 8})
			want := fill(t, a, 9)
			r.toggles[2].On()
			requireContent(t, a, want, "degraded")
			require.NoError(t, a.AddMember(r.devs[n], false))
			rng := rand.New(rand.NewSource(3))
			for a.Status().Recovery != nil {
				off := rng.Int63n(a.Size() - 3*chunk)
				p := make([]byte, 1+rng.Intn(3*chunk))
				rng.Read(p)
				_, err := a.WriteAt(p, off)
				require.NoError(t, err)
				copy(want[off:], p)
				q := make([]byte, len(p))
				_, err = a.ReadAt(q, off)
				require.NoError(t, err)
				require.Equal(t, p, q)
			}
			st := waitIdle(t, a)
			require.False(t, st.Degraded)
			requireContent(t, a, want, "after rebuild under load")
			r.toggles[(2+1)%n].On()
			if level == stripe.RAID10 {
				r.toggles[(2+1)%n].Off()
				r.toggles[(2+2)%n].On() // not the rebuilt member's partner... both work for n=4 near-2
			}
			requireContent(t, a, want, "after losing another member")
		})
	}
}

// TestReplace copies a member onto a new device while I/O goes on: the
// array is never degraded, and the old member leaves at the end.
func TestReplace(t *testing.T) {
	const chunk = 8 << 10
	r := newRig(5, memberSizeFor(chunk, 48))
	a := createArray(t, r.devs[:4], raid.CreateOptions{Name: "rep", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1, RebuildMinRate: 48 * chunk * 4})
	want := fill(t, a, 11)
	require.NoError(t, a.ReplaceMember(r.devs[1].Path, r.devs[4], false))
	rng := rand.New(rand.NewSource(4))
	for a.Status().Recovery != nil {
		assert.False(t, a.Status().Degraded, "a planned replacement never degrades the array")
		off := rng.Int63n(a.Size() - chunk)
		p := make([]byte, 1+rng.Intn(chunk))
		rng.Read(p)
		_, err := a.WriteAt(p, off)
		require.NoError(t, err)
		copy(want[off:], p)
	}
	st := waitIdle(t, a)
	assert.True(t, hasEvent(st, raid.EventReplaceFinished), "%+v", st.History)
	for _, d := range st.Devices {
		assert.NotEqual(t, r.devs[1].Path, d.Path, "the replaced member must have left")
		if d.Path == r.devs[4].Path {
			assert.Equal(t, "active", d.State)
			assert.Equal(t, 1, d.Role)
		}
	}
	r.toggles[0].On() // lose another original: the replacement must carry role 1
	requireContent(t, a, want, "after replace and losing member 0")
}

// TestReplaceOldFails: when the member being replaced dies during the copy,
// the replacement is rebuilt from redundancy from where the copy was.
func TestReplaceOldFails(t *testing.T) {
	const chunk = 8 << 10
	r := newRig(5, memberSizeFor(chunk, 48))
	a := createArray(t, r.devs[:4], raid.CreateOptions{Name: "rep2", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1, RebuildMinRate: 48 * chunk * 2, RebuildMaxRate: 48 * chunk * 2})
	want := fill(t, a, 12)
	require.NoError(t, a.ReplaceMember(r.devs[3].Path, r.devs[4], false))
	time.Sleep(50 * time.Millisecond)
	r.toggles[3].On()
	st := waitIdle(t, a)
	require.False(t, st.Degraded, "%+v", st.Devices)
	requireContent(t, a, want, "after the old member failed mid-replace")
	checkConsistent(t, a)
}

// TestReadErrorRepair: a read error on a member with redundancy returns the
// right bytes and rewrites the bad range; only if the rewrite fails is the
// member failed.
func TestReadErrorRepair(t *testing.T) {
	for _, level := range []stripe.Level{stripe.RAID1, stripe.RAID5, stripe.RAID10} {
		t.Run(level.String(), func(t *testing.T) {
			const chunk = 16 << 10
			n := 4
			if level == stripe.RAID1 {
				n = 2
			}
			mems := make([]*member.Memory, n)
			readTg := make([]*membertest.Toggle, n)
			writeTg := make([]*membertest.Toggle, n)
			var devs []raid.Device
			for i := range mems {
				mems[i] = member.NewMemory(memberSizeFor(chunk, 8))
				readTg[i] = membertest.NewToggle(membertest.OpFilter(membertest.Always(), membertest.OpRead))
				writeTg[i] = membertest.NewToggle(membertest.OpFilter(membertest.Always(), membertest.OpWrite))
				devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: keep{membertest.Inject(mems[i], membertest.Any(readTg[i], writeTg[i]))}})
			}
			a := createArray(t, devs, raid.CreateOptions{Name: "rr", Level: level, Chunk: chunk}, raid.Options{CleanDelay: -1})
			want := fill(t, a, 13)
			// Member 0's reads fail once: the read is served and repaired.
			readTg[0].On()
			got := make([]byte, a.Size())
			_, err := a.ReadAt(got, 0)
			readTg[0].Off()
			require.NoError(t, err)
			require.Equal(t, want, got)
			st := a.Status()
			assert.False(t, st.Degraded, "a repaired member stays in the array")
			assert.True(t, hasEvent(st, raid.EventReadRepaired))
			// Now the rewrite fails too: the member is failed.
			readTg[0].On()
			writeTg[0].On()
			_, err = a.ReadAt(got, 0)
			require.NoError(t, err)
			require.Equal(t, want, got)
			assert.True(t, a.Status().Degraded, "a member whose repair fails is failed")
		})
	}
}

// TestRebuildResumesAtCheckpoint stops an array mid-rebuild and assembles it
// again: the rebuild continues from its checkpoint instead of row 0.
func TestRebuildResumesAtCheckpoint(t *testing.T) {
	const chunk = 4 << 10
	const rows = 400
	r := newRig(4, memberSizeFor(chunk, rows))
	a, err := raid.Create(r.devs[:3], raid.CreateOptions{Name: "ck", Level: stripe.RAID5, Chunk: chunk, Spares: r.devs[3:]},
		raid.Options{CleanDelay: -1, RebuildMinRate: 100 * chunk, RebuildMaxRate: 100 * chunk, ProgressInterval: 20 * time.Millisecond})
	require.NoError(t, err)
	want := fill(t, a, 14)
	require.NoError(t, a.FailMember(r.devs[0].Path))
	time.Sleep(400 * time.Millisecond) // about 40 rows at 100 rows/s
	done := a.Status().Recovery.Done
	require.Greater(t, done, int64(5))
	require.NoError(t, a.Close())
	// Rate-limited (about a second for the rest), so the resumed rebuild is
	// still running when we look.
	b := assembleArray(t, r.devs[1:], raid.Options{CleanDelay: -1, RebuildMinRate: 400 * chunk, RebuildMaxRate: 400 * chunk})
	st := b.Status()
	require.NotNil(t, st.Recovery, "the rebuild must resume")
	assert.GreaterOrEqual(t, st.Recovery.Done, done-5, "resumed from the checkpoint, not from the start")
	st = waitIdle(t, b)
	require.False(t, st.Degraded)
	requireContent(t, b, want, "after resumed rebuild")
}

// TestBitmapWriteFailure: a member that cannot take a write-intent bitmap
// update is failed before the write that needed the update goes ahead, and
// the write still succeeds on the survivors.
func TestBitmapWriteFailure(t *testing.T) {
	const chunk = 16 << 10
	var devs []raid.Device
	var tgs []*membertest.Toggle
	for i := 0; i < 3; i++ {
		tg := membertest.NewToggle(membertest.InRange(superblock.BitmapOffset, superblock.BitmapBytes, membertest.OpFilter(membertest.Always(), membertest.OpWrite)))
		tgs = append(tgs, tg)
		devs = append(devs, raid.Device{Path: fmt.Sprint("b", i), Member: keep{membertest.Inject(member.NewMemory(memberSizeFor(chunk, 64)), tg)}})
	}
	a := createArray(t, devs, raid.CreateOptions{Name: "bm", Level: stripe.RAID5, Chunk: chunk, BitmapRegion: 8 * chunk}, raid.Options{CleanDelay: -1})
	p := make([]byte, 3*chunk)
	rand.New(rand.NewSource(5)).Read(p)
	tgs[1].On()
	_, err := a.WriteAt(p, 0) // dirties region 0: the bitmap update fails on member 1
	require.NoError(t, err)
	st := a.Status()
	assert.True(t, st.Degraded, "the member that lost its bitmap update must be failed")
	got := make([]byte, len(p))
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	assert.Equal(t, p, got)
}
