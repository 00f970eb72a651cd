// Package testpki issues throwaway X.509 certificates for tests: a CA, and
// server (for 127.0.0.1) and client certificates under it, parsed and as
// PEM files.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/atomicfile"
)

// CA is a self-signed certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // the certificate
}

// Leaf is a certificate issued by a CA, with its key.
type Leaf struct {
	Cert            *x509.Certificate
	Key             *ecdsa.PrivateKey
	CertPEM, KeyPEM []byte
}

// NewCA returns a CA named name, valid from notBefore to notAfter.
func NewCA(t testing.TB, name string, notBefore, notAfter time.Time) *CA {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	l := issue(t, tmpl, nil, nil)
	return &CA{Cert: l.Cert, Key: l.Key, PEM: l.CertPEM}
}

// Server issues a server certificate for 127.0.0.1.
func (ca *CA) Server(t testing.TB, notBefore, notAfter time.Time) *Leaf {
	t.Helper()
	return issue(t, &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: "server"},
		NotBefore: notBefore, NotAfter: notAfter, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca.Cert, ca.Key)
}

// Client issues a client certificate.
func (ca *CA) Client(t testing.TB, notBefore, notAfter time.Time) *Leaf {
	t.Helper()
	return issue(t, &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: "workload"},
		NotBefore: notBefore, NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca.Cert, ca.Key)
}

// TLS returns the certificate and key as a tls.Certificate.
func (l *Leaf) TLS(t testing.TB) tls.Certificate {
	t.Helper()
	c, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Write replaces certFile and keyFile, each atomically, certificate first
// (as a renewal that is read half-way leaves them).
func (l *Leaf) Write(t testing.TB, certFile, keyFile string) {
	t.Helper()
	WriteFile(t, certFile, l.CertPEM)
	WriteFile(t, keyFile, l.KeyPEM)
}

// WriteFile replaces path atomically with data (mode 0600).
func WriteFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func issue(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) *Leaf {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, k
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return &Leaf{Cert: c, Key: k, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})}
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n.Add(n, big.NewInt(1))
}
