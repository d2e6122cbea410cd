package member_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
)

// shmMember creates a sparse file of size bytes on tmpfs (/dev/shm), or
// skips the test where there is none.
func shmMember(t *testing.T, size int64) string {
	t.Helper()
	path := filepath.Join(membertest.TmpfsDir(t), "member.img")
	require.NoError(t, member.CreateSparse(path, size))
	return path
}

// TestMappedMember: a member on tmpfs reads and writes its data through a
// shared mapping (copies, no system calls), and reading a hole through it
// never allocates the hole: pages are read through the mapping only once
// they are known to hold data (written, or data at Open), and a discarded
// page is a hole again.
func TestMappedMember(t *testing.T) {
	const size = 1 << 20
	path := shmMember(t, size)
	f := openFile(t, path, member.Options{})
	require.True(t, member.Mapped(f), "a tmpfs member is mapped")
	var reads, writes atomic.Int64
	defer member.SetMappedHook(func(_ *member.File, write bool) {
		if write {
			writes.Add(1)
		} else {
			reads.Add(1)
		}
	})()
	data := bytes.Repeat([]byte{0x5c}, 64<<10)
	_, err := f.WriteAt(data, 128<<10)
	require.NoError(t, err)
	_, err = f.WritevAt([][]byte{data[:4096], data[:4096]}, 512<<10)
	require.NoError(t, err)
	assert.EqualValues(t, 2, writes.Load(), "writes go through the mapping")
	assert.EqualValues(t, 64<<10+8<<10, allocated(t, path))

	// Reading everything, holes included, allocates nothing more; the
	// written pages come back through the mapping.
	want := make([]byte, size)
	copy(want[128<<10:], data)
	copy(want[512<<10:], data[:8192])
	got := make([]byte, size-4096) // the last page is never mapped
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want[:len(got)], got))
	got2 := [][]byte{make([]byte, 32<<10), make([]byte, 32<<10)}
	_, err = f.ReadvAt(got2, 128<<10)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, append(got2[0], got2[1]...)))
	one := make([]byte, 4096)
	_, err = f.ReadAt(one, 512<<10+4096)
	require.NoError(t, err)
	assert.EqualValues(t, 2, reads.Load(), "reads of written pages go through the mapping, reads of holes do not")
	assert.EqualValues(t, 64<<10+8<<10, allocated(t, path), "a read allocated a hole")

	// A discarded page is a hole again, and reading it keeps it one.
	require.NoError(t, f.Discard(128<<10, 64<<10))
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	copy(want[128<<10:], make([]byte, 64<<10))
	assert.True(t, bytes.Equal(want[:len(got)], got))
	assert.EqualValues(t, 8<<10, allocated(t, path), "a read allocated a discarded range")
	// A partial discard punches nothing, but the page no longer counts as
	// known data: it is read with a system call.
	r0 := reads.Load()
	require.NoError(t, f.Discard(512<<10, 512))
	_, err = f.ReadAt(one, 512<<10)
	require.NoError(t, err)
	assert.Equal(t, r0, reads.Load())
	assert.True(t, bytes.Equal(append(make([]byte, 512), data[:4096-512]...), one))
	copy(want[512<<10:], make([]byte, 512))

	// Data present at Open is found with SEEK_DATA and read through the
	// mapping; the holes stay holes.
	require.NoError(t, f.Close())
	g := openFile(t, path, member.Options{ReadOnly: true})
	require.True(t, member.Mapped(g))
	r0 = reads.Load()
	_, err = g.ReadAt(one, 512<<10+4096)
	require.NoError(t, err)
	assert.Equal(t, r0+1, reads.Load())
	_, err = g.ReadAt(got, 0)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want[:len(got)], got))
	assert.EqualValues(t, 8<<10, allocated(t, path))
}

