package member_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
)

var (
	_ raid.Member = (*member.File)(nil)
	_ raid.Member = (*member.Memory)(nil)
)

// tempMember creates a sparse file of size bytes in a test directory.
func tempMember(t *testing.T, size int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "member.img")
	require.NoError(t, member.CreateSparse(path, size))
	return path
}

// openFile opens path and closes it in a cleanup that tolerates a Close by
// the test itself.
func openFile(t *testing.T, path string, opts member.Options) *member.File {
	t.Helper()
	f, err := member.Open(path, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
			t.Errorf("close %s: %v", path, err)
		}
	})
	return f
}

// directSupported reports whether the file system under dir accepts
// O_DIRECT opens.
func directSupported(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		return false
	}
	_ = f.Close()
	return true
}

// loopDevice attaches a loop device to a new backing file of size bytes and
// detaches it in a cleanup. It skips the test when loop devices are not
// available (not root, no losetup, no /dev/loop-control).
func loopDevice(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loop devices need root: skipping block-device tests")
	}
	losetup, err := exec.LookPath("losetup")
	if err != nil {
		t.Skip("losetup not found: skipping block-device tests")
	}
	backing := tempMember(t, size)
	out, err := exec.Command(losetup, "--find", "--show", backing).CombinedOutput()
	if err != nil {
		t.Skipf("losetup --find --show failed (%v: %s): skipping block-device tests", err, strings.TrimSpace(string(out)))
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command(losetup, "--detach", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup --detach %s: %v: %s", dev, err, out)
		}
	})
	// A loop device keeps the request size limit its last user set
	// (max_sectors_kb: a tuning experiment, an audit): the tests that
	// count merged requests need the device's own.
	q := "/sys/block/" + filepath.Base(dev) + "/queue/"
	if hw, err := os.ReadFile(q + "max_hw_sectors_kb"); err == nil {
		_ = os.WriteFile(q+"max_sectors_kb", hw, 0)
	}
	return dev
}

func TestConformance(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		membertest.TestMember(t, func(t *testing.T, size int64) raid.Member {
			return openFile(t, tempMember(t, size), member.Options{})
		})
	})
	t.Run("file/tmpfs", func(t *testing.T) { // mapped: reads and writes are copies
		membertest.TestMember(t, func(t *testing.T, size int64) raid.Member {
			f := openFile(t, shmMember(t, size), member.Options{})
			if size > 4096 {
				require.True(t, member.Mapped(f))
			}
			return f
		})
	})
	t.Run("file/direct", func(t *testing.T) {
		if !directSupported(t, tempMember(t, 4096)) {
			t.Skipf("O_DIRECT not supported on the file system of %s", t.TempDir())
		}
		membertest.TestMember(t, func(t *testing.T, size int64) raid.Member {
			return openFile(t, tempMember(t, size), member.Options{Direct: true})
		})
	})
	t.Run("memory", func(t *testing.T) {
		membertest.TestMember(t, func(t *testing.T, size int64) raid.Member {
			return member.NewMemory(size)
		})
	})
	t.Run("block", func(t *testing.T) {
		loopDevice(t, 4096) // skip early when loop devices are unavailable
		membertest.TestMember(t, func(t *testing.T, size int64) raid.Member {
			return openFile(t, loopDevice(t, size), member.Options{})
		})
	})
	t.Run("block/direct", func(t *testing.T) {
		loopDevice(t, 4096)
		membertest.TestMember(t, func(t *testing.T, size int64) raid.Member {
			return openFile(t, loopDevice(t, size), member.Options{Direct: true})
		})
	})
}

