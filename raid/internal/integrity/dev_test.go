package integrity_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid/internal/integrity"
)

const (
	areaOff = 64 << 10
	dataOff = 128 << 10
)

func newDev(t *testing.T, dataSize int64, pages int) (*integrity.Dev, *member.Memory, *[][2]int64) {
	t.Helper()
	m := member.NewMemory(dataOff + dataSize)
	rebuilt := &[][2]int64{}
	d, err := integrity.New(m, integrity.Config{DataOffset: dataOff, DataSize: dataSize, AreaOffset: areaOff, CachePages: pages,
		OnPageRebuilt: func(first, n int64) { *rebuilt = append(*rebuilt, [2]int64{first, n}) }})
	require.NoError(t, err)
	return d, m, rebuilt
}

func TestAreaSize(t *testing.T) {
	assert.Equal(t, int64(0), integrity.AreaSize(0))
	assert.Equal(t, int64(4096), integrity.AreaSize(1))
	assert.Equal(t, int64(4096), integrity.AreaSize(1023*4096))
	assert.Equal(t, int64(8192), integrity.AreaSize(1023*4096+1))
}

func TestNewRefusesBadConfig(t *testing.T) {
	m := member.NewMemory(1 << 20)
	for name, c := range map[string]integrity.Config{
		"overlap":   {DataOffset: 4096, DataSize: 64 << 10, AreaOffset: 8192},
		"too-small": {DataOffset: 512 << 10, DataSize: 1 << 20, AreaOffset: 4096},
		"empty":     {DataOffset: 4096, DataSize: 0, AreaOffset: 0},
	} {
		_, err := integrity.New(m, c)
		assert.ErrorIs(t, err, integrity.ErrConfig, name)
	}
}

// TestRoundTrip writes, discards and reads random unaligned ranges against
// a model through a small cache, then reads everything back through a
// fresh Dev (cold cache, pages from disk): nothing is reported bad.
func TestRoundTrip(t *testing.T) {
	const size = 3*1023*4096 + 5000 // 3 pages and a short last block
	d, m, rebuilt := newDev(t, size, 2)
	model := make([]byte, size)
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 150; i++ {
		off := rng.Int64N(size)
		n := min(size-off, 1+rng.Int64N(20000))
		if rng.IntN(4) == 0 {
			require.NoError(t, d.Discard(dataOff+off, n))
			clear(model[off : off+n])
			continue
		}
		p := make([]byte, n)
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		_, err := d.WriteAt(p, dataOff+off)
		require.NoError(t, err)
		copy(model[off:], p)
		q := make([]byte, n)
		_, err = d.ReadAt(q, dataOff+off)
		require.NoError(t, err)
		require.True(t, bytes.Equal(p, q))
	}
	require.NoError(t, d.Sync())
	d2, err := integrity.New(m, integrity.Config{DataOffset: dataOff, DataSize: size, AreaOffset: areaOff})
	require.NoError(t, err)
	got := make([]byte, size)
	_, err = d2.ReadAt(got, dataOff)
	require.NoError(t, err)
	require.True(t, bytes.Equal(model, got))
	assert.Empty(t, *rebuilt)
	assert.Zero(t, d.Stats().Mismatches)
	assert.Zero(t, d2.Stats().Mismatches)
	assert.LessOrEqual(t, d.Stats().CachedPages, int64(2))
}

// areaReads counts the reads of a member's checksum area (page loads).
type areaReads struct {
	*member.Memory
	n atomic.Int64
}

func (m *areaReads) ReadAt(p []byte, off int64) (int, error) {
	if off >= areaOff && off < dataOff {
		m.n.Add(1)
	}
	return m.Memory.ReadAt(p, off)
}

// TestCacheBound: the page cache stays within CachePages when every page
// in it was used since the last eviction (each gets one second chance,
// then clean pages go), and a page used between the loads of the others
// stays cached, as it would under LRU.
func TestCacheBound(t *testing.T) {
	const size = 4 * 1023 * 4096 // 4 pages
	m := &areaReads{Memory: member.NewMemory(dataOff + size)}
	d, err := integrity.New(m, integrity.Config{DataOffset: dataOff, DataSize: size, AreaOffset: areaOff, CachePages: 2})
	require.NoError(t, err)
	p := make([]byte, 4096)
	read := func(page int64) {
		t.Helper()
		_, err := d.ReadAt(p, dataOff+page*1023*4096)
		require.NoError(t, err)
		assert.LessOrEqual(t, d.Stats().CachedPages, int64(2))
	}
	// Every cached page used twice before the next load.
	for round := 0; round < 3; round++ {
		for pg := int64(0); pg < 4; pg++ {
			read(pg)
			read(pg)
			read((pg + 3) % 4)
		}
	}
	// Page 0 is hot: it is loaded once, the others at each use.
	read(1)
	read(2)
	m.n.Store(0)
	for i := 0; i < 12; i++ {
		read(0)
		read(1 + int64(i%3))
	}
	assert.Equal(t, int64(1+12), m.n.Load(), "page loads")
}

