package raid_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	randv2 "math/rand/v2"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/integrity"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// eventsOf returns the array's recent events of one kind (Status.History
// is recorded before the event hook runs).
func eventsOf(a *raid.Array, kind raid.EventKind) []raid.Event {
	var out []raid.Event
	for _, ev := range a.Status().History {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

var csumLevels = []struct {
	level   stripe.Level
	members int
}{
	{stripe.RAID0, 3}, {stripe.RAID1, 2}, {stripe.RAID5, 4}, {stripe.RAID6, 5}, {stripe.RAID10, 4},
}

// readLoc returns the member and member offset that a read of the single
// block at array offset off goes to first (mirrors rotate the first copy
// with the chunk: see internal/mirror's firstCopy).
func readLoc(g stripe.Geometry, off int64) (int, int64) {
	e := g.Extents(nil, off, 1)[0]
	if g.Level() != stripe.RAID1 && g.Level() != stripe.RAID10 {
		return e.Member, e.Off
	}
	in := off % g.Chunk()
	locs := g.Copies(nil, e.Chunk, in)
	start := e.Chunk
	if g.Level() == stripe.RAID10 {
		start /= int64((g.Members() + 1) / 2)
	}
	l := locs[start%int64(len(locs))]
	return l.Member, l.Off
}

// TestChecksumBitRot flips bytes in a member's data region, under every
// level: a redundant array returns the original bytes, counts and reports
// the repair, rewrites the block (a second read needs no repair) and keeps
// the member; RAID0 fails the read with EIO and names the block. Then a
// flip in the checksum area itself, seen after a restart (cold cache), is
// detected (checksum-page-rebuilt) and never trusted.
func TestChecksumBitRot(t *testing.T) {
	const chunk, rows = 64 << 10, 32
	for _, lv := range csumLevels {
		t.Run(lv.level.String(), func(t *testing.T) {
			r := newRig(lv.members, dataOffsetOf(lv.level, lv.members, chunk)+64<<10+chunk*rows)
			o := raid.Options{}
			a, err := raid.Create(r.devs, raid.CreateOptions{Name: "c", Level: lv.level, Chunk: chunk, Checksums: true}, o)
			require.NoError(t, err)
			st := a.Status()
			require.NotNil(t, st.Checksums)
			sb, err := superblock.Read(r.mem[0])
			require.NoError(t, err)
			require.True(t, sb.Checksums)
			dataOff := int64(sb.DataOffset)
			require.Greater(t, dataOff, int64(superblock.HeaderSize), "room for the checksum area")

			want := make([]byte, a.Size())
			rng := randv2.New(randv2.NewPCG(1, 2))
			for i := range want {
				want[i] = byte(rng.Uint32())
			}
			_, err = a.WriteAt(want, 0)
			require.NoError(t, err)
			require.NoError(t, a.Sync())
			g := a.Geometry()
			redundant := lv.level != stripe.RAID0

			off := int64(3*chunk + 2*4096)
			m, mo := readLoc(g, off)
			good := r.mem[m].Bytes()[dataOff+mo+100]
			r.mem[m].Bytes()[dataOff+mo+100] ^= 0x5a

			got := make([]byte, 4096)
			_, err = a.ReadAt(got, off)
			if !redundant {
				require.Error(t, err)
				assert.ErrorIs(t, err, raid.ErrIO)
				assert.ErrorIs(t, err, raid.ErrChecksum)
				assert.ErrorIs(t, err, syscall.EIO)
				lost := eventsOf(a, raid.EventChecksumLost)
				require.Len(t, lost, 1)
				assert.Equal(t, m, lost[0].Role)
				assert.Contains(t, lost[0].Detail, fmt.Sprintf("data offset %d", mo))
				assert.Equal(t, int64(1), a.Status().Checksums.Lost)
				for _, d := range a.Status().Devices {
					assert.Equal(t, "active", d.State, "a checksum mismatch never fails a member")
				}
				// A whole-block write heals the block.
				_, err = a.WriteAt(want[off:off+4096], off)
				require.NoError(t, err)
				_, err = a.ReadAt(got, off)
				require.NoError(t, err)
				assert.Equal(t, want[off:off+4096], got)
				require.NoError(t, a.Close())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, want[off:off+4096], got, "the original bytes")
			rep := eventsOf(a, raid.EventChecksumRepaired)
			require.Len(t, rep, 1)
			assert.Equal(t, m, rep[0].Role)
			assert.Contains(t, rep[0].Detail, fmt.Sprintf("data offset %d", mo))
			st = a.Status()
			assert.Equal(t, int64(1), st.Checksums.Repaired)
			assert.Equal(t, good, r.mem[m].Bytes()[dataOff+mo+100], "the bad block was rewritten")
			for _, d := range st.Devices {
				assert.Equal(t, "active", d.State, "a checksum mismatch never fails a member")
				if d.Role == m {
					assert.Equal(t, int64(1), d.ChecksumRepairs)
				}
			}
			_, err = a.ReadAt(got, off)
			require.NoError(t, err)
			assert.Equal(t, want[off:off+4096], got)
			assert.Equal(t, int64(1), a.Status().Checksums.Repaired, "the second read needs no repair")

			// An unaligned read of part of a bad block repairs the whole
			// block: the next read of it needs no repair.
			off2 := off + 4096
			m2, mo2 := readLoc(g, off2)
			r.mem[m2].Bytes()[dataOff+mo2+3000] ^= 0x81
			small := make([]byte, 512)
			_, err = a.ReadAt(small, off2+1024)
			require.NoError(t, err)
			assert.Equal(t, want[off2+1024:off2+1536], small)
			assert.Equal(t, int64(2), a.Status().Checksums.Repaired)
			_, err = a.ReadAt(small, off2+1024)
			require.NoError(t, err)
			_, err = a.ReadAt(got, off2)
			require.NoError(t, err)
			assert.Equal(t, want[off2:off2+4096], got)
			assert.Equal(t, int64(2), a.Status().Checksums.Repaired, "the block was healed whole")

			// A flip in the checksum area: the entry of that same block.
			require.NoError(t, a.Close())
			b := mo / 4096
			entry := int64(sb.ChecksumOffset) + b/1023*4096 + (b%1023)*4
			old := binary.LittleEndian.Uint32(r.mem[m].Bytes()[entry:])
			r.mem[m].Bytes()[entry] ^= 0x01
			a = assembleArray(t, r.devs, raid.Options{})
			_, err = a.ReadAt(got, off)
			require.NoError(t, err)
			assert.Equal(t, want[off:off+4096], got)
			st = a.Status()
			assert.Equal(t, int64(1), st.Checksums.PagesRebuilt)
			require.Len(t, eventsOf(a, raid.EventChecksumPageRebuilt), 1)
			assert.Equal(t, int64(1), st.Checksums.Repaired, "the damaged entry was never trusted: the block was rebuilt")
			require.NoError(t, a.Sync())
			assert.Equal(t, old, binary.LittleEndian.Uint32(r.mem[m].Bytes()[entry:]), "the entry was rewritten")
			_, err = a.ReadAt(got, off)
			require.NoError(t, err)
			assert.Equal(t, int64(1), a.Status().Checksums.Repaired)
		})
	}
}

// TestChecksumPartialWrites checks that unaligned writes, discards and
// write-zeroes keep checksums coherent, and that a partial write over a
// rotten block does not bless the rot.
func TestChecksumPartialWrites(t *testing.T) {
	const chunk, rows = 16 << 10, 16
	for _, lv := range csumLevels {
		t.Run(lv.level.String(), func(t *testing.T) {
			r := newRig(lv.members, dataOffsetOf(lv.level, lv.members, chunk)+64<<10+chunk*rows)
			a := createArray(t, r.devs, raid.CreateOptions{Name: "c", Level: lv.level, Chunk: chunk, Checksums: true}, raid.Options{})
			model := make([]byte, a.Size())
			rng := randv2.New(randv2.NewPCG(3, 4))
			for i := 0; i < 300; i++ {
				off := rng.Int64N(a.Size())
				n := min(a.Size()-off, 1+rng.Int64N(3*chunk))
				switch rng.IntN(4) {
				case 0:
					require.NoError(t, a.Discard(off, n))
					clear(model[off : off+n])
				case 1:
					require.NoError(t, a.WriteZeroes(off, n, rng.IntN(2) == 0))
					clear(model[off : off+n])
				default:
					p := make([]byte, n)
					for j := range p {
						p[j] = byte(rng.Uint32() | 1)
					}
					if rng.IntN(3) == 0 {
						clear(p[:n/2]) // zero blocks are elided
					}
					_, err := a.WriteAt(p, off)
					require.NoError(t, err)
					copy(model[off:], p)
				}
			}
			got := make([]byte, a.Size())
			_, err := a.ReadAt(got, 0)
			require.NoError(t, err)
			require.True(t, bytes.Equal(model, got))
			assert.Equal(t, int64(0), a.Status().Checksums.Detected, "no false mismatch")
		})
	}
}

// TestChecksumCacheBound runs with a cache of one page per member: pages
// are evicted and written back, and every read still verifies.
func TestChecksumCacheBound(t *testing.T) {
	const chunk, rows = 64 << 10, 256 // 16 MiB per member: 4 checksum pages
	r := newRig(2, superblock.HeaderSize+64<<10+chunk*rows)
	a := createArray(t, r.devs, raid.CreateOptions{Name: "c", Level: stripe.RAID1, Chunk: chunk, Checksums: true}, raid.Options{ChecksumCache: 2 * 4096})
	want := make([]byte, a.Size())
	for i := range want {
		want[i] = byte(i * 7)
	}
	for off := int64(0); off < a.Size(); off += 1 << 20 {
		_, err := a.WriteAt(want[off:off+1<<20], off)
		require.NoError(t, err)
	}
	st := a.Status().Checksums
	assert.LessOrEqual(t, st.CachedBytes, st.CacheLimit+2*4096, "bounded (plus what one request touches)")
	got := make([]byte, a.Size())
	_, err := a.ReadAt(got, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got))
	assert.Equal(t, int64(0), a.Status().Checksums.Detected)
}

// TestChecksumOptions checks the configuration errors.
func TestChecksumOptions(t *testing.T) {
	err := raid.Options{ChecksumCache: -1}.Validate()
	require.Error(t, err)
	assert.True(t, errors.Is(err, raid.ErrConfig))
	assert.True(t, strings.Contains(err.Error(), "ChecksumCache"))
}

// noDiscard is a member that cannot punch holes (a block device without
// discard support).
type noDiscard struct{ keep }

func (noDiscard) Discard(off, n int64) error { return errors.ErrUnsupported }

// TestCreateWithoutDiscardResyncs creates arrays on members that cannot
// discard and hold old bytes: the data regions cannot be zeroed, so create
// must resync every row (mirrors copied, parity computed, checksums sealed)
// even though the write-intent bitmap, from which the resync takes its
// rows, starts empty.
func TestCreateWithoutDiscardResyncs(t *testing.T) {
	const chunk, rows = 16 << 10, 16
	for _, tc := range []struct {
		level     stripe.Level
		n         int
		checksums bool
	}{{stripe.RAID1, 2, false}, {stripe.RAID5, 3, false}, {stripe.RAID0, 2, true}, {stripe.RAID5, 3, true}} {
		t.Run(fmt.Sprintf("%s/checksums=%v", tc.level, tc.checksums), func(t *testing.T) {
			r := newRig(tc.n, dataOffsetOf(tc.level, tc.n, chunk)+64<<10+chunk*rows)
			for i := range r.devs {
				randomBytes(r.mem[i].Bytes(), int64(i+1)) // old contents
				r.devs[i].Member = noDiscard{r.devs[i].Member.(keep)}
			}
			a := createArray(t, r.devs, raid.CreateOptions{Name: "nd", Level: tc.level, Chunk: chunk, Checksums: tc.checksums}, raid.Options{})
			st := waitIdle(t, a)
			require.NotNil(t, st.LastResync, "create on members that cannot discard resyncs")
			assert.Equal(t, st.LastResync.Total, a.Geometry().Rows(), "every row")
			if tc.level != stripe.RAID0 {
				checkConsistent(t, a)
			}
			got := make([]byte, a.Size())
			_, err := a.ReadAt(got, 0)
			require.NoError(t, err, "every block reads (and, with checksums, verifies)")
			if tc.checksums {
				assert.Zero(t, a.Status().Checksums.Detected)
			}
		})
	}
}

// TestScrubChecksumsTrustMatchingCopy: with checksums a mirror scrub never
// trusts a rotten copy, not even the first one (without checksums the
// first readable copy wins, as in md: TestScrubMirrorFirstCopyWins). The
// copy that fails its checksum is rewritten from the one that matches, the
// repair is counted, and the row is then compared and verified in the same
// scrub (before, with only one copy readable at first, the scrub called it
// unverifiable until the next one).
func TestScrubChecksumsTrustMatchingCopy(t *testing.T) {
	const chunk = 8 << 10
	r := newRig(2, memberSizeFor(chunk, 4)+64<<10)
	a := createArray(t, r.devs, raid.CreateOptions{Name: "sc", Level: stripe.RAID1, Chunk: chunk, Checksums: true}, raid.Options{CleanDelay: -1})
	want := fill(t, a, 8)
	require.NoError(t, a.Sync())
	sb, err := superblock.Read(r.mem[0])
	require.NoError(t, err)
	// Role 0 holds the first copy of every chunk of a RAID1.
	r.mem[0].Bytes()[int64(sb.DataOffset)+2*chunk+10] ^= 0x5a
	res, err := scrub(t, a, false)
	require.NoError(t, err)
	assert.True(t, res.Consistent(), "%s", res)
	assert.Equal(t, int64(1), a.Status().Checksums.Repaired)
	assert.Equal(t, int64(1), res.ChecksumRepaired, "the scrub's result counts what it healed")
	rep := eventsOf(a, raid.EventChecksumRepaired)
	require.Len(t, rep, 1)
	assert.Equal(t, 0, rep[0].Role)
	requireContent(t, a, want, "the copy matching its checksum won")
	res, err = scrub(t, a, false)
	require.NoError(t, err)
	assert.True(t, res.Consistent(), "%s", res)
	assert.Equal(t, int64(1), a.Status().Checksums.Repaired)
}

// TestChecksumCopyVerifier: the scrub's CopyVerifier on an array with
// checksums confirms a copy that matches its checksums and refuses one
// that does not.
func TestChecksumCopyVerifier(t *testing.T) {
	const chunk = 8 << 10
	r := newRig(2, memberSizeFor(chunk, 4)+64<<10)
	a := createArray(t, r.devs, raid.CreateOptions{Name: "cv", Level: stripe.RAID1, Chunk: chunk, Checksums: true}, raid.Options{CleanDelay: -1})
	want := fill(t, a, 8)
	v := raid.ChecksumVerifier(a)
	ok, known := v.VerifyCopy(raid.Copy{Member: 1, Off: chunk, Data: want[chunk : 2*chunk]})
	assert.True(t, ok)
	assert.True(t, known)
	bad := bytes.Clone(want[chunk : 2*chunk])
	bad[100] ^= 1
	ok, known = v.VerifyCopy(raid.Copy{Member: 1, Off: chunk, Data: bad})
	assert.False(t, ok)
	assert.True(t, known)
}

// TestChecksumMirrorCRCOnce: a write to a mirror computes each block's
// CRC32C once, not once per copy (the copies share an integrity.Shared),
// and every copy's checksums are right: after a sync, each member's whole
// data region verifies against its own checksum area.
func TestChecksumMirrorCRCOnce(t *testing.T) {
	const chunk, rows = 64 << 10, 32
	for _, lv := range []struct {
		level   stripe.Level
		members int
	}{{stripe.RAID1, 2}, {stripe.RAID1, 3}, {stripe.RAID10, 4}} {
		t.Run(fmt.Sprintf("%s/%d", lv.level, lv.members), func(t *testing.T) {
			r := newRig(lv.members, dataOffsetOf(lv.level, lv.members, chunk)+64<<10+chunk*rows)
			a, err := raid.Create(r.devs, raid.CreateOptions{Name: "c", Level: lv.level, Chunk: chunk, Checksums: true}, raid.Options{})
			require.NoError(t, err)
			want := make([]byte, 1<<20+3*4096)
			rng := randv2.New(randv2.NewPCG(3, 4))
			for i := range want {
				want[i] = byte(rng.Uint32())
			}
			before := a.ChecksumsSummed()
			_, err = a.WriteAt(want, 4*4096)
			require.NoError(t, err)
			assert.Equal(t, int64(len(want)/4096), a.ChecksumsSummed()-before, "one CRC per block written, whatever the copies")
			require.NoError(t, a.Sync())
			require.NoError(t, a.Close())

			for m, mem := range r.mem {
				sb, err := superblock.Read(mem)
				require.NoError(t, err)
				d, err := integrity.New(mem, integrity.Config{DataOffset: int64(sb.DataOffset), DataSize: int64(sb.DataSize), AreaOffset: int64(sb.ChecksumOffset)})
				require.NoError(t, err)
				data := make([]byte, sb.DataSize)
				_, err = d.ReadAt(data, int64(sb.DataOffset))
				require.NoError(t, err, "member %d", m)
				if lv.level == stripe.RAID1 {
					require.True(t, bytes.Equal(want, data[4*4096:4*4096+len(want)]), "member %d", m)
				}
			}
		})
	}
}

// areaCounter counts writes that reach [lo, hi) of a memory member (the
// checksum area, once the superblock says where it is).
type areaCounter struct {
	*member.Memory
	lo, hi atomic.Int64
	writes atomic.Int64
}

// InMemory says no: the test is about an appended log that fills up and
// checkpoints, which a log held in memory is not (it is slotted).
func (c *areaCounter) InMemory() bool { return false }

func (c *areaCounter) WriteAt(p []byte, off int64) (int, error) {
	if off < c.hi.Load() && off+int64(len(p)) > c.lo.Load() {
		c.writes.Add(1)
	}
	return c.Memory.WriteAt(p, off)
}

// TestChecksumPagesNotWrittenPerJournalRecord: partial-stripe writes to a
// RAID5 with checksums and its write-hole log (the default policy) sync a
// log record each, and that sync does not write the checksum pages back: they stay
// cached until a FLUSH (Sync), which writes them. Before, every record's
// sync wrote the dirty pages, one more write per member per client write.
func TestChecksumPagesNotWrittenPerJournalRecord(t *testing.T) {
	const chunk, rows, n = 64 << 10, 64, 4
	var devs []raid.Device
	var ctrs []*areaCounter
	for i := 0; i < n; i++ {
		c := &areaCounter{Memory: member.NewMemory(dataOffsetOf(stripe.RAID5, n, chunk) + 64<<10 + chunk*rows)}
		ctrs = append(ctrs, c)
		devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: c})
	}
	a, err := raid.Create(devs, raid.CreateOptions{Name: "c", Level: stripe.RAID5, Chunk: chunk, Checksums: true}, raid.Options{})
	require.NoError(t, err)
	defer a.Close()
	require.NotNil(t, a.Status().Journal, "this test is about the write-hole log's syncs (policy %s)", a.Status().ConsistencyPolicy)
	for _, c := range ctrs {
		sb, err := superblock.Read(c.Memory)
		require.NoError(t, err)
		c.lo.Store(int64(sb.ChecksumOffset))
		c.hi.Store(int64(sb.ChecksumOffset + sb.ChecksumLength))
	}
	p := make([]byte, 4096)
	rng := randv2.New(randv2.NewPCG(5, 6))
	for i := 0; i < 1500; i++ {
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		_, err := a.WriteAt(p, rng.Int64N(a.Size()/4096)*4096)
		require.NoError(t, err)
	}
	written := int64(0)
	for _, c := range ctrs {
		written += c.writes.Load()
	}
	assert.Zero(t, written, "checksum pages written before any FLUSH")
	require.Greater(t, a.Status().Journal.Records, int64(0), "the writes were journaled")
	require.Greater(t, a.Status().Journal.Checkpoints, int64(0), "the log filled up: its checkpoints synced every member")
	require.NoError(t, a.Sync())
	for _, c := range ctrs {
		written += c.writes.Load()
	}
	assert.Positive(t, written, "a FLUSH writes the checksum pages back")
}

