package nbd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"
)

// Export is one named export served by a Server.
type Export struct {
	// Name is the export name clients ask for. The empty name selects the
	// default export, which is always the first one; only the first export
	// may have an empty name.
	Name string
	// Description is a human-readable text sent with NBD_OPT_LIST and
	// NBD_INFO_DESCRIPTION.
	Description string
	// Device serves the data. It must not be nil.
	Device Device
	// ReadOnly makes every write-type command fail with EPERM and sets
	// NBD_FLAG_READ_ONLY.
	ReadOnly bool
}

// Options configure a Server. The zero value of every field except Exports
// means its default.
type Options struct {
	// Exports lists the exports; at least one is required.
	Exports []Export
	// MaxInFlightBytes bounds, per connection, the READ and WRITE payload
	// bytes held by requests that have been read but not yet answered. The
	// request reader blocks while the bound would be exceeded. Default
	// half of MaxTotalInFlightBytes, and at least MaxPayload (32 MiB with
	// the other defaults): one client that stops reading its replies then
	// holds at most half of the server-wide budget until IOTimeout drops
	// it, and the other half still serves any request of the others. It
	// must be at least MaxPayload.
	MaxInFlightBytes int64
	// MaxTotalInFlightBytes bounds the same bytes across all connections:
	// a connection's reader takes a request's length from this server-wide
	// budget before it allocates the WRITE payload or READ reply buffer,
	// and the bytes return when the reply has been written. A reader that
	// finds the budget exhausted blocks (so TCP pushes back on its client)
	// until earlier requests, in FIFO order, have been served. In addition,
	// each connection may hold up to 128 KiB of requests of at most that
	// size outside the budget, so small I/O from any client proceeds while
	// large requests of others exhaust it. Payload memory is therefore
	// bounded by MaxTotalInFlightBytes + MaxConnections x 128 KiB. Default
	// 64 MiB; it must be at least MaxPayload.
	MaxTotalInFlightBytes int64
	// MaxPayload is the largest READ or WRITE length served (and the cap of
	// the advertised maximum block size). Longer requests get EOVERFLOW (a
	// rejected WRITE's payload is read and discarded, never buffered).
	// Default 32 MiB; between 4 KiB and 1 GiB.
	MaxPayload int64
	// MaxConnections bounds the connections open at once, in the handshake
	// or in transmission. A connection beyond it is refused: the server
	// sends its greeting and answers every option with NBD_REP_ERR_POLICY
	// and a message naming the limit (closing at NBD_OPT_EXPORT_NAME, which
	// has no error reply), without allocating buffers for it; at most 16
	// such refusals run at once, and connections beyond those are closed at
	// accept. Default 128.
	MaxConnections int
	// HandshakeTimeout bounds the whole option haggling phase of a
	// connection. Default 10 s.
	HandshakeTimeout time.Duration
	// IdleTimeout closes a connection in transmission that has no request
	// in flight and has not sent a new one for this long. Zero, the
	// default, means no idle timeout: the Linux kernel client keeps an idle
	// connection open for as long as the device is attached and does not
	// reconnect, so closing it would break a mounted file system.
	IdleTimeout time.Duration
	// IOTimeout bounds how long the server waits on a client while it holds
	// memory for it: a WRITE payload must be received in full, and each
	// reply must be written in full, within IOTimeout of the server
	// starting to read or write it. A client that trickles its payload or
	// stops reading replies is disconnected, and the bytes its requests
	// hold return to the budget. With 32 MiB requests the default of 30 s
	// requires about 1.1 MiB/s from the client.
	IOTimeout time.Duration
	// Workers is the number of requests executed concurrently per
	// connection. Default 16.
	Workers int
	// NoSplice turns off READ replies spliced from the device's files
	// (Splicer): every READ is then copied through ReadAt.
	NoSplice bool
	// NoStreamWrites makes the reader receive a large WRITE it runs
	// itself (InlineWriter) whole before writing it, instead of writing
	// it piece by piece as it arrives (see payload.go).
	NoStreamWrites bool
	// NoReceive makes streamed WRITEs go through the server's buffer even
	// when the device could receive them in place (Receiver).
	NoReceive bool
	// Hold, when set, is called as each connection enters transmission,
	// and the function it returns when the connection ends. raidd serve
	// passes internal/awake's Hold, which keeps the Go runtime's system
	// monitor out of its deep sleep while a client is connected: on a
	// server that waits for its clients many times per request this
	// saves the monitor's wake-ups, a fifth or more of the CPU time on
	// sequential writes. It is a hook, not a switch, so that this package
	// stays independent of the rest of raidd.
	Hold func() (release func())
	// Logger receives connection-level events at Debug level and
	// unexpected failures at Warn. Nil discards.
	Logger *slog.Logger
	// TLSMode selects whether NBD_OPT_STARTTLS is offered (TLSOn) or
	// demanded (TLSRequire); TLSOff, the default, answers it with
	// NBD_REP_ERR_UNSUP (the spec's NOTLS mode).
	TLSMode TLSMode
	// TLSConfig is the server configuration used after NBD_OPT_STARTTLS;
	// it is required unless TLSMode is TLSOff, and must hold a certificate
	// (Certificates or GetCertificate). It is cloned; a MinVersion below
	// TLS 1.2 is raised to 1.2. To verify client certificates set ClientCAs
	// and ClientAuth (tls.RequireAndVerifyClientCert).
	TLSConfig *tls.Config
}