// TestDetectsFlip flips a data byte and a checksum-page byte.
func TestDetectsFlip(t *testing.T) {
	const size = 1 << 20
	d, m, rebuilt := newDev(t, size, 0)
	p := bytes.Repeat([]byte("raidd!"), size/6+1)[:size]
	_, err := d.WriteAt(p, dataOff)
	require.NoError(t, err)
	require.NoError(t, d.Sync())

	m.Bytes()[dataOff+5*4096+7] ^= 1
	q := make([]byte, 100)
	_, err = d.ReadAt(q, dataOff+5*4096+50) // part of the block: the whole block is verified
	var me *integrity.MismatchError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, int64(5*4096), me.Offset)
	assert.Equal(t, 1, me.Blocks)
	assert.ErrorIs(t, err, integrity.ErrMismatch)
	assert.ErrorIs(t, err, syscall.EIO)

	// A partial write into the bad block does not bless it.
	_, err = d.WriteAt([]byte("xy"), dataOff+5*4096+1000)
	require.NoError(t, err)
	_, err = d.ReadAt(q, dataOff+5*4096)
	require.ErrorIs(t, err, integrity.ErrMismatch)
	// A whole-block write does.
	_, err = d.WriteAt(p[5*4096:6*4096], dataOff+5*4096)
	require.NoError(t, err)
	_, err = d.ReadAt(q, dataOff+5*4096)
	require.NoError(t, err)

	// A flipped entry, seen by a fresh Dev: the page is reported and the
	// block it describes fails; its neighbours, whose entries are intact,
	// still verify.
	require.NoError(t, d.Sync())
	entry := areaOff + 9*4
	old := binary.LittleEndian.Uint32(m.Bytes()[entry:])
	m.Bytes()[entry+2] ^= 0x10
	d2, err := integrity.New(m, integrity.Config{DataOffset: dataOff, DataSize: size, AreaOffset: areaOff,
		OnPageRebuilt: func(first, n int64) { *rebuilt = append(*rebuilt, [2]int64{first, n}) }})
	require.NoError(t, err)
	_, err = d2.ReadAt(q, dataOff+8*4096)
	require.NoError(t, err)
	require.Equal(t, [][2]int64{{0, size}}, *rebuilt)
	_, err = d2.ReadAt(q, dataOff+9*4096)
	require.ErrorIs(t, err, integrity.ErrMismatch)
	assert.Equal(t, int64(1), d2.Stats().PagesRebuilt)
	// The repair (a rewrite) stores a fresh entry, and the page gets a
	// fresh CRC when written back.
	_, err = d2.WriteAt(p[9*4096:10*4096], dataOff+9*4096)
	require.NoError(t, err)
	require.NoError(t, d2.Sync())
	assert.Equal(t, old, binary.LittleEndian.Uint32(m.Bytes()[entry:]))
	assert.True(t, integrity.PageValid(0, m.Bytes()[areaOff:areaOff+4096]))
}

// TestUnsealAndSeal: in an unsealed range (after a crash) a block that
// disagrees with its entry is resealed, not reported; Seal reseals a range.
func TestUnsealAndSeal(t *testing.T) {
	const size = 256 << 10
	d, m, _ := newDev(t, size, 0)
	p := bytes.Repeat([]byte{7}, size)
	_, err := d.WriteAt(p, dataOff)
	require.NoError(t, err)
	// A torn write: the data reached the disk, the checksum did not.
	m.Bytes()[dataOff+4096] = 9
	m.Bytes()[dataOff+64<<10] = 9
	d.Unseal([][2]int64{{0, 32 << 10}})
	q := make([]byte, 4096)
	_, err = d.ReadAt(q, dataOff+4096)
	require.NoError(t, err)
	assert.Equal(t, int64(1), d.Stats().Resealed)
	_, err = d.ReadAt(q, dataOff+64<<10)
	require.ErrorIs(t, err, integrity.ErrMismatch, "outside the unsealed range")
	n, err := d.Seal(64<<10, 4096)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	_, err = d.ReadAt(q, dataOff+64<<10)
	require.NoError(t, err)
	d.SealAll()
	m.Bytes()[dataOff+4096] = 10
	_, err = d.ReadAt(q, dataOff+4096)
	require.ErrorIs(t, err, integrity.ErrMismatch, "sealed again")
}

