package raid_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// TestJournalGroupCommit: the write-hole log records of concurrent row
// writes share log writes (group commit). With members whose sync takes a
// millisecond, as a disk's flush does, 8 writers' records (partial
// writes to rows of their own, whose parity is on the same members) go
// out in at most half as many log writes as records per log. Before, each record was its own log write, and the records of
// all writers were written one after another under one lock.
func TestJournalGroupCommit(t *testing.T) {
	const chunk = 16 << 10
	for _, c := range []struct {
		level stripe.Level
		n     int
		logs  int64 // logs a record goes to
	}{{stripe.RAID5, 4, 1}, {stripe.RAID6, 5, 2}} {
		t.Run(c.level.String(), func(t *testing.T) {
			// Record writes: past the log header, inside the log area.
			recStart := int64(superblock.HeaderSize + 4096)
			recEnd := int64(superblock.HeaderSize) + raid.JournalLength(c.n, chunk)
			var logWrites atomic.Int64
			var devs []raid.Device
			for i := range c.n {
				m := membertest.Inject(member.NewMemory(memberSizeFor(chunk, 256)), membertest.InjectorFunc(func(op membertest.Op, off, n int64) error {
					switch {
					case op == membertest.OpWrite && off >= recStart && off < recEnd:
						logWrites.Add(1)
					case op == membertest.OpSync:
						time.Sleep(time.Millisecond)
					}
					return nil
				}))
				devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: m})
			}
			a, err := raid.Create(devs, raid.CreateOptions{Name: "gc", Level: c.level, Chunk: chunk}, raid.Options{CleanDelay: -1})
			require.NoError(t, err)
			defer a.Close()
			rows := a.Size() / a.Geometry().StripeWidth()
			records0 := a.Status().Journal.Records
			logWrites.Store(0)
			const writers, each = 8, 6
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					rng := rand.New(rand.NewSource(int64(w)))
					p := make([]byte, 4096)
					for k := range each {
						rng.Read(p)
						// Rows of its own, all with the same parity
						// members (so their records share logs).
						row := (int64(w+k*writers) * int64(c.n)) % rows
						_, err := a.WriteAt(p, row*a.Geometry().StripeWidth()+4096*rng.Int63n(chunk/4096))
						require.NoError(t, err)
					}
				})
			}
			wg.Wait()
			records := a.Status().Journal.Records - records0
			require.Equal(t, int64(writers*each), records, "every partial write is recorded")
			require.LessOrEqual(t, 2*logWrites.Load(), c.logs*records, "log writes against records")
			t.Logf("%d records, %d log writes", records, logWrites.Load())
		})
	}
}

