package raid_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/clock"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

var (
	seedFlag = flag.Int64("seed", 0, "replay the model and crash tests with this seed (0 = $RAIDD_SEED, else time-based)")
	modelOps = flag.Int("model.ops", 120, "operations per model-test case")
	// modelCsum runs every TestModel case on arrays with per-block
	// checksums (TestModelChecksums always runs a few).
	modelCsum = flag.Bool("model.checksums", false, "TestModel: create the arrays with per-block checksums")
	chunkList = []int64{4 << 10, 64 << 10, 1 << 20}
	// modelAll runs the 1 MiB chunk cases of TestModel with every member
	// count, not one per level.
	modelAll = flag.Bool("model.all", false, "TestModel: run the 1 MiB chunk cases with every member count")
)

// testSeed returns the seed of a randomized test: -seed, else $RAIDD_SEED,
// else the time. A test that fails prints it with the command that
// replays it.
func testSeed(t *testing.T) int64 {
	t.Helper()
	seed := *seedFlag
	if env := os.Getenv("RAIDD_SEED"); seed == 0 && env != "" {
		v, err := strconv.ParseInt(env, 0, 64)
		require.NoError(t, err, "RAIDD_SEED")
		seed = v
	}
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay: RAIDD_SEED=%d go test -run '^%s$' ./raid", seed, t.Name())
		}
	})
	return seed
}

// subSeed derives a sub-test's seed from the test's seed and the sub-test's
// name, so that replaying one sub-test with -run gives it the same seed.
func subSeed(seed int64, name string) int64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s", seed, name)
	return int64(h.Sum64() >> 1)
}

// TestModel runs seeded random sequences of writes, reads, syncs, discards,
// write-zeroes, member failures, spares, replacements and removals with
// rebuilds running in the background, concurrent writers and reassembly
// against every level, chunk size and member count, comparing every read
// with a flat in-memory model. Each case first generates its whole
// operation list from its seed (the list depends on nothing else), logs it,
// then runs it; background jobs are paced by a fake clock that the
// operations move, so machine speed does not decide what a run does. Where
// an operation needs a member (fail, replace), it carries a random number
// that picks one of the candidates the array has at that point. A failure
// prints the command that replays it:
//
//	RAIDD_SEED=<seed> go test -run '^TestModel$' ./raid
//	RAIDD_SEED=<seed> go test -run '^TestModel$/^raid5/chunk=4K/members=3$' ./raid
//
// The 1 MiB chunk cases run one member count per level (picked by the seed);
// -model.all runs them all.
func TestModel(t *testing.T) {
	seed := testSeed(t)
	for _, level := range []stripe.Level{stripe.RAID0, stripe.RAID1, stripe.RAID5, stripe.RAID6, stripe.RAID10} {
		shapes := validShapes()[level]
		// The 1 MiB chunks run with one member count per level, picked by
		// the seed (so successive runs cover every shape, and a replay
		// with the seed runs the same one), unless -model.all: they are
		// the slowest cases by far under the race detector (14 of them
		// took about 870 of the package's 970 CPU-seconds), and every
		// shape runs with the 4K and 64K chunks anyway.
		big := shapes[uint64(subSeed(seed, level.String()))%uint64(len(shapes))]
		for _, n := range shapes {
			for _, chunk := range chunkList {
				if chunk >= 1<<20 && n != big && !*modelAll {
					continue
				}
				// Parity levels run with and without the stripe cache
				// (the 1 MiB chunks only without: they are the slowest
				// cases, and the cache's logic does not depend on the chunk).
				caches := []bool{false}
				if (level == stripe.RAID5 || level == stripe.RAID6) && chunk < 1<<20 {
					caches = append(caches, true)
				}
				for _, cache := range caches {
					name := fmt.Sprintf("%s/chunk=%dK/members=%d", level, chunk>>10, n)
					if cache {
						name += "/cache"
					}
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						t.Cleanup(func() {
							if t.Failed() {
								t.Logf("replay this case: RAIDD_SEED=%d go test -run '^TestModel$/^%s$' ./raid", seed, name)
							}
						})
						runModel(t, level, n, chunk, cache, subSeed(seed, name), *modelCsum)
					})
				}
			}
		}
	}
}

