package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCreateTooSmall: a member that cannot hold the header and one chunk
// gets the minimum size and a chunk that fits; the files create made are
// removed, a file that was there before is not.
func TestCreateTooSmall(t *testing.T) {
	e := newEnv(t)
	keep := filepath.Join(e.dir, "keep.img")
	require.NoError(t, os.WriteFile(keep, nil, 0o600))
	require.NoError(t, os.Truncate(keep, 1200<<10))
	made := e.paths("new0.img", "new1.img")

	// With the write-hole journal (the RAID5 default) no chunk fits: the
	// log area alone is 1 MiB.
	code, out, errOut := raidd(t, append([]string{"create", "--name", "small", "--level", "5", "--size", "1200KiB", keep}, made...)...)
	assert.Equal(t, exitError, code, out)
	assert.Contains(t, errOut, "write-hole log area and one chunk")
	assert.Contains(t, errOut, "use larger members, or --consistency-policy bitmap")
	for _, p := range made {
		assert.NoFileExists(t, p, "a failed create removes the files it made")
	}

	code, out, errOut = raidd(t, append([]string{"create", "--name", "small", "--level", "5", "--consistency-policy", "bitmap", "--size", "1200KiB", keep}, made...)...)
	assert.Equal(t, exitError, code, out)
	assert.Contains(t, errOut, "with chunk 512KiB a member needs at least 1.5MiB (1572864 bytes")
	assert.Contains(t, errOut, "use a smaller chunk (--chunk 128KiB) or larger members")
	for _, p := range made {
		assert.NoFileExists(t, p, "a failed create removes the files it made")
	}
	fi, err := os.Stat(keep)
	require.NoError(t, err, "a file that existed before is kept")
	assert.EqualValues(t, 1200<<10, fi.Size())

	// The suggested chunk works.
	code, out, errOut = raidd(t, append([]string{"create", "--name", "small", "--level", "5", "--consistency-policy", "bitmap", "--chunk", "128KiB", "--size", "1200KiB", keep}, made...)...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, `created raid5 array "small"`)

	// Below header plus the smallest chunk, only larger members help.
	tiny := e.paths("t0.img", "t1.img")
	code, _, errOut = raidd(t, append([]string{"create", "--name", "tiny", "--level", "1", "--size", "1MiB"}, tiny...)...)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "even the smallest chunk (4KiB) needs members of at least 1052672 bytes (the 1MiB header and 4KiB): use larger members")
	for _, p := range tiny {
		assert.NoFileExists(t, p)
	}
}

// TestCreateRemovesOnlyWhatItMade: when a member cannot be opened, the
// files made for the others are removed and the existing ones kept.
func TestCreateRemovesOnlyWhatItMade(t *testing.T) {
	e := newEnv(t)
	e.create(t, "old", "1", "o0.img", "o1.img")
	made := e.paths("n0.img")[0]
	// o0.img carries a superblock: create refuses it (no --force).
	code, _, errOut := raidd(t, "create", "--name", "x", "--level", "1", "--size", "8MiB", made, e.paths("o0.img")[0])
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "pass --force")
	assert.NoFileExists(t, made)
	code, out, _ := raidd(t, "examine", e.paths("o0.img")[0])
	require.Equal(t, 0, code)
	assert.Contains(t, out, `"old"`, "the existing member is untouched")
	// A directory is no member: the file made before it is removed.
	code, _, _ = raidd(t, "create", "--name", "x", "--level", "1", "--size", "8MiB", made, e.dir)
	assert.Equal(t, exitError, code)
	assert.NoFileExists(t, made)
	assert.DirExists(t, e.dir)
}

func TestCreateWarnsAboutSizes(t *testing.T) {
	e := newEnv(t)
	for name, size := range map[string]int64{"a.img": 8 << 20, "b.img": 10 << 20, "c.img": 8 << 20, "d.img": 8<<20 + 512<<10} {
		require.NoError(t, os.WriteFile(filepath.Join(e.dir, name), nil, 0o600))
		require.NoError(t, os.Truncate(filepath.Join(e.dir, name), size))
	}
	code, _, errOut := raidd(t, append([]string{"create", "--name", "w", "--level", "1", "--chunk", "64KiB"}, e.paths("a.img", "b.img")...)...)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, errOut, "members differ in size by more than 10%")
	assert.Contains(t, errOut, "so 2MiB stay unused")
	assert.Contains(t, errOut, "largest="+e.paths("b.img")[0])

	code, _, errOut = raidd(t, append([]string{"create", "--name", "v", "--level", "1", "--chunk", "64KiB"}, e.paths("c.img", "d.img")...)...)
	require.Equal(t, exitOK, code, errOut)
	assert.NotContains(t, errOut, "differ in size", "6% is within the tolerance")
}

// TestCreateMissingMember: a member file that does not exist, without
// --size, is refused with the flag that would create it.
func TestCreateMissingMember(t *testing.T) {
	e := newEnv(t)
	paths := e.paths("m0.img", "m1.img")
	code, _, errOut := raidd(t, append([]string{"create", "--name", "x", "--level", "1"}, paths...)...)
	assert.Equal(t, exitError, code)
	for _, p := range paths {
		assert.Contains(t, errOut, p+": file does not exist; --size SIZE creates missing member files as sparse files of that size")
	}
	assert.NotContains(t, errOut, "stat ")
}