// opCounter counts every request that reaches a memory member, vectored
// ones included (as one request each, as the kernel sees a pwritev).
type opCounter struct {
	*member.Memory
	reads, writes, syncs atomic.Int64
}

func (c *opCounter) ReadAt(p []byte, off int64) (int, error) {
	c.reads.Add(1)
	return c.Memory.ReadAt(p, off)
}

func (c *opCounter) WriteAt(p []byte, off int64) (int, error) {
	c.writes.Add(1)
	return c.Memory.WriteAt(p, off)
}

func (c *opCounter) ReadvAt(bufs [][]byte, off int64) (int, error) {
	c.reads.Add(1)
	return c.Memory.ReadvAt(bufs, off)
}

func (c *opCounter) WritevAt(bufs [][]byte, off int64) (int, error) {
	c.writes.Add(1)
	return c.Memory.WritevAt(bufs, off)
}

// FillAt counts an in-place write (raid.Op.WriteFill) as the write it
// replaces.
func (c *opCounter) FillAt(off, n int64, f member.Filler, src [][]byte) bool {
	c.writes.Add(1)
	return c.Memory.FillAt(off, n, f, src)
}

func (c *opCounter) Sync() error {
	c.syncs.Add(1)
	return c.Memory.Sync()
}

// countedMembers makes n memory members, each counted by an opCounter,
// sized for rows rows of chunk on a level-lv array of n members.
func countedMembers(lv stripe.Level, n int, chunk, rows int64) ([]raid.Device, []*opCounter) {
	var devs []raid.Device
	var ctrs []*opCounter
	for i := 0; i < n; i++ {
		c := &opCounter{Memory: member.NewMemory(dataOffsetOf(lv, n, chunk) + 64<<10 + chunk*rows)}
		ctrs = append(ctrs, c)
		devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: c})
	}
	return devs, ctrs
}

