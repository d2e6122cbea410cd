package main

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid/superblock"
)

// setScrubField writes v into the scrub field (superblock bytes 216..224)
// of member path's current superblock, as a running raidd records a scrub.
func setScrubField(t *testing.T, path string, v uint64) *superblock.Meta {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	m, err := superblock.Read(f)
	require.NoError(t, err)
	m.Scrub = v
	require.NoError(t, superblock.Write(f, m))
	return m
}

// TestExamineScrubState: examine decodes the scrub field of the
// superblock: never scrubbed, a check or repair in progress (interrupted)
// with the row it resumes at, and the time the last scrub finished.
func TestExamineScrubState(t *testing.T) {
	e := newEnv(t)
	e.create(t, "data", "1", "a.img", "b.img")
	path := e.paths("a.img")[0]
	examineOne := func() (string, examined) {
		t.Helper()
		code, out, errOut := raidd(t, "examine", path)
		require.Equal(t, 0, code, errOut)
		code, js, errOut := raidd(t, "examine", "--json", path)
		require.Equal(t, 0, code, errOut)
		var ex []examined
		require.NoError(t, json.Unmarshal([]byte(js), &ex), js)
		require.Len(t, ex, 1)
		return out, ex[0]
	}

	out, ex := examineOne()
	assert.Regexp(t, `(?m)^  scrub: +never$`, out)
	assert.Nil(t, ex.Scrub)

	m := setScrubField(t, path, superblock.ScrubRunning|superblock.ScrubRepair|37)
	rows := m.DataSize / m.ChunkSize
	require.EqualValues(t, 112, rows, "8 MiB less the metadata, in 64 KiB rows")
	out, ex = examineOne()
	assert.Regexp(t, fmt.Sprintf(`(?m)^  scrub: +repair in progress at row 37 of %d \(33\.0%%\)`, rows), out)
	assert.Contains(t, out, "resumes there at the next assembly")
	require.NotNil(t, ex.Scrub)
	assert.Equal(t, examinedScrub{Running: true, Kind: "repair", ResumeRow: 37, Rows: rows}, *ex.Scrub)

	setScrubField(t, path, superblock.ScrubRunning|5)
	out, ex = examineOne()
	assert.Regexp(t, fmt.Sprintf(`(?m)^  scrub: +check in progress at row 5 of %d \(`, rows), out)
	require.NotNil(t, ex.Scrub)
	assert.Equal(t, examinedScrub{Running: true, Kind: "check", ResumeRow: 5, Rows: rows}, *ex.Scrub)

	done := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	setScrubField(t, path, uint64(done.Unix()))
	out, ex = examineOne()
	assert.Regexp(t, `(?m)^  scrub: +last finished 2026-11-30T10:00:00Z$`, out)
	require.NotNil(t, ex.Scrub)
	assert.False(t, ex.Scrub.Running)
	assert.True(t, done.Equal(ex.Scrub.LastFinished), "%v", ex.Scrub.LastFinished)
}

// TestExamineMembersInRoleOrder: the member table is listed by role, the
// members without one last, whatever order their slots are in.
func TestExamineMembersInRoleOrder(t *testing.T) {
	e := newEnv(t)
	e.create(t, "data", "5", "a.img", "b.img", "c.img")
	path := e.paths("a.img")[0]
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	m, err := superblock.Read(f)
	require.NoError(t, err)
	spare := superblock.MemberInfo{UUID: [16]byte{9}, Role: -1, State: superblock.MemberSpare}
	m.Members = []superblock.MemberInfo{spare, m.Members[2], m.Members[0], m.Members[1]}
	m.Events++
	require.NoError(t, superblock.Write(f, m))
	require.NoError(t, f.Close())
	code, js, errOut := raidd(t, "examine", "--json", path)
	require.Equal(t, 0, code, errOut)
	var ex []examined
	require.NoError(t, json.Unmarshal([]byte(js), &ex), js)
	require.Len(t, ex, 1)
	var roles []int32
	for _, mm := range ex[0].Members {
		roles = append(roles, mm.Role)
	}
	assert.Equal(t, []int32{0, 1, 2, -1}, roles)
}
