package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid/superblock"
)

// errMemberHeld is wrapped by openMember when another raidd process (or
// this one, under another name) holds the member: by its flock, by the
// flock on a loop device's backing file, or by the in-use block in the
// member's header.
var errMemberHeld = errors.New("member in use")

// Heartbeats of the in-use block. A holder on another host (or in another
// PID namespace), whose process cannot be looked up, counts as alive while
// its heartbeat is younger than heartbeatStale. (Variables so that a test
// can run the heartbeat faster.)
var (
	heartbeatEvery = 10 * time.Second
	heartbeatStale = 60 * time.Second
)

// lockedMember is a member.File plus what keeps a second raidd away from
// it for as long as it is open:
//   - an advisory lock (flock) on its path, so that two raidd processes
//     never drive the same member at once;
//   - for a loop device, the same lock on the loop's backing file, so that
//     the file and a loop device over it are one member, not two;
//   - when opened for writing, a claim in the member's in-use block
//     (superblock.InUse) naming this process, refreshed by a heartbeat and
//     cleared on Close, which a raidd reaching the same bytes by any other
//     path sees.
//
// Block devices are also opened with O_EXCL, which keeps out md, mounts
// and other exclusive openers.
type lockedMember struct {
	*member.File
	lock    *os.File
	backing *os.File // the loop device's backing file, locked; or nil
	claim   *claim   // nil when read-only

	closeOnce sync.Once
	closeErr  error
}

// Close releases the claim, closes the member, then releases the locks.
// Only the first call does; later ones return its result. Both an array
// and its caller may close a device (raid.Assemble closes the devices on
// some of its error paths, and serve then closes every device it opened):
// a second release of the claim used to panic, and took down every array
// served.
func (m *lockedMember) Close() error {
	m.closeOnce.Do(func() {
		if m.claim != nil {
			m.claim.release()
		}
		err := m.File.Close()
		if cerr := m.lock.Close(); err == nil {
			err = cerr
		}
		if m.backing != nil {
			_ = m.backing.Close()
		}
		m.closeErr = err
	})
	return m.closeErr
}

// openMember opens path as a member and locks it. readOnly opens it with
// O_RDONLY and takes a shared lock, so several readers (raidd examine) may
// look at a member that no writer holds; a read-only open neither checks
// nor writes the in-use block. force takes over a member whose in-use block
// names a holder that cannot be proven dead (on another host, with a fresh
// heartbeat); a holder known to be running on this host is never taken
// over.
//
// Neither open blocks on what path names: a FIFO, terminal or other
// non-regular, non-block file is refused by its type before it is opened
// (member.OpenPlain, member.Open).
func openMember(path string, readOnly, direct, force bool) (*lockedMember, error) {
	lock, err := member.OpenPlain(path, true)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_EX
	if readOnly {
		how = syscall.LOCK_SH
	}
	if err := flock(lock, how); err != nil {
		defer lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s %s", errMemberHeld, path, lockHolder(lock))
		}
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	m := &lockedMember{lock: lock}
	fail := func(err error) (*lockedMember, error) {
		if m.File != nil {
			_ = m.File.Close()
		}
		if m.backing != nil {
			_ = m.backing.Close()
		}
		_ = lock.Close()
		return nil, err
	}
	if m.backing, err = lockBacking(path, lock, how); err != nil {
		return fail(err)
	}
	m.File, err = member.Open(path, member.Options{ReadOnly: readOnly, Direct: direct, Exclusive: !readOnly})
	if err != nil {
		if errors.Is(err, syscall.EBUSY) {
			err = fmt.Errorf("%w (the device is mounted or claimed by md or another program)", err)
		}
		return fail(err)
	}
	if !readOnly {
		if m.claim, err = claimMember(m.File, path, force); err != nil {
			return fail(err)
		}
	}
	return m, nil
}

func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if ferr = syscall.Flock(int(fd), how|syscall.LOCK_NB); ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// lockBacking takes the member lock on the backing file of a loop device
// (the lock file f, opened at path), so that the file and the loop device
// over it cannot be served as two members at once. It returns nil for
// anything but a loop device (or a partition of one), and for a loop
// device whose backing file cannot be opened (deleted, or in another mount
// namespace): the in-use block still guards those.
func lockBacking(path string, f *os.File, how int) (*os.File, error) {
	fi, err := f.Stat()
	if err != nil || fi.Mode().Type() != os.ModeDevice {
		return nil, nil
	}
	backing := loopBackingFile(fi.Sys().(*syscall.Stat_t).Rdev)
	if backing == "" {
		return nil, nil
	}
	b, err := member.OpenPlain(backing, true)
	if err != nil {
		return nil, nil
	}
	if err := flock(b, how); err != nil {
		_ = b.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is a loop device over %s, which another raidd process (or this one, by that path) holds; stop it first, or serve the file itself",
				errMemberHeld, path, backing)
		}
		return nil, &os.PathError{Op: "flock", Path: backing, Err: err}
	}
	return b, nil
}