// TestChecksumsAddNoMemberRequests: in steady state (every block written,
// the checksum pages cached) a random 4 KiB write costs the members the
// same requests with checksums as without: the same reads, writes and
// syncs, member by member. Before, the write-hole log's record (written
// with one pwritev of three buffers) went through the checksum wrapper
// as three writes, each under the log's lock: RAID5 random 4K writes on
// throttled disks ran at 40% of their speed without checksums
// (bench/checksums.sh MEMBERS=disks).
func TestChecksumsAddNoMemberRequests(t *testing.T) {
	// The checksum area leaves a little less data region with checksums:
	// the writes fall in the first span bytes of both arrays.
	const chunk, rows, writes, span = 64 << 10, 128, 200, 6 << 20
	for _, lv := range []struct {
		level   stripe.Level
		members int
	}{{stripe.RAID1, 2}, {stripe.RAID5, 4}, {stripe.RAID6, 5}} {
		t.Run(lv.level.String(), func(t *testing.T) {
			// counts[csum][member] = {reads, writes, syncs}
			var counts [2][][3]int64
			for ci, csum := range []bool{false, true} {
				devs, ctrs := countedMembers(lv.level, lv.members, chunk, rows)
				a, err := raid.Create(devs, raid.CreateOptions{Name: "c", Level: lv.level, Chunk: chunk, Checksums: csum}, raid.Options{CleanDelay: -1, KeepZeroes: true})
				require.NoError(t, err)
				if lv.level != stripe.RAID1 {
					require.NotNil(t, a.Status().Journal, "this test covers the write-hole log's records (policy %s)", a.Status().ConsistencyPolicy)
				}
				rng := randv2.New(randv2.NewPCG(7, 8))
				p := make([]byte, 1<<20)
				for off := int64(0); off < a.Size(); off += int64(len(p)) {
					for j := range p {
						p[j] = byte(rng.Uint32())
					}
					_, err := a.WriteAt(p[:min(int64(len(p)), a.Size()-off)], off)
					require.NoError(t, err)
				}
				require.NoError(t, a.Sync())
				for _, c := range ctrs {
					c.reads.Store(0)
					c.writes.Store(0)
					c.syncs.Store(0)
				}
				offs := randv2.New(randv2.NewPCG(9, 10))
				for i := 0; i < writes; i++ {
					_, err := a.WriteAt(p[i*64:i*64+4096], offs.Int64N(span/4096)*4096)
					require.NoError(t, err)
				}
				for _, c := range ctrs {
					counts[ci] = append(counts[ci], [3]int64{c.reads.Load(), c.writes.Load(), c.syncs.Load()})
				}
				require.NoError(t, a.Close())
			}
			total := int64(0)
			for _, c := range counts[0] {
				total += c[1]
			}
			require.GreaterOrEqual(t, total, int64(2*writes), "every write reached at least two members")
			assert.Equal(t, counts[0], counts[1], "member {reads, writes, syncs} for %d random 4 KiB writes, without checksums then with", writes)
		})
	}
}

