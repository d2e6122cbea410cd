package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// Modes of the control socket. Whoever can connect to it can fail and
// remove members, so it never follows the umask.
const (
	controlMode      os.FileMode = 0o600 // the daemon's user only
	controlGroupMode os.FileMode = 0o660 // ... and the members of control_group
)

// lookupGroup resolves a group given by name or by numeric id.
func lookupGroup(name string) (int, error) {
	g, err := user.LookupGroup(name)
	if err != nil {
		var unknown user.UnknownGroupError
		if _, nerr := strconv.Atoi(name); nerr != nil || !errors.As(err, &unknown) {
			return 0, err
		}
		if g, err = user.LookupGroupId(name); err != nil {
			return 0, err
		}
	}
	return strconv.Atoi(g.Gid)
}

// listenControl opens the control socket at path with mode 0600, or 0660
// and group gid when gid >= 0, whatever the umask. The socket is bound in
// a fresh directory only the daemon can enter, given its owner and mode
// there, and only then renamed to path, so it is never reachable with
// wider permissions, not even for an instant.
func listenControl(path string, gid int) (net.Listener, error) {
	if err := prepareSocket(path); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".raidd")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	l, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, err
	}
	// The socket outlives its temporary name; runServe removes path.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	mode := controlMode
	if gid >= 0 {
		mode = controlGroupMode
		// A socket created with the group already (raidd running with it
		// as its group, systemd's Group=) needs no chown, which the
		// shipped unit forbids (no CAP_CHOWN, chown calls filtered).
		var st syscall.Stat_t
		if err := syscall.Lstat(tmp, &st); err != nil || int(st.Gid) != gid {
			if err := os.Lchown(tmp, -1, gid); err != nil {
				_ = l.Close()
				hint := "raidd must run as root or as a member of that group"
				if os.Geteuid() == 0 {
					hint = "raidd runs as root without the right to change a file's group (CAP_CHOWN dropped, or chown filtered, as the shipped systemd unit does): run raidd with that group as its own instead (Group=GROUP in a drop-in, 'systemctl edit raidd'), and the socket is created with it"
				}
				return nil, fmt.Errorf("control_group: give the socket group %d: %w (%s)", gid, err, hint)
			}
		}
	}
	if err := os.Chmod(tmp, mode); err != nil {
		_ = l.Close()
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = l.Close()
		return nil, err
	}
	return l, nil
}