// TestModelChecksums is TestModel on arrays with per-block checksums, for
// every level with its smallest member count and two chunk sizes (the
// -model.checksums flag runs every TestModel case so):
//
//	RAIDD_SEED=<seed> go test -run '^TestModelChecksums$' ./raid
func TestModelChecksums(t *testing.T) {
	seed := testSeed(t)
	for _, level := range []stripe.Level{stripe.RAID0, stripe.RAID1, stripe.RAID5, stripe.RAID6, stripe.RAID10} {
		n := validShapes()[level][0]
		for _, chunk := range chunkList[:2] {
			name := fmt.Sprintf("%s/chunk=%dK/members=%d", level, chunk>>10, n)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("replay this case: RAIDD_SEED=%d go test -run '^TestModelChecksums$/^%s$' ./raid", seed, name)
					}
				})
				runModel(t, level, n, chunk, false, subSeed(seed, name), true)
			})
		}
	}
}

type model struct {
	t     *testing.T
	level stripe.Level
	chunk int64
	r     *rig
	a     *raid.Array
	clk   *clock.Fake
	opts  raid.Options
	data  []byte
	geo   stripe.Geometry
	// Rig indexes: inArray were handed to the array (members, spares, failed
	// ones still attached); failing have their fault toggle on; next is the
	// first rig member never used.
	inArray map[int]bool
	failing map[int]bool
	next    int
	// scrub is the last scrub an opScrub started; it runs while the
	// following operations write.
	scrub *raid.Scrub
	// failedOut: the run ended by failing the array beyond its tolerance
	// (failBeyond), so there is nothing left to check at cleanup.
	failedOut bool
}

const poolSize = 6 // spare devices beyond the initial members

// opKind is what one model operation does.
type opKind int

const (
	opWrite opKind = iota
	opWriteFUA
	opRead
	opSync
	opDiscard
	opWriteZeroes
	opFail         // the operator fails a member
	opFailFaults   // a member's device starts returning errors
	opAddSpare     // a fresh device is added
	opReplace      // an active member is copied onto a fresh device
	opRemove       // a failed member is detached
	opReassemble   // check, close and assemble again
	opConcurrent   // writers on disjoint ranges, each verifying its own
	opWaitRecovery // let every background job finish
	opVerify       // read the whole array
	opScrub        // start a scrub (check or repair) that runs on during the next operations
)

var opNames = [...]string{"write", "write-fua", "read", "sync", "discard", "write-zeroes", "fail", "fail-faults",
	"add-spare", "replace", "remove", "reassemble", "concurrent", "wait-recovery", "verify", "scrub"}

// modelOp is one generated operation. Everything random is drawn when the
// list is generated; what depends on the array's state at run time (which
// member to fail or replace) is resolved from pick.
type modelOp struct {
	kind opKind
	tick time.Duration // fake time that passes before the operation
	off  int64
	n    int64
	seed int64 // the write's bytes; the workers' seeds; the reassembly's choices
	// half: the first half of a write is zeroes (for zero elision);
	// noHole: write-zeroes must allocate.
	half, noHole bool
	pick         uint32
}

func (op modelOp) String() string {
	s := fmt.Sprintf("+%s %s", op.tick, opNames[op.kind])
	switch op.kind {
	case opWrite, opWriteFUA, opRead, opDiscard, opWriteZeroes:
		s += fmt.Sprintf(" [%d,+%d)", op.off, op.n)
	}
	switch op.kind {
	case opWrite, opWriteFUA:
		s += fmt.Sprintf(" seed=%d", op.seed)
		if op.half {
			s += " zero-half"
		}
	case opWriteZeroes:
		if op.noHole {
			s += " no-hole"
		}
	case opFail, opFailFaults, opReplace:
		s += fmt.Sprintf(" pick=%d", op.pick)
	case opConcurrent, opReassemble:
		s += fmt.Sprintf(" seed=%d", op.seed)
	case opScrub:
		s += fmt.Sprintf(" repair=%v", op.pick%2 == 0)
	}
	return s
}

