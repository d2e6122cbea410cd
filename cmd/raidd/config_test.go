package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/nbd"
	"github.com/raidd/raidd/raid"
)

// writeFile writes content to a new file in t's temp dir and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

const fullConfig = `
listen:
  - 127.0.0.1:10809
  - unix:///run/raidd/nbd.sock
  - 0.0.0.0:10810
allow_remote: true
allow_remote_plaintext: true
on_event: logger "$RAIDD_EVENT"
control: /run/raidd/raidd.sock
metrics_listen: 127.0.0.1:9810
shutdown_timeout: 1m
log: {level: debug, format: json}
nbd:
  workers: 8
  max_payload: 16MiB
  max_in_flight: 128MiB
  handshake_timeout: 5s
arrays:
  - name: data
    export: vol0
    description: main volume
    members:
      - /dev/sdb
      - path: /dev/sdc
        write_mostly: true
    read_only: true
    direct: true
    clean_delay: 5s
    keep_zeroes: true
    io_workers: 32
    rebuild_min_rate: 8MiB
    rebuild_max_rate: 100MiB/s
    checksum_cache: 16MiB
    stripe_cache: 16MiB
    stripe_cache_delay: 2ms
  - name: scratch
    members: [/var/lib/raidd/a.img, /var/lib/raidd/b.img]
`

func TestLoadConfigFull(t *testing.T) {
	c, err := loadConfig(newViper(), writeFile(t, "raidd.yaml", fullConfig))
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	want := &Config{
		Listen:               []string{"127.0.0.1:10809", "unix:///run/raidd/nbd.sock", "0.0.0.0:10810"},
		AllowRemote:          true,
		AllowRemotePlaintext: true,
		OnEvent:              `logger "$RAIDD_EVENT"`,
		Control:              "/run/raidd/raidd.sock",
		MetricsListen:        "127.0.0.1:9810",
		ShutdownTimeout:      time.Minute,
		Log:                  LogConfig{Level: "debug", Format: "json"},
		NBD:                  NBDConfig{Workers: 8, MaxPayload: 16 << 20, MaxInFlight: 128 << 20, HandshakeTimeout: 5 * time.Second},
		Arrays: []ArrayConfig{
			{
				Name: "data", Export: "vol0", Description: "main volume",
				Members:  []MemberConfig{{Path: "/dev/sdb"}, {Path: "/dev/sdc", WriteMostly: true}},
				ReadOnly: true, Direct: true, CleanDelay: 5 * time.Second, KeepZeroes: true, IOWorkers: 32,
				RebuildMinRate: 8 << 20, RebuildMaxRate: 100 << 20, ChecksumCache: 16 << 20, StripeCache: ptrTo(byteSize(16 << 20)), StripeCacheDelay: 2 * time.Millisecond,
			},
			{Name: "scratch", Members: []MemberConfig{{Path: "/var/lib/raidd/a.img"}, {Path: "/var/lib/raidd/b.img"}}},
		},
	}
	assert.Equal(t, want, c)
	assert.Equal(t, "vol0", c.Arrays[0].exportName())
	assert.Equal(t, "scratch", c.Arrays[1].exportName())
}

func TestLoadConfigDefaults(t *testing.T) {
	c, err := loadConfig(newViper(), writeFile(t, "raidd.yaml", "arrays: [{name: a, members: [/a, /b]}]\n"))
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	assert.Equal(t, []string{defaultListen}, c.Listen)
	assert.Equal(t, defaultControl, c.Control)
	assert.Equal(t, defaultShutdownTimeout, c.ShutdownTimeout)
	assert.Equal(t, LogConfig{Level: "info", Format: "text"}, c.Log)
	assert.Equal(t, NBDConfig{}, c.NBD, "zero nbd options mean the nbd package's defaults")
}

