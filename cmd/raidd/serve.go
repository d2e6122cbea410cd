package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/raidd/raidd/nbd"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"

	// The personalities register themselves with package raid.
	_ "github.com/raidd/raidd/raid/raid0"
	_ "github.com/raidd/raidd/raid/raid1"
	_ "github.com/raidd/raidd/raid/raid10"
	_ "github.com/raidd/raidd/raid/raid5"
)

// exportDevice is everything the NBD server can use of an array. Listing
// it here makes the build fail if raid.Array stops providing one of them,
// instead of the export silently losing FLUSH, FUA, TRIM or WRITE_ZEROES.
type exportDevice interface {
	nbd.Device
	nbd.Syncer
	nbd.FUAWriter
	nbd.Discarder
	nbd.Zeroer
	nbd.FastZeroer
	nbd.MultiConner
	nbd.BlockSizer
}

var _ exportDevice = (*raid.Array)(nil)

// servedArray is one assembled array and its export.
type servedArray struct {
	cfg      ArrayConfig
	array    *raid.Array
	checking atomic.Bool // a check started through the control API is running
}

// daemon is a running raidd serve.
type daemon struct {
	cfg     *Config
	log     *slog.Logger
	arrays  []*servedArray
	nbd     *nbd.Server
	started time.Time
}

func (c *cli) serveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Assemble the configured arrays and serve them over NBD",
		Long: `Serve assembles every array listed in the configuration and exports each
one over NBD, plus a control socket for 'raidd status' and 'raidd check'.

It refuses to start if any array cannot be assembled, naming each member
that was refused and why. Under systemd (Type=notify) it reports readiness
once every listener is open. SIGINT or SIGTERM stops it gracefully: NBD
requests in flight are answered, members are synced and the arrays are
marked clean. SIGHUP is ignored; restart to apply a changed configuration.`,
		Args: args(cobra.NoArgs),
	}
	fs := cmd.Flags()
	configFlags(fs)
	fs.StringSlice("listen", []string{defaultListen}, "NBD listen `address`es: host:port, tcp://host:port, unix:///path (repeatable)")
	fs.String("control", defaultControl, "control socket `path` (\"\" disables it)")
	fs.String("metrics-listen", "", "TCP `address` that serves Prometheus /metrics (default none)")
	keys := logFlags(fs)
	keys["listen"], keys["control"], keys["metrics-listen"] = "listen", "control", "metrics_listen"
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := commandConfig(cmd, keys)
		if err != nil {
			return err
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		log, err := newLogger(c.stderr, cfg.Log)
		if err != nil {
			return err
		}
		ctx, stop := signalContext(cmd.Context(), log)
		defer stop()
		return runServe(ctx, cfg, log, c.onReady)
	}
	return cmd
}

// runServe assembles every configured array, serves them over NBD and the
// control socket, and returns after ctx is cancelled and everything has
// been shut down: NBD requests in flight answered (within
// ShutdownTimeout), arrays synced, marked clean and closed. ready, if not
// nil, is called once every listener is open.
func runServe(ctx context.Context, cfg *Config, log *slog.Logger, ready func()) (err error) {
	d := &daemon{cfg: cfg, log: log, started: time.Now()}
	if err := d.assemble(); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.closeArrays()) }()

	exports := make([]nbd.Export, len(d.arrays))
	for i, s := range d.arrays {
		exports[i] = nbd.Export{
			Name:        s.cfg.exportName(),
			Description: s.description(),
			Device:      s.array,
			ReadOnly:    s.array.ReadOnly(),
		}
	}
	d.nbd, err = nbd.NewServer(nbd.Options{
		Exports:          exports,
		MaxInFlightBytes: int64(cfg.NBD.MaxInFlight),
		MaxPayload:       int64(cfg.NBD.MaxPayload),
		HandshakeTimeout: cfg.NBD.HandshakeTimeout,
		Workers:          cfg.NBD.Workers,
		Logger:           log,
	})
	if err != nil {
		return err
	}

	// Open every listener before serving on any, so that a bad address
	// fails the start instead of leaving a half-started daemon.
	var (
		listeners []net.Listener
		sockets   []string // unix socket files to remove at exit
	)
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
		for _, p := range sockets {
			_ = os.Remove(p)
		}
	}()
	listen := func(network, addr string) (net.Listener, error) {
		if network == "unix" {
			if err := prepareSocket(addr); err != nil {
				return nil, err
			}
		}
		l, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		if network == "unix" {
			sockets = append(sockets, addr)
		}
		return l, nil
	}
	var nbdLs []net.Listener
	for _, a := range cfg.Listen {
		network, addr, _ := parseListen(a) // validated
		l, err := listen(network, addr)
		if err != nil {
			return fmt.Errorf("nbd listen %s: %w", a, err)
		}
		nbdLs = append(nbdLs, l)
	}
	var httpServers []*http.Server
	var httpLs []net.Listener
	if cfg.Control != "" {
		l, err := listen("unix", cfg.Control)
		if err != nil {
			return fmt.Errorf("control socket %s: %w (set control to another path, or to \"\" to disable it)", cfg.Control, err)
		}
		httpServers = append(httpServers, &http.Server{Handler: d.controlHandler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
		httpLs = append(httpLs, l)
	}
	if cfg.MetricsListen != "" {
		l, err := listen("tcp", cfg.MetricsListen)
		if err != nil {
			return fmt.Errorf("metrics listen %s: %w", cfg.MetricsListen, err)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /metrics", d.handleMetrics)
		httpServers = append(httpServers, &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
		httpLs = append(httpLs, l)
	}

	// Serve. A listener that fails for good stops the daemon.
	fatal := make(chan error, len(nbdLs)+len(httpLs))
	var wg sync.WaitGroup
	for i, l := range nbdLs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.nbd.Serve(l); !errors.Is(err, nbd.ErrServerClosed) {
				fatal <- fmt.Errorf("nbd listener %s: %w", cfg.Listen[i], err)
			}
		}()
	}
	for i, hs := range httpServers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := hs.Serve(httpLs[i]); !errors.Is(err, http.ErrServerClosed) {
				fatal <- fmt.Errorf("http listener %s: %w", httpLs[i].Addr(), err)
			}
		}()
	}
	listeners = nil // the servers own and close them now

	log.Info("serving", "exports", len(d.arrays), "listen", strings.Join(cfg.Listen, ","), "control", cfg.Control)
	if err := sdNotify(fmt.Sprintf("READY=1\nSTATUS=serving %d export(s) on %s", len(d.arrays), strings.Join(cfg.Listen, ", "))); err != nil {
		log.Warn("cannot notify the service manager", "err", err)
	}
	if ready != nil {
		ready()
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
	case runErr = <-fatal:
		log.Error("shutting down", "err", runErr)
	}
	_ = sdNotify("STOPPING=1\nSTATUS=shutting down")

	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := d.nbd.Shutdown(sctx); err != nil {
		log.Warn("NBD connections did not finish in time; closed them", "timeout", cfg.ShutdownTimeout, "err", err)
	}
	for _, hs := range httpServers {
		// Close, not Shutdown: do not wait for a check in progress to
		// answer. (Array.Close still waits for the check itself to end.)
		_ = hs.Close()
	}
	wg.Wait()
	return runErr
}

