package nbd

import (
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fileDev is a Device over a regular file that names its ranges for
// splicing: the device's bytes are the file's, cut into pieces of piece
// bytes sent in order (as a striped array names its chunks). Its knobs
// break the splice on purpose, so that the server must fall back to
// ReadAt.
type fileDev struct {
	f     *os.File
	rc    syscall.RawConn
	size  int64
	piece int64

	// shortAt > 0 names a range that runs past the end of the file when
	// a request starts at that offset (the file ends early).
	shortAt int64
	// declineAfter > 0 returns false after that many ranges were sent.
	declineAfter int

	reads, splices, declined atomic.Int64
}

func newFileDev(t testing.TB, size int64, piece int64) (*fileDev, []byte) {
	t.Helper()
	return newFileDevIn(t, t.TempDir(), size, piece)
}

// shmFileDev is a fileDev on tmpfs (/dev/shm), where the server's splices
// take references to pages already in memory; elsewhere it skips.
func shmFileDev(t testing.TB, size int64, piece int64) *fileDev {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "nbd-splice")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	d, _ := newFileDevIn(t, dir, size, piece)
	return d
}

func newFileDevIn(t testing.TB, dir string, size int64, piece int64) (*fileDev, []byte) {
	t.Helper()
	p := filepath.Join(dir, "dev")
	data := pattern(int(size), 11)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	f, err := os.Open(p)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	rc, err := f.SyscallConn()
	require.NoError(t, err)
	return &fileDev{f: f, rc: rc, size: size, piece: piece}, data
}

func (d *fileDev) Size() int64 { return d.size }

func (d *fileDev) ReadAt(p []byte, off int64) (int, error) {
	d.reads.Add(1)
	return d.f.ReadAt(p, off)
}

func (d *fileDev) WriteAt(p []byte, off int64) (int, error) {
	return 0, syscall.EROFS
}

func (d *fileDev) SpliceReadAt(p []byte, off int64, send func(src syscall.RawConn, srcOff int64, n int) error) bool {
	end := off + int64(len(p))
	k := 0
	for at := off; at < end; k++ {
		if d.declineAfter > 0 && k == d.declineAfter {
			d.declined.Add(1)
			return false
		}
		n := min(d.piece-at%d.piece, end-at)
		from := at
		if d.shortAt > 0 && off == d.shortAt {
			from = d.size - n/2 // only n/2 bytes before end-of-file
		}
		if send(d.rc, from, int(n)) != nil {
			d.declined.Add(1)
			return false
		}
		at += n
	}
	d.splices.Add(1)
	return true
}

// TestSpliceRead: large READs of a Splicer are sent from its file without
// ReadAt, on unix and TCP connections, with simple and structured replies,
// and their bytes are the file's.
func TestSpliceRead(t *testing.T) {
	for _, unix := range []bool{true, false} {
		for _, structured := range []bool{false, true} {
			t.Run(fmt.Sprintf("unix=%v/structured=%v", unix, structured), func(t *testing.T) {
				dev, data := newFileDev(t, 8<<20, 64<<10)
				ts := startServer(t, oneExport(dev), unix)
				cl := connect(t, ts, "disk", structured)
				seed := rand.Uint64()
				t.Logf("seed %d", seed)
				rng := rand.New(rand.NewPCG(seed, 0))
				want := int64(0)
				for i := 0; i < 40; i++ {
					// Page-aligned, as clients send them: an unaligned 1 MiB
					// read can need more pipe slots than the pipe has (one
					// page more per piece) and is then copied, which
					// TestSpliceReadFallback covers.
					n := spliceMin + rng.Int64N((spliceMax-spliceMin)/4096+1)*4096
					off := rng.Int64N((dev.size-n)/4096+1) * 4096
					require.Equal(t, data[off:off+n], cl.read(uint64(off), uint32(n)), "read [%d, +%d)", off, n)
					want += n
				}
				// A small read is copied.
				require.Equal(t, data[100:4196], cl.read(100, 4096))
				st := ts.s.Stats()
				assert.Equal(t, want, st.BytesSpliced)
				assert.Equal(t, want+4096, st.BytesRead)
				assert.Equal(t, int64(40), dev.splices.Load())
				assert.Equal(t, int64(1), dev.reads.Load(), "only the small read goes to ReadAt")
			})
		}
	}
}