// The sample shipped for the systemd unit must load and validate, and
// its NBD section, which says "0 or absent means the default shown", must
// show the nbd package's defaults (it once showed max_in_flight at twice
// the default).
func TestSampleConfig(t *testing.T) {
	c, err := loadConfig(newViper(), "../../contrib/systemd/raidd.yaml")
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	n := c.NBD
	assert.EqualValues(t, nbd.DefaultWorkers, n.Workers)
	assert.EqualValues(t, nbd.DefaultMaxPayload, n.MaxPayload)
	assert.EqualValues(t, nbd.DefaultMaxTotalInFlightBytes, n.MaxTotalInFlight)
	assert.EqualValues(t, max(nbd.DefaultMaxPayload, nbd.DefaultMaxTotalInFlightBytes/2), n.MaxInFlight)
	assert.EqualValues(t, nbd.DefaultMaxConnections, n.MaxConnections)
	assert.Equal(t, nbd.DefaultHandshakeTimeout, n.HandshakeTimeout)
	assert.Equal(t, nbd.DefaultIOTimeout, n.IOTimeout)
}

func TestLoadConfigRejectsUnknownKeys(t *testing.T) {
	tests := map[string]struct{ yaml, key string }{
		"top level":    {"listen: [':1']\nlisten_addr: x\n", "listen_addr"},
		"nested":       {"nbd: {workers: 1, worker: 2}\n", "worker"},
		"in an array":  {"arrays: [{name: a, memebrs: [/a]}]\n", "memebrs"},
		"in a member":  {"arrays: [{name: a, members: [{path: /a, writemostly: true}]}]\n", "writemostly"},
		"log":          {"log: {level: info, colour: true}\n", "colour"},
		"wrong type":   {"nbd: {workers: many}\n", "workers"},
		"bad size":     {"nbd: {max_payload: 12 parsecs}\n", "12 parsecs"},
		"bad duration": {"shutdown_timeout: soon\n", "shutdown_timeout"},
		"bad rate":     {"arrays: [{name: a, rebuild_max_rate: fast}]\n", "fast"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig(newViper(), writeFile(t, "raidd.yaml", tt.yaml))
			require.Error(t, err)
			assert.ErrorIs(t, err, errConfig)
			assert.Contains(t, err.Error(), tt.key)
		})
	}
}

// TestUnknownKeySuggestion: a misspelt key is named with its full path
// and the file, with the nearest key of its level, as for the environment
// (TestCheckEnv), or that level's keys when none is near.
func TestUnknownKeySuggestion(t *testing.T) {
	path := writeFile(t, "raidd.yaml", "listne: x\nnbd: {max_payload_size: 1}\nlog: {colour: red}\n"+
		"arrays: [{name: a, memebrs: [/a]}, {name: b, members: [{path: /b, writemostly: true}]}]\n")
	_, err := loadConfig(newViper(), path)
	require.ErrorIs(t, err, errConfig)
	for _, want := range []string{
		"config: " + path + ": unknown key listne; did you mean listen?",
		"config: " + path + ": unknown key nbd.max_payload_size; did you mean nbd.max_payload?",
		"config: " + path + ": unknown key arrays[0].memebrs; did you mean arrays[0].members?",
		"config: " + path + ": unknown key arrays[1].members[0].writemostly; did you mean arrays[1].members[0].write_mostly?",
		"config: " + path + ": unknown key log.colour (keys of log: level, format)",
	} {
		assert.Contains(t, strings.Split(err.Error(), "\n"), want)
	}
	assert.NotContains(t, err.Error(), "''")
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := loadConfig(newViper(), filepath.Join(t.TempDir(), "nope.yaml"))
	assert.ErrorIs(t, err, errConfig)
}

func TestLoadConfigEnvironment(t *testing.T) {
	t.Setenv("RAIDD_LISTEN", "127.0.0.1:1, unix:///tmp/x.sock")
	t.Setenv("RAIDD_CONTROL", "/tmp/c.sock")
	t.Setenv("RAIDD_LOG_LEVEL", "warn")
	t.Setenv("RAIDD_NBD_MAX_PAYLOAD", "8MiB")
	t.Setenv("RAIDD_NBD_WORKERS", "3")
	t.Setenv("RAIDD_SHUTDOWN_TIMEOUT", "7s")
	t.Setenv("RAIDD_ALLOW_REMOTE", "true")
	t.Setenv("RAIDD_ON_EVENT", "true")
	// The environment wins over the file.
	c, err := loadConfig(newViper(), writeFile(t, "raidd.yaml", "control: /file.sock\nlog: {level: debug}\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:1", "unix:///tmp/x.sock"}, c.Listen)
	assert.Equal(t, "/tmp/c.sock", c.Control)
	assert.Equal(t, "warn", c.Log.Level)
	assert.Equal(t, byteSize(8<<20), c.NBD.MaxPayload)
	assert.Equal(t, 3, c.NBD.Workers)
	assert.Equal(t, 7*time.Second, c.ShutdownTimeout)
	assert.True(t, c.AllowRemote)
	assert.Equal(t, "true", c.OnEvent)
}

