package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/raidd/raidd/raid"
)

// errConfig is wrapped by every configuration problem.
var errConfig = errors.New("config")

// Config is the whole configuration of raidd serve. Keys are snake_case in
// YAML; nested keys map to environment variables with the RAIDD_ prefix and
// dots turned into underscores (nbd.max_payload is RAIDD_NBD_MAX_PAYLOAD).
type Config struct {
	// Listen lists the NBD listen addresses: "host:port" or "tcp://host:port"
	// for TCP; "unix:///path", "unix:PATH" (PATH may be relative) or an
	// absolute path for a unix socket.
	Listen []string `mapstructure:"listen"`
	// AllowRemote permits NBD listen addresses that are not loopback. NBD
	// has no authentication, so this is an explicit choice.
	AllowRemote bool `mapstructure:"allow_remote"`
	// AllowRemotePlaintext permits a listen address that is not loopback
	// while TLS is off (tls.mode off). Without it such an address needs
	// tls.mode on or require, so that data and exports do not cross the
	// network in clear by default. It does not replace AllowRemote.
	AllowRemotePlaintext bool `mapstructure:"allow_remote_plaintext"`
	// Control is the unix socket of the control API used by raidd status
	// and raidd check, and serving /metrics; empty disables it. It is
	// created with mode 0600 whatever the umask: whoever can connect can
	// fail members.
	Control string `mapstructure:"control"`
	// ControlGroup, a group name or id, makes the control socket 0660 and
	// owned by that group, so its members may run raidd status, fail, ...
	ControlGroup string `mapstructure:"control_group"`
	// MetricsListen is an optional TCP address serving /metrics only. The
	// metrics name arrays and member paths, so an address that is not
	// loopback needs AllowRemote.
	MetricsListen string `mapstructure:"metrics_listen"`
	// Force (the serve flag --force; never read from the file or the
	// environment) takes over members whose in-use block names a raidd that
	// cannot be proven dead: one on another host whose heartbeat is fresh.
	Force bool `mapstructure:"-"`
	// Strict makes serve refuse to start when any configured array cannot
	// be assembled; by default it serves the others and reports that one
	// as failed.
	Strict bool `mapstructure:"strict"`
	// ForceAssemble starts arrays that lost more members than they
	// tolerate by trusting the freshest left-out members (serve
	// --force-assemble, mdadm --assemble --force). It is a flag only, never
	// a configuration key: forcing must be a decision made once.
	ForceAssemble bool `mapstructure:"-"`
	// ShutdownTimeout bounds how long a graceful stop waits for NBD requests
	// in flight before closing connections.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// OnEvent is a shell command run (with /bin/sh -c) for every array
	// event, with RAIDD_EVENT, RAIDD_ARRAY, RAIDD_ROLE, RAIDD_MEMBER,
	// RAIDD_DETAIL and RAIDD_TIME in its environment; empty runs nothing.
	OnEvent string        `mapstructure:"on_event"`
	Log     LogConfig     `mapstructure:"log"`
	NBD     NBDConfig     `mapstructure:"nbd"`
	TLS     TLSConfig     `mapstructure:"tls"`
	Arrays  []ArrayConfig `mapstructure:"arrays"`
}

// LogConfig selects the log level and format.
type LogConfig struct {
	Level  string `mapstructure:"level"`  // debug, info, warn, error
	Format string `mapstructure:"format"` // text or json
}

// NBDConfig maps onto nbd.Options; zero means the nbd package's default.
type NBDConfig struct {
	Workers          int           `mapstructure:"workers"`
	MaxPayload       byteSize      `mapstructure:"max_payload"`
	MaxInFlight      byteSize      `mapstructure:"max_in_flight"`
	HandshakeTimeout time.Duration `mapstructure:"handshake_timeout"`
	// The resource bounds: MaxTotalInFlightBytes, MaxConnections,
	// IdleTimeout (zero: none) and IOTimeout.
	MaxTotalInFlight byteSize      `mapstructure:"max_total_in_flight"`
	MaxConnections   int           `mapstructure:"max_connections"`
	IdleTimeout      time.Duration `mapstructure:"idle_timeout"`
	IOTimeout        time.Duration `mapstructure:"io_timeout"`
}

