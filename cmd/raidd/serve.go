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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/raidd/raidd/internal/awake"
	"github.com/raidd/raidd/internal/member"

	"github.com/raidd/raidd/nbd"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"

	// The personalities register themselves with package raid.
	_ "github.com/raidd/raidd/raid/raid0"
	_ "github.com/raidd/raidd/raid/raid1"
	_ "github.com/raidd/raidd/raid/raid10"
	_ "github.com/raidd/raidd/raid/raid5"
	_ "github.com/raidd/raidd/raid/raid6"
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
	nbd.FastZeroerAt
	nbd.MultiConner
	nbd.BlockSizer
	nbd.BlockStatuser
	nbd.InlineWriter
	nbd.Splicer
}

var _ exportDevice = (*raid.Array)(nil)

// servedArray is one assembled array and its export.
type servedArray struct {
	cfg   ArrayConfig
	array *raid.Array
}

// brokenArray is a configured array that could not be assembled; serve
// runs without it (unless strict) and reports it as failed.
type brokenArray struct {
	cfg ArrayConfig
	err error
}

// daemon is a running raidd serve.
type daemon struct {
	cfg    *Config
	log    *slog.Logger
	arrays []*servedArray
	// broken lists the configured arrays that could not be assembled.
	broken  []brokenArray
	nbd     *nbd.Server
	started time.Time
	hooks   *hookRunner // runs on_event; nil if none
	notify  *serviceNotifier
	metrics *metrics
	// opsMu is held for reading by each member change made through the
	// control socket, and for writing to set stopping once none runs.
	opsMu    sync.RWMutex
	stopping bool
}

func (c *cli) serveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve [flags] [MEMBER...]",
		Short: "Assemble arrays and serve them over NBD",
		Long: `Serve assembles every array listed in the configuration and exports each
one over NBD, plus a control socket for 'raidd status', 'raidd check' and
the member commands (fail, remove, add, replace).

Without a configuration, give the members of one array on the command
line: serve assembles the array their superblocks describe and exports it
under its name. --name, --read-only, --direct, --write-mostly and the
rebuild rates apply only to that array (configured arrays have keys for
them). Spares are listed like any other member.

An array that cannot be assembled does not stop the others: serve logs why,
serves the rest, and 'raidd status' (and /metrics) report that array as
failed with the reason ('raidd status' then exits 2). With --strict (strict:
true) serve refuses to start instead, naming each member that was refused
and why; it also refuses when no array at all can be assembled.

Under systemd (Type=notify) it reports readiness once every listener is
open. SIGINT or SIGTERM stops it gracefully: NBD requests in flight are
answered, members are synced and the arrays are marked clean. SIGHUP is ignored; restart to apply a changed configuration.`,
		Example: `  raidd serve --config /etc/raidd/raidd.yaml
  raidd serve --listen unix:/tmp/nbd.sock --control /tmp/raidd.sock /srv/a.img /srv/b.img /srv/c.img
  raidd serve --read-only --name data /dev/sdb /dev/sdc`,
		Args: args(cobra.ArbitraryArgs),
	}
	fs := cmd.Flags()
	configFlags(fs)
	keys := listenFlags(fs)
	fs.String("metrics-listen", "", "TCP `address` that serves Prometheus /metrics (default none)")
	keys["metrics-listen"] = "metrics_listen"
	force := fs.Bool("force", false, "take over members whose in-use block names a raidd on another host with a fresh heartbeat (use only when it is known to be dead)")
	fs.Bool("strict", false, "refuse to start if any configured array cannot be assembled (default: serve the others)")
	keys["strict"] = "strict"
	forceAssemble := fs.Bool("force-assemble", false, "start arrays that lost more members than they tolerate, trusting the freshest members that left (mdadm --assemble --force); see README 'Recovering an array'")
	af := arrayFlags(fs)
	for k, v := range logFlags(fs) {
		keys[k] = v
	}
	for k, v := range nbdLimitFlags(fs) {
		keys[k] = v
	}
	for k, v := range tlsFlags(fs) {
		keys[k] = v
	}
	cmd.RunE = func(cmd *cobra.Command, members []string) error {
		cfg, err := commandConfig(cmd, keys)
		if err != nil {
			return err
		}
		cfg.Force = *force
		// A control socket from --control or RAIDD_CONTROL may be relative
		// to the working directory, as for raidd status, fail, ... and
		// unix:PATH listen addresses; the file's must be absolute, like
		// its members, since it does not say where it will be run.
		if _, env := os.LookupEnv("RAIDD_CONTROL"); cfg.Control != "" && (env || cmd.Flags().Changed("control")) {
			cfg.Control = absPath(cfg.Control)
		}
		if err := af.apply(cmd, cfg, members); err != nil {
			return err
		}
		cfg.ForceAssemble = *forceAssemble
		if err := flagValueError(cmd, keys, cfg.Validate()); err != nil {
			return err
		}
		log, err := newLogger(c.stderr, cfg.Log)
		if err != nil {
			return err
		}
		ctx, stop := signalContext(cmd.Context(), log)
		defer stop()
		return runServe(ctx, cfg, log, func([]string) { c.ready() })
	}
	return cmd
}