// TestLoadConfigEnvironmentBadValue: a value of the wrong type from the
// environment is reported with the variable it came from, not only the key.
func TestLoadConfigEnvironmentBadValue(t *testing.T) {
	t.Setenv("RAIDD_NBD_WORKERS", "many")
	_, err := loadConfig(newViper(), "")
	require.ErrorIs(t, err, errConfig)
	assert.Contains(t, err.Error(), "nbd.workers")
	assert.Contains(t, err.Error(), "set by the environment: RAIDD_NBD_WORKERS")
}

func TestServeFlagsWinOverEnvironmentAndFile(t *testing.T) {
	t.Setenv("RAIDD_CONTROL", "/env.sock")
	t.Setenv("RAIDD_LOG_FORMAT", "json")
	path := writeFile(t, "raidd.yaml", "control: /file.sock\nlisten: [/file-nbd.sock]\n")
	c := &cli{stdout: new(strings.Builder), stderr: new(strings.Builder)}
	cmd, _, err := c.rootCmd().Find([]string{"serve"})
	require.NoError(t, err)
	require.NoError(t, cmd.ParseFlags([]string{"--config", path, "--control", "/flag.sock", "--listen", "/a.sock", "--listen", "127.0.0.1:1"}))
	cfg, err := commandConfig(cmd, map[string]string{"control": "control", "listen": "listen", "log-format": "log.format"})
	require.NoError(t, err)
	assert.Equal(t, "/flag.sock", cfg.Control)
	assert.Equal(t, []string{"/a.sock", "127.0.0.1:1"}, cfg.Listen)
	assert.Equal(t, "json", cfg.Log.Format, "an unset flag does not override the environment")
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := &Config{
		Listen:          []string{"nowhere", "ftp://x:1", "unix://relative"},
		Control:         "relative.sock",
		MetricsListen:   "9100",
		ShutdownTimeout: -time.Second,
		Log:             LogConfig{Level: "loud", Format: "xml"},
		NBD:             NBDConfig{Workers: -1, HandshakeTimeout: -1},
		Arrays: []ArrayConfig{
			{Name: "a", Members: []MemberConfig{{Path: "/dev/sdb"}, {Path: ""}, {Path: "rel.img"}}, CleanDelay: -1, IOWorkers: -1},
			{Name: "a", Export: "x", Members: []MemberConfig{{Path: "/dev/sdb/"}}},
			{Name: "b", Export: "x"},
			{},
		},
	}
	err := c.Validate()
	require.Error(t, err)
	assert.ErrorIs(t, err, errConfig)
	for _, want := range []string{
		`"nowhere": want host:port`,
		`"ftp://x:1": unknown scheme`,
		`"unix://relative": unix socket path must be absolute`,
		`control: "relative.sock" is not an absolute path`,
		`metrics_listen: "9100"`,
		`shutdown_timeout: -1s is negative`,
		`log.level: "loud"`,
		`log.format: "xml"`,
		`nbd.workers: -1`,
		`nbd.handshake_timeout`,
		`arrays[0] (a): members[1]: path is empty`,
		`arrays[0] (a): members[2]: "rel.img" is not an absolute path`,
		`arrays[0] (a): clean_delay`,
		`arrays[0] (a): io_workers`,
		`arrays[1] (a): name already used by arrays[0]`,
		`arrays[1] (a): members[0]: /dev/sdb is already a member of arrays[0] (a)`,
		`arrays[2] (b): export name "x" already used by arrays[1]`,
		`arrays[2] (b): members: no member listed`,
		`arrays[3]: name is empty`,
	} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Len(t, strings.Split(err.Error(), "\n"), 20)
	assert.False(t, errors.Is(err, errSize))
}

func TestValidateNoArrays(t *testing.T) {
	c, err := loadConfig(newViper(), "")
	require.NoError(t, err)
	assert.ErrorContains(t, c.Validate(), "arrays: no array configured")
}

