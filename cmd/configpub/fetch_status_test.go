package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/readback"
)

// TestFetchServesStatusEndpoint runs the sidecar (`fetch --watch
// --status-listen`) against a test Config Server: the collector reads its
// status with the control-plane key (the current snapshot it applied), a
// reload request answers with a load, /metrics exposes the snapshot, and a
// request without a control token is refused.
func TestFetchServesStatusEndpoint(t *testing.T) {
	s, trustKey := newFetchServer(t, time.Hour)
	dir := t.TempDir()
	ctl, pub := newKeyPEM(t)
	ctlPub := filepath.Join(dir, "control.pub")
	if err := os.WriteFile(ctlPub, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)

	args := append(s.args(t, trustKey, filepath.Join(dir, "cache"), filepath.Join(dir, "values.yml")),
		"--watch", "--interval", "1h", "--status-listen", addr, "--control-pub", ctlPub)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRootCmd()
	root.SetOut(io.Discard)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()

	base := "http://" + addr
	target := readback.Target{Endpoint: base, Host: s.id.Host, ServiceID: s.id.ServiceID, EnvTag: s.id.EnvTag}
	col, err := readback.NewCollector(readback.Options{Signer: ctl})
	if err != nil {
		t.Fatal(err)
	}
	want := s.headers.Get("X-Config-Snapshot-Id")
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := col.Read(ctx, target)
		if err == nil && st.Current != nil && st.Current.SnapshotID == want && st.LastKnownGood != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar status: got %+v, %v; want current and last-known-good %s", st, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	reloader, err := readback.NewCollector(readback.Options{Signer: ctl, Reload: true})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := reloader.Read(ctx, target); err != nil || st.LastLoad == nil || st.Current == nil || st.Current.SnapshotID != want {
		t.Fatalf("reload: got %+v, %v", st, err)
	}
	resp, err := http.Get(base + "/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /status without a token: got %d, want 401", resp.StatusCode)
	}
	resp, err = http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `configpub_runtime_snapshot_info{`) || !strings.Contains(string(body), want) {
		t.Fatalf("/metrics does not name the current snapshot %s", want)
	}
	stopWatch(t, cancel, done)
	if _, err := http.Get(base + "/status"); err == nil {
		t.Fatal("status endpoint still served after fetch stopped")
	}
}

func TestFetchStatusUsage(t *testing.T) {
	base := []string{"fetch", "--server", "http://x", "--token-file", "t", "--cache-dir", "c", "--host", "h", "--service-id", "s",
		"--env-tag", "e", "--audience", "agent", "--trust-key", "k", "--out", "o"}
	for name, extra := range map[string][]string{
		"--status-listen without --watch":       {"--status-listen", "127.0.0.1:0", "--control-pub", "p"},
		"--status-listen without --control-pub": {"--watch", "--status-listen", "127.0.0.1:0"},
		"--control-pub alone":                   {"--watch", "--control-pub", "p"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := runCLI(append(append([]string(nil), base...), extra...)...); exitCode(err) != exitUsage {
				t.Fatalf("got %v (exit %d), want exit 2", err, exitCode(err))
			}
		})
	}
}

// stopWatch cancels a running fetch --watch and waits for it to end
// without an error of its own.
func stopWatch(t *testing.T, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("fetch --watch ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fetch --watch did not stop")
	}
}
