package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

// statusOf runs raidd status --json and returns the status of array name.
func statusOf(t *testing.T, control, name string) arrayStatus {
	t.Helper()
	code, out, errOut := raidd(t, "status", "--json", "--control", control, name)
	require.Contains(t, []int{exitOK, exitDegraded, exitFailed}, code, errOut)
	var st statusReply
	require.NoError(t, json.Unmarshal([]byte(out), &st), out)
	require.Len(t, st.Arrays, 1)
	return st.Arrays[0]
}

// device returns the member with path p, if the status lists it.
func device(a arrayStatus, p string) (raid.MemberStatus, bool) {
	for _, m := range a.Devices {
		if m.Path == p {
			return m, true
		}
	}
	return raid.MemberStatus{}, false
}

// waitFor polls cond every 50ms for up to 20s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// examineAll returns the examine output of the members, to compare
// superblocks before and after.
func examineAll(t *testing.T, paths ...string) string {
	t.Helper()
	code, out, errOut := raidd(t, append([]string{"examine"}, paths...)...)
	require.Equal(t, 0, code, errOut)
	return out
}

func TestServeMemberArguments(t *testing.T) {
	e := newEnv(t)
	e.create(t, "data", "5", "a.img", "b.img", "c.img")
	members := e.paths("a.img", "b.img", "c.img")
	listen := []string{"--listen", "unix:" + e.nbdSock, "--control", e.control, "--log-level", "info"}

	// The array's name comes from the superblocks and names the export.
	d := start(t, append(append([]string{"serve"}, listen...), members...)...)
	c := dialNBD(t, "unix", e.nbdSock, "data")
	require.EqualValues(t, 2*dataBytes(t, stripe.RAID5, 3, 64<<10, 8<<20), c.size)
	assert.Zero(t, c.flags&nbdFlagReadOnly)
	p := pattern(8192, 5)
	c.mustDo(nbdCmdWrite, 4096, p)
	c.mustDo(nbdCmdFlush, 0, nil)
	c.do(nbdCmdDisc, 0, nil)
	assert.Contains(t, d.stderr.String(), "export nbd+unix:///data?socket="+e.nbdSock)
	assert.Equal(t, "data", statusOf(t, e.control, "data").Name)
	require.Equal(t, 0, d.stop(t), d.stderr.String())

	// A --name the members do not carry is refused before assembly
	// writes anything.
	before := examineAll(t, members...)
	code, _, errOut := raidd(t, append(append([]string{"serve", "--name", "other"}, listen...), members...)...)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `a.img belongs to array "data" (uuid `)
	assert.Contains(t, errOut, `not "other"`)
	assert.Equal(t, before, examineAll(t, members...), "no superblock changed")
	assert.NoFileExists(t, e.control)

	// --read-only exports the array read-only; the data is there.
	d = start(t, append(append([]string{"serve", "--read-only", "--name", "data"}, listen...), members...)...)
	ro := dialNBD(t, "unix", e.nbdSock, "data")
	assert.NotZero(t, ro.flags&nbdFlagReadOnly)
	got := make([]byte, len(p))
	ro.mustDo(nbdCmdRead, 4096, got)
	assert.Equal(t, p, got)
	assert.EqualValues(t, 1, ro.do(nbdCmdWrite, 0, p), "EPERM on a read-only export")
	st := statusOf(t, e.control, "data")
	assert.True(t, st.ReadOnly)
	require.Equal(t, 0, d.stop(t), d.stderr.String())
	assert.Equal(t, before, examineAll(t, members...), "a read-only serve writes no superblock")

	// --write-mostly needs mirrors: refused on raid5 ...
	code, _, errOut = raidd(t, append(append([]string{"serve", "--write-mostly", members[2]}, listen...), members...)...)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, members[2]+": write_mostly (--write-mostly) applies to mirrors, and data is a raid5 array, which has none")
	assert.Equal(t, before, examineAll(t, members...), "nothing was written")
	// ... and reaches a raid1 array.
	e.create(t, "mirror", "1", "m0.img", "m1.img")
	mirror := e.paths("m0.img", "m1.img")
	d = start(t, append(append([]string{"serve", "--write-mostly", mirror[1]}, listen...), mirror...)...)
	m, _ := device(statusOf(t, e.control, "mirror"), mirror[1])
	assert.True(t, m.WriteMostly, "--write-mostly reaches the array")
	require.Equal(t, 0, d.stop(t), d.stderr.String())
}

