// Package tlstest makes throw-away certificate authorities and
// certificates for tests, in memory and as PEM files, so that no key is
// ever committed. Keys are ECDSA P-256; certificates are valid from an
// hour ago for a day, for 127.0.0.1, ::1 and localhost.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

var serial atomic.Int64

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// Leaf is a certificate issued by a CA, with its key.
type Leaf struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

func newCert(tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = big.NewInt(serial.Add(1))
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

// NewCA makes a self-signed CA called name.
func NewCA(name string) (*CA, error) {
	cert, key, err := newCert(&x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}, nil, nil)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Issue makes a certificate called name, usable by a server (for
// 127.0.0.1, ::1 and localhost) and by a client.
func (ca *CA) Issue(name string) (*Leaf, error) {
	cert, key, err := newCert(&x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}, ca.Cert, ca.Key)
	if err != nil {
		return nil, err
	}
	return &Leaf{Cert: cert, Key: key}, nil
}

// WriteCert writes the CA certificate as PEM to path.
func (ca *CA) WriteCert(path string) error {
	return writePEM(path, "CERTIFICATE", ca.Cert.Raw)
}

// Write writes the certificate and the key (PKCS #8) as PEM files.
func (l *Leaf) Write(certPath, keyPath string) error {
	if err := writePEM(certPath, "CERTIFICATE", l.Cert.Raw); err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(l.Key)
	if err != nil {
		return err
	}
	return writePEM(keyPath, "PRIVATE KEY", der)
}

// WriteClientDir writes dir/ca-cert.pem (the certificates of cas: the CA
// that signed the server's certificate, and for qemu, which checks its own
// certificate too, the one that signed client's) and, if client is not
// nil, dir/client-cert.pem and dir/client-key.pem: the layout libnbd's
// tls-certificates=DIR and qemu's tls-creds-x509 dir= expect.
func WriteClientDir(dir string, client *Leaf, cas ...*CA) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var b []byte
	for _, ca := range cas {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})...)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca-cert.pem"), b, 0o600); err != nil {
		return err
	}
	if client == nil {
		return nil
	}
	return client.Write(filepath.Join(dir, "client-cert.pem"), filepath.Join(dir, "client-key.pem"))
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
