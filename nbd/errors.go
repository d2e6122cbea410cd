package nbd

import "errors"

// ErrServerClosed is returned by Serve after Shutdown or Close was called,
// and by Serve when it is called on a server that is already shutting down.
var ErrServerClosed = errors.New("nbd: server closed")

// ErrInvalidOptions wraps every problem reported by Options.Validate and
// NewServer; test for it with errors.Is.
var ErrInvalidOptions = errors.New("nbd: invalid options")

// ErrProtocol wraps client protocol violations that make the server drop a
// connection (bad magic, unknown client flags, oversized option, unknown
// export in NBD_OPT_EXPORT_NAME). It only appears in logs: the connection is
// simply closed, as the protocol requires.
var ErrProtocol = errors.New("nbd: protocol violation")

// ErrTLSRequired marks, in logs, a connection closed because it sent
// NBD_OPT_EXPORT_NAME before NBD_OPT_STARTTLS to a server in TLSRequire
// mode (that option has no error reply).
var ErrTLSRequired = errors.New("nbd: TLS required")

// ErrTLSHandshake wraps, in logs, the failure of the TLS handshake after
// NBD_OPT_STARTTLS (for example a client certificate that is missing or
// not signed by the configured CA).
var ErrTLSHandshake = errors.New("nbd: TLS handshake failed")