// genOps draws count operations from seed for an array of geometry geo.
func genOps(seed int64, geo stripe.Geometry, count int) []modelOp {
	rng := rand.New(rand.NewSource(seed))
	size, chunk, width := geo.Size(), geo.Chunk(), geo.StripeWidth()
	randRange := func() (off, n int64) {
		switch rng.Intn(4) {
		case 0: // chunk aligned
			n = (1 + rng.Int63n(4)) * chunk
			off = rng.Int63n(size/chunk) * chunk
		case 1: // full stripes
			n = width * (1 + rng.Int63n(2))
			off = rng.Int63n(size/width) * width
		default: // anything
			n = 1 + rng.Int63n(3*width)
			off = rng.Int63n(size)
		}
		return off, min(n, size-off)
	}
	ops := make([]modelOp, count)
	for i := range ops {
		op := modelOp{tick: time.Duration(rng.Intn(4)) * 2 * time.Millisecond, seed: rng.Int63(), pick: rng.Uint32()}
		switch x := rng.Intn(100); {
		case x < 35:
			op.kind = opWrite
			if rng.Intn(5) == 0 {
				op.kind = opWriteFUA
			}
			op.off, op.n = randRange()
			op.half = rng.Intn(8) == 0
		case x < 65:
			op.kind = opRead
			op.off, op.n = randRange()
		case x < 70:
			op.kind = opSync
		case x < 76:
			op.kind = opDiscard
			op.off, op.n = randRange()
		case x < 80:
			op.kind = opWriteZeroes
			op.off, op.n = randRange()
			op.noHole = rng.Intn(2) == 0
		case x < 82:
			op.kind = opFail
			if rng.Intn(2) == 0 {
				op.kind = opFailFaults
			}
		case x < 84:
			op.kind = opAddSpare
		case x < 85:
			op.kind = opReplace
		case x < 86:
			op.kind = opRemove
		case x < 88:
			op.kind = opReassemble
		case x < 91:
			op.kind = opConcurrent
		case x < 92:
			op.kind = opWaitRecovery
		case x < 95:
			op.kind = opScrub
		default:
			op.kind = opVerify
		}
		ops[i] = op
	}
	return ops
}

