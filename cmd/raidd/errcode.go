package main

import (
	"errors"
	"os"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
)

// Errors of the control API that are not errors of package raid. Each has
// its own code (errorCodes), so a client tells them apart with errors.Is.
var (
	// errNoArray is returned for a request naming an array that is not
	// configured.
	errNoArray = errors.New("no such array")
	// errNotAssembled is returned for a request naming a configured array
	// that could not be assembled when serve started (see serve --strict).
	errNotAssembled = errors.New("array not assembled")
	// errStopping is returned for a member change that arrives while
	// serve shuts down.
	errStopping = errors.New("raidd is shutting down")
	// errCheckRunning is returned by check while a check of the same array
	// runs.
	errCheckRunning = errors.New("a check is already running")
	// errBadRequest is returned for a malformed control request: a bad
	// body, a missing field or a device that cannot be opened.
	errBadRequest = errors.New("bad request")
)

// errorCodes maps the error codes of the control protocol to the sentinels
// they stand for, in both directions: the daemon sends the code of the
// first sentinel in this list that the error wraps (errors.Is), and the
// client wraps the daemon's message around the same sentinel, so that code
// on either side classifies errors with errors.Is, never by their text.
// Codes are part of the protocol: never change or reuse one; add new ones
// at the end of their group.
var errorCodes = []struct {
	code string
	err  error
}{
	// Member changes and lookups.
	{"no_array", errNoArray},
	{"not_assembled", errNotAssembled},
	{"not_found", raid.ErrNoMember},
	{"busy", raid.ErrBusy},
	{"in_use", raid.ErrInUse},
	{"read_only", raid.ErrReadOnly},
	{"closed", raid.ErrClosed},
	{"stopping", errStopping},
	{"check_running", errCheckRunning},
	{"would_fail", raid.ErrWouldFail},
	// Array state and I/O.
	{"failed", raid.ErrFailed},
	{"too_many_failures", raid.ErrTooManyFailures},
	{"inconsistent", raid.ErrInconsistent},
	{"range", raid.ErrRange},
	{"io", raid.ErrIO},
	// Devices offered to add and replace.
	{"foreign", raid.ErrForeign},
	{"not_member", raid.ErrNotMember},
	{"corrupt", raid.ErrCorrupt},
	{"config", raid.ErrConfig},
	{"held", errMemberHeld},
	{"member_range", member.ErrOutOfRange},
	{"member_read_only", member.ErrReadOnly},
	{"shrunk", member.ErrShrunk},
	{"size_mismatch", member.ErrSizeMismatch},
	{"file_type", member.ErrFileType},
	{"no_device", os.ErrNotExist},
	{"permission", os.ErrPermission},
	// Anything else the client asked wrongly.
	{"bad_request", errBadRequest},
}

// errorCode returns the protocol code of err, or "" if it wraps none of
// the sentinels of errorCodes.
func errorCode(err error) string {
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// codeError is an error received from the daemon: its message, wrapping
// the sentinel of its code.
type codeError struct {
	code string
	msg  string
	err  error // the sentinel; nil for a code this client does not know
}

func (e *codeError) Error() string { return e.msg }
func (e *codeError) Unwrap() error { return e.err }

// decodeError rebuilds the error the daemon reported as msg with code.
// An unknown code (from a newer daemon) keeps the message and the code but
// wraps no sentinel.
func decodeError(code, msg string) error {
	for _, c := range errorCodes {
		if c.code == code {
			return &codeError{code: code, msg: msg, err: c.err}
		}
	}
	if code == "" {
		return errors.New(msg)
	}
	return &codeError{code: code, msg: msg}
}
