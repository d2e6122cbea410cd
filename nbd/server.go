package nbd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// export is an Export with its discovered capabilities and normalized block
// sizes.
type export struct {
	Export
	caps
	minBlock, prefBlock, maxBlock uint32
}

// Server serves NBD exports. Its methods are safe for concurrent use.
type Server struct {
	opts    Options
	log     *slog.Logger
	exports []*export
	bufs    bufPool
	budget  byteSem // Options.MaxTotalInFlightBytes, shared by all connections

	shutting atomic.Bool // Shutdown or Close was called

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	refusing  map[net.Conn]struct{} // connections being refused (over MaxConnections)
	connWG    sync.WaitGroup        // connection and refusal goroutines
	// Refusal log rate limit: refusals since the last warning, and when it
	// was logged.
	refusedSinceLog int64
	lastRefusedLog  time.Time

	stats counters
}

// NewServer validates opts (see Options.Validate) and returns a server. It
// queries each device's Size and BlockSizes once here; Size is queried again
// for every client that selects the export.
func NewServer(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	s := &Server{
		opts:      opts,
		log:       opts.Logger,
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[*conn]struct{}),
		refusing:  make(map[net.Conn]struct{}),
	}
	s.budget.init(opts.MaxTotalInFlightBytes)
	for _, e := range opts.Exports {
		ex := &export{Export: e, caps: discoverCaps(e.Device)}
		minB, pref, maxB := rawBlockSizes(e.Device)
		ex.minBlock, ex.prefBlock, ex.maxBlock = normalizeBlockSizes(minB, pref, maxB, opts.MaxPayload)
		s.exports = append(s.exports, ex)
	}
	return s, nil
}

// lookup returns the export called name; the empty name selects the first
// export. It returns nil if there is none.
func (s *Server) lookup(name []byte) *export {
	for _, e := range s.exports {
		if e.Name == string(name) {
			return e
		}
	}
	if len(name) == 0 {
		return s.exports[0]
	}
	return nil
}

// Serve accepts connections on l and serves each in its own goroutine until
// Shutdown or Close is called, then returns ErrServerClosed. Several
// listeners (TCP, unix) may be served concurrently. Serve closes l when it
// returns. Temporary accept errors are retried with a backoff of up to one
// second; any other accept error is returned.
func (s *Server) Serve(l net.Listener) error {
	if !s.trackListener(l, true) {
		_ = l.Close()
		return ErrServerClosed
	}
	defer s.trackListener(l, false)
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.shutting.Load() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.log.Warn("nbd: accept failed; retrying", "err", err, "backoff", backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c, refuse := s.register(nc, true)
		switch {
		case refuse:
			go func() {
				defer s.connWG.Done()
				s.refuse(nc)
			}()
		case c != nil:
			go func() {
				defer s.connWG.Done()
				c.serve()
			}()
		}
	}
}

func isTemporary(err error) bool {
	t, ok := err.(interface{ Temporary() bool })
	return ok && t.Temporary()
}

// ServeConn serves one already-accepted connection and returns when it is
// closed. It takes ownership of nc and always closes it. After Shutdown or
// Close it closes nc at once. A connection beyond Options.MaxConnections is
// refused (see there) before ServeConn returns.
func (s *Server) ServeConn(nc net.Conn) {
	c, refuse := s.register(nc, false)
	if c == nil && !refuse {
		return
	}
	defer s.connWG.Done()
	if refuse {
		s.refuse(nc)
		return
	}
	c.serve()
}

func (s *Server) trackListener(l net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.shutting.Load() {
			return false
		}
		s.listeners[l] = struct{}{}
		return true
	}
	delete(s.listeners, l)
	_ = l.Close()
	return true
}

// maxRefusing bounds the refusals (see refuse) running at once; beyond it
// connections over MaxConnections are closed at accept.
const maxRefusing = 16

// refusedLogInterval is the least time between two warnings about refused
// connections.
const refusedLogInterval = 10 * time.Second

// register records a new connection and returns it. It returns nil, false
// (and closes nc) if the server is shutting down, or if nc is beyond
// MaxConnections and cannot be refused politely. It returns nil, true if
// nc is to be refused with refuse; the caller must then call refuse(nc)
// and connWG.Done. limitRefusals applies maxRefusing (ServeConn refuses in
// its caller's goroutine, so it does not need the bound).
func (s *Server) register(nc net.Conn, limitRefusals bool) (c *conn, refuse bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shutting.Load() {
		_ = nc.Close()
		return nil, false
	}
	if len(s.conns) >= s.opts.MaxConnections {
		s.stats.refused.Add(1)
		s.refusedSinceLog++
		if now := time.Now(); now.Sub(s.lastRefusedLog) >= refusedLogInterval {
			s.log.Warn("nbd: refusing connections: the connection limit is reached",
				"limit", s.opts.MaxConnections, "refused", s.refusedSinceLog, "remote", remoteAddr(nc))
			s.lastRefusedLog, s.refusedSinceLog = now, 0
		}
		if limitRefusals && len(s.refusing) >= maxRefusing {
			_ = nc.Close()
			return nil, false
		}
		s.refusing[nc] = struct{}{}
		s.connWG.Add(1)
		return nil, true
	}
	c = newConn(s, nc)
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.stats.connections.Add(1)
	s.stats.active.Add(1)
	return c, false
}

func remoteAddr(nc net.Conn) string {
	if a := nc.RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}

func (s *Server) unregister(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.stats.active.Add(-1)
}

// Shutdown stops the server gracefully: it closes the listeners, interrupts
// connections still in the handshake, and stops every connection from
// reading further requests, after a short drain in which the requests a
// client sent meanwhile are read (see the package documentation,
// "Shutdown"). Requests already executing finish and are answered;
// requests read but not yet started, and any request read after Shutdown
// began, are answered with ESHUTDOWN. Each connection is closed once its
// outstanding replies are sent. Shutdown returns nil when every
// connection goroutine has exited, or ctx.Err() if ctx ends first; in that
// case the remaining connections are closed abruptly, although device calls
// already in progress still run to completion in the background.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutting.Store(true)
	s.mu.Lock()
	for l := range s.listeners {
		_ = l.Close()
	}
	for c := range s.conns {
		c.interrupt()
	}
	for nc := range s.refusing {
		_ = nc.Close() // a refused client has nothing in flight
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() {
		s.connWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.closeConns()
		return ctx.Err()
	}
}

// Close stops the server immediately: listeners and connections are closed
// without waiting for requests in progress (their replies are lost). Device
// calls already in progress still run to completion in the background. Close
// returns nil.
func (s *Server) Close() error {
	s.shutting.Store(true)
	s.mu.Lock()
	for l := range s.listeners {
		_ = l.Close()
	}
	s.mu.Unlock()
	s.closeConns()
	return nil
}

func (s *Server) closeConns() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.halt()
		_ = c.nc.Close()
	}
	for nc := range s.refusing {
		_ = nc.Close()
	}
}
