package nbd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const granule = 64 << 10

// statusDev is a memDev with a known allocation map: one character per
// 64 KiB granule, 'H' for a hole (reads as zeroes), 'D' for data.
type statusDev struct {
	*memDev
	holes []bool
	// maxRun, if > 0, caps every answer, so the server has to merge.
	maxRun int64
	// err, if set, is returned by BlockStatus for offsets from errFrom on.
	err     error
	errFrom int64
	calls   atomic.Int64
}

func newStatusDev(layout string) *statusDev {
	d := &statusDev{memDev: newMemDev(len(layout) * granule)}
	for i, c := range layout {
		d.holes = append(d.holes, c == 'H')
		if c == 'D' {
			copy(d.data[i*granule:], pattern(granule, byte(i+1)))
		}
	}
	return d
}

func (d *statusDev) BlockStatus(off, n int64) (int64, bool, error) {
	d.calls.Add(1)
	if d.err != nil && off >= d.errFrom {
		return 0, false, d.err
	}
	g := off / granule
	zero := d.holes[g]
	l := (g+1)*granule - off
	for l < n && d.holes[(off+l)/granule] == zero {
		l += granule
	}
	l = min(l, n)
	if d.maxRun > 0 {
		l = min(l, d.maxRun)
	}
	return l, zero, nil
}

// wantExtents is the exact answer for [off, off+n) of layout: maximal runs,
// clipped to the range.
func wantExtents(layout string, off, n int64) []extent {
	var out []extent
	for p := off; p < off+n; {
		hole := layout[p/granule] == 'H'
		end := min((p/granule+1)*granule, off+n)
		var flags uint32
		if hole {
			flags = stateHole | stateZero
		}
		if k := len(out); k > 0 && out[k-1].flags == flags {
			out[k-1].length += uint32(end - p)
		} else {
			out = append(out, extent{length: uint32(end - p), flags: flags})
		}
		p = end
	}
	return out
}

func metaData(name string, queries ...string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(name)))
	b = append(b, name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(queries)))
	for _, q := range queries {
		b = binary.BigEndian.AppendUint32(b, uint32(len(q)))
		b = append(b, q...)
	}
	return b
}

type metaCtx struct {
	id   uint32
	name string
}

// metaReplies reads the NBD_REP_META_CONTEXT replies to opt and the final
// reply type.
func (cl *client) metaReplies(opt uint32) ([]metaCtx, uint32) {
	cl.t.Helper()
	var ctxs []metaCtx
	for {
		r := cl.readOptReply()
		require.Equal(cl.t, opt, r.opt)
		if r.typ != repMetaContext {
			return ctxs, r.typ
		}
		require.GreaterOrEqual(cl.t, len(r.data), 4)
		ctxs = append(ctxs, metaCtx{id: binary.BigEndian.Uint32(r.data), name: string(r.data[4:])})
	}
}

func (cl *client) meta(opt uint32, name string, queries ...string) ([]metaCtx, uint32) {
	cl.t.Helper()
	cl.sendOpt(opt, metaData(name, queries...))
	return cl.metaReplies(opt)
}

func (cl *client) structuredReplies() {
	cl.t.Helper()
	cl.sendOpt(optStructuredReply, nil)
	require.Equal(cl.t, repAck, cl.readOptReply().typ)
	cl.structured = true
}

// connectMeta negotiates structured replies, selects base:allocation on
// setExport and enters goExport with GO. It returns the context ID (0 if
// nothing was selected).
func connectMeta(t *testing.T, ts *testServer, setExport, goExport string) (*client, uint32) {
	t.Helper()
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	cl.structuredReplies()
	ctxs, final := cl.meta(optSetMetaContext, setExport, metaBaseAllocation)
	require.Equal(t, repAck, final)
	var id uint32
	if len(ctxs) == 1 {
		id = ctxs[0].id
	}
	require.Equal(t, repAck, cl.info(optGo, goExport, infoBlockSize).final)
	return cl, id
}

func twoExports(a, b Device) Options {
	return Options{Exports: []Export{{Name: "a", Device: a}, {Name: "b", Device: b}}}
}