// TestServeRelativeControl: serve takes a relative --control or
// RAIDD_CONTROL against the working directory, as raidd status does; the
// file's control must still be absolute.
func TestServeRelativeControl(t *testing.T) {
	e := newEnv(t)
	e.create(t, "data", "1", "a.img", "b.img")
	t.Chdir(e.dir)
	members := []string{"a.img", "b.img"}

	d := start(t, append([]string{"serve", "--listen", "unix:nbd.sock", "--control", "z.sock"}, members...)...)
	assert.FileExists(t, filepath.Join(e.dir, "z.sock"))
	code, out, errOut := raidd(t, "status", "--control", "z.sock")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "data")
	require.Equal(t, 0, d.stop(t), d.stderr.String())

	t.Setenv("RAIDD_CONTROL", "env.sock")
	d = start(t, append([]string{"serve", "--listen", "unix:nbd.sock"}, members...)...)
	assert.Equal(t, "data", statusOf(t, filepath.Join(e.dir, "env.sock"), "data").Name)
	require.Equal(t, 0, d.stop(t), d.stderr.String())
	require.NoError(t, os.Unsetenv("RAIDD_CONTROL")) // t.Setenv restores it

	cfg := writeFile(t, "raidd.yaml", "listen: [unix:nbd.sock]\ncontrol: file.sock\n")
	code, _, errOut = raidd(t, append([]string{"serve", "--config", cfg}, members...)...)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, `control: "file.sock" is not an absolute path (a relative one is taken from --control or RAIDD_CONTROL only)`)
}