func runModel(t *testing.T, level stripe.Level, n int, chunk int64, cache bool, seed int64, checksums bool) {
	rows := int64(6)
	if chunk >= 1<<20 {
		rows = 3
	}
	r := newRig(n+poolSize, memberSizeFor(chunk, rows)+chunk/2+csumRoom(checksums)) // a ragged tail is ignored
	if seed&2 == 0 {
		// Half the seeds: members that let parity be computed in
		// place (raid.Op.WriteFill), as members held in memory do.
		r.offerFill()
	}
	clk := clock.NewFake(time.Unix(1e9, 0))
	opts := modelOptions(chunk, clk)
	if cache {
		// Room for about half the array's stripes, so that the cache
		// fills and partial writes also bypass it; the delay is a few
		// operations' ticks, so stripes stay cached across reads,
		// failures, replacements and FUA writes.
		opts.StripeCache = (rows/2 + 1) * chunk * int64(n)
		opts.StripeCacheDelay = 5 * time.Millisecond
		// Random partial writes held too (the default on parity arrays
		// with the write-hole log, since the rig's members are not held
		// in memory) or sent to the members at once, by seed.
		if seed&1 == 1 {
			opts.RandomWriteBack = raid.WriteBackOff
		}
	}
	a, err := raid.Create(r.devs[:n], raid.CreateOptions{Name: "model", Level: level, Chunk: chunk, BitmapRegion: 2 * chunk, Checksums: checksums}, opts)
	require.NoError(t, err)
	m := &model{t: t, level: level, chunk: chunk, r: r, a: a, clk: clk, opts: opts,
		data: make([]byte, a.Size()), geo: a.Geometry(), inArray: map[int]bool{}, failing: map[int]bool{}, next: n}
	for k := 0; k < n; k++ {
		m.inArray[k] = true
	}
	t.Cleanup(func() {
		if m.failedOut {
			_ = m.a.Close()
			return
		}
		m.waitRecovery(-1)
		st := m.a.Status()
		checkAndClose(t, m.a)
		// An orderly close leaves every member in use marked clean.
		for _, d := range st.Devices {
			if k := m.rigIndex(d.Path); k >= 0 && d.State == "active" && !m.failing[k] {
				sb, err := superblock.Read(m.r.mem[k])
				if assert.NoError(t, err, "superblock of %s", d.Path) {
					assert.Equal(t, superblock.StateClean, sb.State, "%s after close", d.Path)
				}
			}
		}
	})
	ops := genOps(seed, m.geo, *modelOps)
	var list strings.Builder
	for i, op := range ops {
		fmt.Fprintf(&list, "\n%4d %s", i, op)
	}
	t.Logf("case seed %d, %d operations:%s", seed, len(ops), list.String())
	for i, op := range ops {
		m.step(i, op)
		if t.Failed() {
			t.Fatalf("stopping at op %d: %s", i, op)
		}
	}
	m.waitRecovery(len(ops))
	m.verifyAll("end")
	if checksums {
		cs := m.a.Status().Checksums
		require.NotNil(t, cs)
		assert.Zero(t, cs.Detected, "no block may fail its checksum without a fault that corrupts data")
	}
	if m.geo.Tolerance() > 0 && !t.Failed() {
		checkArray(t, m.a)
		m.failBeyond()
	}
}

// failBeyond ends a run: the devices of active members start failing one at
// a time, as many as the level tolerates on top of what is already missing
// and then one more. Within the tolerance every byte still reads back as
// the model says (the failures are noticed by the reads); beyond it a read
// either returns the model's bytes (had it avoided the lost members) or
// fails with ErrFailed, as do writes, and the array says it failed.
func (m *model) failBeyond() {
	t := m.t
	for step := 0; ; step++ {
		st := m.a.Status()
		k, d := m.pickActive(st, 0)
		require.GreaterOrEqual(t, k, 0, "failBeyond step %d: no active member left: %+v", step, st.Devices)
		survives := m.geo.Survives(m.missingRoles(st) | 1<<uint(d.Role))
		m.failing[k] = true
		m.r.toggles[k].On()
		t.Logf("failBeyond step %d: %s (role %d) starts failing; the array survives it: %v", step, d.Path, d.Role, survives)
		got := make([]byte, len(m.data))
		_, err := m.a.ReadAt(got, 0)
		if survives {
			require.NoError(t, err, "failBeyond step %d: read within the tolerance", step)
			require.True(t, bytes.Equal(got, m.data), "failBeyond step %d: data differs within the tolerance", step)
			continue
		}
		if err == nil {
			require.True(t, bytes.Equal(got, m.data), "failBeyond: a read beyond the tolerance returned wrong data")
			_, err = m.a.WriteAt(got[:4096], 0)
		}
		require.ErrorIs(t, err, raid.ErrFailed, "failBeyond: beyond the tolerance")
		_, err = m.a.ReadAt(got[:4096], 0)
		require.ErrorIs(t, err, raid.ErrFailed, "failBeyond: every later call fails")
		assert.Equal(t, "failed", m.a.Status().State)
		m.failedOut = true
		return
	}
}