func TestListMetaContext(t *testing.T) {
	ts := startServer(t, twoExports(newStatusDev("HD"), newMemDev(4096)))
	cl := dial(t, ts)
	cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
	all := []metaCtx{{0, metaBaseAllocation}}
	for _, structured := range []bool{false, true} {
		if structured {
			cl.structuredReplies()
		}
		for _, tc := range []struct {
			name    string
			export  string
			queries []string
			want    []metaCtx
		}{
			{"capable-all", "a", nil, all},
			{"capable-default-export", "", nil, all},
			{"capable-namespace-wildcard", "a", []string{"base:"}, all},
			{"capable-by-name", "a", []string{metaBaseAllocation}, all},
			{"capable-listed-once", "a", []string{"base:", metaBaseAllocation, metaBaseAllocation}, all},
			{"capable-unknown-queries", "a", []string{"qemu:dirty-bitmap:x", "base:other", "nocolon", "", "base"}, nil},
			{"capable-mixed", "a", []string{"x-foo:", metaBaseAllocation}, all},
			{"incapable-all", "b", nil, nil},
			{"incapable-by-name", "b", []string{"base:", metaBaseAllocation}, nil},
		} {
			t.Run(fmt.Sprintf("%s/structured=%v", tc.name, structured), func(t *testing.T) {
				cl.t = t
				ctxs, final := cl.meta(optListMetaContext, tc.export, tc.queries...)
				assert.Equal(t, repAck, final)
				assert.Equal(t, tc.want, ctxs)
			})
		}
		cl.t = t
		_, final := cl.meta(optListMetaContext, "missing")
		assert.Equal(t, repErrUnknown, final)
	}
	// LIST selects nothing.
	require.Equal(t, repAck, cl.info(optGo, "a").final)
	assert.Equal(t, errnoInval, cl.do(cmdBlockStatus, 0, 0, granule, nil).errno)
}

func TestSetMetaContext(t *testing.T) {
	ts := startServer(t, twoExports(newStatusDev("HD"), newMemDev(4096)))

	t.Run("before-structured-replies", func(t *testing.T) {
		cl := dial(t, ts)
		cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
		ctxs, final := cl.meta(optSetMetaContext, "a", metaBaseAllocation)
		assert.Equal(t, repErrInvalid, final)
		assert.Empty(t, ctxs)
		// Negotiation continues; nothing was selected.
		cl.structuredReplies()
		require.Equal(t, repAck, cl.info(optGo, "a").final)
		assert.Equal(t, errnoInval, cl.do(cmdBlockStatus, 0, 0, granule, nil).errno)
	})

	for _, tc := range []struct {
		name    string
		export  string
		queries []string
		want    bool
	}{
		{"by-name", "a", []string{metaBaseAllocation}, true},
		{"default-export", "", []string{metaBaseAllocation}, true},
		{"selected-once", "a", []string{metaBaseAllocation, "base:", metaBaseAllocation}, true},
		{"with-unknown", "a", []string{"qemu:dirty-bitmap:x", metaBaseAllocation, "nocolon"}, true},
		{"namespace-selects-nothing", "a", []string{"base:"}, false},
		{"unknown-context", "a", []string{"base:other", "x-foo:bar"}, false},
		{"no-queries", "a", nil, false},
		{"incapable-export", "b", []string{metaBaseAllocation}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := dial(t, ts)
			cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
			cl.structuredReplies()
			ctxs, final := cl.meta(optSetMetaContext, tc.export, tc.queries...)
			require.Equal(t, repAck, final)
			if !tc.want {
				assert.Empty(t, ctxs)
			} else {
				require.Len(t, ctxs, 1)
				assert.Equal(t, metaBaseAllocation, ctxs[0].name)
				assert.NotZero(t, ctxs[0].id)
			}
			goExport := tc.export
			if goExport == "" {
				goExport = "a"
			}
			require.Equal(t, repAck, cl.info(optGo, goExport).final)
			r := cl.do(cmdBlockStatus, 0, 0, 4096, nil)
			if tc.want {
				require.Zero(t, r.errno)
				assert.Equal(t, ctxs[0].id, r.metaID)
				assert.Equal(t, []extent{{4096, stateHole | stateZero}}, r.extents)
			} else {
				assert.Equal(t, errnoInval, r.errno)
			}
		})
	}

	t.Run("unknown-export", func(t *testing.T) {
		cl := dial(t, ts)
		cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
		cl.structuredReplies()
		_, final := cl.meta(optSetMetaContext, "missing", metaBaseAllocation)
		assert.Equal(t, repErrUnknown, final)
	})

	t.Run("id-stable-per-connection", func(t *testing.T) {
		cl := dial(t, ts)
		cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
		cl.structuredReplies()
		first, _ := cl.meta(optSetMetaContext, "a", metaBaseAllocation)
		second, _ := cl.meta(optSetMetaContext, "a", metaBaseAllocation)
		require.Len(t, first, 1)
		assert.Equal(t, first, second)
	})
}

