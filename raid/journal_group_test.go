package raid_test

import (
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