func TestParseListen(t *testing.T) {
	tests := []struct{ in, network, addr string }{
		{"127.0.0.1:10809", "tcp", "127.0.0.1:10809"},
		{"localhost:10809", "tcp", "localhost:10809"},
		{":10809", "tcp", ":10809"},
		{"[::1]:10809", "tcp", "[::1]:10809"},
		{"tcp://0.0.0.0:10809", "tcp", "0.0.0.0:10809"},
		{"unix:///run/raidd/nbd.sock", "unix", "/run/raidd/nbd.sock"},
		{"/run/raidd/nbd.sock", "unix", "/run/raidd/nbd.sock"},
		{"unix:/tmp/x.sock", "unix", "/tmp/x.sock"},
		{"unix:x.sock", "unix", "x.sock"},
		{"unix:dir/x.sock", "unix", "dir/x.sock"},
	}
	for _, tt := range tests {
		n, a, err := parseListen(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.network, n, tt.in)
		assert.Equal(t, tt.addr, a, tt.in)
	}
	for in, want := range map[string]string{
		"unix:":           "no unix socket path",
		"unix://x.sock":   "must be absolute",
		"http://x:1":      "unknown scheme",
		"nowhere":         "want host:port",
		"tcp://nowhere":   "want host:port",
		"relative/x.sock": "want host:port",
	} {
		_, _, err := parseListen(in)
		assert.ErrorContains(t, err, want, in)
	}
}

// A TCP address other than loopback needs allow_remote; unix sockets and
// loopback addresses never do.
func TestValidateRemoteListen(t *testing.T) {
	tests := []struct {
		listen string
		remote bool
	}{
		{"127.0.0.1:10809", false},
		{"127.0.0.2:10809", false},
		{"localhost:10809", false},
		{"[::1]:10809", false},
		{"tcp://127.0.0.1:1", false},
		{"unix:/tmp/x.sock", false},
		{"unix:x.sock", false},
		{"unix:///tmp/x.sock", false},
		{"/tmp/x.sock", false},
		{":10809", true},
		{"0.0.0.0:10809", true},
		{"[::]:10809", true},
		{"tcp://192.168.1.10:10809", true},
		{"nbd.example.com:10809", true},
	}
	for _, tt := range tests {
		c := &Config{Listen: []string{tt.listen}, Log: LogConfig{Level: "info", Format: "text"},
			Arrays: []ArrayConfig{{Name: "a", Members: []MemberConfig{{Path: "/a"}}}}}
		err := c.Validate()
		if !tt.remote {
			assert.NoError(t, err, tt.listen)
			continue
		}
		require.Error(t, err, tt.listen)
		assert.Contains(t, err.Error(), "not a loopback address", tt.listen)
		assert.Contains(t, err.Error(), "--allow-remote", tt.listen)
		c.AllowRemote, c.AllowRemotePlaintext = true, true
		assert.NoError(t, c.Validate(), tt.listen)
	}
}

// TestValidateRemoteListenNeedsTLS: a TCP address other than loopback
// needs TLS (on or require) as well as allow_remote, unless
// allow_remote_plaintext says plaintext is intended; loopback and unix
// sockets need neither.
func TestValidateRemoteListenNeedsTLS(t *testing.T) {
	ca, cert, key := tlsFiles(t)
	tlsOn := TLSConfig{Mode: "on", Cert: cert, Key: key}
	tlsRequire := TLSConfig{Mode: "require", Cert: cert, Key: key, CA: ca}
	tests := map[string]struct {
		listen           string
		remote, plain    bool
		tls              TLSConfig
		want, wantAbsent []string // substrings of the error; no want: no error
	}{
		"loopback plaintext":         {listen: "127.0.0.1:10809"},
		"unix plaintext":             {listen: "unix:/tmp/x.sock"},
		"remote, nothing":            {listen: "0.0.0.0:10809", want: []string{`"0.0.0.0:10809" is not a loopback address`, "--allow-remote (allow_remote: true)", "--tls=require", "--allow-remote-plaintext"}},
		"remote, allowed, no TLS":    {listen: "0.0.0.0:10809", remote: true, want: []string{"TLS is off", "--tls=require", "--allow-remote-plaintext (allow_remote_plaintext: true)"}, wantAbsent: []string{"--allow-remote "}},
		"remote, allowed, plain":     {listen: "0.0.0.0:10809", remote: true, plain: true},
		"remote, allowed, TLS on":    {listen: "[::]:10809", remote: true, tls: tlsOn},
		"remote, allowed, require":   {listen: "192.0.2.1:10809", remote: true, tls: tlsRequire},
		"remote, TLS, not allowed":   {listen: "0.0.0.0:10809", tls: tlsRequire, want: []string{"needs --allow-remote"}, wantAbsent: []string{"plaintext", "TLS"}},
		"remote, plain only":         {listen: "0.0.0.0:10809", plain: true, want: []string{"needs --allow-remote"}, wantAbsent: []string{"plaintext"}},
		"remote, TLS explicitly off": {listen: ":10809", remote: true, tls: TLSConfig{Mode: "off"}, want: []string{"TLS is off"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := &Config{Listen: []string{tt.listen}, AllowRemote: tt.remote, AllowRemotePlaintext: tt.plain, TLS: tt.tls,
				Log: LogConfig{Level: "info", Format: "text"}, Arrays: []ArrayConfig{{Name: "a", Members: []MemberConfig{{Path: "/a"}}}}}
			err := c.Validate()
			if len(tt.want) == 0 {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, errConfig)
			for _, w := range tt.want {
				assert.Contains(t, err.Error(), w)
			}
			for _, w := range tt.wantAbsent {
				assert.NotContains(t, err.Error(), w)
			}
		})
	}
}