// TLSMode is the server's TLS policy (the spec's NOTLS, and FORCEDTLS or
// a SELECTIVETLS server without TLS-only exports).
type TLSMode int

const (
	// TLSOff: no TLS. NBD_OPT_STARTTLS gets NBD_REP_ERR_UNSUP.
	TLSOff TLSMode = iota
	// TLSOn: NBD_OPT_STARTTLS upgrades the connection; clients that do not
	// ask for TLS are served in plaintext.
	TLSOn
	// TLSRequire: before TLS every option except NBD_OPT_STARTTLS and
	// NBD_OPT_ABORT gets NBD_REP_ERR_TLS_REQD, and NBD_OPT_EXPORT_NAME
	// (which has no error reply) closes the connection.
	TLSRequire
)

// String returns off, on or require.
func (m TLSMode) String() string {
	switch m {
	case TLSOff:
		return "off"
	case TLSOn:
		return "on"
	case TLSRequire:
		return "require"
	}
	return fmt.Sprintf("TLSMode(%d)", int(m))
}

// ParseTLSMode parses "off", "on" or "require".
func ParseTLSMode(s string) (TLSMode, error) {
	for _, m := range []TLSMode{TLSOff, TLSOn, TLSRequire} {
		if s == m.String() {
			return m, nil
		}
	}
	return TLSOff, fmt.Errorf("%w: TLS mode %q is not off, on or require", ErrInvalidOptions, s)
}

// Defaults.
const (
	DefaultMaxTotalInFlightBytes = 64 << 20
	DefaultMaxPayload            = 32 << 20
	DefaultMaxConnections        = 128
	DefaultHandshakeTimeout      = 10 * time.Second
	DefaultIOTimeout             = 30 * time.Second
	DefaultWorkers               = 16

	minMaxPayload = 4 << 10
	maxMaxPayload = 1 << 30
)