// nbdLimitFlags adds the serve flags for the NBD resource bounds and
// returns their bindings to configuration keys.
func nbdLimitFlags(fs *pflag.FlagSet) map[string]string {
	fs.Int("max-connections", 0, "most NBD `connections` open at once; more are refused (default 128)")
	fs.String("max-total-in-flight", "", "NBD request payload `size` buffered across all connections, e.g. 64MiB (default 64MiB)")
	durationFlag(fs, "idle-timeout", 0, "close an NBD connection with nothing in flight that sends no request for this `duration` (default none)")
	durationFlag(fs, "io-timeout", 0, "drop an NBD client that does not send a WRITE payload or take a reply within this `duration` (default 30s)")
	return map[string]string{
		"max-connections": "nbd.max_connections", "max-total-in-flight": "nbd.max_total_in_flight",
		"idle-timeout": "nbd.idle_timeout", "io-timeout": "nbd.io_timeout",
	}
}

// ArrayConfig is one array to assemble and export.
type ArrayConfig struct {
	// Name is the array name recorded in the superblocks; assembly refuses
	// members whose superblock names another array.
	Name string `mapstructure:"name"`
	// Export is the NBD export name; default Name.
	Export      string `mapstructure:"export"`
	Description string `mapstructure:"description"`
	// Members lists the member devices: a path, or {path, write_mostly}.
	Members  []MemberConfig `mapstructure:"members"`
	ReadOnly bool           `mapstructure:"read_only"`
	// Direct opens the members with O_DIRECT.
	Direct bool `mapstructure:"direct"`
	// CleanDelay, KeepZeroes and IOWorkers map onto raid.Options.
	CleanDelay time.Duration `mapstructure:"clean_delay"`
	KeepZeroes bool          `mapstructure:"keep_zeroes"`
	IOWorkers  int           `mapstructure:"io_workers"`
	// RebuildMinRate and RebuildMaxRate (bytes per second per member) map
	// onto raid.Options; 0 means the engine's defaults.
	RebuildMinRate byteRate `mapstructure:"rebuild_min_rate"`
	RebuildMaxRate byteRate `mapstructure:"rebuild_max_rate"`
	// ScrubInterval starts a scrub (raidd check) that long after the last
	// one finished, as the superblocks record it (720h is monthly, as
	// Debian's checkarray); 0, the default, disables the schedule.
	// ScrubRepair makes scheduled scrubs repair what they find.
	ScrubInterval time.Duration `mapstructure:"scrub_interval"`
	ScrubRepair   bool          `mapstructure:"scrub_repair"`
	// ChecksumCache bounds the memory for checksum pages of an array
	// created with --checksums (raid.Options.ChecksumCache); 0 means 64MiB.
	ChecksumCache byteSize `mapstructure:"checksum_cache"`
	// StripeCache bounds the memory of a RAID5 or RAID6 array's stripe
	// cache (raid.Options.StripeCache); unset means 64MiB
	// (raid.DefaultStripeCache), 0 disables it. Other levels have none.
	StripeCache *byteSize `mapstructure:"stripe_cache"`
	// StripeCacheDelay is how long a partial stripe may stay cached
	// (raid.Options.StripeCacheDelay); 0 means 5ms.
	StripeCacheDelay time.Duration `mapstructure:"stripe_cache_delay"`
	// StripeCacheRandomWrites says whether the stripe cache also holds
	// random partial-stripe writes (raid.Options.RandomWriteBack): auto
	// (unset: when the array keeps the write-hole log on members not held
	// in memory), on or off.
	StripeCacheRandomWrites string `mapstructure:"stripe_cache_random_writes"`
	// ConsistencyPolicy, when set, is what the superblocks must say keeps
	// the array consistent across a crash (ppl, bitmap, resync or none;
	// journal, the name an earlier raidd used, means ppl); it is chosen at create time (create --consistency-policy),
	// so a mismatch refuses to serve the array rather than silently
	// running without the protection the configuration expects.
	ConsistencyPolicy string `mapstructure:"consistency_policy"`
}