// loopBackingFile returns the backing file of the loop device (or loop
// partition) with device number rdev, from sysfs; "" for other devices.
func loopBackingFile(rdev uint64) string {
	dir, err := filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(rdev), unix.Minor(rdev)))
	if err != nil {
		return ""
	}
	if _, err := os.Stat(filepath.Join(dir, "partition")); err == nil {
		dir = filepath.Dir(dir) // a partition: the loop attributes are its disk's
	}
	b, err := os.ReadFile(filepath.Join(dir, "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// claim is this process's hold on a member's in-use block.
type claim struct {
	dev  *member.File
	mine superblock.InUse
	stop chan struct{}
	done sync.WaitGroup
}

// liveClaims counts the claims this process has made and not released, by
// the Since of their in-use block (a nanosecond time; counted, so that two
// claims made in the same nanosecond cannot release each other). An in-use block that names this process but none of them
// was left by a claim whose release could not clear it (a member that
// failed because its file shrank refuses every write): it holds nothing.
var liveClaims = struct {
	sync.Mutex
	m map[int64]int
}{m: map[int64]int{}}

// ours reports whether h, which names this process, is one of its claims
// in force.
func ours(h *superblock.InUse) bool {
	liveClaims.Lock()
	defer liveClaims.Unlock()
	return liveClaims.m[h.Since] > 0
}

// claimMember reads the member's in-use block, refuses a member that
// another live raidd holds, then writes (and syncs) a block naming this
// process and starts its heartbeat. It returns a nil claim, and no error,
// for a device the block cannot be written to.
func claimMember(dev *member.File, path string, force bool) (*claim, error) {
	me := self()
	if held, err := superblock.ReadInUse(dev); err == nil {
		if why := heldBy(held, &me, force); why != "" {
			return nil, fmt.Errorf("%w: %s %s", errMemberHeld, path, why)
		}
	}
	// A missing, damaged or dead holder's block is simply overwritten.
	now := time.Now().UnixNano()
	me.Path, me.Since, me.Heartbeat = path, now, now
	c := &claim{dev: dev, mine: me, stop: make(chan struct{})}
	err := superblock.WriteInUse(dev, &c.mine)
	if err == nil {
		err = dev.Sync()
	}
	if err == nil {
		liveClaims.Lock()
		liveClaims.m[now]++
		liveClaims.Unlock()
	}
	if err != nil {
		// A device that cannot take the claim (too short for a header,
		// failing writes) cannot take superblock updates either: leave it
		// to assembly, which refuses or fails it with the reason, so that
		// the array can still start degraded without it.
		return nil, nil
	}
	c.done.Add(1)
	go c.beat()
	return c, nil
}

// lockHolder says who holds the flock on lock's file, for a refusal: this
// process, when one of its own descriptors is open on the same file (a
// member listed twice, or under two names: a symlink, a hard link);
// otherwise the raidd its in-use block names; otherwise some process.
func lockHolder(lock *os.File) string {
	var st unix.Stat_t
	if unix.Fstat(int(lock.Fd()), &st) == nil {
		if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
			for _, e := range fds {
				fd, err := strconv.Atoi(e.Name())
				if err != nil || fd == int(lock.Fd()) {
					continue
				}
				var o unix.Stat_t
				if unix.Fstat(fd, &o) == nil && o.Dev == st.Dev && o.Ino == st.Ino && o.Mode&unix.S_IFMT == st.Mode&unix.S_IFMT {
					return "is already open in this raidd process under another name (a symlink, a hard link, or the same path twice); list each member once"
				}
			}
		}
	}
	if h, err := superblock.ReadInUse(lock); err == nil && h.PID != 0 {
		return fmt.Sprintf("is in use by raidd pid %d on host %q (opened as %s since %s); stop it first",
			h.PID, h.Host, h.Path, time.Unix(0, h.Since).UTC().Format(time.RFC3339))
	}
	return "is locked by another process (a raidd, or a tool holding an flock on it); stop it first"
}

// heldBy returns why the member whose in-use block is h cannot be claimed
// by me (a sentence for an error message), or "" if it can.
func heldBy(h, me *superblock.InUse, force bool) string {
	who := fmt.Sprintf("is in use by raidd pid %d on host %q (opened as %s since %s)",
		h.PID, h.Host, h.Path, time.Unix(0, h.Since).UTC().Format(time.RFC3339))
	// A zero boot id is one that could not be read (/proc/sys hidden, as
	// systemd's ProcSubset=pid does): the boots cannot be compared, and
	// the holder's process is looked up as on the same boot (a PID with
	// the same start time across a reboot is not a real risk).
	unknownBoot := h.BootID == [16]byte{} || me.BootID == [16]byte{}
	if h.Host == me.Host && (h.BootID == me.BootID || unknownBoot) && h.PIDNS == me.PIDNS {
		// The holder's process can be looked up: its start time tells a
		// live holder from a dead one whose PID was reused.
		if !running(h.PID, h.ProcStart) {
			return ""
		}
		if h.PID == me.PID {
			if !ours(h) {
				return "" // left by a claim of ours that could not clear it
			}
			return who + ", which is this raidd process under another name; list the member once"
		}
		return who + ", which is running; stop it first"
	}
	if h.Host == me.Host && h.BootID != me.BootID && !unknownBoot {
		return "" // a holder from before this host rebooted
	}
	age := time.Since(time.Unix(0, h.Heartbeat))
	if age >= heartbeatStale || force {
		return ""
	}
	return fmt.Sprintf("%s, last heartbeat %s ago; stop that raidd first, or pass --force if it is known to be dead",
		who, age.Round(time.Second))
}

// running reports whether process pid (in this PID namespace) exists and
// started at procStart clock ticks after boot.
// A process that has exited but not been reaped yet (a zombie, state Z,
// as a SIGKILLed raidd is until its parent or supervisor waits for it)
// holds nothing: its descriptors are closed.
func running(pid uint32, procStart uint64) bool {
	state, st, err := procStat(strconv.FormatUint(uint64(pid), 10))
	return err == nil && st == procStart && state != "Z" && state != "X"
}

// procStartTime reads field 22 (starttime) of /proc/PID/stat.
func procStartTime(pid string) (uint64, error) {
	_, st, err := procStat(pid)
	return st, err
}

// procStat reads fields 3 (state) and 22 (starttime) of /proc/PID/stat.
func procStat(pid string) (state string, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", 0, err
	}
	// The command name (field 2) may hold spaces and parentheses; the
	// fields after it start after its last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, fmt.Errorf("/proc/%s/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return "", 0, fmt.Errorf("/proc/%s/stat: %d fields", pid, len(f))
	}
	start, err = strconv.ParseUint(f[19], 10, 64) // field 22 is the 20th after the name
	return f[0], start, err
}