// filledCsumArray creates an array with checksums on a rig of memory
// members (checked and closed at cleanup) and fills it with random bytes
// from seed, which it returns.
func filledCsumArray(t *testing.T, level stripe.Level, members int, chunk, rows int64, seed uint64) (*rig, *raid.Array, []byte) {
	t.Helper()
	r := newRig(members, dataOffsetOf(level, members, chunk)+64<<10+chunk*rows)
	a := createArray(t, r.devs, raid.CreateOptions{Name: "c", Level: level, Chunk: chunk, Checksums: true}, raid.Options{})
	want := make([]byte, a.Size())
	rng := randv2.New(randv2.NewPCG(seed, seed+1))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	_, err := a.WriteAt(want, 0)
	require.NoError(t, err)
	return r, a, want
}

// rotRow flips a byte in block k of member k's chunk of row row, for every
// member k: each member of the row has one bad block, at an offset of its
// own, so at every block offset at most one chunk is wrong.
func rotRow(t *testing.T, r *rig, a *raid.Array, row int64) {
	t.Helper()
	sb, err := superblock.Read(r.mem[0])
	require.NoError(t, err)
	chunk := a.Geometry().Chunk()
	for k := range r.mem {
		require.Less(t, int64(k+1)*4096, chunk)
		r.mem[k].Bytes()[int64(sb.DataOffset)+row*chunk+int64(k)*4096+7] ^= 0x5a
	}
}