// TestJournalGatherPlanned: a batch's leader waits, up to the time a log
// write takes, for the records already planned for its log. 10 writers'
// partial writes, to rows of their own whose parity is on the same member,
// plan their records at once; their reads finish 1.2 ms apart (a disk's
// queue), and a log write takes 4 ms (its sync). Before, the records went
// out as they came, each batch taking those that arrived during the
// previous log write: 5 to 7 log writes; now a leader waits for the
// records planned meanwhile, up to 4 ms, and they share 2 or 3 (at most 4).
// The writers' reads start together: each waits until every writer has
// planned its record and begun reading (a slow start of a goroutine on a
// loaded machine would otherwise look like a record that was never
// planned), and then finishes at its own time after that common start.
func TestJournalGatherPlanned(t *testing.T) {
	const chunk, n, writers = 16 << 10, 4, 10
	dataOff := dataOffsetOf(stripe.RAID5, n, chunk)
	var delay atomic.Bool
	var (
		startMu sync.Mutex
		reading = map[int64]bool{}
		start   = make(chan struct{})
	)
	var devs []raid.Device
	for i := range n {
		m := membertest.Inject(member.NewMemory(memberSizeFor(chunk, 64)), membertest.InjectorFunc(func(op membertest.Op, off, _ int64) error {
			switch {
			case !delay.Load():
			case op == membertest.OpRead && off >= dataOff:
				// Row k*n (writer k) reads 1 ms + k*1.2 ms, once every
				// writer has begun; the first write (k = writers) reads
				// 1 ms alone.
				k := (off - dataOff) / chunk / n
				if k >= writers {
					time.Sleep(time.Millisecond)
					break
				}
				startMu.Lock()
				if !reading[k] {
					if reading[k] = true; len(reading) == writers {
						close(start)
					}
				}
				startMu.Unlock()
				select {
				case <-start:
				case <-time.After(5 * time.Second):
					return nil // the assertion below fails; never hang
				}
				time.Sleep(time.Millisecond + time.Duration(k)*1200*time.Microsecond)
			case op == membertest.OpSync:
				time.Sleep(4 * time.Millisecond)
			}
			return nil
		}))
		devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: m})
	}
	a, err := raid.Create(devs, raid.CreateOptions{Name: "gather", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	defer a.Close()
	width := a.Geometry().StripeWidth()
	delay.Store(true)
	// One record first, so that the log knows how long its writes take.
	_, err = a.WriteAt(make([]byte, 4096), int64(writers*n)*width)
	require.NoError(t, err)
	j0 := a.Status().Journal
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			p := make([]byte, 4096)
			p[0] = byte(w + 1)
			_, err := a.WriteAt(p, int64(w*n)*width)
			require.NoError(t, err)
		})
	}
	wg.Wait()
	delay.Store(false)
	j := a.Status().Journal
	records, writes := j.Records-j0.Records, j.LogWrites-j0.LogWrites
	require.Equal(t, int64(writers), records, "every partial write is recorded")
	require.LessOrEqual(t, writes, int64(4), "log writes for %d records", records)
	t.Logf("%d records, %d log writes", records, writes)
}

// TestJournalInMemoryLogWritesAtOnce: on members held in memory, where a
// durable log write is a copy, each writer writes its own record at once
// (journal.writeNow) instead of queueing it for a leader and sleeping
// until the leader's batch is written: 8 concurrent writers' records cost
// exactly one log write each. Before, a record that met a leader writing
// waited for it and went out in its next batch (about 7% of records at 16
// writers on memory members). The log is slotted there (members held in
// memory), and a record's slot is cleared once its write is done: after
// a crash of the process that follows the writes, a dirty assembly finds
// nothing to replay, and with a data member missing the array reads every
// byte written.
func TestJournalInMemoryLogWritesAtOnce(t *testing.T) {
	const chunk = 16 << 10
	mems := make([]*member.Memory, 4)
	devs := make([]raid.Device, 4)
	for i := range mems {
		mems[i] = member.NewMemory(memberSizeFor(chunk, 64))
		devs[i] = raid.Device{Path: fmt.Sprint("m", i), Member: mems[i]}
	}
	a, err := raid.Create(devs, raid.CreateOptions{Name: "now", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	geo := a.Geometry()
	width := geo.StripeWidth()
	rows := a.Size() / width
	want := make([]byte, a.Size())
	rand.New(rand.NewSource(1)).Read(want)
	_, err = a.WriteAt(want, 0)
	require.NoError(t, err)
	j0 := *a.Status().Journal
	const writers, each = 8, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewSource(int64(w) + 2))
			for k := range each {
				// Rows of its own (so no two writes overlap), all with
				// member 3's parity (so their records meet on one log).
				row := (int64(w+k*writers) * 4) % rows
				writeBlock(t, a, want, row*width+4096*rng.Int63n(width/4096), rng)
			}
		})
	}
	wg.Wait()
	j := a.Status().Journal
	records, logWrites := j.Records-j0.Records, j.LogWrites-j0.LogWrites
	require.Equal(t, int64(writers*each), records, "every partial write is recorded")
	require.Equal(t, records, logWrites, "each record is written at once, by its own writer")

	b := killedWithoutFirst(t, a, mems)
	require.Positive(t, j.SlotBytes, "members held in memory: a slotted log")
	require.Zero(t, b.Status().Journal.Replayed, "every write was done: no record is left")
	requireReads(t, b, want, "the degraded array reads every byte written")
}