func TestMetaContextMalformed(t *testing.T) {
	ts := startServer(t, oneExport(newStatusDev("HD")))
	name := binary.BigEndian.AppendUint32(nil, 4)
	name = append(name, "disk"...)
	countTooSmall := metaData("disk", metaBaseAllocation, "base:") // two queries, count says one
	binary.BigEndian.PutUint32(countTooSmall[8:], 1)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"short", []byte{0, 0, 0, 0, 0, 0, 0}},
		{"name-too-long", append(binary.BigEndian.AppendUint32(nil, 5), "disk\x00\x00\x00\x00"...)},
		{"name-length-huge", binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 0xffffffff), 0)},
		{"no-count", name},
		{"count-without-queries", binary.BigEndian.AppendUint32(append([]byte(nil), name...), 1)},
		{"count-huge", binary.BigEndian.AppendUint32(append([]byte(nil), name...), 0xffffffff)},
		{"query-length-beyond-data", append(metaData("disk", "base:allocation")[:12], 0, 0, 0, 16, 'b')},
		{"query-length-truncated", append(metaData("disk")[:8], 0, 0, 0, 1, 0, 0)},
		{"count-too-small", countTooSmall},
		{"trailing-bytes", append(metaData("disk", metaBaseAllocation), 0)},
	} {
		for _, opt := range []uint32{optListMetaContext, optSetMetaContext} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, opt), func(t *testing.T) {
				cl := dial(t, ts)
				cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
				cl.structuredReplies()
				// A valid selection first: the failing SET must drop it.
				ctxs, _ := cl.meta(optSetMetaContext, "disk", metaBaseAllocation)
				require.Len(t, ctxs, 1)
				cl.sendOpt(opt, tc.data)
				ctxs, final := cl.metaReplies(opt)
				assert.Equal(t, repErrInvalid, final)
				assert.Empty(t, ctxs)
				// Negotiation continues.
				require.Equal(t, repAck, cl.info(optGo, "disk").final)
				r := cl.do(cmdBlockStatus, 0, 0, 4096, nil)
				if opt == optSetMetaContext {
					assert.Equal(t, errnoInval, r.errno, "failed SET must clear the selection")
				} else {
					assert.Zero(t, r.errno, "failed LIST must not change the selection")
				}
			})
		}
	}
	t.Run("unknown-export-set-clears", func(t *testing.T) {
		cl := dial(t, ts)
		cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
		cl.structuredReplies()
		ctxs, _ := cl.meta(optSetMetaContext, "disk", metaBaseAllocation)
		require.Len(t, ctxs, 1)
		_, final := cl.meta(optSetMetaContext, "missing", metaBaseAllocation)
		require.Equal(t, repErrUnknown, final)
		require.Equal(t, repAck, cl.info(optGo, "disk").final)
		assert.Equal(t, errnoInval, cl.do(cmdBlockStatus, 0, 0, 4096, nil).errno)
	})
	t.Run("later-empty-set-clears", func(t *testing.T) {
		cl := dial(t, ts)
		cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
		cl.structuredReplies()
		ctxs, _ := cl.meta(optSetMetaContext, "disk", metaBaseAllocation)
		require.Len(t, ctxs, 1)
		ctxs, final := cl.meta(optSetMetaContext, "disk")
		require.Equal(t, repAck, final)
		require.Empty(t, ctxs)
		require.Equal(t, repAck, cl.info(optGo, "disk").final)
		assert.Equal(t, errnoInval, cl.do(cmdBlockStatus, 0, 0, 4096, nil).errno)
	})
}

