package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/raidd/raidd/internal/member"
)

// lockedMember is a member.File plus an advisory lock (flock) held on its
// path for as long as it is open, so that two raidd processes never drive
// the same member at once. Block devices are also opened with O_EXCL, which
// keeps out md, mounts and other exclusive openers.
type lockedMember struct {
	*member.File
	lock *os.File
}

// Close closes the member, then releases the lock.
func (m *lockedMember) Close() error {
	err := m.File.Close()
	if cerr := m.lock.Close(); err == nil {
		err = cerr
	}
	return err
}

// openMember opens path as a member and locks it. readOnly opens it with
// O_RDONLY and takes a shared lock, so several readers (raidd examine) may
// look at a member that no writer holds.
//
// Neither open blocks on what path names: a FIFO, terminal or other
// non-regular, non-block file is refused by its type before it is opened
// (member.OpenPlain, member.Open).
func openMember(path string, readOnly, direct bool) (*lockedMember, error) {
	lock, err := member.OpenPlain(path, true)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_EX
	if readOnly {
		how = syscall.LOCK_SH
	}
	if err := syscall.Flock(int(lock.Fd()), how|syscall.LOCK_NB); err != nil {
		_ = lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is in use by another raidd process (stop it first)", path)
		}
		return nil, &os.PathError{Op: "flock", Path: path, Err: err}
	}
	f, err := member.Open(path, member.Options{ReadOnly: readOnly, Direct: direct, Exclusive: !readOnly})
	if err != nil {
		_ = lock.Close()
		if errors.Is(err, syscall.EBUSY) {
			return nil, fmt.Errorf("%w (the device is mounted or claimed by md or another program)", err)
		}
		return nil, err
	}
	return &lockedMember{File: f, lock: lock}, nil
}
