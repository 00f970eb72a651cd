package tlsfiles_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/tlsfiles"
	"github.com/configpub/configpub/internal/testpki"
)

var start = time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

func newCA(t *testing.T, name string) *testpki.CA {
	t.Helper()
	return testpki.NewCA(t, name, start.Add(-day), start.Add(10*365*day))
}

// issue returns a leaf's certificate and key PEM under ca, valid from
// notBefore for lifetime: a server's for 127.0.0.1, or a client's.
func issue(t *testing.T, ca *testpki.CA, notBefore time.Time, lifetime time.Duration, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	issue := ca.Client
	if server {
		issue = ca.Server
	}
	l := issue(t, notBefore, notBefore.Add(lifetime))
	return l.CertPEM, l.KeyPEM
}

// serve accepts TLS connections with cfg until the test ends and completes
// each handshake.
func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				_ = c.(*tls.Conn).Handshake()
				c.Close()
			}()
		}
	}()
	return ln.Addr().String()
}

// handshake connects as a client living at now, trusting roots and
// presenting client (if any); it returns the server certificate's serial.
func handshake(addr string, now time.Time, roots *x509.CertPool, client ...tls.Certificate) (*big.Int, error) {
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, Certificates: client, Time: func() time.Time { return now }})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	// A client learns that the server refused its certificate on its first read.
	if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, net.ErrClosed) && err.Error() != "EOF" {
		return nil, err
	}
	return c.ConnectionState().PeerCertificates[0].SerialNumber, nil
}

// TestAYearOfRenewals runs a server for a simulated year while its
// certificate is renewed the way cert-manager renews it (90-day
// certificates, renewed after 60 days) and its client CA is rotated once,
// between two renewals.
// Every daily handshake of the year succeeds; a server that read its files
// once, started on the same day, fails from day 90 on.
func TestAYearOfRenewals(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	serverCA, oldClientCA, newClientCA := newCA(t, "server ca"), newCA(t, "client ca 1"), newCA(t, "client ca 2")
	roots := x509.NewCertPool()
	roots.AddCert(serverCA.Cert)

	var now atomic.Pointer[time.Time]
	setNow := func(t time.Time) { now.Store(&t) }
	setNow(start)
	issued := start
	crt, key := issue(t, serverCA, issued, 90*day, true)
	testpki.WriteFile(t, certFile, crt)
	testpki.WriteFile(t, keyFile, key)
	testpki.WriteFile(t, caFile, oldClientCA.PEM)

	f, err := tlsfiles.Load(certFile, keyFile, caFile, tlsfiles.Options{Now: func() time.Time { return *now.Load() }})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, f.TLSConfig())
	static, err := tls.X509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	staticAddr := serve(t, &tls.Config{Certificates: []tls.Certificate{static}})

	clientCert := func(ca *testpki.CA, at time.Time) tls.Certificate {
		c, k := issue(t, ca, at, 2*day, false)
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	renewals, staticFailedFrom := 0, -1
	for d := 0; d <= 365; d++ {
		today := start.Add(time.Duration(d)*day + 12*time.Hour)
		setNow(today)
		if today.Sub(issued) >= 60*day {
			issued = today
			crt, key := issue(t, serverCA, issued, 90*day, true)
			testpki.WriteFile(t, certFile, crt)
			testpki.WriteFile(t, keyFile, key)
			renewals++
		}
		switch d { // client CA rotation: add the new CA, move clients, remove the old one
		case 190:
			testpki.WriteFile(t, caFile, append(append([]byte{}, oldClientCA.PEM...), newClientCA.PEM...))
		case 220:
			testpki.WriteFile(t, caFile, newClientCA.PEM)
		}
		f.Check()
		clientCA := oldClientCA
		if d >= 200 {
			clientCA = newClientCA
		}
		if _, err := handshake(addr, today, roots, clientCert(clientCA, today)); err != nil {
			t.Fatalf("day %d: %v", d, err)
		}
		if err := f.Expiry(today); err != nil {
			t.Fatalf("day %d: %v", d, err)
		}
		if _, err := handshake(staticAddr, today, roots); err != nil && staticFailedFrom < 0 {
			staticFailedFrom = d
		}
		switch d {
		case 195: // both CAs trusted
			if _, err := handshake(addr, today, roots, clientCert(newClientCA, today)); err != nil {
				t.Fatalf("day %d, new client CA during the rotation: %v", d, err)
			}
		case 221: // the old CA removed
			if _, err := handshake(addr, today, roots, clientCert(oldClientCA, today)); err == nil {
				t.Fatalf("day %d: a certificate of the removed client CA was accepted", d)
			}
		}
	}
	if renewals != 6 {
		t.Errorf("got %d renewals, want 6", renewals)
	}
	if staticFailedFrom != 90 {
		t.Errorf("the server that read its files once failed from day %d, want 90", staticFailedFrom)
	}
}