// TestMetaContextTiedToExport: the selection applies only when transmission
// starts on the export named in the last SET.
func TestMetaContextTiedToExport(t *testing.T) {
	ts := startServer(t, twoExports(newStatusDev("HD"), newStatusDev("DH")))
	for _, tc := range []struct {
		name, set, enter string
		exportName       bool
		want             bool
	}{
		{"go-same", "a", "a", false, true},
		{"go-other", "a", "b", false, false},
		{"go-default-is-a", "", "a", false, true},
		{"go-default-not-b", "", "b", false, false},
		{"export-name-same", "b", "b", true, true},
		{"export-name-other", "b", "a", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := dial(t, ts)
			cl.hello(clientFlagFixedNewstyle | clientFlagNoZeroes)
			cl.structuredReplies()
			ctxs, _ := cl.meta(optSetMetaContext, tc.set, metaBaseAllocation)
			require.Len(t, ctxs, 1)
			if tc.exportName {
				cl.sendOpt(optExportName, []byte(tc.enter))
				cl.readFull(10)
			} else {
				require.Equal(t, repAck, cl.info(optGo, tc.enter).final)
			}
			r := cl.do(cmdBlockStatus, 0, 0, granule, nil)
			if !tc.want {
				assert.Equal(t, errnoInval, r.errno)
				return
			}
			require.Zero(t, r.errno)
			flags := stateHole | stateZero
			if tc.enter == "b" {
				flags = 0
			}
			assert.Equal(t, []extent{{granule, flags}}, r.extents)
		})
	}
}

func TestBlockStatusMap(t *testing.T) {
	const layout = "HHDDDHDHHHDDHHHD"
	const size = len(layout) * granule
	for _, maxRun := range []int64{0, granule, 4096} {
		t.Run(fmt.Sprintf("maxRun=%d", maxRun), func(t *testing.T) {
			dev := newStatusDev(layout)
			dev.maxRun = maxRun
			ts := startServer(t, Options{Exports: []Export{{Name: "disk", Device: dev}}})
			cl, id := connectMeta(t, ts, "disk", "disk")
			require.NotZero(t, id)
			for _, rng := range []struct{ off, n int64 }{
				{0, int64(size)},
				{100000, 300000},
				{granule * 2, granule * 3},
				{granule*5 + 1, 1},
				{int64(size) - 7, 7},
			} {
				r := cl.do(cmdBlockStatus, 0, uint64(rng.off), uint32(rng.n), nil)
				require.Zero(t, r.errno)
				assert.Equal(t, id, r.metaID)
				assert.Equal(t, wantExtents(layout, rng.off, rng.n), r.extents, "range %+v", rng)
			}
			// The map is truthful: holes read as zeroes.
			off := int64(0)
			for _, e := range cl.do(cmdBlockStatus, 0, 0, uint32(size), nil).extents {
				if e.flags&stateZero != 0 {
					assert.Equal(t, make([]byte, e.length), cl.read(uint64(off), e.length))
				}
				off += int64(e.length)
			}
			assert.Equal(t, int64(6), ts.s.Stats().BlockStatuses)
		})
	}
}