func TestOpen(t *testing.T) {
	t.Run("regular_file", func(t *testing.T) {
		path := tempMember(t, 12345)
		f := openFile(t, path, member.Options{})
		assert.Equal(t, int64(12345), f.Size())
		assert.Equal(t, path, f.Path())
		assert.False(t, f.IsBlockDevice())
	})
	t.Run("missing", func(t *testing.T) {
		_, err := member.Open(filepath.Join(t.TempDir(), "nope"), member.Options{})
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("directory", func(t *testing.T) {
		_, err := member.Open(t.TempDir(), member.Options{ReadOnly: true})
		assert.ErrorIs(t, err, member.ErrFileType)
	})
	t.Run("char_device", func(t *testing.T) {
		_, err := member.Open("/dev/null", member.Options{})
		assert.ErrorIs(t, err, member.ErrFileType)
	})
	t.Run("fifo", func(t *testing.T) {
		// open(2) of a FIFO blocks until the other end opens: Open must
		// refuse it without opening it that way, in every mode.
		fifo := filepath.Join(t.TempDir(), "fifo")
		require.NoError(t, unix.Mkfifo(fifo, 0o600))
		opens := map[string]func() error{
			"read_only":  func() error { _, err := member.Open(fifo, member.Options{ReadOnly: true}); return err },
			"read_write": func() error { _, err := member.Open(fifo, member.Options{Exclusive: true}); return err },
			"plain":      func() error { _, err := member.OpenPlain(fifo, true); return err },
		}
		for name, open := range opens {
			done := make(chan error, 1)
			go func() { done <- open() }()
			select {
			case err := <-done:
				assert.ErrorIs(t, err, member.ErrFileType, name)
				assert.ErrorContains(t, err, "FIFO", name)
			case <-time.After(5 * time.Second):
				// Unblock the stuck open so the test can end.
				w, _ := os.OpenFile(fifo, os.O_RDWR, 0)
				if w != nil {
					_ = w.Close()
				}
				t.Fatalf("%s: Open of a FIFO blocked", name)
			}
		}
	})
	t.Run("size_fixed_at_open", func(t *testing.T) {
		path := tempMember(t, 8192)
		f := openFile(t, path, member.Options{})
		require.NoError(t, os.Truncate(path, 16384))
		assert.Equal(t, int64(8192), f.Size())
		n, err := f.ReadAt(make([]byte, 100), 8192)
		assert.Equal(t, 0, n)
		assert.ErrorIs(t, err, io.EOF)
		n, err = f.WriteAt(make([]byte, 100), 8192)
		assert.Equal(t, 0, n)
		assert.ErrorIs(t, err, member.ErrOutOfRange)
	})
	t.Run("direct_rounds_size_down", func(t *testing.T) {
		path := tempMember(t, 10000)
		if !directSupported(t, path) {
			t.Skip("O_DIRECT not supported here")
		}
		f := openFile(t, path, member.Options{Direct: true})
		assert.Equal(t, int64(8192), f.Size())
		// An unaligned write ending at Size must not extend the file.
		_, err := f.WriteAt(bytes.Repeat([]byte{7}, 100), 8092)
		require.NoError(t, err)
		fi, err := os.Stat(path)
		require.NoError(t, err)
		assert.Equal(t, int64(10000), fi.Size())
		got := make([]byte, 100)
		_, err = f.ReadAt(got, 8092)
		require.NoError(t, err)
		assert.Equal(t, bytes.Repeat([]byte{7}, 100), got)
	})
}

func TestCreateSparse(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.img")
	require.NoError(t, member.CreateSparse(path, 64<<20))
	var st unix.Stat_t
	require.NoError(t, unix.Stat(path, &st))
	assert.Equal(t, int64(64<<20), st.Size)
	assert.Less(t, st.Blocks*512, int64(1<<20), "a new member file must be sparse")

	cases := []struct {
		name string
		path string
		size int64
		want error
	}{
		{name: "same_size_is_fine", path: path, size: 64 << 20},
		{name: "larger_refused", path: path, size: 128 << 20, want: member.ErrSizeMismatch},
		{name: "smaller_refused", path: path, size: 1 << 20, want: member.ErrSizeMismatch},
		{name: "directory_refused", path: dir, size: 4096, want: member.ErrFileType},
		{name: "negative_size", path: filepath.Join(dir, "neg.img"), size: -1, want: member.ErrOutOfRange},
		{name: "zero_size", path: filepath.Join(dir, "zero.img"), size: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := member.CreateSparse(tc.path, tc.size)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			fi, err := os.Stat(tc.path)
			require.NoError(t, err)
			assert.Equal(t, tc.size, fi.Size())
		})
	}
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, int64(64<<20), fi.Size(), "a refused CreateSparse must not resize")
}