// TestMappedNotOnDisk: members on other file systems, and direct or block
// members, use system calls only.
func TestMappedNotOnDisk(t *testing.T) {
	path := tempMember(t, 1<<20)
	if isTmpfs(filepath.Dir(path)) {
		t.Skip("the temporary directory is on tmpfs")
	}
	assert.False(t, member.Mapped(openFile(t, path, member.Options{})))
	if directSupported(t, path) {
		assert.False(t, member.Mapped(openFile(t, path, member.Options{Direct: true})))
	}
}

// TestMappedCloseRace closes a mapped member while readers and writers
// copy through its mapping: each call either completes or fails with
// os.ErrClosed, and none touches the mapping after it is gone (which would
// crash the process, or under the race detector report a race).
func TestMappedCloseRace(t *testing.T) {
	const size = 4 << 20
	for round := 0; round < 20; round++ {
		path := shmMember(t, size)
		f, err := member.Open(path, member.Options{})
		require.NoError(t, err)
		_, err = f.WriteAt(make([]byte, size-4096), 0)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := bytes.Repeat([]byte{byte(w)}, 64<<10)
				for i := 0; ; i++ {
					off := int64(i%32) * int64(len(buf))
					var err error
					if w%2 == 0 {
						_, err = f.WriteAt(buf, off)
					} else {
						_, err = f.ReadAt(buf, off)
					}
					if err != nil {
						if !errors.Is(err, os.ErrClosed) {
							t.Errorf("call racing Close: %v, want os.ErrClosed", err)
						}
						return
					}
				}
			}()
		}
		require.NoError(t, f.Close())
		wg.Wait()
	}
}

// TestMappedAllocs: a copy through the mapping allocates nothing.
func TestMappedAllocs(t *testing.T) {
	f := openFile(t, shmMember(t, 1<<20), member.Options{})
	p := make([]byte, 4096)
	bufs := [][]byte{p, p}
	_, err := f.WriteAt(make([]byte, 64<<10), 0)
	require.NoError(t, err)
	var copies atomic.Int64
	defer member.SetMappedHook(func(*member.File, bool) { copies.Add(1) })()
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = f.ReadAt(p, 4096)
		_, _ = f.WriteAt(p, 8192)
		_, _ = f.ReadvAt(bufs, 0)
		_, _ = f.WritevAt(bufs, 16384)
	})
	if !raceEnabled { // the race detector's instrumentation allocates
		assert.Zero(t, allocs)
	}
	assert.EqualValues(t, 4*101, copies.Load(), "every call was a copy")
}

// TestPrefetch: Prefetch is a hint that is safe anywhere: on a mapped
// member in and out of range (negative, past the end, the last page),
// while a Close unmaps the file under it, and after; it changes no byte
// and makes no hole data (the file's allocated size stays the same).
func TestPrefetch(t *testing.T) {
	const size = 4 << 20
	path := shmMember(t, size)
	f, err := member.Open(path, member.Options{})
	require.NoError(t, err)
	require.True(t, member.Mapped(f))
	want := bytes.Repeat([]byte{0x5a}, 1<<20)
	_, err = f.WriteAt(want, 0)
	require.NoError(t, err)
	var st unix.Stat_t
	require.NoError(t, unix.Stat(path, &st))
	blocks := st.Blocks
	for _, r := range [][2]int64{{0, 4096}, {4096, 1 << 20}, {2 << 20, 1 << 20}, {-4096, 8192}, {size - 4096, 4096}, {size, 4096}, {0, 0}, {0, size + 1}} {
		f.Prefetch(r[0], r[1])
	}
	require.NoError(t, unix.Stat(path, &st))
	assert.Equal(t, blocks, st.Blocks, "a prefetch of holes allocates nothing")
	got := make([]byte, len(want))
	_, err = f.ReadAt(got, 0)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				f.Prefetch(0, size-4096)
			}
		}
	}()
	require.NoError(t, f.Close())
	close(stop)
	<-done
	f.Prefetch(0, 4096) // closed: nothing
}
