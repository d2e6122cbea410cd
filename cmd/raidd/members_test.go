package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid/superblock"
)

// plantHolder writes an in-use block naming h into the member at path.
func plantHolder(t *testing.T, path string, h *superblock.InUse) {
	t.Helper()
	f, err := member.Open(path, member.Options{})
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, superblock.WriteInUse(f, h))
}

func readHolder(t *testing.T, path string) (*superblock.InUse, error) {
	t.Helper()
	f, err := member.Open(path, member.Options{ReadOnly: true})
	require.NoError(t, err)
	defer f.Close()
	return superblock.ReadInUse(f)
}

// TestMemberClaim covers the in-use block: a writable open claims the
// member and Close lets go; a holder that runs on this host is refused,
// even with force; a dead one is taken over; a holder on another host is
// refused while its heartbeat is fresh unless forced.
func TestMemberClaim(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.img")
	require.NoError(t, member.CreateSparse(path, 2<<20))
	path2 := filepath.Join(t.TempDir(), "m2.img")
	require.NoError(t, member.CreateSparse(path2, 2<<20))
	me := self()
	require.NotZero(t, me.ProcStart, "cannot read this process's start time")

	t.Run("claim_and_release", func(t *testing.T) {
		m, err := openMember(path, false, false, false)
		require.NoError(t, err)
		h, err := readHolder(t, path)
		require.NoError(t, err)
		assert.Equal(t, me.PID, h.PID)
		assert.Equal(t, path, h.Path)
		require.NoError(t, m.Close())
		_, err = readHolder(t, path)
		assert.ErrorIs(t, err, superblock.ErrNoInUse, "Close clears the claim")
		// A second Close (raid.Assemble closes devices on some error
		// paths, and serve closes all it opened) must not panic.
		assert.NotPanics(t, func() { _ = m.Close() }, "a second Close")
		ro, err := openMember(path, true, false, false)
		require.NoError(t, err)
		_, err = readHolder(t, path)
		assert.ErrorIs(t, err, superblock.ErrNoInUse, "a read-only open claims nothing")
		require.NoError(t, ro.Close())
	})
	t.Run("running_holder_on_this_host", func(t *testing.T) {
		child := exec.Command("sleep", "60")
		require.NoError(t, child.Start())
		defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
		start, err := procStartTime(strconv.Itoa(child.Process.Pid))
		require.NoError(t, err)
		h := me
		h.PID, h.ProcStart, h.Path, h.Heartbeat = uint32(child.Process.Pid), start, "/dev/loop9", 1
		plantHolder(t, path, &h)
		for _, force := range []bool{false, true} {
			_, err = openMember(path, false, false, force)
			require.Error(t, err, "force=%v", force)
			assert.True(t, errors.Is(err, errMemberHeld), "%v", err)
			assert.Contains(t, err.Error(), "raidd pid "+strconv.Itoa(child.Process.Pid))
			assert.Contains(t, err.Error(), "/dev/loop9")
			assert.Contains(t, err.Error(), "stop it first")
		}
		// Once it has exited, even before it is reaped (a zombie, as a
		// SIGKILLed raidd is until its supervisor waits for it), and once
		// it is gone (its PID may even be reused), the claim is stale.
		require.NoError(t, child.Process.Kill())
		for deadline := time.Now().Add(10 * time.Second); ; {
			state, _, err := procStat(strconv.Itoa(child.Process.Pid))
			require.NoError(t, err)
			if state == "Z" {
				break
			}
			require.True(t, time.Now().Before(deadline), "the child never became a zombie (state %s)", state)
			time.Sleep(time.Millisecond)
		}
		m, err := openMember(path, false, false, false)
		require.NoError(t, err, "an exited, unreaped holder on this host is taken over")
		require.NoError(t, m.Close())
		plantHolder(t, path, &h)
		_ = child.Wait()
		m, err = openMember(path, false, false, false)
		require.NoError(t, err, "a dead holder on this host is taken over")
		require.NoError(t, m.Close())
	})
	t.Run("this_process", func(t *testing.T) {
		// A claim of this process in force under another name (a loop
		// device over the file, say) is refused, even with force.
		other, err := openMember(path2, false, false, false)
		require.NoError(t, err)
		defer other.Close()
		h, err := readHolder(t, path2)
		require.NoError(t, err)
		h.Path = "/dev/other-name"
		plantHolder(t, path, h)
		_, err = openMember(path, false, false, true)
		assert.ErrorIs(t, err, errMemberHeld)
		assert.Contains(t, err.Error(), "this raidd process")
		// A block naming this process that no claim in force made was
		// left by one whose release could not clear it (a member whose
		// file shrank refuses writes): it holds nothing.
		h.Since++
		plantHolder(t, path, h)
		m, err := openMember(path, false, false, false)
		require.NoError(t, err, "a leftover block of this process is taken over")
		require.NoError(t, m.Close())
	})
	t.Run("other_host", func(t *testing.T) {
		h := superblock.InUse{Host: "elsewhere", PID: 77, Path: "/dev/sdz", Since: time.Now().UnixNano(), Heartbeat: time.Now().UnixNano()}
		plantHolder(t, path, &h)
		_, err := openMember(path, false, false, false)
		assert.ErrorIs(t, err, errMemberHeld)
		assert.Contains(t, err.Error(), `host "elsewhere"`)
		assert.Contains(t, err.Error(), "--force")
		m, err := openMember(path, false, false, true)
		require.NoError(t, err, "--force takes over a holder elsewhere")
		require.NoError(t, m.Close())

		h.Heartbeat = time.Now().Add(-2 * heartbeatStale).UnixNano()
		plantHolder(t, path, &h)
		m, err = openMember(path, false, false, false)
		require.NoError(t, err, "a holder whose heartbeat stopped is taken over")
		require.NoError(t, m.Close())
	})
	t.Run("too_short_for_a_header", func(t *testing.T) {
		// A member truncated away must still open, so that assembly can
		// leave it out and start degraded.
		short := filepath.Join(t.TempDir(), "short.img")
		require.NoError(t, os.WriteFile(short, nil, 0o600))
		m, err := openMember(short, false, false, false)
		require.NoError(t, err)
		assert.Nil(t, m.claim)
		require.NoError(t, m.Close())
	})
	t.Run("rebooted_host", func(t *testing.T) {
		h := me
		h.BootID[0] ^= 0xff
		h.Heartbeat = time.Now().UnixNano()
		plantHolder(t, path, &h)
		m, err := openMember(path, false, false, false)
		require.NoError(t, err, "a holder from before a reboot of this host is dead")
		require.NoError(t, m.Close())
	})
}