// TestAllowRemotePlaintextKey: the policy's switch is a flag, a key and a
// variable like every other setting.
func TestAllowRemotePlaintextKey(t *testing.T) {
	file := writeFile(t, "raidd.yaml", "listen: [\"0.0.0.0:10809\"]\nallow_remote: true\narrays: [{name: a, members: [/a]}]\n")
	c, err := loadConfig(newViper(), file)
	require.NoError(t, err)
	require.ErrorContains(t, c.Validate(), "TLS is off")

	file = writeFile(t, "raidd2.yaml", "listen: [\"0.0.0.0:10809\"]\nallow_remote: true\nallow_remote_plaintext: true\narrays: [{name: a, members: [/a]}]\n")
	c, err = loadConfig(newViper(), file)
	require.NoError(t, err)
	assert.True(t, c.AllowRemotePlaintext)
	require.NoError(t, c.Validate())

	t.Setenv("RAIDD_ALLOW_REMOTE_PLAINTEXT", "false")
	c, err = loadConfig(newViper(), file)
	require.NoError(t, err)
	assert.False(t, c.AllowRemotePlaintext, "the environment wins over the file")
}

func TestValidateRebuildRates(t *testing.T) {
	c := &Config{Listen: []string{defaultListen}, Log: LogConfig{Level: "info", Format: "text"},
		Arrays: []ArrayConfig{{Name: "a", Members: []MemberConfig{{Path: "/a"}}, RebuildMinRate: 64 << 20, RebuildMaxRate: 32 << 20}}}
	assert.ErrorContains(t, c.Validate(), "rebuild_min_rate 64MiB/s is above rebuild_max_rate 32MiB/s")
	c.Arrays[0].RebuildMaxRate = 0 // no limit
	assert.NoError(t, c.Validate())
}

func ptrTo[T any](v T) *T { return &v }

// TestStripeCacheConfig: stripe_cache unset means the engine's default, 0
// disables the cache, a size is taken as is, and a negative one is refused.
func TestStripeCacheConfig(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       int64
		bad        string
	}{
		{"unset", "", raid.DefaultStripeCache, ""},
		{"zero disables", "    stripe_cache: 0\n", 0, ""},
		{"size", "    stripe_cache: 8MiB\n", 8 << 20, ""},
		{"negative", "    stripe_cache: -1\n", 0, "stripe_cache: -1 is negative"},
		{"random writes", "    stripe_cache_random_writes: sometimes\n", 0, `stripe_cache_random_writes: "sometimes" is not auto, on or off`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadConfig(newViper(), writeFile(t, "raidd.yaml", "arrays:\n  - name: a\n    members: [/a, /b, /c]\n"+tc.yaml))
			require.NoError(t, err)
			if tc.bad != "" {
				assert.ErrorContains(t, c.Validate(), tc.bad)
				return
			}
			require.NoError(t, c.Validate())
			assert.Equal(t, tc.want, c.Arrays[0].stripeCache())
		})
	}
}

