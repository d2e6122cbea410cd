package main

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/internal/tlstest"
	"github.com/raidd/raidd/nbd"
)

// tlsFiles writes a CA, a server certificate and key signed by it, and
// returns their paths.
func tlsFiles(t *testing.T) (ca, cert, key string) {
	t.Helper()
	dir := t.TempDir()
	c, err := tlstest.NewCA("test CA")
	require.NoError(t, err)
	leaf, err := c.Issue("server")
	require.NoError(t, err)
	ca, cert, key = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, c.WriteCert(ca))
	require.NoError(t, leaf.Write(cert, key))
	return ca, cert, key
}

func TestTLSKeys(t *testing.T) {
	ca, cert, key := tlsFiles(t)
	file := writeFile(t, "raidd.yaml", "tls: {mode: on, cert: "+cert+", key: "+key+"}\narrays: [{name: a, members: [/a, /b]}]\n")
	c, err := loadConfig(newViper(), file)
	require.NoError(t, err)
	require.NoError(t, c.Validate())
	assert.Equal(t, TLSConfig{Mode: "on", Cert: cert, Key: key}, c.TLS)
	mode, cfg, err := c.TLS.server()
	require.NoError(t, err)
	assert.Equal(t, nbd.TLSOn, mode)
	assert.Len(t, cfg.Certificates, 1)
	assert.Equal(t, tls.NoClientCert, cfg.ClientAuth, "no CA: no client certificate asked for")
	assert.Equal(t, uint16(tls.VersionTLS12), cfg.MinVersion)

	t.Setenv("RAIDD_TLS_MODE", "require")
	t.Setenv("RAIDD_TLS_CA", ca)
	require.NoError(t, checkEnv([]string{"RAIDD_TLS_MODE=require", "RAIDD_TLS_CA=" + ca, "RAIDD_TLS_CERT=x", "RAIDD_TLS_KEY=y"}))
	c, err = loadConfig(newViper(), file)
	require.NoError(t, err)
	assert.Equal(t, TLSConfig{Mode: "require", Cert: cert, Key: key, CA: ca}, c.TLS, "the environment wins over the file")
	mode, cfg, err = c.TLS.server()
	require.NoError(t, err)
	assert.Equal(t, nbd.TLSRequire, mode)
	assert.Equal(t, tls.RequireAndVerifyClientCert, cfg.ClientAuth)
	assert.NotNil(t, cfg.ClientCAs)

	cl := &cli{stdout: new(strings.Builder), stderr: new(strings.Builder)}
	cmd, _, err := cl.rootCmd().Find([]string{"serve"})
	require.NoError(t, err)
	require.NoError(t, cmd.ParseFlags([]string{"--config", file, "--tls", "on", "--tls-ca", ""}))
	c, err = commandConfig(cmd, tlsFlags(pflag.NewFlagSet("keys", pflag.ContinueOnError)))
	require.NoError(t, err)
	assert.Equal(t, TLSConfig{Mode: "on", Cert: cert, Key: key}, c.TLS, "flags win over the environment")
}

func TestTLSKeysValidate(t *testing.T) {
	ca, cert, key := tlsFiles(t)
	_, otherCert, _ := tlsFiles(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for _, tc := range []struct {
		name string
		tls  TLSConfig
		want []string
	}{
		{"bad mode", TLSConfig{Mode: "yes"}, []string{`tls.mode (--tls): "yes" is not off, on or require`}},
		{"require without files", TLSConfig{Mode: "require"}, []string{"tls.cert: no file given", "tls.key: no file given"}},
		{"missing cert file", TLSConfig{Mode: "on", Cert: missing, Key: key}, []string{"tls.cert: open " + missing}},
		{"missing key file", TLSConfig{Mode: "on", Cert: cert, Key: missing}, []string{"tls.key: open " + missing}},
		{"key of another certificate", TLSConfig{Mode: "on", Cert: otherCert, Key: key}, []string{"tls.cert " + otherCert + " and tls.key " + key}},
		{"ca not PEM", TLSConfig{Mode: "on", Cert: cert, Key: key, CA: key}, []string{"tls.ca: " + key + " holds no PEM certificate"}},
		{"missing ca", TLSConfig{Mode: "on", Cert: cert, Key: key, CA: missing}, []string{"tls.ca: open " + missing}},
		{"files but off", TLSConfig{Mode: "off", Cert: cert, Key: key, CA: ca}, []string{"tls.mode is off"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Config{
				Listen: []string{defaultListen}, Log: LogConfig{Level: "info", Format: "text"}, TLS: tc.tls,
				Arrays: []ArrayConfig{{Name: "a", Members: []MemberConfig{{Path: "/a"}}}},
			}
			err := c.Validate()
			require.ErrorIs(t, err, errConfig)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}
