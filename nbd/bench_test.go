package nbd

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
)

// benchPipelined drives b.N requests of one kind over a unix socket with up
// to depth requests in flight, using an allocation-free client so that
// allocs/op reflects the server. Run with -benchmem (allocations are
// reported); MB/s comes from SetBytes.
func benchPipelined(b *testing.B, typ uint16, size int, depth int) {
	benchPipelinedDev(b, newMemDev(64<<20), false, typ, size, depth)
}

func benchPipelinedDev(b *testing.B, dev Device, noSplice bool, typ uint16, size int, depth int) {
	opts := oneExport(dev)
	opts.Workers = 8
	opts.NoSplice = noSplice
	ts := startServer(b, opts, true)
	cl := connect(b, ts, "disk", false)
	nc := cl.c

	blocks := int(dev.Size()) / size
	req := make([]byte, 28+size)
	binary.BigEndian.PutUint32(req[0:], magicRequest)
	binary.BigEndian.PutUint16(req[6:], typ)
	binary.BigEndian.PutUint32(req[24:], uint32(size))
	msg := req[:28]
	if typ == cmdWrite {
		msg = req
	}
	window := make(chan struct{}, depth)
	sendErr := make(chan error, 1)
	br := bufio.NewReaderSize(nc, 256<<10)
	rep := make([]byte, 16+size)
	repLen := 16
	if typ == cmdRead {
		repLen += size
	}

	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for i := 0; i < b.N; i++ {
			window <- struct{}{}
			binary.BigEndian.PutUint64(req[8:], uint64(i))
			binary.BigEndian.PutUint64(req[16:], uint64((i%blocks)*size))
			if _, err := nc.Write(msg); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- nil
	}()
	for i := 0; i < b.N; i++ {
		if _, err := io.ReadFull(br, rep[:repLen]); err != nil {
			b.Fatal(err)
		}
		if binary.BigEndian.Uint32(rep[4:]) != 0 {
			b.Fatalf("errno %d", binary.BigEndian.Uint32(rep[4:]))
		}
		<-window
	}
	b.StopTimer()
	if err := <-sendErr; err != nil {
		b.Fatal(err)
	}
}

func BenchmarkPipelinedRead4K(b *testing.B) { benchPipelined(b, cmdRead, 4<<10, 64) }

// BenchmarkSpliceRead compares READs spliced from a tmpfs file (pieces of
// 64 KiB, as a striped array names its chunks) with the same READs copied
// (ReadAt, then writev), with 8 in flight.
func BenchmarkSpliceRead(b *testing.B) {
	for _, size := range []int{64 << 10, 128 << 10, 256 << 10, 1 << 20} {
		for _, noSplice := range []bool{false, true} {
			name := fmt.Sprintf("%dK/splice=%v", size>>10, !noSplice)
			b.Run(name, func(b *testing.B) {
				dev := shmFileDev(b, 64<<20, 64<<10)
				benchPipelinedDev(b, dev, noSplice, cmdRead, size, 8)
			})
		}
	}
}
func BenchmarkPipelinedWrite1M(b *testing.B) { benchPipelined(b, cmdWrite, 1<<20, 16) }
