package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFetchWatchWaitsForTheTokenFile: a sidecar started before its
// --token-file is provisioned (Kubernetes projects the token a moment
// after the containers start, a Vault agent writes it later) waits for it:
// it says so once on stderr, naming the file, loads nothing and prints no
// evidence meanwhile, its /metrics say it fails closed (nothing in --out),
// and it loads, writes --out and reports ready as soon as the file
// appears. Restarted with its cache while the file is gone again, it writes
// the last-known-good to --out and runs on it while it waits. The token
// itself is never printed.
// The sidecar loaded at once without a token, printed an UNAVAILABLE
// TOKEN_UNAVAILABLE line per try, and backed off up to --interval (a
// minute by default) before trying again.
func TestFetchWatchWaitsForTheTokenFile(t *testing.T) {
	s, key := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	_, ctlPEM := newKeyPEM(t)
	ctlPub := filepath.Join(dir, "control.pub")
	if err := os.WriteFile(ctlPub, ctlPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	cache, outFile := filepath.Join(dir, "cache"), filepath.Join(dir, "values.yml")
	tokenFile := filepath.Join(dir, "projected", "token")
	args := s.args(t, key, cache, outFile)
	for i := range args {
		if args[i] == "--token-file" {
			args[i+1] = tokenFile
		}
	}
	addr := freeAddr(t)
	args = append(args, "--watch", "--interval", "1h", "--status-listen", addr, "--control-pub", ctlPub)
	waiting := "waiting for --token-file " + tokenFile

	r := startCLI(t, args...)
	r.waitFor(t, "the sidecar says it waits for the token file", func() bool { return r.printed(waiting) })
	time.Sleep(2 * time.Second) // a few tries
	if n := r.count(waiting); n != 1 {
		t.Fatalf("said %d times that it waits, want once:\n%s", n, r.out.String())
	}
	if !r.printed("no configuration meanwhile: failed closed") {
		t.Fatalf("the wait does not say the runtime has no configuration:\n%s", r.out.String())
	}
	if r.printed(`"outcome"`) {
		t.Fatalf("evidence printed while waiting for the token:\n%s", r.out.String())
	}
	if _, err := os.Stat(outFile); err == nil {
		t.Fatal("--out written without a token")
	}
	m := metricsOf(t, "http://"+addr)
	if !m.has("configpub_runtime_failed_closed{", "} 1") || m.has("configpub_runtime_loads_total{", "TOKEN_UNAVAILABLE") {
		t.Fatalf("/metrics while waiting: want failed closed and no load without a token:\n%s", strings.Join(m, "\n"))
	}

	if err := os.MkdirAll(filepath.Dir(tokenFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFile(t, outFile, string(s.values)) // within MaxTokenRetryDelay of the file appearing
	r.waitFor(t, "APPLIED", func() bool { return r.printed(`"outcome":"APPLIED"`) })
	if !r.printed("--token-file " + tokenFile + " provisioned") {
		t.Fatalf("the token file's arrival is not said:\n%s", r.out.String())
	}
	m = metricsOf(t, "http://"+addr)
	if !m.has("configpub_runtime_failed_closed{", "} 0") {
		t.Fatalf("/metrics once loaded: want not failed closed:\n%s", strings.Join(m, "\n"))
	}
	r.stop(t)
	if strings.Contains(r.out.String(), "tok-123") {
		t.Fatalf("the token was printed:\n%s", r.out.String())
	}

	// Restarted with its cache while the token is gone: the last-known-good.
	if err := os.Remove(tokenFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(outFile); err != nil {
		t.Fatal(err)
	}
	r = startCLI(t, args...)
	r.waitFor(t, "the restarted sidecar says it waits", func() bool { return r.printed(waiting) })
	waitFile(t, outFile, string(s.values))
	if want := "its last-known-good, snapshot " + s.headers.Get("X-Config-Snapshot-Id"); !r.printed(want) {
		t.Fatalf("the wait does not say the runtime runs %q:\n%s", want, r.out.String())
	}
	m = metricsOf(t, "http://"+addr)
	if !m.has("configpub_runtime_failed_closed{", "} 0") {
		t.Fatalf("/metrics on the last-known-good: want not failed closed:\n%s", strings.Join(m, "\n"))
	}
	r.stop(t)
}
