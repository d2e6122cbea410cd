package nbd

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// prefetchDev is a memDev that records the Prefetch calls it gets, and
// says its writes run inline when inline is set.
type prefetchDev struct {
	*memDev
	inline bool
	mu     sync.Mutex
	calls  [][2]int64
}

func (d *prefetchDev) WritesInline() bool { return d.inline }

func (d *prefetchDev) Prefetch(off int64, n int) {
	d.mu.Lock()
	d.calls = append(d.calls, [2]int64{off, int64(n)})
	d.mu.Unlock()
}

func (d *prefetchDev) prefetches() [][2]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][2]int64(nil), d.calls...)
}

// TestPrefetchBeforePayload: a Prefetcher hears of a WRITE that goes to
// the workers, with its offset and length, once its header is read and
// before its payload has arrived; READs and a WRITE the reader runs
// itself are not announced.
func TestPrefetchBeforePayload(t *testing.T) {
	for _, inline := range []bool{false, true} {
		dev := &prefetchDev{memDev: newMemDev(1 << 20), inline: inline}
		ts := startServer(t, oneExport(dev), true)
		cl := connect(t, ts, "disk", true)
		payload := pattern(8192, 5)
		cl.nextHandle++
		h := cl.nextHandle
		cl.sendWithHandle(h, cmdWrite, 0, 12288, uint32(len(payload)), nil) // the header alone
		if !inline {
			require.Eventually(t, func() bool { return len(dev.prefetches()) > 0 }, 5*time.Second, time.Millisecond,
				"the WRITE was announced before its payload was sent")
		}
		cl.write(payload)
		r := cl.readReply()
		require.Equal(t, h, r.handle)
		require.Zero(t, r.errno)
		assert.Equal(t, payload, cl.read(12288, 8192))
		if inline {
			assert.Empty(t, dev.prefetches(), "a WRITE the reader runs itself is not announced")
		} else {
			assert.Equal(t, [][2]int64{{12288, 8192}}, dev.prefetches(), "one announcement, of the WRITE alone (not the READs)")
		}
	}
}
