package member_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

const raChunk = 64 << 10

// aheadMember opens a direct file member of size bytes holding a known
// pattern, which it returns.
func aheadMember(t *testing.T, size int) (*member.File, []byte) {
	t.Helper()
	f := openDirect(t, "file", int64(size))
	want := make([]byte, size)
	rand.New(rand.NewSource(11)).Read(want)
	_, err := f.WriteAt(want, 0)
	require.NoError(t, err)
	return f, want
}

// aligned returns n zero bytes aligned for O_DIRECT.
func aligned(n int) []byte { return misaligned(n, 0) }

// TestReadAheadServesNextRead: a read with a hint reads the next chunk in
// the same system call, and the next read of that chunk (ReadAt or
// ReadvAt) is served from memory, once; the bytes are the member's.
func TestReadAheadServesNextRead(t *testing.T) {
	f, want := aheadMember(t, 1<<20)
	for i, vec := range []bool{false, true} {
		off := int64(2*i) * raChunk * 2
		c, restore := countIO(0)
		p := aligned(raChunk)
		n, err := f.ReadvAhead([][]byte{p}, off, raChunk)
		require.NoError(t, err)
		assert.Equal(t, raChunk, n, "the read-ahead's bytes are not the caller's")
		assert.True(t, bytes.Equal(want[off:off+raChunk], p))
		assert.Equal(t, ioTally{reads: 1, readBytes: 2 * raChunk}, c.get(f), "one preadv of the read and its read-ahead")

		next := off + raChunk
		got := aligned(raChunk)
		if vec {
			_, err = f.ReadvAt([][]byte{got[:raChunk/2], got[raChunk/2:]}, next)
		} else {
			_, err = f.ReadAt(got, next)
		}
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want[next:next+raChunk], got))
		assert.Equal(t, 1, c.get(f).reads, "the next read is served from the read-ahead")

		_, err = f.ReadAt(got, next) // served once: this one reads the device
		restore()
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want[next:next+raChunk], got))
		assert.Equal(t, 2, c.get(f).reads)
	}
	assert.Equal(t, member.ReadAheadStats{Issued: 2, Hits: 2}, f.ReadAhead())
	assert.Zero(t, member.ReadAheadLive(f), "nothing kept once read")
}

// TestReadAheadSeesWrites: every kind of write to the member, made after
// a read-ahead was read (installed) or while its read was in flight,
// voids it: the next read of those bytes returns what the write left.
// Each mutation touches one 4 KiB block inside the read-ahead.
func TestReadAheadSeesWrites(t *testing.T) {
	mutations := []struct {
		name string
		do   func(f *member.File, off int64, p []byte) error
		zero bool // the block reads as zeroes afterwards
	}{
		{"WriteAt", func(f *member.File, off int64, p []byte) error { _, err := f.WriteAt(p, off); return err }, false},
		{"WriteAt-unaligned", func(f *member.File, off int64, p []byte) error {
			q := misaligned(len(p), 3) // through a bounce buffer
			copy(q, p)
			_, err := f.WriteAt(q, off)
			return err
		}, false},
		{"WritevAt", func(f *member.File, off int64, p []byte) error {
			_, err := f.WritevAt([][]byte{p[:1024], p[1024:]}, off)
			return err
		}, false},
		{"WritevAtDSync", func(f *member.File, off int64, p []byte) error {
			_, err := f.WritevAtDSync([][]byte{p}, off)
			return err
		}, false},
		{"Discard", func(f *member.File, off int64, p []byte) error { return f.Discard(off, int64(len(p))) }, true},
		{"ZeroRange", func(f *member.File, off int64, p []byte) error { return f.ZeroRange(off, int64(len(p))) }, true},
		{"Trim", func(f *member.File, off int64, p []byte) error { return f.Trim(off, int64(len(p))) }, true},
	}
	for _, mu := range mutations {
		for _, inFlight := range []bool{false, true} {
			name := mu.name + "/installed"
			if inFlight {
				name = mu.name + "/in-flight"
			}
			t.Run(name, func(t *testing.T) {
				f, want := aheadMember(t, 1<<20)
				const off = 4 * raChunk
				at := int64(off + raChunk + 8192) // inside the read-ahead
				blk := aligned(4096)
				for i := range blk {
					blk[i] = 0xA5
				}
				read := func() {
					p := aligned(raChunk)
					_, err := f.ReadvAhead([][]byte{p}, off, raChunk)
					require.NoError(t, err)
					assert.True(t, bytes.Equal(want[off:off+raChunk], p))
				}
				if inFlight {
					// Hold the read-ahead's preadv until the write returned.
					entered, held := make(chan struct{}), make(chan struct{})
					var once sync.Once
					restore := member.SetIOHook(func(m *member.File, write bool, o int64, n int) {
						if m == f && !write && o == off && n == 2*raChunk {
							once.Do(func() { close(entered); <-held })
						}
					})
					done := make(chan struct{})
					go func() { defer close(done); read() }()
					<-entered
					require.NoError(t, mu.do(f, at, blk))
					close(held)
					<-done
					restore()
				} else {
					read()
					require.NoError(t, mu.do(f, at, blk))
				}
				if mu.zero {
					clear(want[at : at+4096])
				} else {
					copy(want[at:], blk)
				}
				got := aligned(raChunk)
				_, err := f.ReadAt(got, off+raChunk)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(want[off+raChunk:off+2*raChunk], got), "the read after the %s", mu.name)
				st := f.ReadAhead()
				assert.Equal(t, int64(1), st.Issued)
				assert.Zero(t, st.Hits, "a write voids the read-ahead")
				assert.Zero(t, member.ReadAheadLive(f))
			})
		}
	}
}

