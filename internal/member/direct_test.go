package member_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	_ "github.com/raidd/raidd/raid/raid0"
	_ "github.com/raidd/raidd/raid/raid5"
	_ "github.com/raidd/raidd/raid/raid6"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// ioTally is what an ioCounter saw on one member.
type ioTally struct {
	reads, writes           int
	readBytes, writtenBytes int64
}

// ioCounter counts the read and write system calls on members' data (at
// device offsets from min on) through the member package's I/O hook.
type ioCounter struct {
	min int64
	mu  sync.Mutex
	by  map[*member.File]*ioTally
}

// countIO installs an ioCounter until the returned function is called.
func countIO(min int64) (*ioCounter, func()) {
	c := &ioCounter{min: min, by: map[*member.File]*ioTally{}}
	return c, member.SetIOHook(func(m *member.File, write bool, off int64, n int) {
		if off < c.min {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		t := c.by[m]
		if t == nil {
			t = new(ioTally)
			c.by[m] = t
		}
		if write {
			t.writes++
			t.writtenBytes += int64(n)
		} else {
			t.reads++
			t.readBytes += int64(n)
		}
	})
}

// get returns the tally of m (zero if it saw nothing).
func (c *ioCounter) get(m *member.File) ioTally {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.by[m]; t != nil {
		return *t
	}
	return ioTally{}
}

// directKinds are the kinds of direct member the tests below run on: files
// on the test directory's file system and loop devices.
var directKinds = []string{"file", "block"}

// openDirect opens a new direct member of size bytes of the given kind,
// skipping the test when that kind is unavailable here.
func openDirect(t testing.TB, kind string, size int64) *member.File {
	t.Helper()
	tt, ok := t.(*testing.T)
	var path string
	switch {
	case kind == "block" && ok:
		path = loopDevice(tt, size)
	case kind == "block":
		t.Skip("loop devices are set up only in tests")
	default:
		path = t.TempDir() + "/member.img"
		require.NoError(t, member.CreateSparse(path, size))
	}
	f, err := member.Open(path, member.Options{Direct: true})
	if errors.Is(err, unix.EINVAL) && kind == "file" {
		t.Skipf("O_DIRECT not supported on the file system of %s", path)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// misaligned returns n bytes starting by bytes past a page boundary.
func misaligned(n, by int) []byte { return make([]byte, n+4096)[by : by+n] }

// TestDirectAlignment checks that a direct member takes its alignment from
// the kernel: a power of two no larger than DirectAlignment, and for a loop
// device (512-byte logical blocks) no larger than 512.
func TestDirectAlignment(t *testing.T) {
	for _, kind := range directKinds {
		t.Run(kind, func(t *testing.T) {
			f := openDirect(t, kind, 1<<20)
			a := member.Alignment(f)
			assert.True(t, a > 0 && a&(a-1) == 0 && a <= member.DirectAlignment, "alignment %d", a)
			if kind == "block" {
				assert.LessOrEqual(t, a, int64(512), "a loop device has 512-byte logical blocks")
			}
		})
	}
}

// TestDirectVectoredOps counts the system calls a direct member makes for
// vectored calls: one per run of buffers, whether the buffers go to the
// kernel as they are or through a bounce buffer, plus the edge-block reads
// of an unaligned write. Before vectored I/O reached direct members, a run
// of n buffers cost n calls.
func TestDirectVectoredOps(t *testing.T) {
	cases := []struct {
		name        string
		off         int64
		lens        []int
		misalign    int
		reads       int // system calls of ReadvAt
		writes, rmw int // write and read system calls of WritevAt
	}{
		{name: "aligned_chunks", off: 1 << 20, lens: []int{64 << 10, 64 << 10, 64 << 10, 64 << 10}, reads: 1, writes: 1},
		{name: "misaligned_addresses", off: 1 << 20, lens: []int{64 << 10, 64 << 10, 64 << 10}, misalign: 8, reads: 1, writes: 1},
		{name: "unaligned_lengths", off: 1 << 20, lens: []int{100, 64 << 10, 3000}, reads: 1, writes: 1, rmw: 1},
		{name: "unaligned_offset", off: 1<<20 + 1, lens: []int{64 << 10, 64 << 10}, reads: 1, writes: 1, rmw: 2},
		{name: "beyond_iov_max", off: 1 << 20, lens: repeat(4096, 1500), reads: 2, writes: 2},
	}
	for _, kind := range directKinds {
		t.Run(kind, func(t *testing.T) {
			f := openDirect(t, kind, 16<<20)
			rng := rand.New(rand.NewSource(1))
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					bufs := make([][]byte, len(tc.lens))
					for i, n := range tc.lens {
						bufs[i] = misaligned(n, tc.misalign)
						rng.Read(bufs[i])
					}
					c, restore := countIO(0)
					_, err := f.WritevAt(bufs, tc.off)
					restore()
					require.NoError(t, err)
					assert.Equal(t, ioTally{writes: tc.writes, reads: tc.rmw}, ioTally{writes: c.get(f).writes, reads: c.get(f).reads}, "WritevAt")

					got := make([][]byte, len(tc.lens))
					for i, n := range tc.lens {
						got[i] = misaligned(n, tc.misalign)
					}
					c, restore = countIO(0)
					_, err = f.ReadvAt(got, tc.off)
					restore()
					require.NoError(t, err)
					assert.Equal(t, ioTally{reads: tc.reads}, ioTally{writes: c.get(f).writes, reads: c.get(f).reads}, "ReadvAt")
					assert.True(t, bytes.Equal(bytes.Join(bufs, nil), bytes.Join(got, nil)), "read back differs")
				})
			}
		})
	}
}