// allocated returns the bytes allocated to path.
func allocated(t *testing.T, path string) int64 {
	t.Helper()
	var st unix.Stat_t
	require.NoError(t, unix.Stat(path, &st))
	return st.Blocks * 512
}

func TestFileSpaceManagement(t *testing.T) {
	const size = 4 << 20
	cases := []struct {
		name       string
		op         func(f *member.File, off, n int64) error
		keepsSpace bool
	}{
		{name: "discard_punches", op: (*member.File).Discard},
		{name: "trim_punches", op: (*member.File).Trim},
		{name: "zero_range_keeps_allocation", op: (*member.File).ZeroRange, keepsSpace: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := tempMember(t, size)
			f := openFile(t, path, member.Options{})
			data := bytes.Repeat([]byte{0xEE}, size)
			_, err := f.WriteAt(data, 0)
			require.NoError(t, err)
			require.NoError(t, f.Sync())
			before := allocated(t, path)
			require.GreaterOrEqual(t, before, int64(size))

			// Unaligned edges: [1000, size-1000) becomes zero, the rest stays.
			err = tc.op(f, 1000, size-2000)
			if errors.Is(err, errors.ErrUnsupported) {
				t.Skipf("file system does not support it: %v", err)
			}
			require.NoError(t, err)
			require.NoError(t, f.Sync())
			got := make([]byte, size)
			_, err = f.ReadAt(got, 0)
			require.NoError(t, err)
			clear(data[1000 : size-1000])
			assert.True(t, bytes.Equal(data, got), "contents after the operation")

			after := allocated(t, path)
			if tc.keepsSpace {
				assert.Equal(t, before, after, "allocation must be kept")
			} else {
				assert.Less(t, after, before/2, "space must be released")
			}
		})
	}
}

func TestReadOnly(t *testing.T) {
	path := tempMember(t, 8192)
	w := openFile(t, path, member.Options{})
	_, err := w.WriteAt([]byte("hello"), 10)
	require.NoError(t, err)

	f := openFile(t, path, member.Options{ReadOnly: true})
	got := make([]byte, 5)
	_, err = f.ReadAt(got, 10)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))
	cases := []struct {
		name string
		call func() error
	}{
		{name: "write", call: func() error { _, err := f.WriteAt([]byte("x"), 0); return err }},
		{name: "discard", call: func() error { return f.Discard(0, 4096) }},
		{name: "trim", call: func() error { return f.Trim(0, 4096) }},
		{name: "zero_range", call: func() error { return f.ZeroRange(0, 4096) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.ErrorIs(t, tc.call(), member.ErrReadOnly)
		})
	}
	assert.NoError(t, f.Sync())
}

func TestDirectFlag(t *testing.T) {
	path := tempMember(t, 1<<20)
	if !directSupported(t, path) {
		t.Skip("O_DIRECT not supported here")
	}
	f := openFile(t, path, member.Options{Direct: true})
	// /proc/self/fdinfo lists the flags of every open descriptor; the
	// member's descriptor must carry O_DIRECT (octal 040000 on amd64/arm64).
	found := false
	entries, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || target != path {
			continue
		}
		info, err := os.ReadFile(filepath.Join("/proc/self/fdinfo", e.Name()))
		require.NoError(t, err)
		for _, line := range strings.Split(string(info), "\n") {
			var flags int
			if _, err := fmt.Sscanf(line, "flags:\t%o", &flags); err == nil && flags&unix.O_DIRECT != 0 {
				found = true
			}
		}
	}
	assert.True(t, found, "no descriptor of %s has O_DIRECT", path)
	assert.Equal(t, int64(1<<20), f.Size())
}