// TestSpliceReadFallback: a range that cannot be staged whole (the file
// ends early) or a device that gives up part way makes the server serve the
// request with ReadAt, and the reply is still right; the connection goes on.
func TestSpliceReadFallback(t *testing.T) {
	for _, structured := range []bool{false, true} {
		t.Run(fmt.Sprintf("structured=%v", structured), func(t *testing.T) {
			dev, data := newFileDev(t, 4<<20, 64<<10)
			dev.shortAt = 1 << 20
			ts := startServer(t, oneExport(dev), true)
			cl := connect(t, ts, "disk", structured)
			require.Equal(t, data[1<<20:2<<20], cl.read(1<<20, 1<<20))
			assert.Equal(t, int64(1), dev.declined.Load())
			assert.Equal(t, int64(1), dev.reads.Load())

			dev.shortAt, dev.declineAfter = 0, 3
			require.Equal(t, data[5:5+(512<<10)], cl.read(5, 512<<10))
			assert.Equal(t, int64(2), dev.declined.Load())
			assert.Equal(t, int64(2), dev.reads.Load())

			dev.declineAfter = 0
			require.Equal(t, data[0:1<<20], cl.read(0, 1<<20))
			assert.Equal(t, int64(2), dev.reads.Load(), "spliced again")
			st := ts.s.Stats()
			assert.Equal(t, int64(1<<20), st.BytesSpliced)
			assert.Equal(t, int64(2<<20+512<<10), st.BytesRead)
		})
	}
}

// TestSpliceReadOff: Options.NoSplice and reads above spliceMax are copied.
func TestSpliceReadOff(t *testing.T) {
	dev, data := newFileDev(t, 4<<20, 64<<10)
	opts := oneExport(dev)
	opts.NoSplice = true
	ts := startServer(t, opts, true)
	cl := connect(t, ts, "disk", true)
	require.Equal(t, data[:1<<20], cl.read(0, 1<<20))
	assert.Zero(t, ts.s.Stats().BytesSpliced)
	assert.Equal(t, int64(1), dev.reads.Load())

	ts = startServer(t, oneExport(dev), true)
	cl = connect(t, ts, "disk", true)
	require.Equal(t, data[:2<<20], cl.read(0, 2<<20))
	assert.Zero(t, ts.s.Stats().BytesSpliced)
	assert.Equal(t, int64(2), dev.reads.Load())
}

// TestSplicePipelined: many large READs in flight on one connection share
// the connection's pipes, and every reply carries its own bytes.
func TestSplicePipelined(t *testing.T) {
	dev, data := newFileDev(t, 16<<20, 64<<10)
	ts := startServer(t, oneExport(dev), true)
	cl := connect(t, ts, "disk", true)
	const n = 64
	offs := map[uint64]int64{}
	for i := 0; i < n; i++ {
		off := int64(i%16) << 20
		h := cl.send(cmdRead, 0, uint64(off), 256<<10, nil)
		offs[h] = off
	}
	for i := 0; i < n; i++ {
		r := cl.readReply()
		off, ok := offs[r.handle]
		require.True(t, ok)
		require.Zero(t, r.errno)
		require.Equal(t, data[off:off+256<<10], r.data)
	}
	assert.Equal(t, int64(n*256<<10), ts.s.Stats().BytesSpliced+int64(dev.reads.Load())*256<<10)
	assert.Positive(t, ts.s.Stats().BytesSpliced)
}

// TestSpliceReadTLS: after STARTTLS the payload must pass through TLS, so
// large READs are copied.
func TestSpliceReadTLS(t *testing.T) {
	dev, data := newFileDev(t, 4<<20, 64<<10)
	ca := newTestCA(t, "server CA")
	opts := oneExport(dev)
	opts.TLSMode, opts.TLSConfig = TLSRequire, &tls.Config{Certificates: []tls.Certificate{ca.issue(t, "server")}}
	ts := startServer(t, opts)
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	require.NoError(t, cl.startTLS(ca))
	gop := cl.info(optGo, "disk")
	require.Equal(t, repAck, gop.final)
	require.Equal(t, data[1<<20:1<<20+256<<10], cl.read(1<<20, 256<<10))
	assert.Zero(t, ts.s.Stats().BytesSpliced)
	assert.Equal(t, int64(1), dev.reads.Load())
}