func TestMemberLifecycle(t *testing.T) {
	e := newEnv(t)
	code, out, errOut := raidd(t, append([]string{"create", "--name", "r5", "--level", "5", "--chunk", "64KiB", "--size", "8MiB",
		"--bitmap-region", "1MiB", "--spare", filepath.Join(e.dir, "s.img"), "--log-level", "warn"},
		e.paths("a.img", "b.img", "c.img", "d.img")...)...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "1 spare(s)")
	a, b, cc, dd, s := e.paths("a.img", "b.img", "c.img", "d.img", "s.img")[0], e.paths("b.img")[0], e.paths("c.img")[0], e.paths("d.img")[0], e.paths("s.img")[0]
	hookLog := filepath.Join(e.dir, "hooks.log")
	hook := `echo "$RAIDD_EVENT $RAIDD_MEMBER $RAIDD_ARRAY $RAIDD_ROLE" >> ` + hookLog
	// A slow rebuild (7 MiB per member at 4 MiB/s) so that it can be seen running.
	d := start(t, "serve", "--listen", "unix:"+e.nbdSock, "--control", e.control, "--on-event", hook,
		"--rebuild-min-rate", "1MiB", "--rebuild-max-rate", "4MiB/s", a, b, cc, dd, s)
	ctl := []string{"--control", e.control}
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return raidd(t, append(append([]string{args[0]}, ctl...), args[1:]...)...)
	}

	conn := dialNBD(t, "unix", e.nbdSock, "r5")
	writes := map[uint64][]byte{0: pattern(200<<10, 1), 5 << 20: pattern(1<<20, 2), conn.size - 4096: pattern(4096, 3)}
	for off, p := range writes {
		conn.mustDo(nbdCmdWrite, off, p)
	}
	conn.mustDo(nbdCmdFlush, 0, nil)

	st := statusOf(t, e.control, "r5")
	sp, ok := device(st, s)
	require.True(t, ok, "the spare is listed: %+v", st.Devices)
	assert.Equal(t, "spare", sp.State)
	require.NotNil(t, st.Bitmap)
	assert.EqualValues(t, 1<<20, st.Bitmap.Region, "--bitmap-region")

	// fail: the spare is claimed and rebuilt onto.
	code, out, errOut = run("fail", "r5", b)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "r5: "+b+" (role 1) marked failed; rebuild of role 1 onto "+s+" in progress")
	st = statusOf(t, e.control, "r5")
	sp, _ = device(st, s)
	assert.Equal(t, 1, sp.Role, "the spare took the failed role")
	assert.Contains(t, []string{"rebuilding", "active"}, sp.State)
	// At 4 MiB/s the rebuild of 7 MiB is still running.
	require.NotNil(t, st.Recovery, "recovery in progress")
	assert.Equal(t, "rebuild", st.Recovery.Kind)
	assert.Equal(t, s, st.Recovery.Path)
	code, out, _ = run("status", "r5")
	require.Equal(t, exitDegraded, code, "rebuilding is degraded")
	assert.Contains(t, out, "recovery: rebuild of role 1 onto "+s+"  [")
	waitFor(t, "the rebuild", func() bool {
		st = statusOf(t, e.control, "r5")
		sp, _ = device(st, s)
		return !st.Degraded && st.Recovery == nil && sp.State == "active"
	})
	fb, _ := device(st, b)
	assert.Equal(t, "failed", fb.State)

	// The hook saw the failure and the claim, with the member's path.
	waitFor(t, "the hooks", func() bool {
		h, _ := os.ReadFile(hookLog)
		return strings.Contains(string(h), "rebuild-finished ")
	})
	h, _ := os.ReadFile(hookLog)
	assert.Contains(t, string(h), "member-failed "+b+" r5 1\n")
	assert.Contains(t, string(h), "spare-claimed "+s+" r5 1\n")

	// remove the failed member; add a new spare.
	code, out, errOut = run("remove", "r5", b)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "removed")
	_, ok = device(statusOf(t, e.control, "r5"), b)
	assert.False(t, ok, "the removed member is gone")
	n := filepath.Join(e.dir, "n.img")
	require.NoError(t, member.CreateSparse(n, 8<<20))
	// A relative path is made absolute by the client.
	wd, err := os.Getwd()
	require.NoError(t, err)
	rel, err := filepath.Rel(wd, n)
	require.NoError(t, err)
	code, _, errOut = run("add", "r5", rel)
	require.Equal(t, 0, code, errOut)
	m, ok := device(statusOf(t, e.control, "r5"), n)
	require.True(t, ok)
	assert.Equal(t, "spare", m.State)

	// replace an active member; the old one leaves when the copy is done.
	r := filepath.Join(e.dir, "r.img")
	require.NoError(t, member.CreateSparse(r, 8<<20))
	code, out, errOut = run("replace", "r5", a, r)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "replacing "+a+" with "+r)
	waitFor(t, "the replacement", func() bool {
		st = statusOf(t, e.control, "r5")
		m, _ := device(st, r)
		_, old := device(st, a)
		return m.State == "active" && !old
	})
	m, _ = device(st, r)
	assert.Equal(t, 0, m.Role)
	assert.False(t, st.Degraded)

	// Refusals come back with the engine's message.
	code, _, errOut = run("fail", "r5", filepath.Join(e.dir, "nope.img"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `nope.img" is not a member of "r5"`)
	code, _, errOut = run("remove", "r5", cc)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "fail it first")
	code, _, errOut = run("fail", "zz", cc)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `no array named "zz" is running (arrays: "r5")`)
	// A device that does not exist is named, with what add and replace take.
	missing := filepath.Join(e.dir, "missing.img")
	code, _, errOut = run("add", "r5", missing)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, missing+": file does not exist; add takes an existing file or block device at least as large as the array's members (make a file first, e.g. truncate -s SIZE "+missing+")")
	code, _, errOut = run("replace", "r5", cc, missing)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, missing+": file does not exist; replace takes an existing file or block device")
	assert.NotContains(t, errOut, "stat ")
	code, _, errOut = run("add", "r5", dd) // already a member, held by this daemon
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is already active")
	assert.Contains(t, errOut, "fail it first")

	// The data survived all of it, and redundancy is consistent.
	for off, p := range writes {
		got := make([]byte, len(p))
		conn.mustDo(nbdCmdRead, off, got)
		require.Equal(t, p, got, "read at %d", off)
	}
	conn.do(nbdCmdDisc, 0, nil)
	code, out, errOut = run("check", "r5")
	require.Equal(t, 0, code, out+errOut)
	require.Equal(t, 0, d.stop(t), d.stderr.String())

	// The new member set is on disk: it assembles, whole, with its spare.
	start(t, "serve", "--listen", "unix:"+e.nbdSock, "--control", e.control, cc, dd, s, r, n)
	st = statusOf(t, e.control, "r5")
	assert.False(t, st.Degraded)
	m, _ = device(st, n)
	assert.Equal(t, "spare", m.State)
}