// isTmpfs reports whether dir is on a tmpfs.
func isTmpfs(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.TMPFS_MAGIC
}

// TestInMemory: a file on tmpfs opened without O_DIRECT is in memory; one
// on a disk file system, or opened with O_DIRECT, is not.
func TestInMemory(t *testing.T) {
	assert.True(t, member.NewMemory(4096).InMemory())
	if isTmpfs("/dev/shm") {
		dir, err := os.MkdirTemp("/dev/shm", "member-test")
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		path := filepath.Join(dir, "m.img")
		require.NoError(t, member.CreateSparse(path, 1<<20))
		assert.True(t, openFile(t, path, member.Options{}).InMemory(), "a tmpfs file")
	}
	path := tempMember(t, 1<<20)
	if isTmpfs(filepath.Dir(path)) {
		return
	}
	assert.False(t, openFile(t, path, member.Options{}).InMemory(), "a file on a disk file system")
	if directSupported(t, path) {
		assert.False(t, openFile(t, path, member.Options{Direct: true}).InMemory(), "an O_DIRECT file")
	}
}

func TestBlockDevice(t *testing.T) {
	const size = 1 << 20
	dev := loopDevice(t, size)
	f := openFile(t, dev, member.Options{})
	assert.True(t, f.IsBlockDevice())
	assert.Equal(t, int64(size), f.Size())

	data := bytes.Repeat([]byte{0x11}, size)
	_, err := f.WriteAt(data, 0)
	require.NoError(t, err)

	t.Run("zero_range_unaligned", func(t *testing.T) {
		require.NoError(t, f.ZeroRange(1000, 20000))
		clear(data[1000:21000])
		got := make([]byte, size)
		_, err := f.ReadAt(got, 0)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(data, got))
	})
	t.Run("trim_is_advisory", func(t *testing.T) {
		err := f.Trim(65536, 65536)
		if errors.Is(err, errors.ErrUnsupported) {
			t.Skipf("device has no discard: %v", err)
		}
		assert.NoError(t, err)
		// Bytes outside the range are untouched.
		got := make([]byte, 65536)
		_, err = f.ReadAt(got, 0)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(data[:65536], got))
	})
	t.Run("out_of_range", func(t *testing.T) {
		assert.ErrorIs(t, f.ZeroRange(size-512, 1024), member.ErrOutOfRange)
		assert.ErrorIs(t, f.Trim(-512, 1024), member.ErrOutOfRange)
	})
	t.Run("exclusive", func(t *testing.T) {
		excl := openFile(t, dev, member.Options{Exclusive: true})
		_, err := member.Open(dev, member.Options{Exclusive: true})
		assert.ErrorIs(t, err, syscall.EBUSY, "a second exclusive open must fail")
		require.NoError(t, excl.Close())
	})
}

func TestMemory(t *testing.T) {
	m := member.NewMemory(1 << 16)
	p := make([]byte, 4096)
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = m.WriteAt(p, 1000)
		_, _ = m.ReadAt(p, 2000)
	})
	assert.Zero(t, allocs, "ReadAt/WriteAt must not allocate")

	_, err := m.WriteAt([]byte{1, 2, 3}, 10)
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 2, 3}, m.Bytes()[10:13], "Bytes aliases the member")
	assert.Panics(t, func() { member.NewMemory(-1) })
}

func BenchmarkMemory(b *testing.B) {
	m := member.NewMemory(64 << 20)
	p := make([]byte, 64<<10)
	b.SetBytes(int64(len(p)))
	b.RunParallel(func(pb *testing.PB) {
		off := int64(0)
		for pb.Next() {
			_, _ = m.WriteAt(p, off)
			off = (off + int64(len(p))) % m.Size()
		}
	})
}