// ready calls the test hook, if any.
func (c *cli) ready() {
	if c.onReady != nil {
		c.onReady()
	}
}

// listenFlags adds the flags serve and demo share and returns their
// bindings to configuration keys.
func listenFlags(fs *pflag.FlagSet) map[string]string {
	fs.StringSlice("listen", []string{defaultListen}, "NBD listen `address`es: host:port, tcp://host:port, unix:PATH, unix:///path (repeatable)")
	fs.Bool("allow-remote", false, "allow NBD and metrics listen addresses that are not loopback (NBD has no authentication)")
	fs.Bool("allow-remote-plaintext", false, "allow NBD listen addresses that are not loopback with TLS off (by default they need --tls on or require)")
	fs.String("control", defaultControl, "control socket `path` (\"\" disables it); mode 0600, whatever the umask")
	fs.String("control-group", "", "`group` (name or id) that may use the control socket: mode 0660 (default: none, mode 0600)")
	fs.String("on-event", "", "shell `command` run for every array event, with RAIDD_EVENT, RAIDD_ARRAY, RAIDD_ROLE, RAIDD_MEMBER, RAIDD_DETAIL, RAIDD_TIME set")
	return map[string]string{"listen": "listen", "allow-remote": "allow_remote", "allow-remote-plaintext": "allow_remote_plaintext", "control": "control", "control-group": "control_group", "on-event": "on_event"}
}

// cliArray holds the serve flags that describe the array given by MEMBER
// arguments.
type cliArray struct {
	name                       *string
	readOnly, direct           *bool
	writeMostly                *[]string
	rebuildMinRate, rebuildMax *string
	stripeCache                *string
	stripeCacheDelay           *time.Duration
	stripeCacheRandom          *string
}

func arrayFlags(fs *pflag.FlagSet) *cliArray {
	return &cliArray{
		name:              fs.String("name", "", "array `name` the MEMBERs must belong to (default: read from their superblocks)"),
		readOnly:          fs.Bool("read-only", false, "export the MEMBERs' array read-only; no superblock is written"),
		direct:            fs.Bool("direct", false, "open the MEMBERs with O_DIRECT"),
		writeMostly:       fs.StringArray("write-mostly", nil, "MEMBER `path` that serves reads only when no other copy can (repeatable)"),
		rebuildMinRate:    fs.String("rebuild-min-rate", "", "rebuild/resync `rate` per member while clients do I/O, e.g. 16MiB (default 16MiB)"),
		rebuildMax:        fs.String("rebuild-max-rate", "", "rebuild/resync rate `limit` per member, e.g. 200MiB (default none)"),
		stripeCache:       fs.String("stripe-cache", "", "RAID5/RAID6 stripe cache `size`, e.g. 16MiB; 0 disables it (default 64MiB)"),
		stripeCacheDelay:  durationFlag(fs, "stripe-cache-delay", 0, "longest `time` a partial stripe stays in the stripe cache (default 5ms)"),
		stripeCacheRandom: fs.String("stripe-cache-random-writes", "", "whether the stripe cache also holds random partial-stripe writes: auto, on or off `mode` (default auto: with the write-hole log on members not held in memory)"),
	}
}

// perArrayFlags are the flags that only apply to MEMBER arguments.
var perArrayFlags = []string{"name", "read-only", "direct", "write-mostly", "rebuild-min-rate", "rebuild-max-rate", "stripe-cache", "stripe-cache-delay", "stripe-cache-random-writes"}