// modelOptions slows rebuilds to a few rows per operation of fake time,
// so that model operations run while rows are being rebuilt.
func modelOptions(chunk int64, clk *clock.Fake) raid.Options {
	return raid.WithClock(raid.Options{CleanDelay: 20 * time.Millisecond, ProgressInterval: 5 * time.Millisecond,
		RebuildMinRate: 200 * chunk, RebuildMaxRate: 400 * chunk}, clk)
}

// rigIndex maps a status path back to the rig.
func (m *model) rigIndex(path string) int {
	for k, d := range m.r.devs {
		if d.Path == path {
			return k
		}
	}
	return -1
}

// missingRoles returns the roles without an active member, counting members
// whose faults are on but not yet noticed as missing.
func (m *model) missingRoles(st raid.Status) uint64 {
	var held uint64
	for _, d := range st.Devices {
		if d.State == "active" && d.Role >= 0 && !m.failing[m.rigIndex(d.Path)] {
			held |= 1 << uint(d.Role)
		}
	}
	return ^held & (1<<uint(m.geo.Members()) - 1)
}

// pickActive returns the active member that is not failing chosen by pick
// (among those, in status order), with its role.
func (m *model) pickActive(st raid.Status, pick uint32) (int, raid.MemberStatus) {
	var c []raid.MemberStatus
	for _, d := range st.Devices {
		if d.State == "active" && d.Path != "" && !m.failing[m.rigIndex(d.Path)] {
			c = append(c, d)
		}
	}
	if len(c) == 0 {
		return -1, raid.MemberStatus{}
	}
	d := c[int(pick%uint32(len(c)))]
	return m.rigIndex(d.Path), d
}

func (m *model) step(i int, op modelOp) {
	t := m.t
	if op.tick > 0 {
		m.clk.Advance(op.tick)
	}
	off, n := op.off, op.n
	switch op.kind {
	case opWrite, opWriteFUA:
		p := make([]byte, n)
		randomBytes(p, op.seed)
		if op.half { // some zero blocks, for zero elision
			clear(p[:n/2])
		}
		var err error
		if op.kind == opWriteFUA {
			_, err = m.a.WriteAtFUA(p, off)
		} else {
			_, err = m.a.WriteAt(p, off)
		}
		require.NoError(t, err, "op %d: %s", i, op)
		copy(m.data[off:], p)
	case opRead:
		p := make([]byte, n)
		_, err := m.a.ReadAt(p, off)
		require.NoError(t, err, "op %d: %s", i, op)
		if !bytes.Equal(p, m.data[off:off+n]) {
			t.Fatalf("op %d: %s: %s", i, op, firstDiff(p, m.data[off:off+n], off))
		}
	case opSync:
		require.NoError(t, m.a.Sync(), "op %d: %s", i, op)
	case opDiscard:
		require.NoError(t, m.a.Discard(off, n), "op %d: %s", i, op)
		clear(m.data[off : off+n])
	case opWriteZeroes:
		require.NoError(t, m.a.WriteZeroes(off, n, op.noHole), "op %d: %s", i, op)
		clear(m.data[off : off+n])
	case opFail, opFailFaults:
		m.failMember(i, op.kind == opFailFaults, op.pick)
	case opAddSpare:
		m.addSpare(i)
	case opReplace:
		m.replace(i, op.pick)
	case opRemove:
		m.remove(i)
	case opReassemble:
		m.reassemble(i, op.seed)
	case opConcurrent:
		m.concurrent(i, op.seed)
	case opWaitRecovery:
		m.waitRecovery(i)
	case opVerify:
		m.verifyAll(fmt.Sprintf("op %d", i))
	case opScrub:
		m.startScrub(i, op.pick%2 == 0)
	}
	m.judgeScrub(i)
}

// startScrub starts a scrub unless one runs (one started before, or one
// the last assembly resumed).
func (m *model) startScrub(i int, repair bool) {
	s, err := m.a.StartScrub(repair)
	switch {
	case errors.Is(err, raid.ErrScrubRunning), errors.Is(err, raid.ErrFailed):
		return
	case !assert.NoError(m.t, err, "op %d: start scrub", i):
		return
	}
	m.t.Logf("op %d: scrub started (repair %v)", i, repair)
	m.scrub = s
}