func BenchmarkFileWrite(b *testing.B) {
	for _, direct := range []bool{false, true} {
		name := "buffered"
		if direct {
			name = "direct"
		}
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "m.img")
			require.NoError(b, member.CreateSparse(path, 64<<20))
			f, err := member.Open(path, member.Options{Direct: direct})
			if err != nil {
				b.Skipf("open: %v", err)
			}
			defer f.Close()
			p := make([]byte, 64<<10)
			b.SetBytes(int64(len(p)))
			off := int64(0)
			for b.Loop() {
				if _, err := f.WriteAt(p, off); err != nil {
					b.Fatal(err)
				}
				off = (off + int64(len(p))) % f.Size()
			}
		})
	}
}

func TestCanDiscard(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m")
	require.NoError(t, member.CreateSparse(path, 1<<20))
	rw, err := member.Open(path, member.Options{})
	require.NoError(t, err)
	defer rw.Close()
	assert.True(t, rw.CanDiscard(), "a regular file on %s should punch holes", path)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, int64(1<<20), fi.Size(), "the probe must not change the file size")
	ro, err := member.Open(path, member.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	assert.False(t, ro.CanDiscard(), "a read-only member cannot discard")
	assert.True(t, member.NewMemory(4096).CanDiscard())
}

func TestHasData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m")
	require.NoError(t, member.CreateSparse(path, 8<<20))
	f, err := member.Open(path, member.Options{})
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, f.HasData(0, 8<<20), "a new sparse file is one hole")
	_, err = f.WriteAt([]byte{1}, 3<<20)
	require.NoError(t, err)
	assert.True(t, f.HasData(2<<20, 2<<20), "range with a written byte")
	assert.True(t, f.HasData(0, 8<<20))
	assert.False(t, f.HasData(5<<20, 3<<20), "hole after the data, up to the end")
	require.NoError(t, f.Discard(3<<20, 1<<20))
	assert.False(t, f.HasData(0, 8<<20), "punched back to a hole")
}

// TestVectored checks ReadvAt and WritevAt against plain ReadAt on a file
// and in memory, including the fallback paths.
func TestVectored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v")
	require.NoError(t, member.CreateSparse(path, 1<<20))
	f, err := member.Open(path, member.Options{})
	require.NoError(t, err)
	defer f.Close()
	type vio interface {
		ReadvAt([][]byte, int64) (int, error)
		WritevAt([][]byte, int64) (int, error)
		ReadAt([]byte, int64) (int, error)
	}
	for name, m := range map[string]vio{"file": f, "memory": member.NewMemory(1 << 20)} {
		t.Run(name, func(t *testing.T) {
			bufs := [][]byte{bytes.Repeat([]byte{1}, 100), bytes.Repeat([]byte{2}, 4096), bytes.Repeat([]byte{3}, 7)}
			n, err := m.WritevAt(bufs, 5000)
			require.NoError(t, err)
			require.Equal(t, 4203, n)
			flat := make([]byte, 4203)
			_, err = m.ReadAt(flat, 5000)
			require.NoError(t, err)
			assert.Equal(t, bytes.Join(bufs, nil), flat)
			out := [][]byte{make([]byte, 7), make([]byte, 4096), make([]byte, 100)}
			n, err = m.ReadvAt(out, 5000)
			require.NoError(t, err)
			require.Equal(t, 4203, n)
			assert.Equal(t, flat, bytes.Join(out, nil))
			// Past the end: the one-by-one path reports EOF with a short count.
			n, err = m.ReadvAt([][]byte{make([]byte, 10), make([]byte, 10)}, 1<<20-15)
			assert.Equal(t, 15, n)
			assert.ErrorIs(t, err, io.EOF)
		})
	}
}