func TestBlockStatusReqOne(t *testing.T) {
	const layout = "HHDDDHDH"
	dev := newStatusDev(layout)
	dev.maxRun = granule // the server merges up to the request length
	ts := startServer(t, oneExport(dev))
	cl, _ := connectMeta(t, ts, "disk", "disk")
	for _, tc := range []struct {
		off, n int64
		want   extent
	}{
		{0, int64(len(layout) * granule), extent{2 * granule, stateHole | stateZero}},
		{0, 10000, extent{10000, stateHole | stateZero}},
		{granule + 5, granule, extent{granule - 5, stateHole | stateZero}},
		{2 * granule, 3*granule + 1, extent{3 * granule, 0}},
		{2 * granule, 2 * granule, extent{2 * granule, 0}},
		{7*granule + 100, granule - 100, extent{granule - 100, stateHole | stateZero}},
	} {
		r := cl.do(cmdBlockStatus, cmdFlagReqOne, uint64(tc.off), uint32(tc.n), nil)
		require.Zero(t, r.errno)
		require.Len(t, r.extents, 1, "REQ_ONE: exactly one extent")
		assert.LessOrEqual(t, int64(r.extents[0].length), tc.n)
		assert.Equal(t, tc.want, r.extents[0], "off %d len %d", tc.off, tc.n)
	}
}

func TestBlockStatusErrors(t *testing.T) {
	const layout = "HDHDHDHD"
	const size = uint64(len(layout) * granule)
	t.Run("validation", func(t *testing.T) {
		dev := newStatusDev(layout)
		dev.bsMin = 512
		opts := oneExport(dev)
		opts.MaxPayload = 64 << 10
		ts := startServer(t, opts)
		cl, _ := connectMeta(t, ts, "disk", "disk")
		for _, tc := range []struct {
			name   string
			flags  uint16
			off    uint64
			length uint32
		}{
			{"past-end", 0, size - 512, 1024},
			{"offset-at-end", 0, size, 512},
			{"offset-2^63", 0, 1 << 63, 512},
			{"wrapping", 0, 1<<64 - 512, 1024},
			{"zero-length", 0, 0, 0},
			{"zero-length-at-end", 0, size, 0},
			{"misaligned-offset", 0, 100, 512},
			{"misaligned-length", 0, 0, 100},
			{"df-flag", cmdFlagDF, 0, 512},
			{"fast-zero-flag", cmdFlagFastZero, 0, 512},
			{"unknown-flag", 1 << 9, 0, 512},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cl.t = t
				r := cl.do(cmdBlockStatus, tc.flags, tc.off, tc.length, nil)
				assert.Equal(t, errnoName(errnoInval), errnoName(r.errno))
				assert.Equal(t, []uint16{replyTypeError}, r.chunks)
				assert.Len(t, cl.read(0, 512), 512, "connection unusable after error")
			})
		}
		cl.t = t
		assert.Zero(t, dev.calls.Load(), "invalid requests must not reach the device")
		// A request longer than the maximum block size is fine:
		// BLOCK_STATUS has no payload and no maximum. FUA is accepted
		// (memDev is a Syncer, so SEND_FUA is advertised) and ignored.
		r := cl.do(cmdBlockStatus, cmdFlagFUA, 0, uint32(size), nil)
		require.Zero(t, r.errno)
		assert.Equal(t, wantExtents(layout, 0, int64(size)), r.extents)
	})

	t.Run("device-error", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			err  error
			want uint32
		}{
			{"eio", syscall.EIO, errnoIO},
			{"opaque", errors.New("member gone"), errnoIO},
			{"wrapped-eshutdown", fmt.Errorf("x: %w", syscall.ESHUTDOWN), errnoShutdown},
		} {
			t.Run(tc.name, func(t *testing.T) {
				dev := newStatusDev(layout)
				dev.maxRun = granule
				dev.err, dev.errFrom = tc.err, 3*granule
				ts := startServer(t, oneExport(dev))
				cl, _ := connectMeta(t, ts, "disk", "disk")
				r := cl.do(cmdBlockStatus, 0, 0, uint32(size), nil)
				assert.Equal(t, errnoName(tc.want), errnoName(r.errno))
				assert.Equal(t, []uint16{replyTypeError}, r.chunks, "no extents before the error")
				// The connection keeps working.
				r = cl.do(cmdBlockStatus, 0, 0, 3*granule, nil)
				require.Zero(t, r.errno)
				assert.Equal(t, wantExtents(layout, 0, 3*granule), r.extents)
				assert.Len(t, cl.read(0, 100), 100)
			})
		}
	})

	t.Run("not-supported-means-data", func(t *testing.T) {
		dev := newStatusDev(layout)
		dev.maxRun = granule
		dev.err, dev.errFrom = syscall.EOPNOTSUPP, 3*granule
		ts := startServer(t, oneExport(dev))
		cl, _ := connectMeta(t, ts, "disk", "disk")
		r := cl.do(cmdBlockStatus, 0, 0, uint32(size), nil)
		require.Zero(t, r.errno)
		// Exact runs up to errFrom, then "unknown" (data) for the rest.
		assert.Equal(t, []extent{
			{granule, stateHole | stateZero}, {granule, 0}, {granule, stateHole | stateZero},
			{uint32(size) - 3*granule, 0},
		}, r.extents)
	})

	t.Run("device-bad-length", func(t *testing.T) {
		ts := startServer(t, oneExport(funcStatusDev{newMemDev(8192), func(off, n int64) (int64, bool, error) {
			return 0, true, nil
		}}))
		cl, _ := connectMeta(t, ts, "disk", "disk")
		assert.Equal(t, errnoName(errnoIO), errnoName(cl.do(cmdBlockStatus, 0, 0, 4096, nil).errno))
		assert.Len(t, cl.read(0, 10), 10)
	})

	t.Run("without-structured-or-context", func(t *testing.T) {
		ts := startServer(t, oneExport(newStatusDev(layout)))
		for _, structured := range []bool{false, true} {
			cl := connect(t, ts, "disk", structured)
			assert.Equal(t, errnoInval, cl.do(cmdBlockStatus, 0, 0, 4096, nil).errno)
			assert.Equal(t, errnoInval, cl.do(cmdBlockStatus, cmdFlagReqOne, 0, 4096, nil).errno)
			assert.Len(t, cl.read(0, 10), 10)
		}
	})
}

