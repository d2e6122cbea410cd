package main

import (
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestControlSocketMode: the control socket is 0600 even under umask 000,
// and 0660 with the group of control_group.
func TestControlSocketMode(t *testing.T) {
	e := newEnv(t)
	e.create(t, "m", "1", "a.img", "b.img")
	// umask is per process: no other test of this package runs in parallel.
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })

	stat := func() (os.FileMode, uint32) {
		fi, err := os.Stat(e.control)
		require.NoError(t, err)
		require.Equal(t, os.ModeSocket, fi.Mode().Type())
		return fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Gid
	}

	d := serve(t, e.config(t, "", e.array("m", "", "a.img", "b.img")))
	mode, _ := stat()
	assert.Equal(t, os.FileMode(0o600), mode, "under umask 000 any local user could fail members")
	assert.Equal(t, 0, d.stop(t))
	assert.NoFileExists(t, e.control, "the socket is removed at exit")

	gid := os.Getgid()
	d = serve(t, e.config(t, "control_group: "+strconv.Quote(strconv.Itoa(gid))+"\n", e.array("m", "", "a.img", "b.img")))
	mode, g := stat()
	assert.Equal(t, os.FileMode(0o660), mode)
	assert.EqualValues(t, gid, g)
	// The socket works through its final name.
	assert.Contains(t, httpGet(t, e.control, "/v1/status"), `"name": "m"`)
	assert.Equal(t, 0, d.stop(t))
	entries, err := os.ReadDir(e.dir)
	require.NoError(t, err)
	for _, en := range entries {
		assert.NotRegexp(t, `^\.raidd`, en.Name(), "no temporary directory is left behind")
	}
}

func TestValidateControlGroupAndMetrics(t *testing.T) {
	base := func() *Config {
		return &Config{Listen: []string{defaultListen}, Control: "/run/raidd/raidd.sock", ShutdownTimeout: 1,
			Log: LogConfig{Level: "info", Format: "text"}, Arrays: []ArrayConfig{{Name: "a", Members: []MemberConfig{{Path: "/a"}}}}}
	}
	tests := map[string]struct {
		edit func(c *Config)
		want string // "" for valid
	}{
		"own group by id":       {func(c *Config) { c.ControlGroup = strconv.Itoa(os.Getgid()) }, ""},
		"unknown group":         {func(c *Config) { c.ControlGroup = "no-such-group-raidd" }, "control_group: "},
		"loopback metrics":      {func(c *Config) { c.MetricsListen = "127.0.0.1:9810" }, ""},
		"localhost metrics":     {func(c *Config) { c.MetricsListen = "localhost:9810" }, ""},
		"remote metrics":        {func(c *Config) { c.MetricsListen = "0.0.0.0:9810" }, `metrics_listen: "0.0.0.0:9810" is not a loopback address`},
		"every address metrics": {func(c *Config) { c.MetricsListen = ":9810" }, "needs allow_remote: true"},
		"remote metrics allowed": {func(c *Config) {
			c.MetricsListen, c.AllowRemote = "0.0.0.0:9810", true
		}, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := base()
			tt.edit(c)
			err := c.Validate()
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, errConfig)
			assert.ErrorContains(t, err, tt.want)
		})
	}

	// And through the command line.
	e := newEnv(t)
	code, _, errOut := raidd(t, "serve", "--config", e.config(t, "", e.array("m", "", "a.img")), "--metrics-listen", "0.0.0.0:9810")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "allow_remote")
}
