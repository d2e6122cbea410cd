package parity_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	_ "github.com/raidd/raidd/raid/raid5"
	_ "github.com/raidd/raidd/raid/raid6"
	"github.com/raidd/raidd/stripe"
)

// TestFullStripeWriteNoAllocs: a full-stripe write of RAID5 and RAID6 on memory
// members allocates nothing once warm. EachRow's
// RowWrite used to be a heap allocation per write (4.8 KiB, about 40% of a
// full-stripe write's CPU time).
func TestFullStripeWriteNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	const chunk = 64 << 10
	for _, s := range []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID5, 4}, {stripe.RAID6, 6}} {
		t.Run(fmt.Sprintf("%s/members=%d", s.level, s.n), func(t *testing.T) {
			var devs []raid.Device
			for i := range s.n {
				devs = append(devs, raid.Device{Path: fmt.Sprint("mem", i), Member: member.NewMemory(8 << 20)})
			}
			a, err := raid.Create(devs, raid.CreateOptions{Name: "allocs", Level: s.level, Chunk: chunk}, raid.Options{CleanDelay: -1, KeepZeroes: true})
			require.NoError(t, err)
			t.Cleanup(func() { a.Close() })
			w := a.Geometry().StripeWidth()
			p := make([]byte, w)
			rand.New(rand.NewSource(1)).Read(p)
			rows := a.Size() / w
			row := int64(0)
			full := testing.AllocsPerRun(50, func() {
				_, err := a.WriteAt(p, row%rows*w)
				require.NoError(t, err)
				row++
			})
			require.Zero(t, full, "full-stripe write")
		})
	}
}