// TestStripeCacheRandomWritesConfig: stripe_cache_random_writes names
// raid.Options.RandomWriteBack's choices; unset means auto.
func TestStripeCacheRandomWritesConfig(t *testing.T) {
	for yaml, want := range map[string]raid.WriteBack{
		"": raid.WriteBackAuto, "auto": raid.WriteBackAuto, "on": raid.WriteBackOn, "off": raid.WriteBackOff,
	} {
		line := ""
		if yaml != "" {
			line = "    stripe_cache_random_writes: " + yaml + "\n"
		}
		c, err := loadConfig(newViper(), writeFile(t, "raidd.yaml", "arrays:\n  - name: a\n    members: [/a, /b, /c]\n"+line))
		require.NoError(t, err)
		require.NoError(t, c.Validate())
		assert.Equal(t, want, c.Arrays[0].randomWriteBack(), "%q", yaml)
	}
}

// durationKeys counts the time.Duration fields of t, nested ones included.
func durationKeys(t reflect.Type) int {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice:
		return durationKeys(t.Elem())
	case reflect.Struct:
		n := 0
		for i := range t.NumField() {
			if f := t.Field(i); f.Type == reflect.TypeFor[time.Duration]() {
				n++
			} else {
				n += durationKeys(t.Field(i).Type)
			}
		}
		return n
	}
	return 0
}

// TestDurationNeedsUnit: a duration given as a bare number other than 0,
// in the file, the environment or a flag, is refused with the unit to
// write, never taken as nanoseconds (shutdown_timeout: 30 was 30ns).
func TestDurationNeedsUnit(t *testing.T) {
	const hint = `"30" has no unit; write 30s (units: ms, s, m, h)`
	keys := map[string]string{ // key: YAML setting it to %s
		"shutdown_timeout":      "shutdown_timeout: %s\n",
		"nbd.handshake_timeout": "nbd: {handshake_timeout: %s}\n",
		"nbd.idle_timeout":      "nbd: {idle_timeout: %s}\n",
		"nbd.io_timeout":        "nbd: {io_timeout: %s}\n",
		"clean_delay":           "arrays: [{name: a, members: [/a], clean_delay: %s}]\n",
		"scrub_interval":        "arrays: [{name: a, members: [/a], scrub_interval: %s}]\n",
		"stripe_cache_delay":    "arrays: [{name: a, members: [/a], stripe_cache_delay: %s}]\n",
	}
	require.Equal(t, durationKeys(reflect.TypeFor[Config]()), len(keys), "every duration key is tested")
	for key, yaml := range keys {
		for _, bad := range []string{"30", `"30"`} {
			_, err := loadConfig(newViper(), writeFile(t, "raidd.yaml", fmt.Sprintf(yaml, bad)))
			require.ErrorIs(t, err, errConfig, "%s: %s", key, bad)
			assert.ErrorContains(t, err, key, bad)
			assert.ErrorContains(t, err, hint, "%s: %s", key, bad)
		}
		for _, ok := range []string{"0", "0.0", `"0"`, "30s", "1m30s"} {
			_, err := loadConfig(newViper(), writeFile(t, "raidd.yaml", fmt.Sprintf(yaml, ok)))
			assert.NoError(t, err, "%s: %s", key, ok)
		}
	}
	_, err := loadConfig(newViper(), writeFile(t, "raidd.yaml", "shutdown_timeout: 1.5\n"))
	assert.ErrorContains(t, err, `"1.5" has no unit; write 1.5s`)

	t.Setenv("RAIDD_SHUTDOWN_TIMEOUT", "30")
	_, err = loadConfig(newViper(), "")
	assert.ErrorContains(t, err, hint)
	assert.ErrorContains(t, err, "set by the environment: RAIDD_SHUTDOWN_TIMEOUT")
	require.NoError(t, os.Unsetenv("RAIDD_SHUTDOWN_TIMEOUT")) // t.Setenv restores it

	for flag, cmd := range map[string]string{
		"io-timeout": "serve", "idle-timeout": "serve", "stripe-cache-delay": "serve", "interval": "status",
	} {
		code, _, errOut := raidd(t, cmd, "--"+flag, "30")
		assert.Equal(t, exitUsage, code, flag)
		assert.Contains(t, errOut, fmt.Sprintf(`for "--%s" flag: %s`, flag, hint), flag)
	}
}