// TestAddAnotherArraysDevice: 'raidd add' of a device that another array
// of the same raidd holds is refused and leaves that array as it was: a
// failed member's device stays with its array (the add used to release
// it, and 'raidd remove' then no longer found it), and the refusal says
// how to move a device: take it out of its array, then add it with
// --force; following that works.
func TestAddAnotherArraysDevice(t *testing.T) {
	e := newEnv(t)
	for _, a := range []struct{ name, level string }{{"one", "1"}, {"two", "1"}} {
		code, _, errOut := raidd(t, append([]string{"create", "--name", a.name, "--level", a.level, "--size", "8MiB", "--log-level", "warn",
			"--spare", e.paths(a.name + "s.img")[0]}, e.paths(a.name+"0.img", a.name+"1.img")...)...)
		require.Equal(t, 0, code, errOut)
	}
	cfg := e.config(t, "", e.array("one", "", "one0.img", "one1.img", "ones.img"), e.array("two", "", "two0.img", "two1.img", "twos.img"))
	d := start(t, "serve", "--config", cfg)
	run := func(args ...string) (int, string, string) {
		t.Helper()
		return raidd(t, append(append([]string{args[0]}, "--control", e.control), args[1:]...)...)
	}
	two0, two1 := e.paths("two0.img")[0], e.paths("two1.img")[0]

	// An active member of "two".
	code, _, errOut := run("add", "one", two0)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `is a device of array "two" of this raidd (active)`)
	assert.NotContains(t, errOut, "to re-add or rebuild it, fail it first", "a re-add hint for another array's member")
	// The same, named through a symlink: the same device, the same advice.
	alias := filepath.Join(e.dir, "alias-two0")
	require.NoError(t, os.Symlink(two0, alias))
	code, _, errOut = run("add", "one", alias)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `is a device of array "two" of this raidd (active)`)

	// A spare of "two": removing it is enough, no fail first.
	code, _, errOut = run("add", "one", e.paths("twos.img")[0])
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `is a device of array "two" of this raidd (spare)`)
	assert.Contains(t, errOut, "'raidd remove two "+e.paths("twos.img")[0]+"' first")
	assert.NotContains(t, errOut, "'raidd fail two")

	// A failed member of "two": refused, and still "two"'s.
	code, out, errOut := run("fail", "two", "1") // by role: the reply names the device
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "two: "+two1+" (role 1) marked failed")
	code, _, errOut = run("add", "one", two1)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `is a device of array "two" of this raidd (failed)`)
	assert.Contains(t, errOut, "'raidd remove two "+two1+"' first")
	m, ok := device(statusOf(t, e.control, "two"), two1)
	require.True(t, ok, "the refused add took the device from its array")
	assert.Equal(t, "failed", m.State)

	// Following the refusal moves it. (The failed member named through a
	// symlink is the same member.)
	alias1 := filepath.Join(e.dir, "alias-two1")
	require.NoError(t, os.Symlink(two1, alias1))
	code, _, errOut = run("fail", "two", alias1)
	assert.Equal(t, 1, code)
	assert.NotContains(t, errOut, "is not a member", "found through its symlink")
	code, out, errOut = run("remove", "two", "1") // the failed entry of role 1, not the spare now in it
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "two: "+two1)
	assert.Contains(t, out, " removed")
	code, _, errOut = run("add", "--force", "one", two1)
	require.Equal(t, 0, code, errOut)
	m, ok = device(statusOf(t, e.control, "one"), two1)
	require.True(t, ok)
	assert.Equal(t, "spare", m.State)
	require.Equal(t, 0, d.stop(t), d.stderr.String())

	// Restarted with the configuration unchanged, "two" still lists the
	// moved device: it starts without it (its spare took the role)
	// instead of not at all.
	d = start(t, "serve", "--config", cfg)
	st := statusOf(t, e.control, "two")
	assert.False(t, st.Failed, "%+v", st)
	_, listed := device(st, two1)
	assert.False(t, listed, "the moved device is left out of its old array")
	assert.Contains(t, d.stderr.String(), "member of another array; assembling without it")
	require.Equal(t, 0, d.stop(t), d.stderr.String())
}