// TestChecksumRotAtDifferentBlocks: a read over chunks that each have a
// block failing its checksum, at different offsets, returns the right
// bytes on every redundant level: at each block offset only one chunk is
// wrong, and the copies or parity rebuild it. Before, the first bad block
// made its whole member unreadable for the request, the second one
// another member, and the read failed with EIO, reporting the blocks lost
// (RAID1 with two copies rotten at different blocks, RAID5 with two
// chunks of a row, RAID6 with three), though block reads of the same
// bytes succeeded.
func TestChecksumRotAtDifferentBlocks(t *testing.T) {
	const chunk, rows = 64 << 10, 8
	for _, lv := range csumLevels {
		if lv.level == stripe.RAID0 {
			continue
		}
		t.Run(lv.level.String(), func(t *testing.T) {
			r, a, want := filledCsumArray(t, lv.level, lv.members, chunk, rows, 3)
			const row = 2
			rotRow(t, r, a, row)
			w := a.Geometry().StripeWidth()
			got := make([]byte, w)
			_, err := a.ReadAt(got, row*w)
			require.NoError(t, err, "every bad block has a good copy or its parity")
			assert.Equal(t, want[row*w:(row+1)*w], got)
			st := a.Status()
			assert.Zero(t, st.Checksums.Lost)
			assert.Empty(t, eventsOf(a, raid.EventChecksumLost))
			assert.Positive(t, st.Checksums.Repaired)
			for _, d := range st.Devices {
				assert.Equal(t, "active", d.State)
			}
			_, err = a.ReadAt(got, row*w)
			require.NoError(t, err)
			assert.Equal(t, want[row*w:(row+1)*w], got)
		})
	}
}