// MemberConfig is one member device. In YAML it is either a plain path or a
// mapping with path and write_mostly.
type MemberConfig struct {
	Path        string `mapstructure:"path"`
	WriteMostly bool   `mapstructure:"write_mostly"`
}

// byteSize is a size in bytes that the configuration may spell "64MiB".
type byteSize int64

// byteRate is bytes per second, spelled like a size with an optional
// "/s": "16MiB" or "16MiB/s".
type byteRate int64

// parseRate parses a byteRate.
func parseRate(s string) (int64, error) {
	return parseSize(strings.TrimSuffix(strings.TrimSpace(s), "/s"))
}

// Defaults. The control socket lives in /run/raidd, which the systemd unit
// creates with RuntimeDirectory=raidd.
const (
	defaultListen          = "127.0.0.1:10809"
	defaultControl         = "/run/raidd/raidd.sock"
	defaultShutdownTimeout = 30 * time.Second
)

// scalarDefaults are the keys viper knows before any file is read. Listing
// every scalar key here is also what lets AutomaticEnv find RAIDD_* for
// keys the file does not mention.
var scalarDefaults = map[string]any{
	"listen":                  []string{defaultListen},
	"allow_remote":            false,
	"allow_remote_plaintext":  false,
	"on_event":                "",
	"control":                 defaultControl,
	"control_group":           "",
	"metrics_listen":          "",
	"strict":                  false,
	"shutdown_timeout":        defaultShutdownTimeout,
	"log.level":               "info",
	"log.format":              "text",
	"nbd.workers":             0,
	"nbd.max_payload":         "0",
	"nbd.max_in_flight":       "0",
	"nbd.handshake_timeout":   time.Duration(0),
	"nbd.max_total_in_flight": "0",
	"nbd.max_connections":     0,
	"nbd.idle_timeout":        time.Duration(0),
	"nbd.io_timeout":          time.Duration(0),
	"tls.mode":                "",
	"tls.cert":                "",
	"tls.key":                 "",
	"tls.ca":                  "",
}

// newViper returns a fresh, non-global viper with the defaults and the
// RAIDD_ environment bound.
func newViper() *viper.Viper {
	v := viper.New()
	for k, d := range scalarDefaults {
		v.SetDefault(k, d)
	}
	v.SetEnvPrefix("RAIDD")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	return v
}

// bindFlags binds command-line flags to configuration keys: flags win over
// the environment, which wins over the file.
func bindFlags(v *viper.Viper, fs *pflag.FlagSet, keys map[string]string) error {
	for flag, key := range keys {
		f := fs.Lookup(flag)
		if f == nil {
			panic("raidd: unknown flag " + flag) // a programming error, not input
		}
		if err := v.BindPFlag(key, f); err != nil {
			return err
		}
	}
	return nil
}

// configPath returns the file named by --config, else by RAIDD_CONFIG, else
// "". Commands without a --config flag read no file.
func configPath(fs *pflag.FlagSet) string {
	f := fs.Lookup("config")
	switch {
	case f == nil:
		return ""
	case f.Value.String() != "":
		return f.Value.String()
	}
	return os.Getenv(envConfig)
}

// loadConfig reads the YAML file at path (if any) into v and decodes
// everything into a Config. Unknown keys are an error, so that a typo does
// not silently fall back to a default. It does not validate the result.
func loadConfig(v *viper.Viper, path string) (*Config, error) {
	if path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("%w: read %s: %w", errConfig, path, err)
		}
	}
	var c Config
	hook := mapstructure.ComposeDecodeHookFunc(
		toDuration,
		stringToByteSize,
		stringToByteRate,
		stringToMember,
		splitList,
	)
	if err := v.UnmarshalExact(&c, viper.DecodeHook(hook)); err != nil {
		where := "configuration"
		if path != "" {
			where = path
		}
		var errs []error
		for _, p := range decodeProblems(err) {
			errs = append(errs, fmt.Errorf("%w: %s: %s", errConfig, where, p))
		}
		if len(errs) == 0 {
			return nil, fmt.Errorf("%w: %s: %w", errConfig, where, err)
		}
		return nil, errors.Join(errs...)
	}
	return &c, nil
}

