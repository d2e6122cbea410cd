package raid_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/internal/integrity"
)

// BenchmarkChecksums measures the cost of per-block checksums: the same
// workloads on the same shapes, with and without CreateOptions.Checksums,
// in one run, interleaved (compare each csum=on line with the csum=off line
// above it; with -count each round runs both again). Sequential reads and
// writes move 1 MiB per call over the whole array; random reads and writes
// are 4 KiB at aligned offsets. The data is random, so no block is a hole.
// Members are memory, so the numbers are the CPU cost: besides MB/s each
// run reports cpu-ns/KiB, the process's user and system CPU time (workers
// included) per KiB moved.
func BenchmarkChecksums(b *testing.B) {
	shapes := []benchShape{benchShapes[0], benchShapes[1], benchShapes[2]}
	for _, s := range shapes {
		for _, work := range []string{"seq-write", "seq-read", "rand-write-4K", "rand-read-4K"} {
			for _, csum := range []bool{false, true} {
				name := fmt.Sprintf("%s/members=%d/%s/csum=%s", s.level, s.n, work, map[bool]string{false: "off", true: "on"}[csum])
				b.Run(name, func(b *testing.B) {
					a := benchCsumArray(b, s, csum)
					p := make([]byte, 1<<20)
					rand.New(rand.NewSource(3)).Read(p)
					rng := rand.New(rand.NewSource(4))
					// Every job starts from a written array (steady state,
					// not the first touch of a memory member's pages or of
					// never-written rows).
					for off := int64(0); off+1<<20 <= a.Size(); off += 1 << 20 {
						_, err := a.WriteAt(p, off)
						require.NoError(b, err)
					}
					n := int64(1 << 20)
					if work == "rand-write-4K" || work == "rand-read-4K" {
						n = 4096
					}
					b.SetBytes(n)
					b.ReportAllocs()
					off := int64(0)
					cpu0, ops := cpuTime(), 0
					for b.Loop() {
						ops++
						var err error
						switch work {
						case "seq-write":
							_, err = a.WriteAt(p, off)
						case "seq-read":
							_, err = a.ReadAt(p, off)
						case "rand-read-4K":
							_, err = a.ReadAt(p[:4096], rng.Int63n(a.Size()/4096)*4096)
						default:
							_, err = a.WriteAt(p[:4096], rng.Int63n(a.Size()/4096)*4096)
						}
						if err != nil {
							b.Fatal(err)
						}
						off += n
						if off+n > a.Size() {
							off = 0
						}
					}
					b.ReportMetric(float64(cpuTime()-cpu0)/float64(int64(ops)*n/1024), "cpu-ns/KiB")
				})
			}
		}
	}
}

func benchCsumArray(b *testing.B, s benchShape, csum bool) *raid.Array {
	b.Helper()
	var devs []raid.Device
	for i := 0; i < s.n; i++ {
		m := member.NewMemory(memberSizeFor(benchChunk, 512) + 64<<10) // 32 MiB of data per member
		devs = append(devs, raid.Device{Path: fmt.Sprint("mem", i), Member: m})
	}
	a, err := raid.Create(devs, raid.CreateOptions{Name: "bench", Level: s.level, Chunk: benchChunk, Checksums: csum}, raid.Options{CleanDelay: -1, KeepZeroes: true})
	require.NoError(b, err)
	b.Cleanup(func() { a.Close() })
	return a
}

// BenchmarkChecksumFloor is the yardstick for BenchmarkChecksums on memory
// members: what a read with checksums cannot avoid there. A memory
// member's read is a copy; with checksums the copied bytes also pass
// through the CRC32C. It walks 128 MiB (beyond the caches, as the arrays
// do) in pieces of 256 KiB, what each member of a 4-member RAID0 reads
// for a 1 MiB request, interleaved in one run:
//
//   - copy: the copy alone;
//   - copy+crc: the copy, then the CRC32C of every 4 KiB block of the
//     piece, as integrity.Dev verifies a member's read (while the bytes
//     are still in the core's cache: Go copies of 1 MiB and more use
//     non-temporal stores, which bypass it, so larger pieces would show
//     the CRC reading memory instead);
//   - copy+crc-per-block: each 4 KiB block copied and its CRC computed
//     at once, while the block is in the first-level cache: the best a
//     copy that checksums as it goes could do;
//   - crc: the CRC32C alone, over bytes in memory.
//
// The time of copy+crc over copy is the least a read with checksums
// costs on memory members, whatever the engine does around it.
func BenchmarkChecksumFloor(b *testing.B) {
	const total, piece, blk = 128 << 20, 256 << 10, integrity.BlockSize
	src, dst := make([]byte, total), make([]byte, total)
	for i := range src { // fault every page in first (see BenchmarkMemcpy)
		src[i], dst[i] = byte(i), byte(i>>8)
	}
	var sink uint32
	for _, work := range []string{"copy", "copy+crc", "copy+crc-per-block", "crc"} {
		b.Run(work, func(b *testing.B) {
			b.SetBytes(piece)
			off := 0
			for b.Loop() {
				d, s := dst[off:off+piece], src[off:off+piece]
				switch work {
				case "copy":
					copy(d, s)
				case "copy+crc":
					copy(d, s)
					for i := 0; i < piece; i += blk {
						sink += integrity.Sum(d[i : i+blk])
					}
				case "copy+crc-per-block":
					for i := 0; i < piece; i += blk {
						copy(d[i:i+blk], s[i:i+blk])
						sink += integrity.Sum(d[i : i+blk])
					}
				case "crc":
					for i := 0; i < piece; i += blk {
						sink += integrity.Sum(s[i : i+blk])
					}
				}
				off = (off + piece) % total
			}
		})
	}
	_ = sink
}