// TestCheckHealsChecksumFailures: a check of a parity row whose blocks
// fail their checksums (a data block and a parity block, each in a chunk
// of its own) rebuilds and rewrites them, as reads do, and verifies the
// row; losing a member afterwards loses nothing. Before, RAID5's and
// RAID6's Check stopped at the first member read that failed: the row was
// reported unverifiable "because the array is degraded" at every check,
// --repair included, and the bad parity stayed until a member failure
// needed it and the read failed. A row with more bad blocks at one offset
// than the level can rebuild is reported unverifiable because of its
// checksums, not because of a degraded array.
func TestCheckHealsChecksumFailures(t *testing.T) {
	const chunk, rows = 64 << 10, 8
	for _, lv := range csumLevels {
		if lv.level != stripe.RAID5 && lv.level != stripe.RAID6 {
			continue
		}
		t.Run(lv.level.String(), func(t *testing.T) {
			r, a, want := filledCsumArray(t, lv.level, lv.members, chunk, rows, 5)
			sb, err := superblock.Read(r.mem[0])
			require.NoError(t, err)
			g := a.Geometry()
			const row = 3
			pm, dm := g.ParityMember(row), g.DataMember(row, 1)
			at := func(m int, blk int64) *byte {
				return &r.mem[m].Bytes()[int64(sb.DataOffset)+row*chunk+blk*4096+100]
			}
			goodP, goodD := *at(pm, 2), *at(dm, 5)
			*at(pm, 2) ^= 0xff
			*at(dm, 5) ^= 0xff

			res, err := a.Check()
			require.NoError(t, err, "%s", res)
			assert.True(t, res.Consistent(), "%s", res)
			assert.Equal(t, goodP, *at(pm, 2), "the parity block was rewritten")
			assert.Equal(t, goodD, *at(dm, 5), "the data block was rewritten")
			st := a.Status()
			assert.Equal(t, int64(2), st.Checksums.Repaired)
			assert.Zero(t, st.Checksums.Lost)
			// The check says what it healed; it used to say only "all N
			// rows verified consistent".
			assert.Equal(t, int64(2), res.ChecksumRepaired)
			assert.Contains(t, res.String(), "; 2 blocks that failed their checksums were rewritten")
			res, err = a.Check()
			require.NoError(t, err, "%s", res)
			assert.Zero(t, res.ChecksumRepaired, "nothing left to heal")
			assert.Equal(t, fmt.Sprintf("all %d rows verified consistent", res.Rows), res.String())
			r.toggles[dm].On() // the parity is needed now
			requireContent(t, a, want, "after the check, with a member failing")
			r.toggles[dm].Off()
		})
	}
	t.Run("lost", func(t *testing.T) {
		r := newRig(4, dataOffsetOf(stripe.RAID5, 4, chunk)+64<<10+chunk*rows)
		a, err := raid.Create(r.devs, raid.CreateOptions{Name: "c", Level: stripe.RAID5, Chunk: chunk, Checksums: true}, raid.Options{})
		require.NoError(t, err)
		defer a.Close()
		_, err = a.WriteAt(bytes.Repeat([]byte{7}, int(a.Size())), 0)
		require.NoError(t, err)
		sb, err := superblock.Read(r.mem[0])
		require.NoError(t, err)
		g := a.Geometry()
		const row = 3
		for _, m := range []int{g.ParityMember(row), g.DataMember(row, 0)} {
			r.mem[m].Bytes()[int64(sb.DataOffset)+row*chunk+4096+9] ^= 0xff
		}
		res, err := a.Check()
		require.ErrorIs(t, err, raid.ErrUnverifiable)
		assert.Equal(t, int64(1), res.ChecksumUnverifiable)
		assert.NotContains(t, res.String(), "degraded")
		assert.Contains(t, res.String(), "1 rows could not be verified because blocks failed their checksums")
		assert.NotEmpty(t, eventsOf(a, raid.EventChecksumLost))
	})
}