// judgeScrub checks the result of a scrub that has ended: writes,
// failures, rebuilds and reassembly running alongside must never make it
// see a mismatch, since every row it reads is consistent under its locks.
// A scrub stopped by Close (reassembly) is resumed by the next assembly,
// whose result Status reports.
func (m *model) judgeScrub(i int) {
	if m.scrub != nil {
		select {
		case <-m.scrub.Done():
			res, err := m.scrub.Wait(context.Background())
			m.scrub = nil
			assert.Zero(m.t, res.Mismatches, "op %d: a scrub during writes found mismatches: %s %+v", i, res, res.Findings)
			assert.NotErrorIs(m.t, err, raid.ErrInconsistent, "op %d", i)
		default:
		}
	}
	if ls := m.a.Status().LastScrub; ls != nil {
		assert.Zero(m.t, ls.Mismatches, "op %d: the last scrub found mismatches: %s %+v", i, ls.CheckResult, ls.Findings)
	}
}

// failMember makes an active member fail, if the level survives it: either
// its device starts returning errors (noticed at its next I/O) or the
// operator fails it.
func (m *model) failMember(i int, viaFaults bool, pick uint32) {
	st := m.a.Status()
	k, d := m.pickActive(st, pick)
	if k < 0 || !m.geo.Survives(m.missingRoles(st)|1<<uint(d.Role)) {
		return
	}
	if viaFaults {
		m.failing[k] = true
		m.r.toggles[k].On()
		m.t.Logf("op %d: %s (role %d) starts failing", i, d.Path, d.Role)
		return
	}
	err := m.a.FailMember(d.Path)
	if r := st.Recovery; errors.Is(err, raid.ErrNoMember) && r != nil && r.Kind == "replace" && r.Role == d.Role {
		// The replace of d's role was finishing when Status was taken: its
		// last commit retires d, and FailMember, queued behind that commit,
		// then rightly finds d gone. The operator's race, not an error.
		m.t.Logf("op %d: %s (role %d) was retired by its finishing replace before it could be failed", i, d.Path, d.Role)
		return
	}
	require.NoError(m.t, err, "op %d: fail %s", i, d.Path)
	m.t.Logf("op %d: %s (role %d) failed by operator", i, d.Path, d.Role)
}

// addSpare hands the array a fresh device; a degraded array rebuilds onto it
// in the background while the model keeps going.
func (m *model) addSpare(i int) {
	if m.level == stripe.RAID0 || m.next >= len(m.r.devs) {
		return
	}
	k := m.next
	m.next++
	require.NoError(m.t, m.a.AddMember(m.r.devs[k], false), "op %d: add %s", i, m.r.devs[k].Path)
	m.inArray[k] = true
	m.t.Logf("op %d: added %s", i, m.r.devs[k].Path)
}

// replace copies an active member onto a fresh device, while I/O goes on.
func (m *model) replace(i int, pick uint32) {
	st := m.a.Status()
	if m.level == stripe.RAID0 || m.next >= len(m.r.devs) || st.Recovery != nil {
		return
	}
	k, d := m.pickActive(st, pick)
	if k < 0 {
		return
	}
	n := m.next
	m.next++
	require.NoError(m.t, m.a.ReplaceMember(d.Path, m.r.devs[n], false), "op %d: replace %s", i, d.Path)
	m.inArray[n] = true
	m.t.Logf("op %d: replacing %s (role %d) with %s", i, d.Path, d.Role, m.r.devs[n].Path)
}

// remove detaches a failed member.
func (m *model) remove(i int) {
	for _, d := range m.a.Status().Devices {
		if (d.State == "failed" || d.State == "stale") && d.Path != "" {
			require.NoError(m.t, m.a.RemoveMember(d.Path), "op %d: remove %s", i, d.Path)
			k := m.rigIndex(d.Path)
			delete(m.inArray, k)
			if m.failing[k] {
				delete(m.failing, k)
				m.r.toggles[k].Off()
			}
			m.t.Logf("op %d: removed %s", i, d.Path)
			return
		}
	}
}