// assemble opens the members of every configured array and assembles the
// arrays. On failure it closes whatever it opened and returns every
// problem at once.
func (d *daemon) assemble() error {
	var errs []error
	for _, ac := range d.cfg.Arrays {
		a, err := assembleArray(ac, d.log)
		if err != nil {
			errs = append(errs, fmt.Errorf("array %s: %w", ac.Name, err))
			continue
		}
		d.arrays = append(d.arrays, &servedArray{cfg: ac, array: a})
		st := a.Status()
		d.log.Info("array started", "array", ac.Name, "export", ac.exportName(), "level", st.Level,
			"size", st.Size, "state", st.State, "read_only", st.ReadOnly)
	}
	if len(errs) > 0 {
		return errors.Join(append(errs, d.closeArrays())...)
	}
	return nil
}

// assembleArray opens ac's members and assembles the array they form.
func assembleArray(ac ArrayConfig, log *slog.Logger) (*raid.Array, error) {
	var (
		devs []raid.Device
		errs []error
	)
	for _, m := range ac.Members {
		f, err := openMember(m.Path, ac.ReadOnly, ac.Direct)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		devs = append(devs, raid.Device{Path: m.Path, Member: f, WriteMostly: m.WriteMostly})
	}
	closeAll := func() {
		for _, d := range devs {
			_ = d.Member.Close()
		}
	}
	// Assembly writes superblocks, so refuse members of another array
	// before it can touch them. Unreadable superblocks are left to
	// Assemble, whose messages say what to do.
	for _, d := range devs {
		if m, err := superblock.Read(d.Member); err == nil && m.Name != ac.Name {
			errs = append(errs, fmt.Errorf("%s belongs to array %q (uuid %s), not %q; fix the name or the member list in the configuration",
				d.Path, m.Name, superblock.FormatUUID(m.ArrayUUID), ac.Name))
		}
	}
	if len(errs) > 0 {
		closeAll()
		return nil, errors.Join(errs...)
	}
	a, err := raid.Assemble(devs, raid.Options{
		ReadOnly:   ac.ReadOnly,
		Logger:     log,
		CleanDelay: ac.CleanDelay,
		KeepZeroes: ac.KeepZeroes,
		IOWorkers:  ac.IOWorkers,
	})
	if err != nil {
		closeAll()
		return nil, err
	}
	return a, nil
}

// closeArrays closes every assembled array: each syncs its members and is
// marked clean.
func (d *daemon) closeArrays() error {
	var errs []error
	for _, s := range d.arrays {
		if err := s.array.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close array %s: %w", s.cfg.Name, err))
		} else {
			d.log.Info("array stopped", "array", s.cfg.Name)
		}
	}
	return errors.Join(errs...)
}

// description is the export description sent to NBD clients.
func (s *servedArray) description() string {
	if s.cfg.Description != "" {
		return s.cfg.Description
	}
	g := s.array.Geometry()
	return fmt.Sprintf("raidd %s array %q: %d members, chunk %s", g.Level(), s.array.Name(), g.Members(), formatSize(g.Chunk()))
}

// prepareSocket makes way for a unix socket at path: it creates the
// directory, and removes a socket file left by a process that is gone. A
// socket that still answers belongs to a running process and is an error.
func prepareSocket(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		_ = c.Close()
		return fmt.Errorf("%s is in use by a running process (is raidd already running?)", path)
	}
	return os.Remove(path)
}

// signalContext returns a context cancelled by SIGINT or SIGTERM. A second
// signal kills the process the default way. SIGHUP is logged and ignored:
// the configuration is read only at start.
func signalContext(parent context.Context, log *slog.Logger) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-stop:
				signal.Reset(syscall.SIGINT, syscall.SIGTERM)
				cancel(fmt.Errorf("signal %v", s))
			case <-hup:
				log.Warn("SIGHUP ignored: raidd reads its configuration only at start; restart it to apply changes")
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		close(done)
		signal.Stop(stop)
		signal.Stop(hup)
		cancel(context.Canceled)
	}
}