// TestVectoredCloseRace closes a member in the window between a vectored
// call's checks and its system call, then puts another file on the member's
// old descriptor number, as a concurrent open elsewhere in the process
// could. The stale call must fail with os.ErrClosed and leave the other file
// alone, rather than read or write through the reused number.
func TestVectoredCloseRace(t *testing.T) {
	for _, write := range []bool{false, true} {
		name := "readv"
		if write {
			name = "writev"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path, other := filepath.Join(dir, "m"), filepath.Join(dir, "other")
			require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte{0xaa}, 1<<16), 0o600))
			require.NoError(t, os.WriteFile(other, bytes.Repeat([]byte{0xbb}, 1<<16), 0o600))
			f, err := member.Open(path, member.Options{})
			require.NoError(t, err)
			fd := member.Descriptor(f)
			require.GreaterOrEqual(t, fd, 0)
			o, err := os.OpenFile(other, os.O_RDWR, 0)
			require.NoError(t, err)
			defer o.Close()
			reused := false
			defer member.SetVectorHook(func() {
				require.NoError(t, f.Close())
				// The descriptor number is free now unless the call holds it;
				// take it for the other file.
				rc, err := o.SyscallConn()
				require.NoError(t, err)
				require.NoError(t, rc.Control(func(ofd uintptr) {
					reused = unix.Dup3(int(ofd), fd, unix.O_CLOEXEC) == nil
				}))
			})()
			bufs := [][]byte{make([]byte, 4096), make([]byte, 4096)}
			if write {
				bufs = [][]byte{bytes.Repeat([]byte{1}, 4096), bytes.Repeat([]byte{2}, 4096)}
				_, err = f.WritevAt(bufs, 0)
			} else {
				_, err = f.ReadvAt(bufs, 0)
			}
			require.True(t, reused, "descriptor %d was not reused", fd)
			defer unix.Close(fd)
			assert.ErrorIs(t, err, os.ErrClosed)
			got, rerr := os.ReadFile(other)
			require.NoError(t, rerr)
			assert.True(t, bytes.Equal(bytes.Repeat([]byte{0xbb}, 1<<16), got), "the other file was written")
			if !write {
				assert.True(t, bytes.Equal(make([]byte, 4096), bufs[0]), "bytes were read from the other file")
			}
		})
	}
}

// TestVectoredAllocs checks that the guarded vectored path allocates
// nothing per call beyond what preadv itself needs.
func TestVectoredAllocs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v")
	require.NoError(t, member.CreateSparse(path, 1<<20))
	f, err := member.Open(path, member.Options{})
	require.NoError(t, err)
	defer f.Close()
	bufs := [][]byte{make([]byte, 4096), make([]byte, 4096)}
	allocs := testing.AllocsPerRun(100, func() { _, _ = f.ReadvAt(bufs, 0) })
	assert.Zero(t, allocs)
}

// TestShrunk truncates a member's file behind its back. A read that meets
// the new end inside Size must fail with ErrShrunk (an unexpected EOF, not
// io.EOF), and no write may extend the file again: that would leave holes
// that read back as zeroes without any error.
//
// It runs on the test's temporary directory and on tmpfs, where reads and
// writes are copies through a mapping and a truncated range faults.
func TestShrunk(t *testing.T) {
	for name, dir := range tailDirs(t) {
		t.Run(name, func(t *testing.T) { testShrunk(t, dir) })
	}
}