// apply adds the array given by MEMBER arguments to cfg. Without members
// none of the per-array flags may be set.
func (f *cliArray) apply(cmd *cobra.Command, cfg *Config, members []string) error {
	if len(members) == 0 {
		for _, n := range perArrayFlags {
			if cmd.Flags().Changed(n) {
				return usageError{fmt.Errorf("--%s applies to the array given by MEMBER arguments, and none were given (use the array keys of the configuration instead)", n)}
			}
		}
		return nil
	}
	if len(cfg.Arrays) > 0 {
		return usageError{fmt.Errorf("both MEMBER arguments and arrays in the configuration (%s) were given; use one or the other", configPath(cmd.Flags()))}
	}
	ac := ArrayConfig{Name: *f.name, ReadOnly: *f.readOnly, Direct: *f.direct}
	var errs []error
	seen := map[string]bool{}
	for _, m := range members {
		p, err := filepath.Abs(m)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		seen[p] = true
		ac.Members = append(ac.Members, MemberConfig{Path: p})
	}
	for _, w := range *f.writeMostly {
		p, err := filepath.Abs(w)
		if err == nil && !seen[p] {
			err = fmt.Errorf("--write-mostly %s is not one of the MEMBER arguments", w)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range ac.Members {
			if ac.Members[i].Path == p {
				ac.Members[i].WriteMostly = true
			}
		}
	}
	for _, r := range []struct {
		flag, val string
		dst       *byteRate
	}{{"rebuild-min-rate", *f.rebuildMinRate, &ac.RebuildMinRate}, {"rebuild-max-rate", *f.rebuildMax, &ac.RebuildMaxRate}} {
		if r.val == "" {
			continue
		}
		n, err := parseRate(r.val)
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", r.flag, err))
		}
		*r.dst = byteRate(n)
	}
	if *f.stripeCache != "" {
		n, err := parseSize(*f.stripeCache)
		if err != nil {
			errs = append(errs, fmt.Errorf("--stripe-cache: %w", err))
		}
		sc := byteSize(n)
		ac.StripeCache = &sc
	}
	ac.StripeCacheDelay = *f.stripeCacheDelay
	if _, err := raid.ParseWriteBack(*f.stripeCacheRandom); err != nil {
		errs = append(errs, fmt.Errorf("--stripe-cache-random-writes: %w", err))
	}
	ac.StripeCacheRandomWrites = *f.stripeCacheRandom
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	if ac.Name == "" {
		name, err := arrayNameOf(ac.Members)
		if err != nil {
			return err
		}
		ac.Name = name
	}
	cfg.Arrays = []ArrayConfig{ac}
	return nil
}

// arrayNameOf returns the array name recorded in the first member that
// has a readable superblock. The members are opened read-only and not
// locked; assembly checks every member against the name afterwards.
func arrayNameOf(members []MemberConfig) (string, error) {
	var errs []error
	for _, m := range members {
		f, err := member.Open(m.Path, member.Options{ReadOnly: true})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		sb, err := superblock.Read(f)
		_ = f.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", m.Path, err))
			continue
		}
		return sb.Name, nil
	}
	return "", fmt.Errorf("no MEMBER carries a readable raidd superblock, so the array is unknown (create it first with 'raidd create'):\n%w", errors.Join(errs...))
}

