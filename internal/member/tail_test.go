package member_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
)

// tailDirs are the file systems the size-check tests run on: the test's
// temporary directory, and tmpfs (/dev/shm), where faulting in a hole
// would allocate it.
func tailDirs(t *testing.T) map[string]string {
	dirs := map[string]string{"tempdir": t.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "member-tail")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(d) })
		dirs["shm"] = d
	}
	return dirs
}

// TestSizeCheckWithoutFstat: writes below the last page of a regular file
// check the size with a mapping of that page and make no fstat (on tmpfs
// once that page holds data, before which each write makes one: faulting
// in the hole would allocate it); writes into the last page keep the
// fstat. The check still finds a shrink (TestShrunk covers every kind of
// write).
func TestSizeCheckWithoutFstat(t *testing.T) {
	const size = 1 << 20
	page := int64(os.Getpagesize())
	var stats atomic.Int64
	defer member.SetStatHook(func() { stats.Add(1) })()
	for name, dir := range tailDirs(t) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "m.img")
			require.NoError(t, member.CreateSparse(path, size))
			f := openFile(t, path, member.Options{})
			holeFaults := f.InMemory()
			assert.Equal(t, !holeFaults, member.TailMapped(f), "the last page is a hole: mapped unless on tmpfs")
			assert.False(t, f.HasData(size-page, page))

			data := make([]byte, 4096)
			stats.Store(0)
			_, err := f.WriteAt(data, 0)
			require.NoError(t, err)
			if holeFaults {
				assert.Equal(t, int64(1), stats.Load(), "without the mapping a write makes an fstat")
			} else {
				assert.Zero(t, stats.Load(), "a mapped hole: no fstat")
				assert.False(t, f.HasData(size-page, page), "the probe of the hole made it data")
			}

			_, err = f.WriteAt(data, size-4096)
			require.NoError(t, err)
			assert.True(t, member.TailMapped(f), "a write into the last page maps it")

			stats.Store(0)
			for off := int64(0); off < size-page; off += 4096 {
				_, err := f.WriteAt(data, off)
				require.NoError(t, err)
				_, err = f.WritevAt([][]byte{data[:2048], data[2048:]}, off)
				require.NoError(t, err)
			}
			assert.Zero(t, stats.Load(), "writes below the last page made an fstat")
			_, err = f.WriteAt(data[:1], size-1)
			require.NoError(t, err)
			assert.Equal(t, int64(2), stats.Load(), "a write ending at Size: fstat before and after")

			// A member opened over data in its last page maps it at once.
			g := openFile(t, path, member.Options{})
			assert.True(t, member.TailMapped(g))
			require.NoError(t, g.Close())
			assert.False(t, member.TailMapped(g), "Close unmaps")
		})
	}
}

// TestSizeCheckDiscardKeepsHole: on tmpfs a discard reaching into the
// last page drops its mapping, so that the size check cannot fault the
// punched page back in as data (it would be allocated again, and reported
// as data where the member holds a hole); elsewhere the mapping stays, and
// its probes leave the hole a hole.
func TestSizeCheckDiscardKeepsHole(t *testing.T) {
	const size = 1 << 20
	page := int64(os.Getpagesize())
	for name, dir := range tailDirs(t) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "m.img")
			require.NoError(t, member.CreateSparse(path, size))
			f := openFile(t, path, member.Options{})
			if !f.CanDiscard() {
				t.Skip("the file system cannot punch holes")
			}
			data := make([]byte, 4096)
			data[0] = 1
			_, err := f.WriteAt(data, size-4096)
			require.NoError(t, err)
			require.True(t, member.TailMapped(f))
			require.NoError(t, f.Discard(size-page, page))
			assert.Equal(t, !f.InMemory(), member.TailMapped(f))
			for i := 0; i < 10; i++ {
				_, err := f.WriteAt(data, 0)
				require.NoError(t, err)
			}
			assert.False(t, f.HasData(size-page, page), "the discarded last page became data again")
		})
	}
}

// TestShrunkInsideLastPage: a file truncated inside its last page cannot
// be extended by a write below that page (such a write succeeds and leaves
// the size alone); a read or write of the last page reports the shrink.
func TestShrunkInsideLastPage(t *testing.T) {
	const size = 1 << 20
	for name, dir := range tailDirs(t) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "m.img")
			require.NoError(t, member.CreateSparse(path, size))
			f := openFile(t, path, member.Options{})
			data := make([]byte, 4096)
			_, err := f.WriteAt(data, size-4096)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, size-100))
			_, err = f.WriteAt(data, 0)
			require.NoError(t, err)
			fi, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, int64(size-100), fi.Size())
			_, err = f.ReadAt(data, size-4096)
			assert.ErrorIs(t, err, member.ErrShrunk)
			_, err = f.WriteAt(data, 0)
			assert.ErrorIs(t, err, member.ErrShrunk)
		})
	}
}

// TestReserveTail: a member on tmpfs told that nothing of the array lies
// in its last page writes that page once, maps it, and from then on checks
// its size after a write with no fstat; told that the array's data
// reaches into the last page, it leaves the page a hole. Elsewhere the
// hole is mapped from the start and nothing is written.
func TestReserveTail(t *testing.T) {
	const size = 1<<20 + 512 // the last page is partial
	page := int64(os.Getpagesize())
	last := (int64(size) - 1) &^ (page - 1)
	var stats atomic.Int64
	defer member.SetStatHook(func() { stats.Add(1) })()
	for name, dir := range tailDirs(t) {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "m.img")
			require.NoError(t, member.CreateSparse(path, size))
			f := openFile(t, path, member.Options{})
			holeFaults := f.InMemory()
			require.NoError(t, f.ReserveTail(last+1))
			assert.Equal(t, !holeFaults, member.TailMapped(f), "the array's data reaches into the last page: leave it")
			assert.False(t, f.HasData(last, size-last))

			require.NoError(t, f.ReserveTail(last))
			assert.True(t, member.TailMapped(f))
			assert.Equal(t, holeFaults, f.HasData(last, size-last), "written on tmpfs only")
			got := make([]byte, size-last)
			got[0] = 1
			_, err := f.ReadAt(got, last)
			require.NoError(t, err)
			assert.Equal(t, make([]byte, size-last), got, "the reserved page reads as zeroes")

			stats.Store(0)
			_, err = f.WriteAt(make([]byte, 4096), 0)
			require.NoError(t, err)
			assert.Zero(t, stats.Load(), "a write below the reserved page made an fstat")
			require.NoError(t, f.ReserveTail(0), "a second call is a no-op")
			require.NoError(t, f.Close())
		})
	}
}