// TestWritevAtDSync: a durable vectored write (how the engine writes its
// write-hole log records: a head, partial parities and padding) is one
// write system call on buffered and direct members alike, with no sync
// of its own (but on a block device without FUA, which writes and syncs),
// reads back intact, and still works where the kernel refuses RWF_DSYNC.
func TestWritevAtDSync(t *testing.T) {
	for _, kind := range append([]string{"buffered"}, directKinds...) {
		t.Run(kind, func(t *testing.T) {
			var f *member.File
			if kind == "buffered" {
				path := t.TempDir() + "/member.img"
				require.NoError(t, member.CreateSparse(path, 4<<20))
				var err error
				f, err = member.Open(path, member.Options{})
				require.NoError(t, err)
				t.Cleanup(func() { _ = f.Close() })
			} else {
				f = openDirect(t, kind, 4<<20)
			}
			noFUA := kind == "block" && queueAttr(t, f.Path(), "fua") == "0"
			for round, refuse := range []bool{false, true} {
				if refuse {
					member.RefuseDSync(f)
				}
				syncs := refuse || noFUA // writes and syncs
				bufs := [][]byte{make([]byte, 64), misaligned(4096, 8), make([]byte, 4096), make([]byte, 448)}
				for i, b := range bufs {
					fill(b, int64(10*round+i))
				}
				const off = 1 << 20
				c, restore := countIO(0)
				var nsync atomic.Int32
				restoreSync := member.SetSyncHook(func(*member.File) { nsync.Add(1) })
				n, err := f.WritevAtDSync(bufs, off)
				restoreSync()
				restore()
				require.NoError(t, err)
				require.Equal(t, 8704, n)
				assert.Equal(t, 1, c.get(f).writes, "one write system call")
				wantSyncs := int32(0) // RWF_DSYNC: the write is durable by itself
				if syncs {
					wantSyncs = 1
				}
				assert.Equal(t, wantSyncs, nsync.Load(), "fdatasync calls (refused %v, no FUA %v)", refuse, noFUA)
				assert.Equal(t, syncs, member.DSyncRefused(f), "RWF_DSYNC not used")
				got := make([]byte, 8704)
				_, err = f.ReadAt(got, off)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(bytes.Join(bufs, nil), got), "read back differs (refused %v)", refuse)
			}
		})
	}
}

// queueAttr returns the sysfs queue attribute name of the loop device at
// path, trimmed, skipping the test when sysfs does not have it.
func queueAttr(t *testing.T, path, name string) string {
	t.Helper()
	b, err := os.ReadFile("/sys/block/" + filepath.Base(path) + "/queue/" + name)
	if err != nil {
		t.Skipf("no queue/%s in sysfs for %s: %v", name, path, err)
	}
	return strings.TrimSpace(string(b))
}

// flushes returns how many flush requests the loop device at path has
// completed (/sys/block/NAME/stat, field 16), skipping the test when the
// kernel does not count them (before Linux 5.5).
func flushes(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile("/sys/block/" + filepath.Base(path) + "/stat")
	require.NoError(t, err)
	f := strings.Fields(string(b))
	if len(f) < 16 {
		t.Skipf("%s: the kernel does not count flushes in /sys/block/*/stat", path)
	}
	n, err := strconv.ParseInt(f[15], 10, 64)
	require.NoError(t, err)
	return n
}