// runServe assembles every configured array, serves them over NBD and the
// control socket, and returns after ctx is cancelled and everything has
// been shut down: NBD requests in flight answered (within
// ShutdownTimeout), arrays synced, marked clean and closed. ready, if not
// nil, is called once every listener is open, with the NBD URI of every
// export on every listener.
func runServe(ctx context.Context, cfg *Config, log *slog.Logger, ready func(uris []string)) (err error) {
	d := &daemon{cfg: cfg, log: log, started: time.Now()}
	// The watchdog runs from the start; STATUS= lines once serving.
	d.notify = newServiceNotifier(log)
	defer d.notify.close()
	if cfg.OnEvent != "" {
		d.hooks = newHookRunner(cfg.OnEvent, log)
		// After the arrays are closed (deferred below), so that their last
		// events still run.
		defer d.hooks.close(cfg.ShutdownTimeout)
	}
	// Sockets passed by the service manager (raidd.socket) replace the
	// listen setting. They are checked before any array is assembled, so
	// that a refusal costs no assembly (and no resync under a restart
	// loop).
	activated, err := activatedListeners(os.Getenv, os.Getpid(), listenFDsStart)
	unsetActivationEnv()
	if err != nil {
		return err
	}
	for _, l := range activated {
		a := listenString(l.Addr())
		if _, tcp := l.Addr().(*net.TCPAddr); tcp && !isLoopback(a) {
			if err := cfg.remoteListenPolicy(a); err != nil {
				return fmt.Errorf("%w (this socket was passed by the service manager: %s)", err, l.name)
			}
		}
	}
	if err := d.assemble(); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, d.closeArrays()) }()

	d.metrics = newMetrics(d.status)
	exports := make([]nbd.Export, len(d.arrays))
	for i, s := range d.arrays {
		exports[i] = nbd.Export{
			Name:        s.cfg.exportName(),
			Description: s.description(),
			Device:      d.metrics.timed(s.array, s.cfg.exportName()),
			ReadOnly:    s.array.ReadOnly(),
		}
	}
	tlsMode, tlsConfig, err := cfg.TLS.server()
	if err != nil {
		return err
	}
	d.nbd, err = nbd.NewServer(nbd.Options{
		Exports:          exports,
		MaxInFlightBytes: int64(cfg.NBD.MaxInFlight),
		MaxPayload:       int64(cfg.NBD.MaxPayload),
		HandshakeTimeout: cfg.NBD.HandshakeTimeout,
		Workers:          cfg.NBD.Workers,
		Logger:           log,
		// Resource bounds (issue 7).
		MaxTotalInFlightBytes: int64(cfg.NBD.MaxTotalInFlight),
		MaxConnections:        cfg.NBD.MaxConnections,
		IdleTimeout:           cfg.NBD.IdleTimeout,
		IOTimeout:             cfg.NBD.IOTimeout,
		TLSMode:               tlsMode,
		TLSConfig:             tlsConfig,
		// The runtime's system monitor stays awake while clients are
		// connected (bench/README.md, "CPU per byte").
		Hold: awake.Hold,
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
	var (
		nbdLs []net.Listener
		uris  []string
	)
	addURIs := func(l net.Listener) {
		for _, e := range exports {
			u := nbdURI(l.Addr(), e.Name)
			if tlsMode == nbd.TLSRequire { // nbds:// and nbds+unix:// ask clients for TLS
				u = "nbds" + strings.TrimPrefix(u, "nbd")
			}
			uris = append(uris, u)
		}
	}
	if len(activated) > 0 {
		cfg.Listen = nil
		for _, l := range activated {
			listeners = append(listeners, l.Listener)
		}
		for _, l := range activated {
			a := listenString(l.Addr())
			cfg.Listen = append(cfg.Listen, a)
			nbdLs = append(nbdLs, l.Listener)
			addURIs(l.Listener)
		}
		log.Info("socket activation: NBD is served on the sockets the service manager passed; the listen setting is not used", "sockets", strings.Join(cfg.Listen, ","))
	} else {
		for _, a := range cfg.Listen {
			network, addr, _ := parseListen(a) // validated
			if network == "unix" {
				if addr, err = filepath.Abs(addr); err != nil {
					return fmt.Errorf("nbd listen %s: %w", a, err)
				}
			}
			l, err := listen(network, addr)
			if err != nil {
				return fmt.Errorf("nbd listen %s: %w", a, err)
			}
			nbdLs = append(nbdLs, l)
			addURIs(l)
		}
	}
	var httpServers []*http.Server
	var httpLs []net.Listener
	if cfg.Control != "" {
		gid := -1
		if cfg.ControlGroup != "" {
			if gid, err = lookupGroup(cfg.ControlGroup); err != nil {
				return fmt.Errorf("control_group: %w", err)
			}
		}
		l, err := listenControl(cfg.Control, gid)
		if err != nil {
			return fmt.Errorf("control socket %s: %w (set control to another path, or to \"\" to disable it)", cfg.Control, err)
		}
		listeners = append(listeners, l)
		sockets = append(sockets, cfg.Control)
		httpServers = append(httpServers, &http.Server{Handler: d.controlHandler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
		httpLs = append(httpLs, l)
	}
	if cfg.MetricsListen != "" {
		l, err := listen("tcp", cfg.MetricsListen)
		if err != nil {
			return fmt.Errorf("metrics listen %s: %w", cfg.MetricsListen, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", d.metrics.handler(log))
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
	for _, u := range uris {
		log.Info("export " + u)
	}
	d.notify.serving(func() string { return serviceStatus(d.status()) })
	if ready != nil {
		ready(uris)
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
	case runErr = <-fatal:
		log.Error("shutting down", "err", runErr)
	}
	d.notify.stopping()

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
	// Member changes started through the control socket are short; let
	// them finish before the arrays close, and refuse any later one.
	d.opsMu.Lock()
	d.stopping = true
	d.opsMu.Unlock()
	return runErr
}

// nbdURI is the NBD URI of export name on a listener: nbd://host:port/name
// or nbd+unix:///name?socket=path. A listener on every address is named
// by the loopback address of its family.
func nbdURI(addr net.Addr, name string) string {
	switch a := addr.(type) {
	case *net.TCPAddr:
		ip := a.IP
		switch {
		case ip == nil || ip.Equal(net.IPv4zero):
			ip = net.IPv4(127, 0, 0, 1)
		case ip.Equal(net.IPv6unspecified):
			ip = net.IPv6loopback
		}
		return "nbd://" + net.JoinHostPort(ip.String(), strconv.Itoa(a.Port)) + "/" + uriEscape(name, false)
	case *net.UnixAddr:
		return "nbd+unix:///" + uriEscape(name, false) + "?socket=" + uriEscape(a.Name, true)
	}
	return addr.String()
}

// uriEscape percent-encodes what may not appear literally in a URI path
// segment (or, with slash, a query value holding a path).
func uriEscape(s string, slash bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("-._~", c) >= 0 || slash && c == '/' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// assemble opens the members of every configured array and assembles the
// arrays. An array that cannot be assembled is recorded in d.broken, and
// reported as an array-failed event, while the others are served. It
// fails, closing whatever it opened and returning every problem at once,
// when the configuration is strict and an array failed, or when no array
// could be assembled.
func (d *daemon) assemble() error {
	var errs []error
	onEvent := func(e raid.Event) {
		if d.hooks != nil {
			d.hooks.enqueue(e)
		}
		if d.notify != nil {
			d.notify.kick() // the array's state may have changed: STATUS=
		}
	}
	for _, ac := range d.cfg.Arrays {
		a, err := assembleArray(ac, d.cfg.Force, d.cfg.ForceAssemble, d.log, onEvent)
		if err != nil {
			errs = append(errs, fmt.Errorf("array %s: %w", ac.Name, err))
			d.broken = append(d.broken, brokenArray{cfg: ac, err: err})
			continue
		}
		d.arrays = append(d.arrays, &servedArray{cfg: ac, array: a})
		st := a.Status()
		d.log.Info("array started", "array", ac.Name, "export", ac.exportName(), "level", st.Level,
			"size", st.Size, "state", st.State, "read_only", st.ReadOnly)
	}
	switch {
	case len(errs) > 0 && d.cfg.Strict:
		return errors.Join(append(errs, d.closeArrays())...)
	case len(errs) > 0 && len(d.arrays) == 0:
		return errors.Join(append(errs, errors.New("no array could be assembled, so there is nothing to serve"))...)
	}
	for _, b := range d.broken {
		d.log.Error("array not assembled; serving the others (--strict refuses to start instead)", "array", b.cfg.Name, "err", b.err)
		{
			onEvent(raid.Event{Time: time.Now(), Kind: raid.EventFailed, Array: b.cfg.Name, Role: -1, Detail: "not assembled: " + b.err.Error()})
		}
	}
	return nil
}

// assembleArray opens ac's members and assembles the array they form.
// force takes over members whose holder cannot be proven dead (openMember);
// forceAssemble is Options.ForceAssemble. onEvent, if not nil, receives the
// array's events. A member whose path does not exist is left out with a
// warning: the array starts degraded when the level tolerates its absence.
func assembleArray(ac ArrayConfig, force, forceAssemble bool, log *slog.Logger, onEvent func(raid.Event)) (*raid.Array, error) {
	var (
		devs    []raid.Device
		errs    []error
		absents []error
	)
	for _, m := range ac.Members {
		f, err := openMember(m.Path, ac.ReadOnly, ac.Direct, force)
		if errors.Is(err, os.ErrNotExist) {
			log.Warn("member not found; assembling without it", "array", ac.Name, "path", m.Path, "err", err)
			absents = append(absents, err)
			continue
		}
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
	// Assembly writes superblocks, so members of another array are left
	// out before it can touch them: the array starts without them
	// (degraded, if its level allows), as without a member that is gone;
	// a device moved to another array ('raidd remove', then 'raidd add
	// --force' there) is then no reason to leave its old array down.
	// Unreadable superblocks are left to Assemble, whose messages say
	// what to do.
	kept := devs[:0]
	for _, d := range devs {
		m, err := superblock.Read(d.Member)
		if err == nil && m.Name != ac.Name {
			ferr := fmt.Errorf("%s belongs to array %q (uuid %s), not %q; take it out of %q's member list (or fix the array name)",
				d.Path, m.Name, superblock.FormatUUID(m.ArrayUUID), ac.Name, ac.Name)
			log.Warn("member of another array; assembling without it", "array", ac.Name, "path", d.Path, "err", ferr)
			absents = append(absents, ferr)
			_ = d.Member.Close()
			continue
		}
		kept = append(kept, d)
	}
	devs = kept
	for _, d := range devs {
		m, err := superblock.Read(d.Member)
		switch {
		case err != nil:
		case ac.ConsistencyPolicy != "" && raid.ConsistencyPolicyOf(m) != raid.CanonicalConsistencyPolicy(ac.ConsistencyPolicy):
			errs = append(errs, fmt.Errorf("%s: array %q was created with consistency policy %s, and the configuration says %s; the policy is chosen at create time ('raidd create --consistency-policy'): fix consistency_policy or remove it",
				d.Path, ac.Name, raid.ConsistencyPolicyOf(m), ac.ConsistencyPolicy))
		case d.WriteMostly && !hasMirrors(stripe.Level(m.Level)):
			errs = append(errs, fmt.Errorf("%s: write_mostly (--write-mostly) applies to mirrors, and %s is a %s array, which has none; remove the setting (it is only for raid1 and raid10)",
				d.Path, ac.Name, stripe.Level(m.Level)))
		}
	}
	if len(errs) > 0 || len(devs) == 0 {
		closeAll()
		return nil, errors.Join(append(errs, absents...)...)
	}
	a, err := raid.Assemble(devs, raid.Options{
		ReadOnly:         ac.ReadOnly,
		Logger:           log,
		CleanDelay:       ac.CleanDelay,
		KeepZeroes:       ac.KeepZeroes,
		IOWorkers:        ac.IOWorkers,
		RebuildMinRate:   int64(ac.RebuildMinRate),
		RebuildMaxRate:   int64(ac.RebuildMaxRate),
		ScrubInterval:    ac.ScrubInterval,
		ScrubRepair:      ac.ScrubRepair,
		ChecksumCache:    int64(ac.ChecksumCache),
		StripeCache:      ac.stripeCache(),
		StripeCacheDelay: ac.StripeCacheDelay,
		RandomWriteBack:  ac.randomWriteBack(),
		OnEvent:          onEvent,
		ForceAssemble:    forceAssemble,
	})
	if err != nil {
		closeAll()
		return nil, errors.Join(append([]error{err}, absents...)...)
	}
	return a, nil
}

// randomWriteBack returns raid.Options.RandomWriteBack (the value is
// checked by Validate and by the flag's parsing).
func (a ArrayConfig) randomWriteBack() raid.WriteBack {
	w, _ := raid.ParseWriteBack(a.StripeCacheRandomWrites)
	return w
}

// stripeCache returns the stripe cache size for raid.Options.
func (a ArrayConfig) stripeCache() int64 {
	if a.StripeCache == nil {
		return raid.DefaultStripeCache
	}
	return int64(*a.StripeCache)
}

// hasMirrors reports whether a level keeps copies that write_mostly can
// steer reads away from.
func hasMirrors(l stripe.Level) bool { return l == stripe.RAID1 || l == stripe.RAID10 }

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
