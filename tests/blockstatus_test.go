package tests

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBlockStatusMap checks base:allocation through nbdinfo --map: written
// data shows as data, never-written and trimmed space as hole+zero, so
// clients like nbdcopy and qemu-img can skip it.
func TestBlockStatusMap(t *testing.T) {
	requireBinary(t)
	requireTool(t, "nbdinfo", "nbdcopy", "qemu-io")
	for _, level := range []string{"1", "5", "10"} {
		t.Run("raid"+level, func(t *testing.T) {
			t.Parallel()
			n := map[string]int{"1": 2, "5": 4, "10": 3}[level]
			arr := createArray(t, level, n, "64K")
			src, _ := writeRandomFile(t, t.TempDir(), 4<<20, 77)
			srv := serve(t, arr.members...)
			uri := srv.uri(arr.name)
			mustRun(t, "nbdcopy", src, uri)
			// Trim the second MiB back to a hole.
			mustRun(t, "qemu-io", "-f", "raw", uri, "-c", "discard 1M 1M")
			out := mustRun(t, "nbdinfo", "--map", "--json", uri)
			var extents []struct {
				Offset int64  `json:"offset"`
				Length int64  `json:"length"`
				Type   int    `json:"type"`
				Desc   string `json:"description"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &extents), out)
			require.NotEmpty(t, extents)
			stateAt := func(off int64) int {
				for _, e := range extents {
					if off >= e.Offset && off < e.Offset+e.Length {
						return e.Type
					}
				}
				t.Fatalf("offset %d not in the map %s", off, out)
				return -1
			}
			assert.Equal(t, 0, stateAt(0), "written data: %s", out)
			assert.Equal(t, 0, stateAt(3<<20), "written data: %s", out)
			assert.Equal(t, 3, stateAt(1<<20+4096), "trimmed range is hole+zero: %s", out)
			assert.Equal(t, 3, stateAt(8<<20), "never-written space is hole+zero: %s", out)
			srv.stopOK(t)
		})
	}
}