// killedWithoutFirst returns the array that mems hold after a crash of
// the process that ran a on them (the members as they are, the array
// dirty), assembled without member 0; it closes a.
func killedWithoutFirst(t *testing.T, a *raid.Array, mems []*member.Memory) *raid.Array {
	t.Helper()
	var keep []raid.Device
	for i := 1; i < len(mems); i++ {
		c := member.NewMemory(mems[i].Size())
		_, err := c.WriteAt(mems[i].Bytes(), 0)
		require.NoError(t, err)
		keep = append(keep, raid.Device{Path: fmt.Sprint("m", i), Member: c})
	}
	require.NoError(t, a.Close())
	return assembleArray(t, keep, raid.Options{CleanDelay: -1})
}

// writeBlock writes random bytes to the 4 KiB of a at off, and the same
// to want, a's model.
func writeBlock(t *testing.T, a *raid.Array, want []byte, off int64, rng *rand.Rand) {
	t.Helper()
	p := want[off : off+4096]
	rng.Read(p)
	_, err := a.WriteAt(p, off)
	require.NoError(t, err)
}

// requireReads requires a to read want from its start.
func requireReads(t *testing.T, a *raid.Array, want []byte, msg string) {
	t.Helper()
	got := make([]byte, len(want))
	_, err := a.ReadAt(got, 0)
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), msg)
}

// TestSlottedLogFull: a slotted log with every slot taken (more row writes
// in flight than it has slots: members held in memory whose data writes
// take a millisecond) checkpoints, as a full appended log does, and goes
// on; every write reads back, and so it does after a crash of the process
// and an assembly without a data member.
func TestSlottedLogFull(t *testing.T) {
	const chunk, writers, each = 64 << 10, 32, 8
	dataOff := dataOffsetOf(stripe.RAID5, 4, chunk)
	var slow atomic.Bool
	mems := make([]*member.Memory, 4)
	var devs []raid.Device
	for i := range mems {
		mems[i] = member.NewMemory(memberSizeFor(chunk, 4*writers))
		m := membertest.Inject(mems[i], membertest.InjectorFunc(func(op membertest.Op, off, _ int64) error {
			if slow.Load() && op == membertest.OpWrite && off >= dataOff {
				time.Sleep(time.Millisecond)
			}
			return nil
		}))
		devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: heldCrashable{keep{m}}})
	}
	a, err := raid.Create(devs, raid.CreateOptions{Name: "full", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1})
	require.NoError(t, err)
	j0 := *a.Status().Journal
	require.Positive(t, j0.SlotBytes, "members held in memory: a slotted log")
	slots := (j0.AreaBytes - 4096) / j0.SlotBytes
	require.Less(t, slots, int64(writers), "fewer slots than writers")
	want := make([]byte, a.Size())
	rand.New(rand.NewSource(3)).Read(want)
	_, err = a.WriteAt(want, 0)
	require.NoError(t, err)
	width := a.Geometry().StripeWidth()
	rows := a.Size() / width
	require.GreaterOrEqual(t, rows, int64(4*writers))
	slow.Store(true)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			rng := rand.New(rand.NewSource(int64(w) + 10))
			for range each {
				// A row of its own, all with the same parity member (so
				// that their records take the slots of one log).
				row := int64(4*w) % rows
				writeBlock(t, a, want, row*width+4096*rng.Int63n(width/4096), rng)
			}
		})
	}
	wg.Wait()
	slow.Store(false)
	j := a.Status().Journal
	t.Logf("%d slots, %d records, %d checkpoints", slots, j.Records-j0.Records, j.Checkpoints-j0.Checkpoints)
	require.Positive(t, j.Checkpoints-j0.Checkpoints, "the slots ran out: checkpoints")
	requireReads(t, a, want, "every write reads back")
	requireReads(t, killedWithoutFirst(t, a, mems), want, "the degraded array reads every byte written")
}
