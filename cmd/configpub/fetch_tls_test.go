package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/configserver/tlsfiles"
)

// writeCert issues a certificate for tmpl under parent (self-signed when
// nil) and writes it and its key as PEM files in dir under name; it returns
// the certificate, its key and the two paths.
func writeCert(t *testing.T, dir, name string, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if parent == nil {
		parent, parentKey = tmpl, k
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &k.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	kd, _ := x509.MarshalECPrivateKey(k)
	crt, key := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return c, k, crt, key
}

// TestFetchOverMutualTLS: fetch reaches a Config Server that requires a
// client certificate from a private CA, with --tls-ca, --tls-cert and
// --tls-key; without the client certificate, or without the CA bundle, it
// gets no answer (UNAVAILABLE; with nothing verified before, it fails
// closed), and the flags are checked as a pair.
func TestFetchOverMutualTLS(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	now := time.Now()
	ca, caKey, caFile, _ := writeCert(t, dir, "ca", &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}, nil, nil)
	_, _, srvCrt, srvKey := writeCert(t, dir, "server", &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "server"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, caKey)
	_, _, cliCrt, cliKey := writeCert(t, dir, "client", &x509.Certificate{SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "workload"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, caKey)
	files, err := tlsfiles.Load(srvCrt, srvKey, caFile, tlsfiles.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string // client certificate serials, per request
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.TLS.PeerCertificates[0].SerialNumber.String())
		mu.Unlock()
		s.serve(w, r)
	}))
	ts.TLS = files.TLSConfig()
	ts.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes below
	ts.StartTLS()
	defer ts.Close()

	args := func(extra ...string) []string {
		a := s.args(t, key, t.TempDir(), filepath.Join(t.TempDir(), "values.yml"))
		for i := range a {
			if a[i] == "--server" {
				a[i+1] = ts.URL
			}
		}
		return append(a, extra...)
	}
	out, err := runCLI(args("--tls-ca", caFile, "--tls-cert", cliCrt, "--tls-key", cliKey)...)
	if exitCode(err) != exitOK {
		t.Fatalf("with the CA bundle and a client certificate: exit %d (%v)\n%s", exitCode(err), err, out)
	}
	if ev := evidenceOf(t, out); ev.Outcome != client.OutcomeApplied {
		t.Fatalf("got %s %s, want APPLIED", ev.Outcome, ev.Reason)
	}
	mu.Lock()
	if !slices.Equal(seen, []string{"3"}) {
		t.Fatalf("the server saw client certificates %v, want [3]", seen)
	}
	mu.Unlock()
	for name, extra := range map[string][]string{
		"no client certificate": {"--tls-ca", caFile},
		"no CA bundle":          {"--tls-cert", cliCrt, "--tls-key", cliKey},
	} {
		out, err := runCLI(args(extra...)...)
		if exitCode(err) != exitFailClosed {
			t.Fatalf("%s: exit %d (%v), want 3\n%s", name, exitCode(err), err, out)
		}
		if ev := evidenceOf(t, out); ev.Outcome != client.OutcomeUnavailable {
			t.Fatalf("%s: got %s %s, want UNAVAILABLE", name, ev.Outcome, ev.Reason)
		}
	}
	if out, err := runCLI(args("--tls-cert", cliCrt)...); exitCode(err) != exitUsage || !strings.Contains(out+err.Error(), "--tls-cert and --tls-key go together") {
		t.Fatalf("--tls-cert alone: exit %d (%v)\n%s", exitCode(err), err, out)
	}
}