// TestConcurrent runs writers and readers on overlapping blocks (distinct
// bytes): no read may see a false mismatch.
func TestConcurrent(t *testing.T) {
	const size = 1 << 20
	d, _, _ := newDev(t, size, 1)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			buf := make([]byte, 512)
			for i := 0; i < 300; i++ {
				blk := rng.Int64N(size / 4096)
				off := dataOff + blk*4096 + int64(w)*1024 // each writer its own quarter of a block
				for j := range buf {
					buf[j] = byte(rng.Uint32())
				}
				if _, err := d.WriteAt(buf, off); err != nil {
					errs <- err
					return
				}
				if _, err := d.ReadAt(buf, off); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Zero(t, d.Stats().Mismatches)
}

// TestConcurrentWidenedReads: the raid package widens an unaligned client
// read to whole blocks, so an aligned read may cover bytes of its edge
// blocks that another request writes at the same time. Such reads must not
// race with the write (the race detector catches it) nor report a false
// mismatch.
func TestConcurrentWidenedReads(t *testing.T) {
	const blocks = 8
	d, _, _ := newDev(t, 1<<20, 1)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 2; w++ {
		wg.Add(2)
		go func() { // a writer of its own quarter of every block
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 2))
			buf := make([]byte, 1024)
			for i := 0; i < 200; i++ {
				for j := range buf {
					buf[j] = byte(rng.Uint32())
				}
				if _, err := d.WriteAt(buf, dataOff+rng.Int64N(blocks)*4096+int64(w)*1024); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() { // a reader of whole blocks (a widened read)
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			buf := make([]byte, 2*4096)
			for i := 0; i < 200; i++ {
				if _, err := d.ReadAt(buf, dataOff+rng.Int64N(blocks-1)*4096); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Zero(t, d.Stats().Mismatches)
}

// TestPassThrough: offsets outside the data region are not checked.
func TestPassThrough(t *testing.T) {
	d, m, _ := newDev(t, 64<<10, 0)
	_, err := d.WriteAt([]byte("super"), 4096)
	require.NoError(t, err)
	assert.Equal(t, "super", string(m.Bytes()[4096:4101]))
	q := make([]byte, 5)
	_, err = d.ReadAt(q, 4096)
	require.NoError(t, err)
	assert.Equal(t, "super", string(q))
	assert.True(t, d.CanDiscard())
	assert.False(t, errors.Is(d.Discard(0, 4096), integrity.ErrMismatch))
}

// vecCounter counts the requests that reach a memory device, a vectored
// one as one request.
type vecCounter struct {
	*member.Memory
	reads, writes, vreads, vwrites int
}

func (c *vecCounter) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	return c.Memory.ReadAt(p, off)
}

func (c *vecCounter) WriteAt(p []byte, off int64) (int, error) {
	c.writes++
	return c.Memory.WriteAt(p, off)
}

func (c *vecCounter) ReadvAt(bufs [][]byte, off int64) (int, error) {
	c.vreads++
	return c.Memory.ReadvAt(bufs, off)
}

func (c *vecCounter) WritevAt(bufs [][]byte, off int64) (int, error) {
	c.vwrites++
	return c.Memory.WritevAt(bufs, off)
}

// TestPassThroughVectored: a vectored write or read outside the data
// region (package raid writes its write-hole log records so, in three
// buffers of any length) reaches the device as one vectored request, as
// it would without the Dev. It used to become one write per buffer,
// which cost a RAID5 with checksums most of its random 4K write speed on
// throttled disks (raid's TestChecksumsAddNoMemberRequests).
func TestPassThroughVectored(t *testing.T) {
	m := &vecCounter{Memory: member.NewMemory(dataOff + 64<<10)}
	d, err := integrity.New(m, integrity.Config{DataOffset: dataOff, DataSize: 64 << 10, AreaOffset: areaOff})
	require.NoError(t, err)
	rec := [][]byte{[]byte("head"), bytes.Repeat([]byte{7}, 5000), []byte("tail")}
	_, err = d.WritevAt(rec, 4096)
	require.NoError(t, err)
	assert.Equal(t, vecCounter{Memory: m.Memory, vwrites: 1}, *m, "one vectored write")
	assert.Equal(t, "head", string(m.Bytes()[4096:4100]))
	assert.Equal(t, "tail", string(m.Bytes()[4096+4+5000:4096+4+5000+4]))
	got := [][]byte{make([]byte, 4), make([]byte, 5000), make([]byte, 4)}
	_, err = d.ReadvAt(got, 4096)
	require.NoError(t, err)
	assert.Equal(t, rec, got)
	assert.Equal(t, vecCounter{Memory: m.Memory, vwrites: 1, vreads: 1}, *m, "one vectored read")
}

// TestVerify compares bytes the caller holds with the stored checksums.
func TestVerify(t *testing.T) {
	d, _, _ := newDev(t, 64<<10, 0)
	p := bytes.Repeat([]byte{3}, 8192)
	_, err := d.WriteAt(p, dataOff+4096)
	require.NoError(t, err)
	ok, err := d.Verify(p, 4096)
	require.NoError(t, err)
	assert.True(t, ok)
	q := bytes.Clone(p)
	q[5000] = 4
	ok, err = d.Verify(q, 4096)
	require.NoError(t, err)
	assert.False(t, ok)
	ok, err = d.Verify(make([]byte, 4096), 32<<10) // a hole
	require.NoError(t, err)
	assert.True(t, ok)
	_, err = d.Verify(p, 100)
	assert.ErrorIs(t, err, integrity.ErrConfig)
}

// TestSharedWrites writes the same buffers to three devices through one
// Shared, concurrently, several times over (the Shared reused after
// Release): every device then holds the data and checksums that verify,
// also through a fresh Dev reading its pages from disk. A write that does
// not cover whole blocks computes its own checksums.
func TestSharedWrites(t *testing.T) {
	const size = 2 * 1023 * 4096
	var devs []*integrity.Dev
	var mems []*member.Memory
	for i := 0; i < 3; i++ {
		d, m, _ := newDev(t, size, 4)
		devs, mems = append(devs, d), append(mems, m)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var s integrity.Shared
	for round := 0; round < 20; round++ {
		bufs := make([][]byte, 1+rng.IntN(3))
		total := int64(0)
		for i := range bufs {
			bufs[i] = make([]byte, 4096*(1+rng.IntN(40)))
			for j := range bufs[i] {
				bufs[i][j] = byte(rng.Uint32())
			}
			total += int64(len(bufs[i]))
		}
		off := rng.Int64N((size-total)/4096) * 4096
		if round%5 == 4 {
			off++ // not block-aligned: each device computes its own
		}
		require.True(t, s.Reset(bufs))
		var wg sync.WaitGroup
		for _, d := range devs[:1+round%3] { // sometimes fewer writers than usual
			wg.Add(1)
			go func() {
				defer wg.Done()
				n, err := d.WriteShared(dataOff+off, &s)
				assert.NoError(t, err)
				assert.Equal(t, int(total), n)
			}()
		}
		wg.Wait()
		s.Release()
		want := bytes.Join(bufs, nil)
		for _, d := range devs[:1+round%3] {
			got := make([]byte, total)
			_, err := d.ReadAt(got, dataOff+off)
			require.NoError(t, err)
			require.True(t, bytes.Equal(want, got))
		}
	}
	assert.False(t, s.Reset([][]byte{make([]byte, 100)}), "a buffer of part of a block cannot share")
	for i, d := range devs {
		require.NoError(t, d.Sync())
		fresh, err := integrity.New(mems[i], integrity.Config{DataOffset: dataOff, DataSize: size, AreaOffset: areaOff})
		require.NoError(t, err)
		_, err = fresh.ReadAt(make([]byte, size), dataOff)
		require.NoError(t, err, "device %d", i)
	}
}

// TestNoAllocs: block-aligned reads and writes, vectored or not, and writes
// of part of a block allocate nothing once warm (the checksum slices and
// the block scratch are pooled).
func TestNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	d, _, _ := newDev(t, 1023*4096, 4)
	p := make([]byte, 64<<10)
	for i := range p {
		p[i] = byte(i * 7)
	}
	bufs := [][]byte{p[:32<<10], p[32<<10:]}
	var s integrity.Shared
	for name, f := range map[string]func(){
		"WriteAt":      func() { _, _ = d.WriteAt(p, dataOff+4096) },
		"WriteAt-part": func() { _, _ = d.WriteAt(p[:100], dataOff+4096+10) },
		"WritevAt":     func() { _, _ = d.WritevAt(bufs, dataOff) },
		"ReadAt":       func() { _, _ = d.ReadAt(p, dataOff) },
		"ReadvAt":      func() { _, _ = d.ReadvAt(bufs, dataOff) },
		"Discard":      func() { _ = d.Discard(dataOff+8192, 100) },
		"WriteShared": func() {
			s.Reset(bufs)
			_, _ = d.WriteShared(dataOff, &s)
			s.Release()
		},
	} {
		f()
		assert.Zero(t, testing.AllocsPerRun(50, f), name)
	}
}

// TestPoison: poisoned blocks (a rebuild's lost blocks) fail their reads,
// on the same and on a fresh Dev (the entries are durable after Sync). A
// partial write keeps such a block flagged; a whole-block write clears
// it. Blocks outside the range are untouched, and a hole can be poisoned.
func TestPoison(t *testing.T) {
	const size = 64 << 10
	d, m, _ := newDev(t, size, 4)
	data := bytes.Repeat([]byte{0x5a}, size)
	_, err := d.WriteAt(data, dataOff)
	require.NoError(t, err)
	// Blocks 1..2 hold data, block 15 is a hole made by a discard.
	require.NoError(t, d.Discard(dataOff+15*4096, 4096))
	n, err := d.Poison(4096+100, 4096) // overlaps blocks 1 and 2
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	n, err = d.Poison(15*4096, 4096)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a hole can be lost too")
	for _, dev := range []*integrity.Dev{d, nil} {
		if dev == nil {
			require.NoError(t, d.Sync())
			var err error
			dev, err = integrity.New(m, integrity.Config{DataOffset: dataOff, DataSize: size, AreaOffset: areaOff, CachePages: 4})
			require.NoError(t, err)
		}
		buf := make([]byte, size)
		_, err := dev.ReadAt(buf, dataOff)
		var me *integrity.MismatchError
		require.ErrorAs(t, err, &me)
		assert.Equal(t, int64(4096), me.Offset, "the first lost block")
		assert.ErrorIs(t, err, integrity.ErrMismatch)
		_, err = dev.ReadAt(buf[:4096], dataOff)
		require.NoError(t, err, "block 0 was not poisoned")
		_, err = dev.ReadAt(buf[:4096], dataOff+3*4096)
		require.NoError(t, err, "block 3 was not poisoned")
		_, err = dev.ReadAt(buf[:4096], dataOff+15*4096)
		require.ErrorIs(t, err, integrity.ErrMismatch, "the poisoned hole")
	}
	// A partial write keeps block 1 lost; a whole-block write clears block 2.
	_, err = d.WriteAt([]byte("partial"), dataOff+4096+10)
	require.NoError(t, err)
	_, err = d.WriteAt(bytes.Repeat([]byte{7}, 4096), dataOff+2*4096)
	require.NoError(t, err)
	buf := make([]byte, 4096)
	_, err = d.ReadAt(buf, dataOff+4096)
	assert.ErrorIs(t, err, integrity.ErrMismatch, "a partial write does not bless a lost block")
	_, err = d.ReadAt(buf, dataOff+2*4096)
	assert.NoError(t, err, "a whole-block write gives it a fresh checksum")
}

// TestSealKeepsPoison: a resync after a crash reseals blocks whose data and
// checksum disagree, but not a block Poison marked lost that still holds
// the bytes it was marked on: that block must go on reading as lost, in
// the unsealed range during the resync and after Seal. A lost block whose
// bytes a write changed before the crash (data reached, checksum not) is
// resealed like any other.
func TestSealKeepsPoison(t *testing.T) {
	const size = 64 << 10
	d, m, _ := newDev(t, size, 4)
	_, err := d.WriteAt(bytes.Repeat([]byte{0x5a}, size), dataOff)
	require.NoError(t, err)
	_, err = d.Poison(4096, 2*4096) // blocks 1 and 2
	require.NoError(t, err)
	// Block 2's bytes change behind the checksums (a write in flight at the
	// crash reached the data only).
	_, err = m.WriteAt(bytes.Repeat([]byte{0x11}, 4096), dataOff+2*4096)
	require.NoError(t, err)

	d.Unseal([][2]int64{{0, size}})
	buf := make([]byte, 4096)
	_, err = d.ReadAt(buf, dataOff+4096)
	assert.ErrorIs(t, err, integrity.ErrMismatch, "a lost block in an unsealed range still reads as lost")
	n, err := d.Seal(0, size)
	require.NoError(t, err)
	d.SealAll()
	assert.LessOrEqual(t, n, 1, "only block 2 (if the read above did not reseal it first) is resealed")
	_, err = d.ReadAt(buf, dataOff+4096)
	assert.ErrorIs(t, err, integrity.ErrMismatch, "Seal keeps a lost block lost")
	_, err = d.ReadAt(buf, dataOff+2*4096)
	require.NoError(t, err, "a lost block a write changed is resealed")
	assert.Equal(t, bytes.Repeat([]byte{0x11}, 4096), buf)
	_, err = d.ReadAt(buf, dataOff)
	require.NoError(t, err)
}
