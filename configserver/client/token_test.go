package client_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/client"
)

// waitToken runs c.WaitToken in the background; the channel receives its
// result, and missing returns the errors it reported missing.
func waitToken(ctx context.Context, c *client.Client) (done <-chan error, missing func() []error) {
	var mu sync.Mutex
	var errs []error
	ch := make(chan error, 1)
	go func() {
		ch <- c.WaitToken(ctx, func(err error) {
			mu.Lock()
			defer mu.Unlock()
			errs = append(errs, err)
		})
	}()
	return ch, func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), errs...)
	}
}

// returned waits up to d for done and returns its error; it fails the test
// when it does not end.
func returned(t *testing.T, done <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("WaitToken did not return within %s %s", d, what)
		return nil
	}
}

// TestTokenProvisionedAfterStart: a runtime started before its token file
// exists (a projected token, a Vault agent's sink) waits for it with
// back-off, saying so once, naming the file and never a token, and with
// nothing loaded it is failed closed meanwhile; it returns as soon as the
// file appears (within MaxTokenRetryDelay and its jitter), and the load
// that follows applies. A load without the file is UNAVAILABLE
// TOKEN_UNAVAILABLE matching ErrTokenMissing and fs.ErrNotExist.
func TestTokenProvisionedAfterStart(t *testing.T) {
	w := newWorld(t)
	w.srv.set(w.build(w.spec(1)), nil)
	tokenFile := filepath.Join(t.TempDir(), "token")
	c := w.client(func(o *client.Options) { o.TokenSource = client.TokenFile(tokenFile) })

	ev, err := c.Load(context.Background())
	if ev.Outcome != client.OutcomeUnavailable || ev.Reason != client.ReasonTokenUnavailable || !ev.FailedClosed ||
		!errors.Is(err, client.ErrTokenMissing) || !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, client.ErrNoSnapshot) {
		t.Fatalf("load without the token file: got %s %s failedClosed %v, %v; want UNAVAILABLE TOKEN_UNAVAILABLE, failed closed, ErrTokenMissing",
			ev.Outcome, ev.Reason, ev.FailedClosed, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, missing := waitToken(ctx, c)
	time.Sleep(2 * time.Second) // three tries at least: 0.5 s, then 1 s apart (±20%)
	select {
	case err := <-done:
		t.Fatalf("WaitToken returned %v before the token file exists", err)
	default:
	}
	if m := missing(); len(m) != 1 || !strings.Contains(m[0].Error(), tokenFile) || !errors.Is(m[0], client.ErrTokenMissing) {
		t.Fatalf("missing reported %v, want once, naming %s", m, tokenFile)
	}
	if st := c.Status(); !st.FailedClosed || st.Current != nil {
		t.Fatalf("status while waiting: failedClosed %v, current %+v; want failed closed, nothing current", st.FailedClosed, st.Current)
	}

	// An empty file is a token not written yet, too.
	if err := os.WriteFile(tokenFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("WaitToken returned %v on an empty token file", err)
	default:
	}
	if err := os.WriteFile(tokenFile, []byte("test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	appeared := time.Now()
	if err := returned(t, done, client.MaxTokenRetryDelay*6/5+time.Second, "of the token file appearing"); err != nil {
		t.Fatalf("WaitToken: %v, want nil once the token is there", err)
	}
	t.Logf("returned %s after the token file appeared", time.Since(appeared).Round(time.Millisecond))
	if m := missing(); len(m) != 1 {
		t.Fatalf("missing reported %d times, want once", len(m))
	}
	for _, e := range missing() {
		if strings.Contains(e.Error(), "test-token") {
			t.Fatalf("missing reported the token: %v", e)
		}
	}
	mustLoad(t, c, client.OutcomeApplied)
}

// TestTokenFileGoneKeepsLastKnownGoodUntilLeaseEnd: a token file that
// disappears after the runtime loaded (a rotated projection lost, a Vault
// agent stopped) leaves it on its verified snapshot, over simulated days,
// until the signed lease (plus skew) ends: every load meanwhile is
// UNAVAILABLE TOKEN_UNAVAILABLE and changes nothing, a restart restores the
// last-known-good, and WaitToken keeps the runtime on it while it waits —
// then returns at the lease's end, so that the load after it fails closed.
// When the token is back the runtime loads again.
func TestTokenFileGoneKeepsLastKnownGoodUntilLeaseEnd(t *testing.T) {
	w := newWorld(t)
	sp := w.spec(1)
	sp.leaseTo = t0.Add(3 * 24 * time.Hour) // a three-day lease
	r1 := w.build(sp)
	w.srv.set(r1, nil)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withFile := func(o *client.Options) { o.TokenSource = client.TokenFile(tokenFile) }
	c := w.client(withFile)
	mustLoad(t, c, client.OutcomeApplied)
	if err := os.Remove(tokenFile); err != nil {
		t.Fatal(err)
	}

	end := sp.leaseTo.Add(30 * time.Second) // the skew
	for _, at := range []time.Duration{time.Hour, 24 * time.Hour, 71 * time.Hour, 72 * time.Hour} {
		w.clock.Set(t0.Add(at))
		ev, err := c.Load(context.Background())
		if ev.Outcome != client.OutcomeUnavailable || ev.Reason != client.ReasonTokenUnavailable || ev.FailedClosed ||
			ev.CurrentSnapshotID != r1.Manifest.SnapshotID || !errors.Is(err, client.ErrTokenMissing) {
			t.Fatalf("%s in, token gone: got %s %s failedClosed %v current %s, %v; want UNAVAILABLE TOKEN_UNAVAILABLE on %s",
				at, ev.Outcome, ev.Reason, ev.FailedClosed, ev.CurrentSnapshotID, err, r1.Manifest.SnapshotID)
		}
		if err := c.Guard(); err != nil {
			t.Fatalf("%s in, token gone: Guard %v, want the last-known-good", at, err)
		}
		if _, err := w.client(withFile).Restore(context.Background()); err != nil {
			t.Fatalf("%s in, token gone: a restart does not restore the last-known-good: %v", at, err)
		}
	}

	// Waiting for the token does not outlast the lease.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, missing := waitToken(ctx, c)
	time.Sleep(300 * time.Millisecond)
	if err := c.Guard(); err != nil {
		t.Fatalf("while waiting: Guard %v, want the last-known-good", err)
	}
	w.clock.Set(end)
	if err := returned(t, done, 3*time.Second, "of the lease's end"); err != nil {
		t.Fatalf("WaitToken at the lease's end: %v, want nil", err)
	}
	if len(missing()) != 1 {
		t.Fatalf("missing reported %d times, want once", len(missing()))
	}
	ev, err := c.Load(context.Background())
	if !ev.FailedClosed || !errors.Is(err, client.ErrExpired) || c.Guard() == nil {
		t.Fatalf("at the lease's end, token gone: got %s %s failedClosed %v, %v; want failed closed (ErrExpired)", ev.Outcome, ev.Reason, ev.FailedClosed, err)
	}
	w.clock.Set(end.Add(14 * 24 * time.Hour))
	if _, err := w.client(withFile).Restore(context.Background()); !errors.Is(err, client.ErrNoSnapshot) {
		t.Fatalf("a restart two weeks later: %v, want no snapshot (the last-known-good's lease ended)", err)
	}

	// The token is back and the server serves a renewed lease.
	sp2 := w.spec(2)
	w.srv.set(w.build(sp2), nil)
	if err := os.WriteFile(tokenFile, []byte("test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitToken(context.Background(), func(err error) { t.Errorf("token reported missing: %v", err) }); err != nil {
		t.Fatal(err)
	}
	if ev := mustLoad(t, c, client.OutcomeApplied); ev.SnapshotID == r1.Manifest.SnapshotID {
		t.Fatalf("applied %s again, want release 2", ev.SnapshotID)
	}
}
