package tlsfiles_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/tlsfiles"
	"github.com/configpub/configpub/internal/testpki"
)

// serveHTTPS serves, with cfg, an answer naming the client certificate's
// serial number.
func serveHTTPS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.TLS.PeerCertificates[0].SerialNumber.String())
	}), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(tls.NewListener(ln, cfg))
	t.Cleanup(func() { srv.Close() })
	return "https://" + ln.Addr().String()
}

// TestClientTransportOverTwoMonths: a client's certificate, valid for a
// day, is renewed every 16 hours for two simulated months, and the server's
// CA is rotated once (the new CA added to the client's bundle, the server
// moved to a certificate of it, the old CA removed). Every request of the
// two months is answered, each with the client certificate in force; a
// client that read its files once is refused from the first day's end.
func TestClientTransportOverTwoMonths(t *testing.T) {
	dir := t.TempDir()
	srvCert, srvKey, clientCAFile := filepath.Join(dir, "srv.crt"), filepath.Join(dir, "srv.key"), filepath.Join(dir, "client-ca.crt")
	cliCert, cliKey, caBundle := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	serverCA1, serverCA2, clientCA := newCA(t, "server ca 1"), newCA(t, "server ca 2"), newCA(t, "client ca")

	var now atomic.Pointer[time.Time]
	setNow := func(t time.Time) { now.Store(&t) }
	clock := func() time.Time { return *now.Load() }
	setNow(start)
	c, k := issue(t, serverCA1, start.Add(-day), 400*day, true)
	testpki.WriteFile(t, srvCert, c)
	testpki.WriteFile(t, srvKey, k)
	testpki.WriteFile(t, clientCAFile, clientCA.PEM)
	server, err := tlsfiles.Load(srvCert, srvKey, clientCAFile, tlsfiles.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	url := serveHTTPS(t, server.TLSConfig())

	issued := start
	c, k = issue(t, clientCA, issued, day, false)
	testpki.WriteFile(t, cliCert, c)
	testpki.WriteFile(t, cliKey, k)
	testpki.WriteFile(t, caBundle, serverCA1.PEM)
	tr, err := tlsfiles.NewTransport(caBundle, cliCert, cliKey, tlsfiles.Options{Interval: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	static, err := tlsfiles.NewTransport(caBundle, cliCert, cliKey, tlsfiles.Options{Interval: 1000 * 24 * time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	get := func(rt http.RoundTripper) (string, error) {
		resp, err := (&http.Client{Transport: rt, Timeout: 5 * time.Second}).Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	renewals, staticRefusedAt := 0, time.Duration(-1)
	for at := time.Duration(0); at <= 60*day; at += 4 * time.Hour {
		today := start.Add(at)
		setNow(today)
		if today.Sub(issued) >= 16*time.Hour {
			issued = today
			c, k := issue(t, clientCA, issued, day, false)
			testpki.WriteFile(t, cliCert, c)
			testpki.WriteFile(t, cliKey, k)
			renewals++
		}
		switch at {
		case 21 * day: // the client trusts both server CAs (between two renewals)
			testpki.WriteFile(t, caBundle, append(append([]byte{}, serverCA1.PEM...), serverCA2.PEM...))
		case 21*day + 4*time.Hour: // the server moves to the new CA, before the next renewal
			c, k := issue(t, serverCA2, today.Add(-day), 400*day, true)
			testpki.WriteFile(t, srvCert, c)
			testpki.WriteFile(t, srvKey, k)
			server.Check()
		case 31 * day: // the old server CA is removed
			testpki.WriteFile(t, caBundle, serverCA2.PEM)
		}
		server.Check()
		// Requests 4 simulated hours apart: a server closes idle
		// connections long before (the Config Server after 120 s).
		tr.CloseIdleConnections()
		got, err := get(tr)
		if err != nil {
			t.Fatalf("at %s: %v", at, err)
		}
		if want := tr.ClientCertificate().SerialNumber.String(); got != want {
			t.Fatalf("at %s: the server saw client certificate %s, want %s", at, got, want)
		}
		static.CloseIdleConnections()
		if _, err := get(static); err != nil && staticRefusedAt < 0 {
			staticRefusedAt = at
		}
	}
	if renewals != 90 {
		t.Errorf("got %d renewals, want 90", renewals)
	}
	// Its certificate is valid through its NotAfter, start+24h: refused at
	// the next request.
	if want := day + 4*time.Hour; staticRefusedAt != want {
		t.Errorf("the client that read its files once was refused from %s, want %s", staticRefusedAt, want)
	}
}

// TestClientTransportKeepsAConsistentSet: a certificate written without its
// new key, or garbage, keeps the set in use; a missing key is refused up
// front.
func TestClientTransportKeepsAConsistentSet(t *testing.T) {
	dir := t.TempDir()
	cliCert, cliKey := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newCA(t, "client ca")
	c, k := issue(t, ca, start, day, false)
	testpki.WriteFile(t, cliCert, c)
	testpki.WriteFile(t, cliKey, k)
	tr, err := tlsfiles.NewTransport("", cliCert, cliKey, tlsfiles.Options{})
	if err != nil {
		t.Fatal(err)
	}
	first := tr.ClientCertificate().SerialNumber
	c2, k2 := issue(t, ca, start.Add(16*time.Hour), day, false)
	testpki.WriteFile(t, cliCert, c2)
	if _, err := tr.Reload(); err == nil || !strings.Contains(err.Error(), "private key does not match public key") {
		t.Fatalf("certificate without its key: got %v, want a mismatch", err)
	}
	if tr.ClientCertificate().SerialNumber.Cmp(first) != 0 {
		t.Fatal("a half-written renewal replaced the certificate in use")
	}
	testpki.WriteFile(t, cliKey, k2)
	if changed, err := tr.Reload(); err != nil || !changed {
		t.Fatalf("consistent renewal: changed %v, %v", changed, err)
	}
	if tr.ClientCertificate().SerialNumber.Cmp(first) == 0 {
		t.Fatal("the renewed certificate is not in use")
	}
	if _, err := tlsfiles.NewTransport("", cliCert, "", tlsfiles.Options{}); err == nil {
		t.Fatal("a certificate without a key file: accepted")
	}
	if _, err := tlsfiles.NewTransport(filepath.Join(dir, "missing.crt"), "", "", tlsfiles.Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing CA bundle: got %v, want fs.ErrNotExist", err)
	}
}

// TestClientExpiryWarning: a client certificate nobody renews is reported
// in the log within the last fifth of its lifetime, then as an error once
// expired.
func TestClientExpiryWarning(t *testing.T) {
	dir := t.TempDir()
	cliCert, cliKey := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := newCA(t, "client ca")
	c, k := issue(t, ca, start, day, false)
	testpki.WriteFile(t, cliCert, c)
	testpki.WriteFile(t, cliKey, k)
	now := start
	var logs bytes.Buffer
	tr, err := tlsfiles.NewTransport("", cliCert, cliKey, tlsfiles.Options{Interval: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveHTTPS(t, &tls.Config{}) // any server: the request only drives the check
	levels := map[time.Duration]string{}
	for _, at := range []time.Duration{18 * time.Hour, 20 * time.Hour, 25 * time.Hour} {
		now = start.Add(at)
		before := logs.Len()
		(&http.Client{Transport: tr, Timeout: time.Second}).Get(srv) // fails: the server has no certificate
		if line := logs.String()[before:]; strings.Contains(line, "TLS certificate not renewed") {
			levels[at] = strings.Fields(line)[1]
		}
	}
	want := map[time.Duration]string{20 * time.Hour: "level=WARN", 25 * time.Hour: "level=ERROR"}
	if len(levels) != len(want) || levels[20*time.Hour] != want[20*time.Hour] || levels[25*time.Hour] != want[25*time.Hour] {
		t.Fatalf("got %v, want %v; log:\n%s", levels, want, logs.String())
	}
}
