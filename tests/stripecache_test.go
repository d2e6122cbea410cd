package tests

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cacheStatus is the stripe_cache object of `raidd status --json`.
type cacheStatus struct {
	Stripes int64 `json:"cached_stripes"`
	Bytes   int64 `json:"bytes"`
}

func (s *server) stripeCache(t *testing.T, name string) cacheStatus {
	t.Helper()
	out := statusRaidd(t, "--json", "--control", s.ctrl)
	var st struct {
		Arrays []struct {
			Name        string       `json:"name"`
			StripeCache *cacheStatus `json:"stripe_cache"`
		} `json:"arrays"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st), "raidd status --json:\n%s", out)
	for _, a := range st.Arrays {
		if a.Name == name {
			require.NotNil(t, a.StripeCache, "a RAID5 array reports its stripe cache:\n%s", out)
			return *a.StripeCache
		}
	}
	require.FailNow(t, "array missing from raidd status", "want %q in:\n%s", name, out)
	return cacheStatus{}
}

// TestStripeCacheKill: raidd is killed with SIGKILL while partial stripes
// sit in its stripe cache. What a FLUSH or a FUA write made durable reads
// back after the restart; the cached, unflushed writes (which clients read
// back before the kill, from the cache) are lost, as NBD allows. The
// cache's deadline is an hour here, so that nothing but FLUSH and FUA
// writes the pieces out.
func TestStripeCacheKill(t *testing.T) {
	t.Parallel()
	requireBinary(t)
	arr := createArray(t, "5", 4, testChunk) // stripe width 192 KiB
	const width = 3 * 64 << 10
	srv := serve(t, append([]string{"--stripe-cache", "8MiB", "--stripe-cache-delay", "1h"}, arr.members...)...)
	rc := openRaw(t, srv.sock, arr.name, false)
	rng := rand.New(rand.NewPCG(1, 2))
	piece := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	type w struct {
		off uint64
		p   []byte
	}
	var flushed, fua, lost []w
	for s := uint64(0); s < 4; s++ { // partial stripes 0..3 (from their starts: cached), then FLUSH
		x := w{s * width, piece(5000 + int(s)*7)}
		rc.write(t, x.off, x.p, 0)
		flushed = append(flushed, x)
	}
	rc.flush(t)
	x := w{10*width + 3, piece(70000)} // stripe 10, FUA
	rc.write(t, x.off, x.p, nbdCmdFlagFUA)
	fua = append(fua, x)
	for s := uint64(20); s < 24; s++ { // partial stripes 20..23 (to their ends: cached), never flushed
		x := w{s*width + 500, piece(width - 500)}
		rc.write(t, x.off, x.p, 0)
		lost = append(lost, x)
	}
	for _, x := range append(append(append([]w{}, flushed...), fua...), lost...) {
		assert.True(t, bytes.Equal(x.p, rc.read(t, x.off, uint32(len(x.p)))), "read back before the kill at %d", x.off)
	}
	cs := srv.stripeCache(t, arr.name)
	require.Equal(t, int64(4), cs.Stripes, "the unflushed pieces are cached (and only they)")
	assert.Equal(t, int64(4*width), cs.Bytes)
	srv.kill()
	rc.c.Close()

	srv = serve(t, arr.members...)
	rc = openRaw(t, srv.sock, arr.name, false)
	defer rc.disconnect()
	for _, x := range flushed {
		assert.True(t, bytes.Equal(x.p, rc.read(t, x.off, uint32(len(x.p)))), "flushed at %d survives SIGKILL", x.off)
	}
	for _, x := range fua {
		assert.True(t, bytes.Equal(x.p, rc.read(t, x.off, uint32(len(x.p)))), "FUA at %d survives SIGKILL", x.off)
	}
	for _, x := range lost {
		assert.True(t, bytes.Equal(make([]byte, len(x.p)), rc.read(t, x.off, uint32(len(x.p)))),
			"cached, unflushed write at %d: lost with the process (the hour-long deadline never wrote it out)", x.off)
	}
}