// decodeProblems flattens a decoding error into one line per problem, each
// naming its key by the full path (nbd.max_payload, arrays[0].clean_delay):
// mapstructure names a misspelt key's parent instead (an empty name at the
// top level) and suggests nothing.
func decodeProblems(err error) []string {
	var de *mapstructure.DecodeError
	switch e := err.(type) {
	case interface{ Unwrap() []error }:
		var out []string
		for _, e := range e.Unwrap() {
			out = append(out, decodeProblems(e)...)
		}
		return out
	case *mapstructure.DecodeError:
		inner := e.Unwrap()
		if _, joined := inner.(interface{ Unwrap() []error }); joined || errors.As(inner, &de) {
			return decodeProblems(inner)
		}
		if keys, ok := strings.CutPrefix(inner.Error(), "has invalid keys: "); ok {
			var out []string
			for _, k := range strings.Split(keys, ", ") {
				out = append(out, unknownKey(e.Name(), k))
			}
			return out
		}
		return []string{e.Name() + ": " + inner.Error() + envSource(e.Name())}
	}
	// "decoding failed due to the following error(s)" around the problems.
	if inner := errors.Unwrap(err); inner != nil && errors.As(inner, &de) {
		return decodeProblems(inner)
	}
	return []string{err.Error()}
}

// listIndex is a list index in a decoding error's key (arrays[0]).
var listIndex = regexp.MustCompile(`\[[0-9]+\]`)

// unknownKey describes key, a key under parent that no setting has, with
// the nearest known key there (as checkEnv does for the environment) or,
// when none is near, the keys that parent takes.
func unknownKey(parent, key string) string {
	msg := "unknown key " + joinKey(parent, key)
	known := configKeys(reflect.TypeFor[Config](), listIndex.ReplaceAllString(parent, ""))
	if near := nearest(key, known); near != "" {
		return msg + "; did you mean " + joinKey(parent, near) + "?"
	}
	if parent == "" {
		return msg + " (keys: " + strings.Join(known, ", ") + ")"
	}
	return msg + " (keys of " + parent + ": " + strings.Join(known, ", ") + ")"
}

// joinKey names key under parent ("" is the top level).
func joinKey(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}

// configKeys returns the keys of the configuration struct t (Config, or
// one inside it) at path, a dotted key path without list indexes ("",
// "nbd", "arrays.members").
func configKeys(t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	head, rest, _ := strings.Cut(path, ".")
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		key := f.Tag.Get("mapstructure")
		switch {
		case key == "" || key == "-":
		case path == "":
			keys = append(keys, key)
		case key == head:
			return configKeys(f.Type, rest)
		}
	}
	return keys
}

// envSource names the environment variable that set key, if it is set, as
// " (set by the environment: RAIDD_...)": a decoding error names the key,
// nbd.workers, and not the variable the bad value came from,
// RAIDD_NBD_WORKERS.
func envSource(key string) string {
	env := envPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
	if _, ok := os.LookupEnv(env); !ok {
		return ""
	}
	return " (set by the environment: " + env + ")"
}

// bareNumber matches a number without a unit: "30", "-1", "1.5".
var bareNumber = regexp.MustCompile(`^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)$`)

// noUnitError refuses a duration given as a bare number other than 0:
// time.Duration would take it as nanoseconds, and shutdown_timeout: 30
// means 30s far more often than 30ns.
type noUnitError string

func (e noUnitError) Error() string {
	return fmt.Sprintf("%q has no unit; write %ss (units: ms, s, m, h)", string(e), string(e))
}

// parseDuration parses a duration as time.ParseDuration does ("1m30s"),
// refusing a bare number other than 0 (noUnitError).
func parseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if bareNumber.MatchString(t) {
		if f, err := strconv.ParseFloat(t, 64); err == nil && f == 0 {
			return 0, nil
		}
		return 0, noUnitError(t)
	}
	return time.ParseDuration(t)
}