// TestReadAheadNotDuringWrite: while a write of the member is in flight a
// hint is ignored (the read could miss the write's bytes and yet look
// valid, the write having started before it): the read goes alone.
func TestReadAheadNotDuringWrite(t *testing.T) {
	f, want := aheadMember(t, 1<<20)
	entered, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	restore := member.SetIOHook(func(m *member.File, write bool, o int64, n int) {
		if m == f && write {
			once.Do(func() { close(entered); <-held })
		}
	})
	defer restore()
	done := make(chan error)
	go func() {
		_, err := f.WriteAt(want[512<<10:516<<10], 512<<10) // far from the read
		done <- err
	}()
	<-entered
	p := aligned(raChunk)
	_, err := f.ReadvAhead([][]byte{p}, 0, raChunk)
	require.NoError(t, err)
	close(held)
	require.NoError(t, <-done)
	assert.True(t, bytes.Equal(want[:raChunk], p))
	assert.Zero(t, f.ReadAhead().Issued, "no read-ahead while a write is in flight")
}

// TestReadAheadSkipsReadBytes: a hint for bytes that another read took
// lately is ignored (reading them again would be waste), and so is one
// for bytes already read ahead.
func TestReadAheadSkipsReadBytes(t *testing.T) {
	f, _ := aheadMember(t, 1<<20)
	p := aligned(raChunk)
	_, err := f.ReadAt(p, raChunk) // the next request came first
	require.NoError(t, err)
	c, restore := countIO(0)
	defer restore()
	_, err = f.ReadvAhead([][]byte{p}, 0, raChunk)
	require.NoError(t, err)
	assert.Equal(t, ioTally{reads: 1, readBytes: raChunk}, c.get(f))
	_, err = f.ReadvAhead([][]byte{p}, 4*raChunk, raChunk)
	require.NoError(t, err)
	_, err = f.ReadvAhead([][]byte{p}, 4*raChunk, raChunk)
	require.NoError(t, err)
	assert.Equal(t, int64(1), f.ReadAhead().Issued, "the second hint asks for what the first read ahead")
}

// TestReadAheadBacksOff: when read-aheads keep going unread (here a write
// voids each), the member ignores the next hints, then tries again.
func TestReadAheadBacksOff(t *testing.T) {
	f, want := aheadMember(t, 2<<20)
	p := aligned(raChunk)
	for i := 0; i < member.ReadAheadWasteLimit+4; i++ {
		off := int64(i) * 2 * raChunk
		_, err := f.ReadvAhead([][]byte{p}, off, raChunk)
		require.NoError(t, err)
		_, err = f.WriteAt(want[:4096], 0)
		require.NoError(t, err)
		_, err = f.ReadAt(p, off+raChunk)
		require.NoError(t, err)
	}
	st := f.ReadAhead()
	assert.Equal(t, int64(member.ReadAheadWasteLimit), st.Issued, "hints ignored after %d unread", member.ReadAheadWasteLimit)
	assert.Equal(t, int64(member.ReadAheadWasteLimit), st.Dropped)
}

// TestReadAheadExpires: a read-ahead that nobody reads is dropped, its
// buffer returned, once it is older than the member keeps them.
func TestReadAheadExpires(t *testing.T) {
	f, _ := aheadMember(t, 1<<20)
	p := aligned(raChunk)
	_, err := f.ReadvAhead([][]byte{p}, 0, raChunk)
	require.NoError(t, err)
	require.Equal(t, 1, member.ReadAheadLive(f))
	for deadline := time.Now().Add(5 * time.Second); member.ReadAheadLive(f) > 0; time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the read-ahead was never dropped")
	}
	assert.Equal(t, member.ReadAheadStats{Issued: 1, Dropped: 1}, f.ReadAhead())
}

