package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The NBD resource bounds (issue 7) come from the file, the environment
// and serve's flags, in the usual order of precedence.
func TestNBDLimitKeys(t *testing.T) {
	file := writeFile(t, "raidd.yaml", `
nbd:
  max_total_in_flight: 48MiB
  max_connections: 10
  idle_timeout: 5m
  io_timeout: 1m
arrays: [{name: a, members: [/a, /b]}]
`)
	c, err := loadConfig(newViper(), file)
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	assert.Equal(t, NBDConfig{MaxTotalInFlight: 48 << 20, MaxConnections: 10, IdleTimeout: 5 * time.Minute, IOTimeout: time.Minute}, c.NBD)

	t.Setenv("RAIDD_NBD_MAX_CONNECTIONS", "20")
	t.Setenv("RAIDD_NBD_MAX_TOTAL_IN_FLIGHT", "96MiB")
	t.Setenv("RAIDD_NBD_IDLE_TIMEOUT", "10m")
	t.Setenv("RAIDD_NBD_IO_TIMEOUT", "2m")
	c, err = loadConfig(newViper(), file)
	require.NoError(t, err)
	assert.Equal(t, NBDConfig{MaxTotalInFlight: 96 << 20, MaxConnections: 20, IdleTimeout: 10 * time.Minute, IOTimeout: 2 * time.Minute}, c.NBD,
		"the environment wins over the file")

	cl := &cli{stdout: new(strings.Builder), stderr: new(strings.Builder)}
	cmd, _, err := cl.rootCmd().Find([]string{"serve"})
	require.NoError(t, err)
	require.NoError(t, cmd.ParseFlags([]string{"--config", file, "--max-connections", "30", "--max-total-in-flight", "128MiB",
		"--idle-timeout", "1h", "--io-timeout", "45s"}))
	c, err = commandConfig(cmd, nbdLimitFlags(pflag.NewFlagSet("keys", pflag.ContinueOnError)))
	require.NoError(t, err)
	assert.Equal(t, NBDConfig{MaxTotalInFlight: 128 << 20, MaxConnections: 30, IdleTimeout: time.Hour, IOTimeout: 45 * time.Second}, c.NBD,
		"flags win over the environment")
}

func TestNBDLimitKeysValidate(t *testing.T) {
	c := &Config{
		Listen: []string{defaultListen}, Log: LogConfig{Level: "info", Format: "text"},
		NBD:    NBDConfig{MaxConnections: -1, IdleTimeout: -time.Second, IOTimeout: -time.Second},
		Arrays: []ArrayConfig{{Name: "a", Members: []MemberConfig{{Path: "/a"}}}},
	}
	err := c.Validate()
	require.Error(t, err)
	for _, want := range []string{"nbd.max_connections: -1 is negative", "nbd.idle_timeout: -1s is negative", "nbd.io_timeout: -1s is negative"} {
		assert.Contains(t, err.Error(), want)
	}
	_, err = loadConfig(newViper(), writeFile(t, "raidd.yaml", "nbd: {max_total_in_flight: lots}\n"))
	assert.ErrorIs(t, err, errConfig)
}