// TestCrashResyncPrefersMatchingCopy: after a crash, the resync of a
// mirror's dirty rows rewrites a block of the first copy that fails its
// checksum from a copy that matches, instead of resealing it (which made
// the rot valid) and copying it over the good copies. Before, clients
// then read the rot, and a check found the copies consistent.
func TestCrashResyncPrefersMatchingCopy(t *testing.T) {
	for _, lv := range []levelShape{{stripe.RAID1, 2}, {stripe.RAID1, 3}, {stripe.RAID10, 4}} {
		t.Run(fmt.Sprint(lv.level, "x", lv.n), func(t *testing.T) {
			// Block 3 of chunk 5 rots on the copy a resync keeps (the
			// first readable one, in Copies order).
			crashResyncRot(t, lv, func(g stripe.Geometry, chunk int64) (int, int64) {
				loc := g.Copies(nil, 5, 3*4096)[0]
				return loc.Member, loc.Off
			})
		})
	}
}

// TestCrashResyncParityArbitrates: after a crash, the resync of a RAID5 or
// RAID6 row where a data block fails its checksum rebuilds the block from
// the row's parity; the rebuilt block matches the stored checksum, so the
// bad block was rot, and it is rewritten instead of resealed. Before, the
// reseal made the rot valid, the resync recomputed the parity from it, and
// clients read the rot.
func TestCrashResyncParityArbitrates(t *testing.T) {
	for _, lv := range []levelShape{{stripe.RAID5, 4}, {stripe.RAID6, 5}} {
		t.Run(lv.level.String(), func(t *testing.T) {
			// Block 2 of data chunk 1 of row 4 rots.
			crashResyncRot(t, lv, func(g stripe.Geometry, chunk int64) (int, int64) {
				return g.DataMember(4, 1), 4*chunk + 2*4096
			})
		})
	}
}

// TestCrashRequestBeforeResyncPrefersGoodData: after a crash, a client
// read of a rotten block in a dirty region, or a write of part of it,
// before the resync reaches the row, gets the resync's arbitration first
// (a copy that matches its checksum, or the block rebuilt from the
// parity), and so the block's right bytes. Before, the request resealed
// the rotten block as it met it, as if a write had torn it: the read
// served the rot, and a partial write kept the rot in the bytes it did
// not write, on a block now valid.
func TestCrashRequestBeforeResyncPrefersGoodData(t *testing.T) {
	// The resync's first window is 64 rows of 16 KiB (1 MiB); at 16 KiB/s
	// it takes the next one 64 s later.
	const chunk, rows = 16 << 10, 80
	for _, lv := range []levelShape{{stripe.RAID1, 2}, {stripe.RAID10, 4}, {stripe.RAID5, 4}, {stripe.RAID6, 5}} {
		for _, write := range []bool{false, true} {
			name := fmt.Sprint(lv.level, "x", lv.n, "/read")
			if write {
				name = fmt.Sprint(lv.level, "x", lv.n, "/partial-write")
			}
			t.Run(name, func(t *testing.T) {
				r := newRig(lv.n, dataOffsetOf(lv.level, lv.n, chunk)+64<<10+chunk*rows)
				o := raid.Options{CleanDelay: -1}
				a, want, dataOff := filledChecksummed(t, r, raid.CreateOptions{Level: lv.level, Chunk: chunk, BitmapRegion: 4 * chunk}, o, 12)
				// A block of the last member row rots: on a mirror, on the
				// copy a read (and the resync) takes; on a parity level, in
				// data chunk 1.
				g := a.Geometry()
				var m int
				var memOff, arrOff int64
				if g.Mirrored() {
					c := g.Size()/chunk - 1
					loc := g.Copies(nil, c, 3*4096)[0]
					m, memOff, arrOff = loc.Member, loc.Off, c*chunk+3*4096
				} else {
					row := g.Rows() - 1
					m, memOff = g.DataMember(row, 1), row*chunk+2*4096
					arrOff = (row*int64(g.DataMembers())+1)*chunk + 2*4096
				}
				at := &r.mem[m].Bytes()[dataOff+memOff+33]
				good := *at
				*at ^= 0x3c
				a.Abandon() // a crash: every region stays dirty

				// A slow resync, which reaches the last row (outside its
				// first window) long after the request.
				o.RebuildMinRate, o.RebuildMaxRate = chunk, chunk
				b, err := raid.Assemble(r.devs, o)
				require.NoError(t, err)
				defer b.Abandon()
				require.NotNil(t, b.Status().Resync, "an unclean array resyncs")
				if write {
					p := make([]byte, 512)
					randomBytes(p, 13)
					_, err := b.WriteAt(p, arrOff)
					require.NoError(t, err)
					copy(want[arrOff:], p)
				}
				got := make([]byte, 4096)
				_, err = b.ReadAt(got, arrOff)
				require.NoError(t, err)
				if !bytes.Equal(got, want[arrOff:arrOff+4096]) {
					t.Fatalf("the block read back: %s", firstDiff(got, want[arrOff:arrOff+4096], arrOff))
				}
				if !write {
					assert.Equal(t, good, *at, "the rotten block was rewritten with its right bytes")
				}
				assert.Equal(t, int64(1), b.Status().Checksums.Repaired)
				require.NotNil(t, b.Status().Resync, "the resync had not reached the row yet")
				requireContent(t, b, want, "before the resync ends")
			})
		}
	}
}