// TestReadAheadConcurrent runs sequential readers that read ahead and
// writers of random chunks side by side (under -race in CI). A reader
// holds its own chunks' locks while it reads them, as the engine never
// reads what it writes at the same time, but not the chunk it reads
// ahead, which writers may change meanwhile. Every chunk holds one
// version byte throughout; a read must see a version no older than the
// last write of that chunk that completed before the read began.
func TestReadAheadConcurrent(t *testing.T) {
	const chunks = 32
	f := openDirect(t, "file", chunks*raChunk)
	member.SetReadAheadBackoff(f, false)
	var locks [chunks]sync.RWMutex
	var done [chunks]atomic.Int32 // the last version written, completed
	var next [chunks]int32        // the next version to write, under the chunk's lock
	fillv := func(v int32) []byte {
		p := aligned(raChunk)
		for i := range p {
			p[i] = byte(v)
		}
		return p
	}
	for c := range chunks {
		_, err := f.WriteAt(fillv(0), int64(c)*raChunk)
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for i := 0; i < 80; i++ {
				c := rng.Intn(chunks)
				locks[c].Lock()
				next[c]++
				v := next[c]
				_, err := f.WriteAt(fillv(v), int64(c)*raChunk)
				done[c].Store(v)
				locks[c].Unlock()
				if !assert.NoError(t, err) {
					return
				}
			}
		}()
	}
	var readers sync.WaitGroup
	for r := 0; r < 3; r++ {
		readers.Add(1)
		go func() {
			defer readers.Done()
			p := aligned(raChunk)
			for i := 0; i < 64; i++ {
				c := (r*11 + i) % (chunks - 1)
				locks[c].RLock()
				min := done[c].Load()
				_, err := f.ReadvAhead([][]byte{p}, int64(c)*raChunk, raChunk)
				locks[c].RUnlock()
				if !assert.NoError(t, err) {
					return
				}
				v := int32(p[0])
				if !assert.GreaterOrEqual(t, v, min, "chunk %d", c) ||
					!assert.True(t, bytes.Equal(p, fillv(v)), "chunk %d torn", c) {
					return
				}
			}
		}()
	}
	readers.Wait()
	wg.Wait()
	st := f.ReadAhead()
	t.Logf("read-ahead: %+v", st)
	assert.Positive(t, st.Issued)
}

// TestDirectRAID6ReadAhead: sequential 1 MiB reads of a RAID6 of four
// direct members with 64 KiB chunks. Each member holds data in 2 rows of
// every 4, and member 2's run crosses the row where each request ends,
// so without read-ahead it reads 3 times per request where the others
// read twice (bench/README.md, "disks.sh: RAID6 sequential reads"). Once
// the stream is known to be sequential (from its second request on),
// member 2 reads the next request's first chunk with its last one, and
// the next request takes it from memory: 2 reads per request, like the
// others. The bytes are the array's, a client write over a chunk read
// ahead is seen, and random reads never read ahead.
func TestDirectRAID6ReadAhead(t *testing.T) {
	const chunk = 64 << 10
	a, files := directLevelArray(t, "file", stripe.RAID6, 4, 64)
	want := make([]byte, 6<<20)
	rand.New(rand.NewSource(7)).Read(want)
	_, err := a.WriteAt(want, 0)
	require.NoError(t, err)

	got := aligned(1 << 20)
	reads := make([][]int, 4) // reads[m][request]
	for k := 0; k < 5; k++ {
		c, restore := countIO(superblock.HeaderSize)
		_, err := a.ReadAt(got, int64(k)<<20)
		restore()
		require.NoError(t, err)
		require.True(t, bytes.Equal(want[k<<20:(k+1)<<20], got), "request %d", k)
		for m, f := range files {
			reads[m] = append(reads[m], c.get(f).reads)
		}
	}
	// Request 0 is not known to follow anything; request 1 follows it and
	// reads ahead for request 2, which is the first served from memory.
	assert.Equal(t, [][]int{{2, 2, 2, 2, 2}, {2, 2, 2, 2, 2}, {3, 3, 2, 2, 2}, {2, 2, 2, 2, 2}}, reads, "reads per member and request")
	st := files[2].ReadAhead()
	assert.Equal(t, member.ReadAheadStats{Issued: 4, Hits: 3}, st, "member 2")
	for _, m := range []int{0, 1, 3} {
		assert.Zero(t, files[m].ReadAhead().Issued, "member %d's runs end with the requests", m)
	}

	// Request 4 read ahead request 5's first chunk on member 2 (array
	// offset 5 MiB, row 40). A client write over it voids it: a whole
	// row, which reads nothing first (a partial write's read of the old
	// bytes could take them from the read-ahead, rightly).
	p := aligned(2 * chunk)
	rand.New(rand.NewSource(8)).Read(p)
	_, err = a.WriteAt(p, 5<<20)
	require.NoError(t, err)
	copy(want[5<<20:], p)
	_, err = a.ReadAt(got, 5<<20)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(want[5<<20:6<<20], got), "the read after a write over the read-ahead")
	assert.Equal(t, int64(3), files[2].ReadAhead().Hits, "not served from the read-ahead")

	// Random 4 KiB reads read nothing ahead.
	before := files[2].ReadAhead().Issued
	rng := rand.New(rand.NewSource(9))
	q := aligned(4096)
	for i := 0; i < 64; i++ {
		off := rng.Int63n(6<<20/4096) * 4096
		_, err := a.ReadAt(q, off)
		require.NoError(t, err)
		require.True(t, bytes.Equal(want[off:off+4096], q))
	}
	for m, f := range files {
		if m == 2 {
			assert.Equal(t, before, f.ReadAhead().Issued)
		} else {
			assert.Zero(t, f.ReadAhead().Issued)
		}
	}
}

