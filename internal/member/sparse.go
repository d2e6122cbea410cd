package member

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// CreateSparse creates a sparse regular file of exactly size bytes at path,
// suitable as a member, and makes its existence and size durable (it syncs
// the file and its directory). If the file already exists with exactly size
// bytes CreateSparse succeeds without touching it; it never shrinks or grows
// an existing file.
//
// Errors: ErrOutOfRange for a negative size, ErrSizeMismatch when the file
// exists with another size, ErrFileType when path exists but is not a regular
// file, and file system errors wrapped in *os.PathError.
func CreateSparse(path string, size int64) error {
	_, err := EnsureSparse(path, size)
	return err
}

// EnsureSparse is CreateSparse that also reports whether it created the
// file (true) or found it already there with the right size (false), so a
// caller that fails later removes only what it made.
func EnsureSparse(path string, size int64) (created bool, err error) {
	if size < 0 {
		return false, fmt.Errorf("member: create %s with size %d: %w", path, size, ErrOutOfRange)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			return false, err
		case !fi.Mode().IsRegular():
			return false, fmt.Errorf("member: create %s: exists as %v: %w", path, fi.Mode().Type(), ErrFileType)
		case fi.Size() != size:
			return false, fmt.Errorf("member: create %s: exists with %d bytes, want %d: %w", path, fi.Size(), size, ErrSizeMismatch)
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = os.Remove(path)
		return false, err
	}
	return true, nil
}

// syncDir fsyncs a directory so that a newly created entry in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
