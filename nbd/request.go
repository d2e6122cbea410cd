package nbd

import (
	"encoding/binary"
	"errors"
	"syscall"
)

// requestHeader is a decoded NBD request header.
type requestHeader struct {
	flags  uint16
	typ    uint16
	handle uint64
	offset uint64
	length uint32
}

// parseRequestHeader decodes a 28-byte request header. ok is false if b is
// short or the magic is wrong; the stream cannot be resynchronised then.
func parseRequestHeader(b []byte) (h requestHeader, ok bool) {
	if len(b) < requestHeaderLen || binary.BigEndian.Uint32(b[0:4]) != magicRequest {
		return h, false
	}
	h.flags = binary.BigEndian.Uint16(b[4:6])
	h.typ = binary.BigEndian.Uint16(b[6:8])
	h.handle = binary.BigEndian.Uint64(b[8:16])
	h.offset = binary.BigEndian.Uint64(b[16:24])
	h.length = binary.BigEndian.Uint32(b[24:28])
	return h, true
}

// policy is what the request validator needs to know about a connection: the
// export size and transmission flags sent to the client, and the block size
// constraints it enforces. It is immutable once transmission starts.
type policy struct {
	size        uint64 // export size, < 2^63
	tflags      uint16 // transmission flags as advertised
	minBlock    uint32 // power of two; 1 means no alignment requirement
	maxLen      uint32 // largest READ/WRITE length
	blockStatus bool   // base:allocation was selected for this export
}

func (p *policy) has(f uint16) bool { return p.tflags&f != 0 }

// allowedFlags returns the command flags valid for typ under p.
func (p *policy) allowedFlags(typ uint16) uint16 {
	var f uint16
	if p.has(tflagSendFUA) {
		f |= cmdFlagFUA // valid on every command once negotiated
	}
	switch typ {
	case cmdRead:
		if p.has(tflagSendDF) {
			f |= cmdFlagDF
		}
	case cmdWriteZeroes:
		f |= cmdFlagNoHole
		if p.has(tflagSendFastZero) {
			f |= cmdFlagFastZero
		}
	case cmdBlockStatus:
		f |= cmdFlagReqOne
	}
	return f
}

// isWriteType reports whether typ modifies data.
func isWriteType(typ uint16) bool {
	return typ == cmdWrite || typ == cmdTrim || typ == cmdWriteZeroes
}

// Validation failure reasons, sent as the message of structured error chunks.
const (
	reasonUnknownCommand = "unknown command"
	reasonBlockStatus    = "no metadata context was negotiated"
	reasonBadFlags       = "command flag not valid for this command"
	reasonReadOnly       = "export is read-only"
	reasonNotSupported   = "command not advertised for this export"
	reasonFlushArgs      = "FLUSH offset and length must be zero"
	reasonOutOfRange     = "request extends beyond the end of the export"
	reasonMisaligned     = "request not aligned to the minimum block size"
	reasonTooLarge       = "request length exceeds the maximum block size"
	reasonZeroStatus     = "BLOCK_STATUS length must not be zero"
	reasonShutdown       = "server is shutting down"
	reasonNoFastZero     = "fast zeroing is not possible now"
	reasonDeviceError    = "device error"
)

