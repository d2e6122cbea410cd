package raid_test

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

func allocated(t *testing.T, paths []string) int64 {
	t.Helper()
	var total int64
	for _, p := range paths {
		var st syscall.Stat_t
		require.NoError(t, syscall.Stat(p, &st))
		total += st.Blocks * 512
	}
	return total
}

// TestSpaceAndAmplification checks on real sparse files that all-zero
// writes and discards on RAID5 release space (parity included) while the
// data stays right, and that the write-amplification metric is what the
// write plans predict.
func TestSpaceAndAmplification(t *testing.T) {
	const chunk = 64 << 10
	dir := t.TempDir()
	var devs []raid.Device
	var paths []string
	for i := 0; i < 4; i++ {
		p := filepath.Join(dir, fmt.Sprint("m", i))
		require.NoError(t, member.CreateSparse(p, superblock.HeaderSize+64*chunk))
		f, err := member.Open(p, member.Options{})
		require.NoError(t, err)
		if !f.CanDiscard() {
			t.Skipf("the file system of %s cannot punch holes", dir)
		}
		devs = append(devs, raid.Device{Path: p, Member: f})
		paths = append(paths, p)
	}
	a := createArray(t, devs, raid.CreateOptions{Name: "space", Level: stripe.RAID5, Chunk: chunk}, raid.Options{CleanDelay: -1})
	base := allocated(t, paths)
	width := a.Geometry().StripeWidth()

	// Full stripes of random data: every member gets a chunk per row.
	data := make([]byte, 8*width)
	rand.New(rand.NewSource(1)).Read(data)
	_, err := a.WriteAt(data, 0)
	require.NoError(t, err)
	st := a.Status().Stats
	assert.InDelta(t, 4.0/3.0, st.WriteAmplification, 0.001, "full-stripe writes on 4 members write 4/3 of the data")
	afterData := allocated(t, paths)
	assert.GreaterOrEqual(t, afterData-base, int64(8*4*chunk), "data and parity allocated")

	// All-zero full stripes become holes, parity included.
	_, err = a.WriteAt(make([]byte, 4*width), 0)
	require.NoError(t, err)
	afterZero := allocated(t, paths)
	assert.LessOrEqual(t, afterZero, afterData-int64(4*4*chunk)+64<<10, "zero stripes must release their space")

	// A discard of a partial range: neighbours stay, the range reads zero,
	// the fully covered chunks release space.
	require.NoError(t, a.Discard(4*width+chunk/2, 2*width))
	got := make([]byte, 8*width)
	_, err = a.ReadAt(got, 0)
	require.NoError(t, err)
	want := append(make([]byte, 4*width), data[4*width:]...)
	clear(want[4*width+chunk/2 : 6*width+chunk/2])
	require.Equal(t, want, got)
	assert.Less(t, allocated(t, paths), afterZero, "discard must release space")
	checkConsistent(t, a)

	// A 4 KiB random write is a read-modify-write: data + parity = 2x.
	before := a.Status().Stats
	p := make([]byte, 4096)
	rand.New(rand.NewSource(2)).Read(p)
	_, err = a.WriteAt(p, 6*width+8192)
	require.NoError(t, err)
	after := a.Status().Stats
	assert.Equal(t, int64(2*4096), after.MemberBytesWritten-before.MemberBytesWritten)
}