// memberRuns returns, per member, the runs of [off, off+n) of array g on
// it: member data-region ranges, back-to-back chunks joined.
func memberRuns(g stripe.Geometry, off, n int64) [][][2]int64 {
	runs := make([][][2]int64, g.Members())
	for _, e := range g.Extents(nil, off, n) {
		r := runs[e.Member]
		if len(r) > 0 && r[len(r)-1][1] == e.Off {
			r[len(r)-1][1] += e.Len
		} else {
			r = append(r, [2]int64{e.Off, e.Off + e.Len})
		}
		runs[e.Member] = r
	}
	return runs
}

// TestDirectParityReadAheadModel: sequential 1 MiB reads on RAID5 and
// RAID6 of direct members cost each member, from the third request on,
// its runs in the request less the first one when the request before read
// it ahead: which it does when that run starts where the member's last
// run of the request before ended, and is at most 2 chunks long (a longer
// one would still cost a read). Every read-ahead but the last request's is
// read, and the bytes are the array's.
func TestDirectParityReadAheadModel(t *testing.T) {
	const chunk, reqs = 64 << 10, 6
	for _, lv := range []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID5, 4}, {stripe.RAID6, 4}, {stripe.RAID6, 5}} {
		t.Run(fmt.Sprintf("%s/members=%d", lv.level, lv.n), func(t *testing.T) {
			a, files := directLevelArray(t, "file", lv.level, lv.n, 64)
			g := a.Geometry()
			want := make([]byte, reqs<<20)
			rand.New(rand.NewSource(7)).Read(want)
			_, err := a.WriteAt(want, 0)
			require.NoError(t, err)
			got := aligned(1 << 20)
			ahead := make([]bool, lv.n) // the request before read ahead on m
			issued := 0
			for k := 0; k < reqs; k++ {
				c, restore := countIO(superblock.HeaderSize)
				_, err := a.ReadAt(got, int64(k)<<20)
				restore()
				require.NoError(t, err)
				require.True(t, bytes.Equal(want[k<<20:(k+1)<<20], got), "request %d", k)
				runs := memberRuns(g, int64(k)<<20, 1<<20)
				next := make([][][2]int64, lv.n) // none past the array's end
				if end := int64(k+1) << 20; end < a.Size() {
					next = memberRuns(g, end, min(1<<20, a.Size()-end))
				}
				for m, f := range files {
					want := len(runs[m])
					hit := ahead[m]
					if hit {
						want--
					}
					assert.Equal(t, want, c.get(f).reads, "request %d, member %d", k, m)
					// A request that follows another reads ahead, unless
					// its only run was served from memory.
					r := runs[m]
					ahead[m] = k >= 1 && !(hit && len(r) == 1) && len(r) > 0 && len(next[m]) > 0 &&
						next[m][0][0] == r[len(r)-1][1] && next[m][0][1]-next[m][0][0] <= 2*chunk
					if ahead[m] {
						issued++
					}
				}
			}
			var st member.ReadAheadStats
			for _, f := range files {
				s := f.ReadAhead()
				st.Issued += s.Issued
				st.Hits += s.Hits
				st.Dropped += s.Dropped
			}
			last := 0
			for _, x := range ahead {
				if x {
					last++
				}
			}
			assert.Equal(t, member.ReadAheadStats{Issued: int64(issued), Hits: int64(issued - last)}, st)
			assert.Positive(t, issued)
		})
	}
}