func TestDemo(t *testing.T) {
	dir, err := os.MkdirTemp("", "raidd")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "nbd.sock")
	args := []string{"demo", "--dir", dir, "--size", "64MiB", "--listen", "unix:" + sock, "--log-level", "warn"}
	members := []string{filepath.Join(dir, "member0.img"), filepath.Join(dir, "member1.img"), filepath.Join(dir, "member2.img"), filepath.Join(dir, "member3.img")}

	d := start(t, args...)
	out := d.stderr.String()
	assert.Contains(t, out, "Created the demo array (uuid ")
	uri := "nbd+unix:///demo?socket=" + sock
	assert.Contains(t, out, uri)
	assert.Contains(t, out, "nbdinfo '"+uri+"'")
	assert.Contains(t, out, "nbdcopy ")
	assert.Contains(t, out, "qemu-img info '"+uri+"'")
	c := dialNBD(t, "unix", sock, "demo")
	assert.EqualValues(t, 3*dataBytes(t, stripe.RAID5, 4, 512<<10, 64<<20), c.size)
	c.do(nbdCmdDisc, 0, nil)
	st := statusOf(t, filepath.Join(dir, "control.sock"), "demo")
	assert.Equal(t, "raid5", st.Level)
	assert.EqualValues(t, 512<<10, st.Chunk)
	for _, m := range members {
		var fi syscall.Stat_t
		require.NoError(t, syscall.Stat(m, &fi))
		assert.EqualValues(t, 64<<20, fi.Size, m)
		assert.Less(t, fi.Blocks*512, int64(4<<20), "%s is sparse", m)
	}
	require.Equal(t, 0, d.stop(t), d.stderr.String())
	uuid := examinedUUID(t, members[0])

	// A second start finds the array instead of creating a new one.
	d = start(t, args...)
	assert.Contains(t, d.stderr.String(), "Reusing the demo array (uuid "+uuid+")")
	require.Equal(t, 0, d.stop(t), d.stderr.String())
	for _, m := range members {
		assert.Equal(t, uuid, examinedUUID(t, m))
	}

	// Files of another array are never taken over.
	e := newEnv(t)
	e.create(t, "other", "1", "member0.img", "member1.img")
	code, _, errOut := raidd(t, "demo", "--dir", e.dir, "--listen", "unix:"+e.nbdSock)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `member0.img belongs to array "other", not "demo"`)
}

func examinedUUID(t *testing.T, path string) string {
	t.Helper()
	code, out, errOut := raidd(t, "examine", "--json", path)
	require.Equal(t, 0, code, errOut)
	var ex []examined
	require.NoError(t, json.Unmarshal([]byte(out), &ex))
	require.Len(t, ex, 1)
	require.NotEmpty(t, ex[0].ArrayUUID)
	return ex[0].ArrayUUID
}