// TestHeldByUnknownBootID: a raidd that could not read the boot id (its
// /proc/sys hidden, as systemd's ProcSubset=pid does) writes a zero one.
// The boots cannot be compared then, and the holder's process decides: a
// running holder is refused whichever side's boot id is unknown. Taking
// the mismatch for a reboot let two raidds write the same member.
func TestHeldByUnknownBootID(t *testing.T) {
	me := self()
	require.NotZero(t, me.BootID, "this machine's boot id")
	child := exec.Command("sleep", "30")
	require.NoError(t, child.Start())
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	pid := strconv.Itoa(child.Process.Pid)
	st, err := procStartTime(pid)
	require.NoError(t, err)
	h := me
	h.PID, h.ProcStart, h.Since, h.Heartbeat = uint32(child.Process.Pid), st, time.Now().UnixNano(), time.Now().UnixNano()

	unknown := h
	unknown.BootID = [16]byte{}
	assert.Contains(t, heldBy(&unknown, &me, false), "which is running", "the holder could not read its boot id")
	blind := me
	blind.BootID = [16]byte{}
	assert.Contains(t, heldBy(&h, &blind, false), "which is running", "this raidd could not read its boot id")
	assert.Contains(t, heldBy(&h, &me, false), "which is running")

	_ = child.Process.Kill()
	_ = child.Wait()
	assert.Empty(t, heldBy(&unknown, &me, false), "a holder that exited holds nothing")
}

// TestProcStartTime reads this process's start time and reports a process
// that does not exist.
func TestProcStartTime(t *testing.T) {
	st, err := procStartTime("self")
	require.NoError(t, err)
	assert.NotZero(t, st)
	_, err = procStartTime(strconv.Itoa(1 << 30))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestMemberHeartbeat checks that a holder refreshes its heartbeat while it
// holds the member, which is what keeps a raidd on another host away.
func TestMemberHeartbeat(t *testing.T) {
	defer func(every time.Duration) { heartbeatEvery = every }(heartbeatEvery)
	heartbeatEvery = 20 * time.Millisecond
	path := filepath.Join(t.TempDir(), "m.img")
	require.NoError(t, member.CreateSparse(path, 2<<20))
	m, err := openMember(path, false, false, false)
	require.NoError(t, err)
	defer m.Close()
	first, err := readHolder(t, path)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		h, err := readHolder(t, path)
		return err == nil && h.Heartbeat > first.Heartbeat && h.Since == first.Since
	}, 5*time.Second, 10*time.Millisecond, "the heartbeat never advanced")
}

// TestExamineInUse checks that examine shows the holder of a member while
// it is held, and nothing once it is let go.
func TestExamineInUse(t *testing.T) {
	e := newEnv(t)
	e.create(t, "data", "1", "a.img", "b.img")
	path := e.paths("a.img")[0]
	m, err := openMember(path, false, false, false)
	require.NoError(t, err)
	code, out, errOut := raidd(t, "examine", path)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "in use by:")
	assert.Contains(t, out, "raidd pid "+strconv.Itoa(os.Getpid()))
	require.NoError(t, m.Close())
	code, out, errOut = raidd(t, "examine", path)
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "in use by")
}

// TestMemberHeldUnderAnotherName: a member this process already holds,
// opened again through a symlink, is refused with what happened (the same
// file under two names), not with advice to stop another raidd that does
// not exist.
func TestMemberHeldUnderAnotherName(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m0")
	require.NoError(t, member.CreateSparse(path, 4<<20))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(path, link))
	m, err := openMember(path, false, false, false)
	require.NoError(t, err)
	defer m.Close()
	_, err = openMember(link, false, false, false)
	require.ErrorIs(t, err, errMemberHeld)
	assert.Contains(t, err.Error(), "already open in this raidd process under another name")
	assert.NotContains(t, err.Error(), "stop it first")
}