// TestHalfWrittenRenewal: a renewal that has written the certificate but
// not yet its key, or has left garbage, keeps the pair in use; the next
// consistent read is served.
func TestHalfWrittenRenewal(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newCA(t, "ca")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	crt1, key1 := issue(t, ca, start, 90*day, true)
	testpki.WriteFile(t, certFile, crt1)
	testpki.WriteFile(t, keyFile, key1)
	var logs bytes.Buffer
	f, err := tlsfiles.Load(certFile, keyFile, "", tlsfiles.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, f.TLSConfig())
	first := f.Certificate().SerialNumber

	crt2, key2 := issue(t, ca, start.Add(60*day), 90*day, true)
	testpki.WriteFile(t, certFile, crt2) // the key still the old one
	if _, err := f.Reload(); err == nil || !strings.Contains(err.Error(), "private key does not match public key") {
		t.Fatalf("certificate without its key: got %v, want a mismatch", err)
	}
	f.Check()
	if !strings.Contains(logs.String(), "the certificate in use is kept") {
		t.Errorf("the failed reload was not logged:\n%s", logs.String())
	}
	if got, err := handshake(addr, start.Add(time.Hour), roots); err != nil || got.Cmp(first) != 0 {
		t.Fatalf("after a half-written renewal: serial %v, %v; want %v", got, err, first)
	}
	testpki.WriteFile(t, keyFile, []byte("-----BEGIN EC PRIVATE KEY-----\ngarbage\n"))
	if _, err := f.Reload(); err == nil {
		t.Fatal("garbage key: reload succeeded")
	}
	testpki.WriteFile(t, keyFile, key2)
	if changed, err := f.Reload(); err != nil || !changed {
		t.Fatalf("consistent renewal: changed %v, %v", changed, err)
	}
	if changed, err := f.Reload(); err != nil || changed {
		t.Fatalf("unchanged files: changed %v, %v; want false, nil", changed, err)
	}
	got, err := handshake(addr, start.Add(61*day), roots)
	if err != nil {
		t.Fatal(err)
	}
	if got.Cmp(first) == 0 {
		t.Fatal("the renewed certificate is not served")
	}
	if got.Cmp(f.Certificate().SerialNumber) != 0 {
		t.Fatalf("served serial %v, Certificate() says %v", got, f.Certificate().SerialNumber)
	}
}

// TestExpiryWarnings: a certificate that is not renewed is reported within
// the last fifth of its lifetime, at most hourly, and as an error once
// expired — over simulated months, with nobody renewing it.
func TestExpiryWarnings(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newCA(t, "ca")
	crt, key := issue(t, ca, start, 90*day, true)
	testpki.WriteFile(t, certFile, crt)
	testpki.WriteFile(t, keyFile, key)
	var logs bytes.Buffer
	now := start
	f, err := tlsfiles.Load(certFile, keyFile, "", tlsfiles.Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var firstWarn, firstError time.Time
	checks := 0
	for now = start; now.Before(start.Add(120 * day)); now = now.Add(10 * time.Minute) {
		before := logs.Len()
		f.Check()
		checks++
		line := logs.String()[before:]
		switch {
		case strings.Contains(line, "level=ERROR") && firstError.IsZero():
			firstError = now
		case strings.Contains(line, "level=WARN") && firstWarn.IsZero():
			firstWarn = now
		}
	}
	if want := start.Add(72 * day); firstWarn.Before(want) || firstWarn.After(want.Add(10*time.Minute)) {
		t.Errorf("first warning at %v, want at day 72 (a fifth of 90 days before the end)", firstWarn)
	}
	if want := start.Add(90 * day); firstError.Before(want) || firstError.After(want.Add(10*time.Minute)) {
		t.Errorf("first error at %v, want at day 90", firstError)
	}
	lines := strings.Count(logs.String(), "TLS certificate not renewed")
	// 48 days warned or failed, hourly: about 48*24 lines out of 17,280 checks.
	if lines < 47*24 || lines > 49*24 {
		t.Errorf("got %d expiry lines over %d checks, want about one an hour for 48 days", lines, checks)
	}
}