// funcStatusDev serves BlockStatus from a function.
type funcStatusDev struct {
	*memDev
	fn func(off, n int64) (int64, bool, error)
}

func (f funcStatusDev) BlockStatus(off, n int64) (int64, bool, error) { return f.fn(off, n) }

// byteMap is a BlockStatuser over a per-byte hole map that answers with runs
// of at most maxRun bytes (split at random points when split is set), and
// counts its calls.
type byteMap struct {
	hole   []bool
	maxRun int64
	rng    *rand.Rand
	calls  int
}

func (m *byteMap) BlockStatus(off, n int64) (int64, bool, error) {
	m.calls++
	if n <= 0 || off < 0 || off+n > int64(len(m.hole)) {
		return 0, false, fmt.Errorf("bad call BlockStatus(%d, %d)", off, n)
	}
	limit := n
	if m.maxRun > 0 {
		limit = min(n, m.maxRun)
	}
	l := int64(1)
	for l < limit && m.hole[off+l] == m.hole[off] {
		l++
	}
	if m.rng != nil && l > 1 && m.rng.IntN(3) == 0 {
		l = 1 + m.rng.Int64N(l-1)
	}
	return l, m.hole[off], nil
}

// checkExtents verifies ext against the byte map for [off, off+n) and
// returns the length covered: lengths are nonzero multiples of minB, never
// past off+n, consecutive states differ, and each minimum block is reported
// as a hole exactly when every byte of it is a hole.
func checkExtents(t *testing.T, m *byteMap, ext []extent, off, n, minB int64, reqOne bool) int64 {
	t.Helper()
	require.NotEmpty(t, ext)
	if reqOne {
		require.Len(t, ext, 1)
	}
	require.LessOrEqual(t, len(ext), maxStatusExtents)
	p := off
	for i, e := range ext {
		require.NotZero(t, e.length)
		require.Zero(t, int64(e.length)%minB, "extent %d length %d not a multiple of %d", i, e.length, minB)
		if i > 0 {
			require.NotEqual(t, ext[i-1].flags, e.flags, "consecutive extents %d, %d with the same state", i-1, i)
		}
		require.LessOrEqual(t, p+int64(e.length), off+n, "extent %d beyond the request", i)
		for b := p; b < p+int64(e.length); b += minB {
			allHole := true
			for _, h := range m.hole[b : b+minB] {
				allHole = allHole && h
			}
			require.Contains(t, []uint32{0, stateHole | stateZero}, e.flags)
			require.Equal(t, allHole, e.flags != 0, "block at %d: all hole %v, reported flags %d", b, allHole, e.flags)
		}
		p += int64(e.length)
	}
	return p - off
}