// withDefaults returns o with zero fields replaced by their defaults.
func (o Options) withDefaults() Options {
	if o.MaxTotalInFlightBytes == 0 {
		o.MaxTotalInFlightBytes = DefaultMaxTotalInFlightBytes
	}
	if o.MaxPayload == 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	if o.MaxInFlightBytes == 0 {
		o.MaxInFlightBytes = max(o.MaxPayload, o.MaxTotalInFlightBytes/2)
	}
	if o.MaxConnections == 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.IOTimeout == 0 {
		o.IOTimeout = DefaultIOTimeout
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.Workers == 0 {
		o.Workers = DefaultWorkers
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.TLSConfig != nil {
		o.TLSConfig = o.TLSConfig.Clone()
		if o.TLSConfig.MinVersion < tls.VersionTLS12 {
			o.TLSConfig.MinVersion = tls.VersionTLS12
		}
	}
	return o
}

// Validate reports every problem in o at once, each wrapping
// ErrInvalidOptions, joined with errors.Join. It calls Size and (if
// implemented) BlockSizes on each export's Device.
func (o Options) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	if o.MaxInFlightBytes < 0 {
		bad("MaxInFlightBytes %d is negative", o.MaxInFlightBytes)
	}
	if o.MaxTotalInFlightBytes < 0 {
		bad("MaxTotalInFlightBytes %d is negative", o.MaxTotalInFlightBytes)
	}
	if o.MaxPayload < 0 {
		bad("MaxPayload %d is negative", o.MaxPayload)
	}
	if o.MaxConnections < 0 {
		bad("MaxConnections %d is negative", o.MaxConnections)
	}
	if o.HandshakeTimeout < 0 {
		bad("HandshakeTimeout %v is negative", o.HandshakeTimeout)
	}
	if o.IdleTimeout < 0 {
		bad("IdleTimeout %v is negative", o.IdleTimeout)
	}
	if o.IOTimeout < 0 {
		bad("IOTimeout %v is negative", o.IOTimeout)
	}
	if o.Workers < 0 {
		bad("Workers %d is negative", o.Workers)
	}
	d := o.withDefaults()
	if o.MaxPayload >= 0 && (d.MaxPayload < minMaxPayload || d.MaxPayload > maxMaxPayload) {
		bad("MaxPayload %d is outside [%d, %d]", d.MaxPayload, minMaxPayload, maxMaxPayload)
	}
	if o.MaxInFlightBytes >= 0 && o.MaxPayload >= 0 && d.MaxInFlightBytes < d.MaxPayload {
		bad("MaxInFlightBytes %d is smaller than MaxPayload %d", d.MaxInFlightBytes, d.MaxPayload)
	}
	if o.MaxTotalInFlightBytes >= 0 && o.MaxPayload >= 0 && d.MaxTotalInFlightBytes < d.MaxPayload {
		bad("MaxTotalInFlightBytes %d is smaller than MaxPayload %d", d.MaxTotalInFlightBytes, d.MaxPayload)
	}
	switch {
	case o.TLSMode < TLSOff || o.TLSMode > TLSRequire:
		bad("unknown TLSMode %d", int(o.TLSMode))
	case o.TLSMode != TLSOff && o.TLSConfig == nil:
		bad("TLSMode %s needs a TLSConfig", o.TLSMode)
	case o.TLSMode != TLSOff && len(o.TLSConfig.Certificates) == 0 && o.TLSConfig.GetCertificate == nil &&
		o.TLSConfig.GetConfigForClient == nil:
		bad("TLSMode %s: TLSConfig has no certificate", o.TLSMode)
	}
	if len(o.Exports) == 0 {
		bad("no exports")
	}
	seen := make(map[string]int, len(o.Exports))
	for i, e := range o.Exports {
		where := fmt.Sprintf("export %d (%q)", i, e.Name)
		if prev, dup := seen[e.Name]; dup {
			bad("%s: name already used by export %d", where, prev)
		}
		seen[e.Name] = i
		if e.Name == "" && i != 0 {
			bad("%s: only the first (default) export may have an empty name", where)
		}
		if msg := checkString(e.Name); msg != "" {
			bad("%s: name %s", where, msg)
		}
		if msg := checkString(e.Description); msg != "" {
			bad("%s: description %s", where, msg)
		}
		if e.Device == nil {
			bad("%s: nil Device", where)
			continue
		}
		if sz := e.Device.Size(); sz < 0 {
			bad("%s: negative device size %d", where, sz)
		}
		minB, pref, maxB := rawBlockSizes(e.Device)
		if !isPow2(minB) || minB > maxMinBlock {
			bad("%s: minimum block size %d is not a power of two <= %d", where, minB, maxMinBlock)
		}
		if maxB < max(minB, 512) {
			bad("%s: maximum block size %d is smaller than max(minimum %d, 512)", where, maxB, minB)
		}
		if pref < minB {
			bad("%s: preferred block size %d is smaller than minimum %d", where, pref, minB)
		}
	}
	return errors.Join(errs...)
}

// checkString applies the protocol's string rules; it returns "" if s is
// acceptable.
func checkString(s string) string {
	switch {
	case len(s) > maxStringLen:
		return fmt.Sprintf("is %d bytes, longer than %d", len(s), maxStringLen)
	case strings.IndexByte(s, 0) >= 0:
		return "contains NUL"
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	}
	return ""
}