// TestCrashResyncChecksumsReadsInWindows: the crash resync of an array
// with checksums reads each member's dirty rows in window-sized requests,
// as one without does: its arbitration of checksum failures and its
// reseal work on the window's bytes. They used to read every chunk of
// every row from the devices themselves, one request at a time (two
// 64 KiB reads per member per row here, 512 per member): on disks that
// charge per operation the resync ran at 3% of one without checksums
// (bench/disks.sh CSUM=1). A parity level assembled without a member,
// which only reseals, read one chunk per member per row the same way.
func TestCrashResyncChecksumsReadsInWindows(t *testing.T) {
	const chunk, rows = 64 << 10, 256
	for _, tc := range []struct {
		levelShape
		degraded bool // assembled without its last member: a parity level only reseals
	}{
		{levelShape{stripe.RAID1, 2}, false}, {levelShape{stripe.RAID10, 4}, false},
		{levelShape{stripe.RAID5, 4}, false}, {levelShape{stripe.RAID6, 5}, false},
		{levelShape{stripe.RAID5, 4}, true}, {levelShape{stripe.RAID6, 5}, true},
	} {
		lv := tc.levelShape
		name := fmt.Sprint(lv.level, "x", lv.n)
		if tc.degraded {
			name += "/degraded"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(lv.n, dataOffsetOf(lv.level, lv.n, chunk)+1<<20+chunk*rows)
			var counting atomic.Bool
			reads := make([]atomic.Int64, lv.n)
			dataOff := int64(-1)
			for i := range r.devs {
				r.devs[i].Member = keep{membertest.Inject(r.mem[i], membertest.InjectorFunc(func(op membertest.Op, off, n int64) error {
					if counting.Load() && op == membertest.OpRead && off >= dataOff {
						reads[i].Add(1)
					}
					return nil
				}))}
			}
			o := raid.Options{CleanDelay: -1}
			a, want, off := filledChecksummed(t, r, raid.CreateOptions{Level: lv.level, Chunk: chunk}, o, 21)
			dataOff = off
			a.Abandon() // a crash: every row is dirty
			counting.Store(true)
			devs := r.devs
			if tc.degraded {
				devs = devs[:lv.n-1]
			}
			b := assembleArray(t, devs, o)
			st := waitIdle(t, b)
			waitUntil(t, "the rows are sealed", func() bool { return !b.Unsealed() })
			counting.Store(false)
			if tc.degraded {
				require.True(t, st.Degraded)
				assert.Positive(t, reads[0].Load(), "the reseal read the members")
			} else {
				require.NotNil(t, st.LastResync, "a resync ran")
			}
			// 1 MiB windows: 16 rows of 64 KiB each.
			windows := int64(rows / 16)
			for m := range reads {
				assert.LessOrEqual(t, reads[m].Load(), windows+2, "data-region reads of member %d", m)
			}
			requireContent(t, b, want, "after the resync")
		})
	}
}

// filledChecksummed creates an array with checksums on r's members (c
// names the level, chunk and bitmap), fills it with random bytes from
// seed, and syncs it. It returns the array, its bytes, and the members'
// data offset.
func filledChecksummed(t *testing.T, r *rig, c raid.CreateOptions, o raid.Options, seed int64) (*raid.Array, []byte, int64) {
	t.Helper()
	c.Name, c.Checksums = "cs", true
	a, err := raid.Create(r.devs, c, o)
	require.NoError(t, err)
	want := fill(t, a, seed)
	require.NoError(t, a.Sync())
	sb, err := superblock.Read(r.mem[0])
	require.NoError(t, err)
	return a, want, int64(sb.DataOffset)
}

// crashResyncRot fills an array of shape lv with checksums, syncs it, rots
// a byte of the block that where names (member, data-region offset), and
// crashes; the resync after the restart must rewrite the block with its
// right bytes, count one checksum repair, and leave the array consistent.
func crashResyncRot(t *testing.T, lv levelShape, where func(g stripe.Geometry, chunk int64) (int, int64)) {
	const chunk = 16 << 10
	r := newRig(lv.n, dataOffsetOf(lv.level, lv.n, chunk)+64<<10+chunk*16)
	o := raid.Options{CleanDelay: -1}
	a, want, dataOff := filledChecksummed(t, r, raid.CreateOptions{Level: lv.level, Chunk: chunk}, o, 11)
	m, off := where(a.Geometry(), chunk)
	at := &r.mem[m].Bytes()[dataOff+off+33]
	good := *at
	*at ^= 0x3c
	a.Abandon() // a crash: the rows stay dirty

	b := assembleArray(t, r.devs, o)
	st := waitIdle(t, b)
	require.NotNil(t, st.LastResync, "a resync ran")
	assert.Equal(t, good, *at, "the rotten block was rewritten with its right bytes")
	requireContent(t, b, want, "after the resync")
	assert.Equal(t, int64(1), b.Status().Checksums.Repaired)
	res, err := b.Check()
	require.NoError(t, err, "%s", res)
}