// toDuration decodes a duration key: a string with units, parsed by
// parseDuration, or a YAML number, which must be 0 (shutdown_timeout: 30
// is refused, not taken as 30ns).
func toDuration(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[time.Duration]() || from == to {
		return data, nil
	}
	switch from.Kind() {
	case reflect.String:
		return parseDuration(data.(string))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return parseDuration(fmt.Sprint(data))
	}
	return data, nil
}

// durationValue is a duration flag that refuses a bare number as the
// configuration keys do (parseDuration). Its type is "duration", like
// pflag's own, so viper reads a bound one the same way.
type durationValue time.Duration

func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

// String spells zero "0", so that help shows no "(default 0s)".
func (d *durationValue) String() string {
	if *d == 0 {
		return "0"
	}
	return time.Duration(*d).String()
}

func (d *durationValue) Type() string { return "duration" }

// durationFlag is fs.Duration with durationValue's refusal of a bare
// number: --io-timeout 30 is an error that suggests 30s.
func durationFlag(fs *pflag.FlagSet, name string, value time.Duration, usage string) *time.Duration {
	p := &value
	fs.Var((*durationValue)(p), name, usage)
	return p
}

// stringToByteSize decodes "64MiB" (or a plain number) into a byteSize.
func stringToByteSize(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[byteSize]() || from.Kind() != reflect.String {
		return data, nil
	}
	n, err := parseSize(data.(string))
	return byteSize(n), err
}

// stringToByteRate decodes "16MiB" or "16MiB/s" into a byteRate.
func stringToByteRate(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[byteRate]() || from.Kind() != reflect.String {
		return data, nil
	}
	n, err := parseRate(data.(string))
	return byteRate(n), err
}

// stringToMember lets a member be written as a bare path.
func stringToMember(from, to reflect.Type, data any) (any, error) {
	if to != reflect.TypeFor[MemberConfig]() || from.Kind() != reflect.String {
		return data, nil
	}
	return MemberConfig{Path: data.(string)}, nil
}

// splitList turns "a,b" (from the environment or a flag) into a list.
// A list of strings (listen) is also split at white space, so that
// RAIDD_LISTEN="127.0.0.1:10809 /run/raidd/nbd.sock" is two addresses,
// never one unix socket path with a space in it.
func splitList(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to.Kind() != reflect.Slice {
		return data, nil
	}
	s := strings.TrimSpace(data.(string))
	if s == "" {
		return []string{}, nil
	}
	if to.Elem().Kind() == reflect.String {
		return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }), nil
	}
	parts := strings.Split(s, ",")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts, nil
}

// exportName returns the NBD export name of a.
func (a *ArrayConfig) exportName() string {
	if a.Export != "" {
		return a.Export
	}
	return a.Name
}