// TestDSyncWithoutFUA: on a block device without FUA a durable write costs
// the device one flush, not the two RWF_DSYNC makes it pay there (the
// flush that stands in for the write's FUA, and the one of the sync the
// kernel adds after a dsync write): the write-hole log's records are
// written and synced, and a disk that counts its operations does a third
// fewer per record.
func TestDSyncWithoutFUA(t *testing.T) {
	f := openDirect(t, "block", 4<<20)
	if queueAttr(t, f.Path(), "fua") != "0" {
		t.Skipf("%s has FUA: RWF_DSYNC is a FUA write there", f.Path())
	}
	buf := make([]byte, 4096)
	fill(buf, 1)
	const writes = 20
	before := flushes(t, f.Path())
	for i := range writes {
		_, err := f.WritevAtDSync([][]byte{buf}, int64(i)*4096)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(writes), flushes(t, f.Path())-before, "one flush per durable write")
}

// fill fills p with a seeded pattern that differs in every 4 KiB, more
// cheaply than math/rand can under the race detector.
func fill(p []byte, seed int64) {
	block := make([]byte, 64<<10)
	rand.New(rand.NewSource(seed)).Read(block)
	for i := 0; i < len(p); i += copy(p[i:], block) {
		for j := 0; j+8 <= len(block); j += 4096 {
			block[j]++
		}
	}
}

func repeat(n, times int) []int {
	s := make([]int, times)
	for i := range s {
		s[i] = n
	}
	return s
}

// TestDirectBounceWindows writes and reads a run longer than one bounce
// buffer at an unaligned offset: it is served in windows of
// member.MaxBounce bytes, one system call each, and reads back intact.
func TestDirectBounceWindows(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 80 MiB")
	}
	f := openDirect(t, "file", member.MaxBounce+4<<20)
	p := misaligned(member.MaxBounce+2<<20, 1)
	fill(p, 2)
	bufs := [][]byte{p[:1000], p[1000 : 5<<20], p[5<<20:]}
	c, restore := countIO(0)
	n, err := f.WritevAt(bufs, 3)
	restore()
	require.NoError(t, err)
	require.Equal(t, len(p), n)
	assert.Equal(t, 2, c.get(f).writes, "two windows")
	got := misaligned(len(p), 5)
	c, restore = countIO(0)
	n, err = f.ReadvAt([][]byte{got[:7], got[7:]}, 3)
	restore()
	require.NoError(t, err)
	require.Equal(t, len(p), n)
	assert.Equal(t, 2, c.get(f).reads, "two windows")
	assert.True(t, bytes.Equal(p, got), "read back differs")
}

// directArray creates a RAID0 of n direct members of the given kind, with
// 64 KiB chunks and rows rows.
func directArray(t testing.TB, kind string, n int, rows int64) (*raid.Array, []*member.File) {
	t.Helper()
	return directLevelArray(t, kind, stripe.RAID0, n, rows)
}

