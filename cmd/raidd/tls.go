package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/raidd/raidd/nbd"
)

// TLSConfig is the tls block: NBD_OPT_STARTTLS for the NBD listeners.
type TLSConfig struct {
	// Mode is off (the default, also spelt ""; STARTTLS is answered "unsupported"), on (TLS offered,
	// plaintext clients still served) or require (every option but
	// STARTTLS and ABORT refused before TLS).
	Mode string `mapstructure:"mode"`
	// Cert and Key are PEM files: the server certificate (chain) and its
	// private key. Required unless Mode is off.
	Cert string `mapstructure:"cert"`
	Key  string `mapstructure:"key"`
	// CA is an optional PEM file of CA certificates. When set, every TLS
	// client must present a certificate signed by one of them
	// (tls.RequireAndVerifyClientCert); when empty, none is asked for.
	CA string `mapstructure:"ca"`
}

// tlsFlags adds the serve flags of the tls block and returns their
// bindings to configuration keys.
func tlsFlags(fs *pflag.FlagSet) map[string]string {
	fs.String("tls", "", "NBD TLS `mode`: off, on (offer STARTTLS) or require (refuse clients that do not use TLS) (default off)")
	fs.String("tls-cert", "", "server certificate PEM `file` for --tls")
	fs.String("tls-key", "", "server private key PEM `file` for --tls")
	fs.String("tls-ca", "", "CA certificate PEM `file`: TLS clients must present a certificate it signed (default: no client certificate asked)")
	return map[string]string{"tls": "tls.mode", "tls-cert": "tls.cert", "tls-key": "tls.key", "tls-ca": "tls.ca"}
}

// server returns the NBD TLS mode and, unless it is off, the server TLS
// configuration, reading the files. Every problem is reported, each
// wrapping errConfig and naming its key.
func (t *TLSConfig) server() (nbd.TLSMode, *tls.Config, error) {
	mode, err := nbd.TLSOff, error(nil)
	if t.Mode != "" {
		mode, err = nbd.ParseTLSMode(t.Mode)
	}
	if err != nil {
		return nbd.TLSOff, nil, fmt.Errorf("%w: tls.mode (--tls): %q is not off, on or require", errConfig, t.Mode)
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{errConfig}, args...)...))
	}
	if mode == nbd.TLSOff {
		if t.Cert != "" || t.Key != "" || t.CA != "" {
			bad("tls.cert, tls.key or tls.ca is set but tls.mode is off: set tls.mode (--tls) to on or require to use them, or remove them")
		}
		return mode, nil, errors.Join(errs...)
	}
	read := func(key, path string) []byte {
		if path == "" {
			bad("%s: no file given; tls.mode %s needs tls.cert and tls.key", key, mode)
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			bad("%s: %v", key, err)
			return nil
		}
		return b
	}
	certPEM, keyPEM := read("tls.cert", t.Cert), read("tls.key", t.Key)
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if certPEM != nil && keyPEM != nil {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			bad("tls.cert %s and tls.key %s: %v", t.Cert, t.Key, err)
		} else {
			cfg.Certificates = []tls.Certificate{cert}
		}
	}
	if t.CA != "" {
		if b := read("tls.ca", t.CA); b != nil {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(b) {
				bad("tls.ca: %s holds no PEM certificate", t.CA)
			}
			cfg.ClientCAs = pool
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
	}
	if len(errs) > 0 {
		return mode, nil, errors.Join(errs...)
	}
	return mode, cfg, nil
}