// waitRecovery waits until no rebuild, replace or resync runs, moving the
// fake clock whenever the background work sleeps on it.
func (m *model) waitRecovery(i int) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := m.a.Status()
		if st.Recovery == nil && st.Resync == nil {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("op %d: recovery did not finish: %+v", i, st.Recovery)
		}
		if m.clk.WaitSleepers(1, time.Millisecond) {
			m.clk.AdvanceToNext()
		}
	}
}

// reassemble checks the array, closes it and assembles it again. A member
// whose faults are on is either left out (a dead disk) or comes back
// healthy (a disk that was unplugged); the array must not trust it if it
// noticed the failure.
func (m *model) reassemble(i int, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	closeChecked(m.t, m.a)
	var devs []raid.Device
	for _, k := range slices.Sorted(maps.Keys(m.inArray)) {
		if m.failing[k] {
			delete(m.failing, k)
			if rng.Intn(2) == 0 {
				delete(m.inArray, k)
				continue
			}
			m.r.toggles[k].Off()
		}
		devs = append(devs, m.r.devs[k])
	}
	rng.Shuffle(len(devs), func(a, b int) { devs[a], devs[b] = devs[b], devs[a] })
	a, err := raid.Assemble(devs, m.opts)
	require.NoError(m.t, err, "op %d assemble", i)
	m.a = a
	st := a.Status()
	assert.False(m.t, st.Failed, "op %d: reassembled array failed", i)
	assert.Equal(m.t, st.Degraded, m.missingRoles(st) != 0, "op %d: degraded flag vs roles: %+v", i, st.Devices)
	m.t.Logf("op %d: reassembled, state %s", i, st.State)
}

// concurrent runs writers on disjoint ranges, each verifying its own range.
func (m *model) concurrent(i int, seed int64) {
	const workers = 4
	size := int64(len(m.data))
	part := size / workers
	var wg sync.WaitGroup
	errs := make([]error, workers)
	seeds := make([]int64, workers)
	rng := rand.New(rand.NewSource(seed))
	for w := range seeds {
		seeds[w] = rng.Int63()
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(seeds[w]))
			base := int64(w) * part
			for k := 0; k < 6; k++ {
				n := 1 + rng.Int63n(min(part, 2*m.geo.StripeWidth()))
				off := base + rng.Int63n(part-n+1)
				p := make([]byte, n)
				randomBytes(p, rng.Int63())
				if _, err := m.a.WriteAt(p, off); err != nil {
					errs[w] = err
					return
				}
				copy(m.data[off:], p) // disjoint per worker
				q := make([]byte, n)
				if _, err := m.a.ReadAt(q, off); err != nil {
					errs[w] = err
					return
				}
				if !bytes.Equal(p, q) {
					errs[w] = fmt.Errorf("worker %d read back differs at [%d,+%d): %s", w, off, n, firstDiff(q, p, off))
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(m.t, errors.Join(errs...), "op %d concurrent", i)
}

func (m *model) verifyAll(when string) {
	p := make([]byte, len(m.data))
	_, err := m.a.ReadAt(p, 0)
	require.NoError(m.t, err, "%s: read all", when)
	if !bytes.Equal(p, m.data) {
		m.t.Fatalf("%s: whole-array read: %s", when, firstDiff(p, m.data, 0))
	}
}

func firstDiff(got, want []byte, base int64) string {
	for i := range got {
		if got[i] != want[i] {
			j := i
			for j < len(got) && got[j] != want[j] {
				j++
			}
			return fmt.Sprintf("first difference at array offset %d (%d bytes differ from there): got %#x want %#x", base+int64(i), j-i, got[i], want[i])
		}
	}
	return "no difference"
}