// directLevelArray creates an array of level lv on n direct members of
// the given kind, with 64 KiB chunks and rows rows.
func directLevelArray(t testing.TB, kind string, lv stripe.Level, n int, rows int64) (*raid.Array, []*member.File) {
	t.Helper()
	const chunk = 64 << 10
	var devs []raid.Device
	var files []*member.File
	for i := 0; i < n; i++ {
		f := openDirect(t, kind, superblock.HeaderSize+chunk*rows)
		files = append(files, f)
		devs = append(devs, raid.Device{Path: f.Path(), Member: f})
	}
	a, err := raid.Create(devs, raid.CreateOptions{Name: "direct", Level: lv, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	return a, files
}

// TestDirectRAID0OneOpPerMember is the point of merging on the direct
// path: a 1 MiB request on a RAID0 of four direct members with 64 KiB
// chunks is four back-to-back chunks on each member, and must cost each
// member one system call (256 KiB), not four, whether the client's buffer
// is aligned for O_DIRECT (the chunks go to the kernel as they are) or not
// (one bounce buffer per member).
func TestDirectRAID0OneOpPerMember(t *testing.T) {
	for _, kind := range directKinds {
		for _, mis := range []int{0, 8} {
			t.Run(fmt.Sprintf("%s/misalign=%d", kind, mis), func(t *testing.T) {
				a, files := directArray(t, kind, 4, 64)
				p := misaligned(1<<20, mis)
				rand.New(rand.NewSource(3)).Read(p)
				// The first write marks the array dirty and sets its bitmap
				// bits: superblock and bitmap writes, not counted here.
				_, err := a.WriteAt(p, 1<<20)
				require.NoError(t, err)

				c, restore := countIO(superblock.HeaderSize)
				_, err = a.WriteAt(p, 1<<20)
				restore()
				require.NoError(t, err)
				for i, f := range files {
					assert.Equal(t, ioTally{writes: 1, writtenBytes: 256 << 10}, c.get(f), "member %d, 1 MiB write", i)
				}

				got := misaligned(1<<20, mis)
				c, restore = countIO(superblock.HeaderSize)
				_, err = a.ReadAt(got, 1<<20)
				restore()
				require.NoError(t, err)
				for i, f := range files {
					assert.Equal(t, ioTally{reads: 1, readBytes: 256 << 10}, c.get(f), "member %d, 1 MiB read", i)
				}
				assert.True(t, bytes.Equal(p, got), "read back differs")
			})
		}
	}
}

// TestDirectAllocs checks that direct vectored calls allocate nothing, on
// the straight path and through the bounce buffers.
func TestDirectAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop buffers at random")
	}
	f := openDirect(t, "file", 4<<20)
	aligned := [][]byte{misaligned(64<<10, 0), misaligned(64<<10, 0)}
	unaligned := [][]byte{misaligned(64<<10, 8), misaligned(64<<10, 8)}
	one := misaligned(5000, 3)
	for name, fn := range map[string]func(){
		"readv":         func() { _, _ = f.ReadvAt(aligned, 1<<20) },
		"writev":        func() { _, _ = f.WritevAt(aligned, 1<<20) },
		"readv/bounce":  func() { _, _ = f.ReadvAt(unaligned, 1<<20) },
		"writev/bounce": func() { _, _ = f.WritevAt(unaligned, 1<<20+1) },
		"read/bounce":   func() { _, _ = f.ReadAt(one, 77) },
		"write/bounce":  func() { _, _ = f.WriteAt(one, 77) },
	} {
		fn() // fill the pools
		assert.Zero(t, testing.AllocsPerRun(50, fn), name)
	}
}

// BenchmarkDirectRAID0 reads and writes 1 MiB requests on a RAID0 of four
// direct members (files on the test directory's file system) with 64 KiB
// chunks, from buffers aligned for O_DIRECT and not: run it with -benchmem
// to see that the path allocates nothing per request.
func BenchmarkDirectRAID0(b *testing.B) {
	const rows = 256 // 16 MiB per member
	for _, mis := range []int{0, 8} {
		for _, write := range []bool{false, true} {
			op := "read"
			if write {
				op = "write"
			}
			b.Run(fmt.Sprintf("%s/misalign=%d", op, mis), func(b *testing.B) {
				a, _ := directArray(b, "file", 4, rows)
				p := misaligned(1<<20, mis)
				rand.New(rand.NewSource(4)).Read(p)
				for off := int64(0); off < a.Size(); off += 1 << 20 {
					_, err := a.WriteAt(p, off)
					require.NoError(b, err)
				}
				b.SetBytes(1 << 20)
				b.ReportAllocs()
				off := int64(0)
				for b.Loop() {
					var err error
					if write {
						_, err = a.WriteAt(p, off)
					} else {
						_, err = a.ReadAt(p, off)
					}
					if err != nil {
						b.Fatal(err)
					}
					off = (off + 1<<20) % a.Size()
				}
			})
		}
	}
}

// TestDirectSharedEdgeBlock has two writers fill the two halves of the
// first 200 bytes of many alignment blocks at once. The requests never
// overlap, but each is a read-modify-write of the same block; without the
// edge locks one writer's bytes are lost.
func TestDirectSharedEdgeBlock(t *testing.T) {
	for _, kind := range directKinds {
		t.Run(kind, func(t *testing.T) {
			const blocks, stride = 256, 4096
			f := openDirect(t, kind, blocks*stride)
			var wg sync.WaitGroup
			for half := 0; half < 2; half++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					p := bytes.Repeat([]byte{byte(0xa0 + half)}, 100)
					for b := 0; b < blocks; b++ {
						_, err := f.WriteAt(p, int64(b*stride+half*100))
						assert.NoError(t, err)
					}
				}()
			}
			wg.Wait()
			got := make([]byte, 200)
			want := append(bytes.Repeat([]byte{0xa0}, 100), bytes.Repeat([]byte{0xa1}, 100)...)
			lost := 0
			for b := 0; b < blocks; b++ {
				_, err := f.ReadAt(got, int64(b*stride))
				require.NoError(t, err)
				if !bytes.Equal(got, want) {
					lost++
				}
			}
			assert.Zero(t, lost, "blocks where one writer's bytes were lost")
		})
	}
}