// Validate reports every problem of a serve configuration at once, before
// any device is opened. Problems the nbd and raid packages check themselves
// (payload bounds and the like) are reported by them at startup.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{errConfig}, args...)...))
	}
	if len(c.Listen) == 0 {
		bad("listen: no NBD listen address")
	}
	for _, l := range c.Listen {
		network, addr, err := parseListen(l)
		switch {
		case err != nil:
			bad("listen: %v", err)
		case network == "tcp" && !isLoopback(addr):
			if err := c.remoteListenPolicy(l); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if c.Control != "" && !filepath.IsAbs(c.Control) {
		bad("control: %q is not an absolute path (a relative one is taken from --control or RAIDD_CONTROL only)", c.Control)
	}
	if c.ControlGroup != "" {
		if _, err := lookupGroup(c.ControlGroup); err != nil {
			bad("control_group: %v", err)
		}
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			bad("metrics_listen: %q is not host:port", c.MetricsListen)
		} else if !c.AllowRemote && !isLoopback(c.MetricsListen) {
			errs = append(errs, policyError{fmt.Errorf("%w: metrics_listen: %q is not a loopback address; /metrics names the arrays and member paths to anyone who connects, so serving it there needs allow_remote: true (--allow-remote)", errConfig, c.MetricsListen)})
		}
	}
	if c.ShutdownTimeout < 0 {
		bad("shutdown_timeout: %v is negative", c.ShutdownTimeout)
	}
	if _, err := parseLevel(c.Log.Level); err != nil {
		bad("log.level: %v", err)
	}
	if f := c.Log.Format; f != "text" && f != "json" {
		bad("log.format: %q is not text or json", f)
	}
	if c.NBD.Workers < 0 {
		bad("nbd.workers: %d is negative", c.NBD.Workers)
	}
	if c.NBD.HandshakeTimeout < 0 {
		bad("nbd.handshake_timeout: %v is negative", c.NBD.HandshakeTimeout)
	}
	if c.NBD.MaxConnections < 0 {
		bad("nbd.max_connections: %d is negative", c.NBD.MaxConnections)
	}
	if c.NBD.IdleTimeout < 0 {
		bad("nbd.idle_timeout: %v is negative", c.NBD.IdleTimeout)
	}
	if c.NBD.IOTimeout < 0 {
		bad("nbd.io_timeout: %v is negative", c.NBD.IOTimeout)
	}
	if _, _, err := c.TLS.server(); err != nil {
		errs = append(errs, err)
	}
	if len(c.Arrays) == 0 {
		bad("arrays: no array configured")
	}
	names, exports, paths := map[string]int{}, map[string]int{}, map[string]string{}
	for i, a := range c.Arrays {
		where := fmt.Sprintf("arrays[%d]", i)
		if a.Name == "" {
			bad("%s: name is empty", where)
		} else {
			where = fmt.Sprintf("arrays[%d] (%s)", i, a.Name)
			if j, dup := names[a.Name]; dup {
				bad("%s: name already used by arrays[%d]", where, j)
			}
			names[a.Name] = i
		}
		if e := a.exportName(); e != "" {
			if j, dup := exports[e]; dup {
				bad("%s: export name %q already used by arrays[%d]", where, e, j)
			}
			exports[e] = i
		}
		if len(a.Members) == 0 {
			bad("%s: members: no member listed", where)
		}
		for j, m := range a.Members {
			switch {
			case m.Path == "":
				bad("%s: members[%d]: path is empty", where, j)
			case !filepath.IsAbs(m.Path):
				bad("%s: members[%d]: %q is not an absolute path", where, j, m.Path)
			default:
				p := filepath.Clean(m.Path)
				if other, dup := paths[p]; dup {
					bad("%s: members[%d]: %s is already a member of %s", where, j, p, other)
				}
				paths[p] = where
			}
		}
		if a.CleanDelay < 0 {
			bad("%s: clean_delay: %v is negative", where, a.CleanDelay)
		}
		if a.IOWorkers < 0 {
			bad("%s: io_workers: %d is negative", where, a.IOWorkers)
		}
		if a.ScrubInterval < 0 {
			bad("%s: scrub_interval: %v is negative (0 disables the schedule)", where, a.ScrubInterval)
		}
		if a.ChecksumCache < 0 {
			bad("%s: checksum_cache: %d is negative", where, a.ChecksumCache)
		}
		if a.StripeCache != nil && *a.StripeCache < 0 {
			bad("%s: stripe_cache: %d is negative (0 disables the cache)", where, int64(*a.StripeCache))
		}
		if a.StripeCacheDelay < 0 {
			bad("%s: stripe_cache_delay: %v is negative", where, a.StripeCacheDelay)
		}
		if _, err := raid.ParseWriteBack(a.StripeCacheRandomWrites); err != nil {
			bad("%s: stripe_cache_random_writes: %q is not auto, on or off", where, a.StripeCacheRandomWrites)
		}
		if a.RebuildMaxRate > 0 && a.RebuildMinRate > a.RebuildMaxRate {
			bad("%s: rebuild_min_rate %s/s is above rebuild_max_rate %s/s", where, formatSize(int64(a.RebuildMinRate)), formatSize(int64(a.RebuildMaxRate)))
		}
		switch a.ConsistencyPolicy {
		case "", "ppl", "journal", "bitmap", "resync", "none":
		default:
			if _, err := raid.ParseConsistencyPolicy(a.ConsistencyPolicy); err != nil {
				bad("%s: consistency_policy: %v", where, err)
			}
		}
	}
	return errors.Join(errs...)
}

