package member_test

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
)

// shmMembers creates n members of size bytes on tmpfs, each filled with
// random data but for its last page (never mapped for data), and returns
// them with their paths and contents.
func shmMembers(t *testing.T, n int, size int64) ([]*member.File, []string, [][]byte) {
	t.Helper()
	dir := membertest.TmpfsDir(t)
	rng := rand.New(rand.NewSource(int64(n)))
	var fs []*member.File
	var paths []string
	var data [][]byte
	for i := range n {
		p := filepath.Join(dir, "m"+string(rune('0'+i)))
		require.NoError(t, member.CreateSparse(p, size))
		f := openFile(t, p, member.Options{})
		require.True(t, member.Mapped(f))
		d := make([]byte, size-4096)
		rng.Read(d)
		_, err := f.WriteAt(d, 0)
		require.NoError(t, err)
		fs, paths, data = append(fs, f), append(paths, p), append(data, d)
	}
	return fs, paths, data
}

// TestReadSideBySide: reads of several members (and several of one
// member) served side by side return what ReadAt returns, whatever their
// lengths and offsets, with one copy through each member's mapping.
func TestReadSideBySide(t *testing.T) {
	fs, _, data := shmMembers(t, 3, 1<<20)
	var copies atomic.Int64
	defer member.SetMappedHook(func(_ *member.File, write bool) {
		if !write {
			copies.Add(1)
		}
	})()
	shapes := [][][3]int64{ // member, offset, length
		{{0, 0, 4096}, {1, 0, 4096}},
		{{0, 8192, 4096}, {1, 65536, 4096}, {2, 4096, 4096}},
		{{2, 1, 1}, {0, 777, 5000}, {1, 100000, 64 << 10}},
		{{0, 4096, 512}, {0, 12288, 513}, {1, 0, 1023}},
		{{1, 0, 1<<20 - 4096}, {2, 300, 40000}},
	}
	for _, sh := range shapes {
		copies.Store(0)
		reads := make([]member.SideRead, len(sh))
		members := map[int]bool{}
		for i, r := range sh {
			reads[i] = member.SideRead{F: fs[r[0]], P: make([]byte, r[2]), Off: r[1]}
			members[int(r[0])] = true
		}
		require.True(t, member.ReadSideBySide(reads), "shape %v", sh)
		for i, r := range sh {
			assert.True(t, bytes.Equal(data[r[0]][r[1]:r[1]+r[2]], reads[i].P), "shape %v, read %d", sh, i)
		}
		assert.EqualValues(t, len(members), copies.Load(), "shape %v: one copy through each member's mapping", sh)
	}
}

// TestReadSideBySideRefuses: what ReadAt would not serve from the mapping
// is refused whole, before any copy: a lone read, a read of a hole, past
// the data's end, of a closed member, or too many reads; and a copy that
// faults (the file truncated behind the member's back) reports false
// instead of crashing the process.
func TestReadSideBySideRefuses(t *testing.T) {
	fs, paths, _ := shmMembers(t, 3, 1<<20)
	var copies atomic.Int64
	defer member.SetMappedHook(func(*member.File, bool) { copies.Add(1) })()
	buf := func() []byte { return make([]byte, 4096) }
	ok := member.SideRead{F: fs[0], P: buf(), Off: 0}
	require.NoError(t, fs[1].Discard(64<<10, 4096))
	many := make([]member.SideRead, 17)
	for i := range many {
		many[i] = member.SideRead{F: fs[i%3], P: buf(), Off: 0}
	}
	for name, reads := range map[string][]member.SideRead{
		"lone":      {ok},
		"hole":      {ok, {F: fs[1], P: buf(), Off: 64 << 10}},
		"last page": {ok, {F: fs[1], P: buf(), Off: 1<<20 - 4096}},
		"past end":  {ok, {F: fs[1], P: buf(), Off: 1 << 20}},
		"too many":  many,
	} {
		copies.Store(0)
		assert.False(t, member.ReadSideBySide(reads), name)
		assert.Zero(t, copies.Load(), "%s: refused before any copy", name)
	}

	require.NoError(t, os.Truncate(paths[2], 4096))
	assert.False(t, member.ReadSideBySide([]member.SideRead{ok, {F: fs[2], P: buf(), Off: 512 << 10}}),
		"a copy beyond the truncated end faults, and reports false")

	require.NoError(t, fs[1].Close())
	copies.Store(0)
	assert.False(t, member.ReadSideBySide([]member.SideRead{ok, {F: fs[1], P: buf(), Off: 0}}), "closed")
	assert.Zero(t, copies.Load())
}

// TestReadSideBySideCloseRace: reads side by side of two members, taken
// in both orders at once, while both are closed: every call either
// returns true with the right bytes or false, none touches a mapping
// after it is gone, and none deadlocks with the Closes (each call locks
// the mappings in one order).
func TestReadSideBySideCloseRace(t *testing.T) {
	for round := 0; round < 10; round++ {
		dir := membertest.TmpfsDir(t)
		var fs [2]*member.File
		var data [2][]byte
		for i := range fs {
			p := filepath.Join(dir, "m"+string(rune('0'+i)))
			require.NoError(t, member.CreateSparse(p, 1<<20))
			f, err := member.Open(p, member.Options{})
			require.NoError(t, err)
			data[i] = bytes.Repeat([]byte{byte(i + 1)}, 64<<10)
			_, err = f.WriteAt(data[i], 0)
			require.NoError(t, err)
			fs[i] = f
		}
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, b := w%2, 1-w%2
				for {
					reads := []member.SideRead{
						{F: fs[a], P: make([]byte, 4096), Off: 8192},
						{F: fs[b], P: make([]byte, 4096), Off: 4096},
					}
					if !member.ReadSideBySide(reads) {
						return
					}
					if !bytes.Equal(reads[0].P, data[a][:4096]) || !bytes.Equal(reads[1].P, data[b][:4096]) {
						t.Error("a read side by side returned the wrong bytes")
						return
					}
				}
			}()
		}
		require.NoError(t, fs[round%2].Close())
		require.NoError(t, fs[1-round%2].Close())
		wg.Wait()
	}
}