func TestProgressBar(t *testing.T) {
	tests := []struct {
		p    raid.Progress
		want string
	}{
		{raid.Progress{Percent: 47.3, BytesPerSec: 112.4 * (1 << 20), ETASeconds: 12}, "[#########...........] 47.3%  112.4 MiB/s  ETA 0:12"},
		{raid.Progress{}, "[....................] 0.0%"},
		{raid.Progress{Percent: 100}, "[####################] 100.0%"},
		{raid.Progress{Percent: 250, ETASeconds: 0.2}, "[####################] 100.0%  ETA 0:01"},
		{raid.Progress{Percent: -3}, "[....................] 0.0%"},
		{raid.Progress{Percent: 5, BytesPerSec: 1 << 20, ETASeconds: 3725}, "[#...................] 5.0%  1.0 MiB/s  ETA 1:02:05"},
		{raid.Progress{Percent: 99.99, ETASeconds: 59.5}, "[###################.] 100.0%  ETA 1:00"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, progressBar(&tt.p, 20), "%+v", tt.p)
	}
}

func TestWatchStatus(t *testing.T) {
	st := &statusReply{Version: "v", Arrays: []arrayStatus{{Export: "x", Status: raid.Status{
		Name: "x", Level: "raid5", State: "degraded",
		Recovery: &raid.Progress{Kind: "rebuild", Role: 2, Path: "/m2", Percent: 50, BytesPerSec: 2 << 20, ETASeconds: 90},
		Resync:   &raid.Progress{Kind: "resync", Role: -1, Percent: 10, Done: 1, Total: 10},
		Bitmap:   &raid.BitmapStatus{Region: 64 << 20, Regions: 16, Dirty: 3},
		History:  []raid.Event{{Time: time.Now(), Kind: raid.EventSpareClaimed, Role: 2, Path: "/m2"}},
	}}}}
	calls := 0
	fetch := func(context.Context) (*statusReply, error) {
		calls++
		if calls > 2 {
			return nil, errors.New("raidd is not running")
		}
		return st, nil
	}
	var out strings.Builder
	render := func(w io.Writer, s *statusReply) error {
		printStatus(w, s, time.Now())
		return nil
	}
	err := watchStatus(context.Background(), &out, time.Millisecond, false, fetch, render)
	assert.ErrorContains(t, err, "raidd went away: raidd is not running")
	assert.Equal(t, 2, strings.Count(out.String(), "x: raid5, DEGRADED"), "two frames")
	assert.Contains(t, out.String(), "  recovery: rebuild of role 2 onto /m2  [##########..........] 50.0%  2.0 MiB/s  ETA 1:30\n")
	assert.Contains(t, out.String(), "  resync: [##..................] 10.0% (1 of 10 rows)\n")
	assert.Contains(t, out.String(), "  bitmap: 64MiB per bit, 3 of 16 regions dirty\n")
	assert.Regexp(t, `  recent events:\n    \S+ \S+  spare-claimed  role 2  /m2\n`, out.String())

	// Interrupted: no error; cleared screen on a terminal.
	ctx, cancel := context.WithCancel(context.Background())
	calls = 0
	out.Reset()
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	fetchForever := func(context.Context) (*statusReply, error) { return st, nil }
	require.NoError(t, watchStatus(ctx, &out, 10*time.Millisecond, true, fetchForever, render))
	assert.True(t, strings.HasPrefix(out.String(), "\x1b[H\x1b[2J"))

	// The first fetch failing is the plain error.
	err = watchStatus(context.Background(), &out, time.Millisecond, false,
		func(context.Context) (*statusReply, error) { return nil, errors.New("raidd is not running") }, render)
	assert.EqualError(t, err, "raidd is not running")
}