// remoteListenPolicy says whether NBD may listen on addr, a TCP address
// that is not loopback: it needs allow_remote, since NBD has no
// authentication of its own, and TLS (tls.mode on or require) unless
// allow_remote_plaintext says plaintext on the network is intended. The
// error names the flags that allow it.
func (c *Config) remoteListenPolicy(addr string) error {
	if err := c.remoteListenRule(addr); err != nil {
		return policyError{err}
	}
	return nil
}

// policyError is a configuration refused by a safety policy (a valid
// value, not allowed as given): it keeps exit code 1 even when a flag set
// the value (flagValueError).
type policyError struct{ error }

func (e policyError) Unwrap() error { return e.error }

func (c *Config) remoteListenRule(addr string) error {
	tlsOff := c.TLS.Mode == "" || strings.EqualFold(c.TLS.Mode, "off")
	switch {
	case !c.AllowRemote && tlsOff && !c.AllowRemotePlaintext:
		return fmt.Errorf("%w: listen: %q is not a loopback address; NBD has no authentication, so listening on it needs --allow-remote (allow_remote: true), and TLS: --tls=require with --tls-cert, --tls-key and --tls-ca (tls.mode: require), or --allow-remote-plaintext (allow_remote_plaintext: true) to serve it unencrypted", errConfig, addr)
	case !c.AllowRemote:
		return fmt.Errorf("%w: listen: %q is not a loopback address; NBD has no authentication, so listening on it needs --allow-remote (allow_remote: true)", errConfig, addr)
	case tlsOff && !c.AllowRemotePlaintext:
		return fmt.Errorf("%w: listen: %q is not a loopback address and TLS is off, so clients' data would cross the network unencrypted; use --tls=require with --tls-cert, --tls-key and --tls-ca (tls.mode: require), or pass --allow-remote-plaintext (allow_remote_plaintext: true) to serve it in plaintext anyway", errConfig, addr)
	}
	return nil
}

// parseLevel maps a log level name to a slog.Level.
func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
	}
	return l, nil
}

// parseListen splits a listen address into a network and an address. A
// unix socket path given as "unix:PATH" may be relative (to the working
// directory); "unix://" must be followed by an absolute path, as in a URL.
func parseListen(s string) (network, addr string, err error) {
	if strings.ContainsFunc(s, unicode.IsSpace) {
		return "", "", fmt.Errorf("%q contains white space: give each address on its own (--listen A --listen B, or \"A,B\")", s)
	}
	switch {
	case strings.HasPrefix(s, "unix://"):
		network, addr = "unix", strings.TrimPrefix(s, "unix://")
		if !filepath.IsAbs(addr) {
			return "", "", fmt.Errorf("%q: unix socket path must be absolute (unix:///path, or unix:PATH for a relative one)", s)
		}
	case strings.HasPrefix(s, "unix:"):
		network, addr = "unix", strings.TrimPrefix(s, "unix:")
		if addr == "" {
			return "", "", fmt.Errorf("%q: no unix socket path", s)
		}
	case strings.HasPrefix(s, "/"):
		network, addr = "unix", s
	case strings.HasPrefix(s, "tcp://"):
		network, addr = "tcp", strings.TrimPrefix(s, "tcp://")
	case strings.Contains(s, "://"):
		return "", "", fmt.Errorf("%q: unknown scheme (want tcp:// or unix:)", s)
	default:
		network, addr = "tcp", s
	}
	if network == "tcp" {
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return "", "", fmt.Errorf("%q: want host:port (use [::]:10809 or :10809 for every address)", s)
		}
	}
	return network, addr, nil
}

// isLoopback reports whether a TCP listen address (host:port) only
// accepts connections from this host: localhost or a loopback IP. An
// empty host or an unspecified IP (":10809", "0.0.0.0", "[::]") listens
// on every address; other host names are not resolved and count as remote.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