func testShrunk(t *testing.T, dir string) {
	const size, cut = 1 << 20, 256 << 10
	data := bytes.Repeat([]byte{0x5a}, 64<<10)
	tempMember := func(t *testing.T, size int64) string {
		path := filepath.Join(dir, fmt.Sprintf("%s.img", strings.ReplaceAll(t.Name(), "/", "_")))
		require.NoError(t, member.CreateSparse(path, size))
		t.Cleanup(func() { _ = os.Remove(path) })
		return path
	}
	open := func(t *testing.T) (*member.File, string) {
		path := tempMember(t, size)
		f := openFile(t, path, member.Options{})
		for off := int64(0); off < size; off += int64(len(data)) {
			_, err := f.WriteAt(data, off)
			require.NoError(t, err)
		}
		require.NoError(t, os.Truncate(path, cut))
		return f, path
	}
	fileSize := func(t *testing.T, path string) int64 {
		fi, err := os.Stat(path)
		require.NoError(t, err)
		return fi.Size()
	}
	writes := map[string]func(f *member.File, off int64) error{
		"write":  func(f *member.File, off int64) error { _, err := f.WriteAt(data, off); return err },
		"writev": func(f *member.File, off int64) error { _, err := f.WritevAt([][]byte{data, data}, off); return err },
		"tail":   func(f *member.File, _ int64) error { _, err := f.WriteAt(data, size-int64(len(data))); return err },
	}
	t.Run("read_then_write", func(t *testing.T) {
		f, path := open(t)
		// Below the cut the file is intact.
		got := make([]byte, len(data))
		_, err := f.ReadAt(got, 0)
		require.NoError(t, err)
		for _, read := range []func() error{
			func() error { _, err := f.ReadAt(got, 512<<10); return err },
			func() error { _, err := f.ReadAt(got, cut-4096); return err },
		} {
			err := read()
			assert.ErrorIs(t, err, member.ErrShrunk)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
			assert.NotErrorIs(t, err, io.EOF)
		}
		// Once shrunk, always shrunk: nothing more is read or written.
		_, err = f.ReadAt(got, 0)
		assert.ErrorIs(t, err, member.ErrShrunk)
		for name, write := range writes {
			assert.ErrorIs(t, write(f, 512<<10), member.ErrShrunk, name)
		}
		assert.ErrorIs(t, f.Discard(0, 4096), member.ErrShrunk)
		assert.Equal(t, int64(cut), fileSize(t, path), "a write extended the shrunk file")
	})
	for name, write := range writes {
		t.Run("write_first/"+name, func(t *testing.T) {
			f, path := open(t)
			err := write(f, 512<<10)
			assert.ErrorIs(t, err, member.ErrShrunk, "the write must notice the shrink")
			if name == "tail" {
				assert.Equal(t, int64(cut), fileSize(t, path), "a write ending at Size must not restore the size")
			}
			_, err = f.ReadAt(make([]byte, 4096), 0)
			assert.ErrorIs(t, err, member.ErrShrunk)
			_, err = f.ReadvAt([][]byte{make([]byte, 4096)}, 0)
			assert.ErrorIs(t, err, member.ErrShrunk)
		})
	}
	t.Run("readv", func(t *testing.T) {
		f, _ := open(t)
		_, err := f.ReadvAt([][]byte{make([]byte, 128<<10), make([]byte, 128<<10)}, 128<<10)
		assert.ErrorIs(t, err, member.ErrShrunk)
	})
	t.Run("grown_is_fine", func(t *testing.T) {
		path := tempMember(t, size)
		f := openFile(t, path, member.Options{})
		require.NoError(t, os.Truncate(path, 2*size))
		_, err := f.WriteAt(data, 0)
		assert.NoError(t, err)
	})
}

// BenchmarkSizeCheck measures the fstat that follows every write to a file
// member (the shrink check), next to the 4 KiB and 64 KiB writes it follows.
func BenchmarkSizeCheck(b *testing.B) {
	path := filepath.Join(b.TempDir(), "m.img")
	require.NoError(b, member.CreateSparse(path, 64<<20))
	f, err := member.Open(path, member.Options{})
	require.NoError(b, err)
	defer f.Close()
	b.Run("fstat", func(b *testing.B) {
		for b.Loop() {
			if _, err := member.StatSize(f); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, n := range []int{4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("write=%dK", n>>10), func(b *testing.B) {
			p := make([]byte, n)
			off := int64(0)
			for b.Loop() {
				if _, err := f.WriteAt(p, off); err != nil {
					b.Fatal(err)
				}
				off = (off + int64(n)) % f.Size()
			}
		})
	}
}
