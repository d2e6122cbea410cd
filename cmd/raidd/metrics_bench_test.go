package main

import (
	"fmt"
	"testing"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// BenchmarkTimedRead measures what the latency histograms cost a request:
// 4 KiB reads of a RAID1 on memory members, through the array itself
// ("array") and through the export's timed wrapper ("timed").
func BenchmarkTimedRead(b *testing.B) {
	var devs []raid.Device
	for i := range 2 {
		devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: member.NewMemory(superblock.HeaderSize + 64<<20)})
	}
	a, err := raid.Create(devs, raid.CreateOptions{Name: "bench", Level: stripe.RAID1, Chunk: 64 << 10}, raid.Options{CleanDelay: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	m := newMetrics(func() statusReply { return statusReply{} })
	for _, c := range []struct {
		name string
		dev  exportDevice
	}{{"array", a}, {"timed", m.timed(a, "bench")}} {
		b.Run(c.name, func(b *testing.B) {
			p := make([]byte, 4096)
			b.SetBytes(int64(len(p)))
			for i := 0; b.Loop(); i++ {
				if _, err := c.dev.ReadAt(p, int64(i%1024)*4096); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