func TestBlockExtentsAlignmentAndMerging(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 300 {
		minB := int64(1) << rng.IntN(8)
		size := minB * (1 + rng.Int64N(200))
		m := &byteMap{hole: make([]bool, size)}
		for p := int64(0); p < size; {
			l := min(size-p, 1+rng.Int64N(3*minB))
			h := rng.IntN(2) == 0
			for i := p; i < p+l; i++ {
				m.hole[i] = h
			}
			p += l
		}
		if rng.IntN(2) == 0 {
			m.rng = rand.New(rand.NewPCG(uint64(iter), 7))
		}
		off := minB * rng.Int64N(size/minB)
		n := minB * (1 + rng.Int64N((size-off)/minB))
		reqOne := rng.IntN(4) == 0
		ext, err := blockExtents(m, off, n, minB, reqOne)
		require.NoError(t, err)
		covered := checkExtents(t, m, ext, off, n, minB, reqOne)
		if !reqOne {
			// Far below the limits, so the whole range is described.
			assert.Equal(t, n, covered, "iteration %d", iter)
		}
	}
}

func TestBlockExtentsLimits(t *testing.T) {
	t.Run("descriptor-cap", func(t *testing.T) {
		const blocks = 3000
		m := &byteMap{hole: make([]bool, blocks*512)}
		for b := 0; b < blocks; b += 2 {
			for i := b * 512; i < (b+1)*512; i++ {
				m.hole[i] = true
			}
		}
		ext, err := blockExtents(m, 0, blocks*512, 512, false)
		require.NoError(t, err)
		assert.Len(t, ext, maxStatusExtents)
		covered := checkExtents(t, m, ext, 0, blocks*512, 512, false)
		assert.Equal(t, int64(maxStatusExtents*512), covered)
	})
	t.Run("call-cap", func(t *testing.T) {
		// A device answering one byte at a time over one long hole.
		m := &byteMap{hole: make([]bool, 1<<20), maxRun: 1}
		for i := range m.hole {
			m.hole[i] = true
		}
		ext, err := blockExtents(m, 0, 1<<20, 1, false)
		require.NoError(t, err)
		assert.Equal(t, maxStatusCalls, m.calls)
		assert.Equal(t, []extent{{maxStatusCalls, stateHole | stateZero}}, ext)
	})
	t.Run("call-cap-inside-a-block", func(t *testing.T) {
		// Runs of one byte inside a 64 KiB minimum block: the budget runs
		// out before the block is known to be a hole, so it is data.
		m := &byteMap{hole: make([]bool, 1<<16), maxRun: 1}
		for i := range m.hole {
			m.hole[i] = true
		}
		ext, err := blockExtents(m, 0, 1<<16, 1<<16, false)
		require.NoError(t, err)
		assert.Equal(t, maxStatusCalls, m.calls)
		assert.Equal(t, []extent{{1 << 16, 0}}, ext)
	})
	t.Run("device-overshoots", func(t *testing.T) {
		// A device answering beyond n: the extent stops at the request end.
		for _, reqOne := range []bool{false, true} {
			ext, err := blockExtents(funcStatusDev{fn: func(off, l int64) (int64, bool, error) {
				return l + 1<<20, false, nil
			}}, 4096, 8192, 512, reqOne)
			require.NoError(t, err)
			assert.Equal(t, []extent{{8192, 0}}, ext)
		}
	})
	t.Run("huge-request", func(t *testing.T) {
		// 4 GiB - 4 KiB of hole in runs of 1 GiB: lengths fit in 32 bits.
		const n = 1<<32 - 4096
		ext, err := blockExtents(funcStatusDev{fn: func(off, l int64) (int64, bool, error) {
			return min(l, 1<<30), true, nil
		}}, 0, n, 4096, false)
		require.NoError(t, err)
		assert.Equal(t, []extent{{n, stateHole | stateZero}}, ext)
	})
}