// self describes this process for an in-use block.
func self() superblock.InUse {
	me := superblock.InUse{PID: uint32(os.Getpid())}
	me.Host, _ = os.Hostname()
	me.ProcStart, _ = procStartTime("self")
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		if u, err := superblock.ParseUUID(strings.TrimSpace(string(b))); err == nil {
			me.BootID = u
		}
	}
	var st unix.Stat_t
	if unix.Stat("/proc/self/ns/pid", &st) == nil {
		me.PIDNS = st.Ino
	}
	return me
}

// beat refreshes the heartbeat until release. It does not sync: the page
// cache reaches the device within the kernel's writeback interval, well
// inside heartbeatStale, and a sync here would flush the array's data.
func (c *claim) beat() {
	defer c.done.Done()
	t := time.NewTicker(heartbeatEvery)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.mine.Heartbeat = time.Now().UnixNano()
			_ = superblock.WriteInUse(c.dev, &c.mine) // a failed member fails this too; nothing to do
		}
	}
}

// release stops the heartbeat and clears the in-use block (best effort: a
// failed member may refuse the write).
func (c *claim) release() {
	close(c.stop)
	c.done.Wait()
	liveClaims.Lock()
	if liveClaims.m[c.mine.Since]--; liveClaims.m[c.mine.Since] <= 0 {
		delete(liveClaims.m, c.mine.Since)
	}
	liveClaims.Unlock()
	if superblock.ClearInUse(c.dev) == nil {
		_ = c.dev.Sync()
	}
}