// validate checks a request (other than NBD_CMD_DISC) against p and returns 0
// or the protocol error to reply with, plus a reason for humans. It is pure
// and never panics. Checks run in this order, the first failure wins:
//
//  1. unknown command, or BLOCK_STATUS without
//     a selected metadata context            -> EINVAL
//  2. flag not valid for the command         -> EINVAL
//  3. write-type command on read-only export -> EPERM
//  4. command not advertised (FLUSH, TRIM,
//     WRITE_ZEROES)                          -> EINVAL
//  5. FLUSH with nonzero offset or length    -> EINVAL
//  6. range not inside the export (offset >= 2^63 and wrap-around included):
//     WRITE, WRITE_ZEROES -> ENOSPC; READ, TRIM, CACHE, BLOCK_STATUS -> EINVAL
//  7. offset or length not a multiple of the minimum block size -> EINVAL
//  8. BLOCK_STATUS with length 0 (no extent could describe it)   -> EINVAL
//  9. READ or WRITE length above the maximum block size          -> EOVERFLOW
//     (the spec suggests EINVAL; raidd answers EOVERFLOW, as its users asked,
//     so a client can tell "too big" from "malformed". Either way the
//     payload is consumed and the connection stays usable.)
//
// Zero-length READ, WRITE, TRIM, WRITE_ZEROES and CACHE requests whose offset
// is within [0, size] are valid; they are answered with success without
// calling the device. BLOCK_STATUS has no maximum length (the spec limits
// only READ, WRITE, CACHE and WRITE_ZEROES).
func (p *policy) validate(h *requestHeader) (errno uint32, reason string) {
	switch h.typ {
	case cmdRead, cmdWrite, cmdFlush, cmdTrim, cmdCache, cmdWriteZeroes:
	case cmdBlockStatus:
		if !p.blockStatus {
			return errnoInval, reasonBlockStatus
		}
	default:
		return errnoInval, reasonUnknownCommand
	}
	if h.flags&^p.allowedFlags(h.typ) != 0 {
		return errnoInval, reasonBadFlags
	}
	if isWriteType(h.typ) && p.has(tflagReadOnly) {
		return errnoPerm, reasonReadOnly
	}
	switch h.typ {
	case cmdFlush:
		if !p.has(tflagSendFlush) {
			return errnoInval, reasonNotSupported
		}
		if h.offset != 0 || h.length != 0 {
			return errnoInval, reasonFlushArgs
		}
		return 0, ""
	case cmdTrim:
		if !p.has(tflagSendTrim) {
			return errnoInval, reasonNotSupported
		}
	case cmdWriteZeroes:
		if !p.has(tflagSendWriteZeroes) {
			return errnoInval, reasonNotSupported
		}
	}
	// The export size is below 2^63, so this also rejects offsets >= 2^63
	// and offset+length wrapping past 2^64, without overflow.
	if h.offset > p.size || uint64(h.length) > p.size-h.offset {
		if h.typ == cmdWrite || h.typ == cmdWriteZeroes {
			return errnoNoSpc, reasonOutOfRange
		}
		return errnoInval, reasonOutOfRange
	}
	if p.minBlock > 1 && (h.offset|uint64(h.length))&uint64(p.minBlock-1) != 0 {
		return errnoInval, reasonMisaligned
	}
	if h.typ == cmdBlockStatus && h.length == 0 {
		return errnoInval, reasonZeroStatus
	}
	if (h.typ == cmdRead || h.typ == cmdWrite) && h.length > p.maxLen {
		return errnoOverflow, reasonTooLarge
	}
	return 0, ""
}

// mapDeviceError maps an error returned by a Device to a protocol error.
// syscall.Errno values found with errors.As are mapped as follows; anything
// else is EIO:
//
//	EPERM, EACCES, EROFS            -> EPERM
//	ENOSPC, EDQUOT, EFBIG           -> ENOSPC
//	EINVAL                          -> EINVAL
//	ENOTSUP/EOPNOTSUPP              -> ENOTSUP (callers narrow it, see execute)
//	EOVERFLOW                       -> EOVERFLOW
//	ESHUTDOWN                       -> ESHUTDOWN
//	EIO and everything else         -> EIO
func mapDeviceError(err error) uint32 {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if !errors.As(err, &e) {
		return errnoIO
	}
	if e == syscall.ENOTSUP || e == syscall.EOPNOTSUPP { // equal on Linux
		return errnoNotSup
	}
	switch e {
	case syscall.EPERM, syscall.EACCES, syscall.EROFS:
		return errnoPerm
	case syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG:
		return errnoNoSpc
	case syscall.EINVAL:
		return errnoInval
	case syscall.EOVERFLOW:
		return errnoOverflow
	case syscall.ESHUTDOWN:
		return errnoShutdown
	default:
		return errnoIO
	}
}
