package main

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/configserver/tlsfiles"
	"github.com/configpub/configpub/internal/testpki"
)

// TestFetchOverMutualTLS: fetch reaches a Config Server that requires a
// client certificate from a private CA, with --tls-ca, --tls-cert and
// --tls-key; without the client certificate, or without the CA bundle, it
// gets no answer (UNAVAILABLE; with nothing verified before, it fails
// closed), and the flags are checked as a pair.
func TestFetchOverMutualTLS(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	now := time.Now()
	ca := testpki.NewCA(t, "test ca", now.Add(-time.Hour), now.Add(time.Hour))
	caFile := filepath.Join(dir, "ca.crt")
	testpki.WriteFile(t, caFile, ca.PEM)
	srvCrt, srvKey, cliCrt, cliKey := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key"), filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	ca.Server(t, now.Add(-time.Hour), now.Add(time.Hour)).Write(t, srvCrt, srvKey)
	cli := ca.Client(t, now.Add(-time.Hour), now.Add(time.Hour))
	cli.Write(t, cliCrt, cliKey)
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
	if want := []string{cli.Cert.SerialNumber.String()}; !slices.Equal(seen, want) {
		t.Fatalf("the server saw client certificates %v, want %v", seen, want)
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
