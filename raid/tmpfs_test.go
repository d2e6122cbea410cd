package raid_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/internal/member/membertest"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// TestTmpfsMembers runs seeded random writes, reads, discards, write-zeroes
// and syncs from concurrent writers (each on its own part of the array,
// compared with a flat model of it) against arrays whose members are files
// on tmpfs, which member.File reads and writes through a shared mapping
// (internal/member/mapped.go): with a member failed half-way on the
// redundant levels, and again after the array is closed and assembled
// from its files, where the mapping learns the files' data anew. A
// failure prints the seed that replays it:
//
//	RAIDD_SEED=<seed> go test -run '^TestTmpfsMembers$' ./raid
func TestTmpfsMembers(t *testing.T) {
	membertest.TmpfsDir(t) // skips without a tmpfs
	seed := testSeed(t)
	const chunk = 16 << 10
	for _, s := range []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID0, 2}, {stripe.RAID1, 2}, {stripe.RAID5, 4}, {stripe.RAID6, 4}, {stripe.RAID10, 4}} {
		name := fmt.Sprintf("%s/members=%d", s.level, s.n)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := membertest.TmpfsDir(t)
			size := levelSizeFor(s.level, chunk, 48)
			var paths []string
			for i := range s.n {
				p := filepath.Join(dir, fmt.Sprint("m", i))
				require.NoError(t, member.CreateSparse(p, size))
				paths = append(paths, p)
			}
			open := func() []raid.Device {
				var devs []raid.Device
				for _, p := range paths {
					f, err := member.Open(p, member.Options{})
					require.NoError(t, err)
					require.True(t, f.InMemory())
					devs = append(devs, raid.Device{Path: p, Member: f})
				}
				return devs
			}
			opts := raid.Options{CleanDelay: -1}
			a, err := raid.Create(open(), raid.CreateOptions{Name: "tmpfs", Level: s.level, Chunk: chunk}, opts)
			require.NoError(t, err)
			model := make([]byte, a.Size())
			rng := rand.New(rand.NewSource(subSeed(seed, name)))
			run := func(phase string, ops int) {
				const writers = 4
				part := a.Size() / writers
				var wg sync.WaitGroup
				for w := range writers {
					r := rand.New(rand.NewSource(rng.Int63()))
					wg.Add(1)
					go func() {
						defer wg.Done()
						base := int64(w) * part
						for i := range ops {
							off := base + r.Int63n(part-1)
							n := min(1+r.Int63n(3*chunk), base+part-off)
							switch k := r.Intn(10); {
							case k < 4:
								p := make([]byte, n)
								r.Read(p)
								if _, err := a.WriteAt(p, off); err != nil {
									t.Errorf("%s: writer %d op %d: write [%d, +%d): %v", phase, w, i, off, n, err)
									return
								}
								copy(model[off:], p)
							case k < 5:
								if err := a.Discard(off, n); err != nil {
									t.Errorf("%s: writer %d op %d: discard [%d, +%d): %v", phase, w, i, off, n, err)
									return
								}
								clear(model[off : off+n])
							case k < 6:
								if err := a.WriteZeroes(off, n, r.Intn(2) == 0); err != nil {
									t.Errorf("%s: writer %d op %d: write zeroes [%d, +%d): %v", phase, w, i, off, n, err)
									return
								}
								clear(model[off : off+n])
							case k < 7:
								if err := a.Sync(); err != nil {
									t.Errorf("%s: writer %d op %d: sync: %v", phase, w, i, err)
									return
								}
							default:
								got := make([]byte, n)
								if _, err := a.ReadAt(got, off); err != nil {
									t.Errorf("%s: writer %d op %d: read [%d, +%d): %v", phase, w, i, off, n, err)
									return
								}
								if !bytes.Equal(got, model[off:off+n]) {
									t.Errorf("%s: writer %d op %d: read [%d, +%d) differs from the model", phase, w, i, off, n)
									return
								}
							}
						}
					}()
				}
				wg.Wait()
				got := make([]byte, a.Size())
				_, err := a.ReadAt(got, 0)
				require.NoError(t, err, phase)
				require.True(t, bytes.Equal(got, model), "%s: the array differs from the model", phase)
			}
			run("healthy", 150)
			if s.level != stripe.RAID0 {
				require.NoError(t, a.FailMember(paths[1]))
				run("degraded", 100)
			}
			require.NoError(t, a.Close())
			devs := open()
			if s.level != stripe.RAID0 {
				devs = append(devs[:1], devs[2:]...) // the failed member stays out
			}
			a, err = raid.Assemble(devs, opts)
			require.NoError(t, err)
			t.Cleanup(func() { _ = a.Close() })
			run("assembled", 100)
		})
	}
}