func TestNBDURI(t *testing.T) {
	tests := []struct {
		addr net.Addr
		name string
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 10809}, "data", "nbd://127.0.0.1:10809/data"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 10809}, "data", "nbd://127.0.0.1:10809/data"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 1}, "d", "nbd://[::1]:1/d"},
		{&net.TCPAddr{IP: net.ParseIP("192.168.1.2"), Port: 2}, "a b", "nbd://192.168.1.2:2/a%20b"},
		{&net.UnixAddr{Name: "/run/raidd/nbd.sock", Net: "unix"}, "data", "nbd+unix:///data?socket=/run/raidd/nbd.sock"},
		{&net.UnixAddr{Name: "/tmp/a&b.sock", Net: "unix"}, "x", "nbd+unix:///x?socket=/tmp/a%26b.sock"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, nbdURI(tt.addr, tt.name))
	}
}

func TestHookRunner(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "log")
	var logs syncBuffer
	h := newHookRunner(`case "$RAIDD_EVENT" in slow) sleep 10; echo late >> `+logFile+`;; bad) echo oops; exit 3;; esac
echo "$RAIDD_EVENT|$RAIDD_ARRAY|$RAIDD_ROLE|$RAIDD_MEMBER|$RAIDD_DETAIL|$RAIDD_TIME" >> `+logFile,
		slog.New(slog.NewTextHandler(&logs, nil)))
	// Long enough for a shell to start on a loaded CI machine (300 ms
	// killed the "bad" hook at load 30), far below the slow hook's sleep.
	h.timeout = 3 * time.Second
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	start := time.Now()
	h.enqueue(raid.Event{Time: at, Kind: "slow", Array: "a", Role: -1})
	h.enqueue(raid.Event{Time: at, Kind: "bad", Array: "a", Role: -1})
	h.enqueue(raid.Event{Time: at, Kind: raid.EventMemberFailed, Array: "a", Role: 2, Path: "/m 2", Detail: "x y"})
	h.enqueue(raid.Event{Time: at, Kind: raid.EventSpareClaimed, Array: "a", Role: 2, Path: "/s"})
	h.close(20 * time.Second)
	assert.Less(t, time.Since(start), 9*time.Second, "the slow hook was killed at its timeout")
	b, err := os.ReadFile(logFile)
	require.NoError(t, err)
	assert.Equal(t, "member-failed|a|2|/m 2|x y|2030-01-02T03:04:05Z\nspare-claimed|a|2|/s||2030-01-02T03:04:05Z\n", string(b),
		"in order, one at a time, and the killed hook's shell did not go on")
	assert.Contains(t, logs.String(), "on_event: command killed after timeout")
	assert.Contains(t, logs.String(), "on_event: command failed")
	assert.Contains(t, logs.String(), "output=oops")
	h.enqueue(raid.Event{Kind: "late"}) // after close: logged, not run
	assert.Contains(t, logs.String(), "event after shutdown not run")
}

// TestPrintStatusNamesAbsentMembers: a member whose device is not present
// is listed by the uuid 'raidd remove' takes for it, and a RAID0 without
// a bitmap is not said to need a resync after a crash.
func TestPrintStatusNamesAbsentMembers(t *testing.T) {
	st := &statusReply{Arrays: []arrayStatus{{Export: "a", Status: raid.Status{Name: "a", Level: "raid5", State: "degraded",
		Devices: []raid.MemberStatus{
			{Role: 0, Path: "/dev/a", UUID: "11111111-2222-3333-4444-555555555555", State: "active"},
			{Role: 1, UUID: "66666666-7777-8888-9999-000000000000", State: "failed", Note: "device not present"},
		}}}, {Export: "z", Status: raid.Status{Name: "z", Level: "raid0", State: "clean"}}}}
	var b strings.Builder
	printStatus(&b, st, time.Now())
	out := b.String()
	assert.Contains(t, out, "uuid 66666666-7777-8888-9999-000000000000")
	assert.Contains(t, out, "bitmap: none (a crash means a full resync)", "raid5")
	assert.Contains(t, out, "bitmap: none (raid0 has no redundancy to resync after a crash)")
}
