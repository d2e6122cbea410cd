package raid_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// readRecorder is a memory member that records the ranges it is asked
// to prefetch and the ranges it reads (one entry per buffer).
type readRecorder struct {
	*member.Memory
	mu                sync.Mutex
	reads, prefetches [][2]int64
}

func (r *readRecorder) note(list *[][2]int64, off, n int64) {
	r.mu.Lock()
	*list = append(*list, [2]int64{off, n})
	r.mu.Unlock()
}

func (r *readRecorder) ReadAt(p []byte, off int64) (int, error) {
	r.note(&r.reads, off, int64(len(p)))
	return r.Memory.ReadAt(p, off)
}

func (r *readRecorder) ReadvAt(bufs [][]byte, off int64) (int, error) {
	at := off
	for _, b := range bufs {
		r.note(&r.reads, at, int64(len(b)))
		at += int64(len(b))
	}
	return r.Memory.ReadvAt(bufs, off)
}

func (r *readRecorder) Prefetch(off, n int64) { r.note(&r.prefetches, off, n) }

func (r *readRecorder) take() (reads, prefetches [][2]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	reads, prefetches = r.reads, r.prefetches
	r.reads, r.prefetches = nil, nil
	return reads, prefetches
}

// TestPrefetchIsWhatTheWriteReads: Array.Prefetch, which the NBD server
// calls when a WRITE's header arrives (nbd.Prefetcher), asks each member
// for exactly the ranges that the write's read-modify-write then reads:
// the old data and the old parity (and Q on RAID6), or the row's other
// data chunks where the plan is a reconstruct-write (RAID5 of 3 members,
// RAID6 of up to 6), for writes within one chunk anywhere in a row; and
// nothing for a write of a whole stripe, on a mirror or on RAID0.
func TestPrefetchIsWhatTheWriteReads(t *testing.T) {
	const chunk = 64 << 10
	for _, tc := range []struct {
		level stripe.Level
		n     int
	}{{stripe.RAID5, 4}, {stripe.RAID5, 3}, {stripe.RAID5, 6}, {stripe.RAID6, 5}, {stripe.RAID6, 6}, {stripe.RAID6, 7}, {stripe.RAID0, 4}, {stripe.RAID1, 2}} {
		t.Run(fmt.Sprintf("%s/members=%d", tc.level, tc.n), func(t *testing.T) {
			var recs []*readRecorder
			var devs []raid.Device
			for i := range tc.n {
				r := &readRecorder{Memory: member.NewMemory(levelSizeFor(tc.level, chunk, 32))}
				recs = append(recs, r)
				devs = append(devs, raid.Device{Path: fmt.Sprint("m", i), Member: r})
			}
			a := createArray(t, devs, raid.CreateOptions{Name: "p", Level: tc.level, Chunk: chunk}, raid.Options{CleanDelay: -1, KeepZeroes: true})
			p := make([]byte, a.Size())
			for i := range p {
				p[i] = byte(i*7 + 1)
			}
			_, err := a.WriteAt(p, 0)
			require.NoError(t, err)
			require.NoError(t, a.Sync())
			parity := tc.level == stripe.RAID5 || tc.level == stripe.RAID6
			width := int64(chunk) * int64(tc.n) // RAID0; RAID1: any row size does
			switch tc.level {
			case stripe.RAID5:
				width = chunk * int64(tc.n-1)
			case stripe.RAID6:
				width = chunk * int64(tc.n-2)
			}
			// Writes within one chunk, each in a row of its own (a row's
			// earlier record would change the plan), away from the
			// stripe's ends (where the stripe cache would hold them).
			for k, w := range []struct{ in, n int64 }{
				{chunk + 4096, 4096}, {chunk + 1, 1}, {chunk + 100, chunk - 100}, {2*chunk + 8192, 12 << 10}, {chunk, chunk},
			} {
				off := int64(k+1)*width + w.in
				for _, r := range recs {
					r.take()
				}
				a.Prefetch(off, int(w.n))
				var pre [][][2]int64
				for _, r := range recs {
					_, pf := r.take()
					pre = append(pre, pf)
				}
				_, err := a.WriteAt(p[:w.n], off)
				require.NoError(t, err)
				for m, r := range recs {
					reads, _ := r.take()
					slices.SortFunc(reads, func(x, y [2]int64) int { return int(x[0] - y[0]) })
					if !parity {
						assert.Empty(t, pre[m], "member %d: no prefetch without parity", m)
						continue
					}
					assert.Equal(t, reads, pre[m], "write [%d, +%d): member %d prefetched what it then read", off, w.n, m)
				}
			}
			if parity {
				for _, r := range recs {
					r.take()
				}
				a.Prefetch(width, int(width))
				for m, r := range recs {
					_, pf := r.take()
					assert.Empty(t, pf, "member %d: a whole stripe reads nothing, so nothing is prefetched", m)
				}
			}
		})
	}
}
