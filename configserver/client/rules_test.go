package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/signing"
)

// loadWant loads once and requires outcome and reason.
func loadWant(t *testing.T, c *client.Client, outcome client.Outcome, reason client.Reason) *client.Evidence {
	t.Helper()
	ev, err := c.Load(context.Background())
	if ev.Outcome != outcome || ev.Reason != reason {
		t.Fatalf("Load: got %s %s (field %q, detail %q, err %v), want %s %s", ev.Outcome, ev.Reason, ev.Field, ev.Detail, err, outcome, reason)
	}
	return ev
}

// TestActivationWindowIsCheckedAgainstActivatedAt: once activated inside its
// envelope window, a snapshot keeps running on renewed leases long after the
// envelope's expiresAt; the runtime's clock only judges the lease.
func TestActivationWindowIsCheckedAgainstActivatedAt(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	s := w.spec(1)
	s.envFrom, s.envTo = t0.Add(-24*time.Hour), t0.Add(21*24*time.Hour) // a 504h profile
	s.activatedAt = t0.Add(-time.Minute)
	w.srv.set(w.build(s), nil)
	mustLoad(t, c, client.OutcomeApplied)

	// Renew every day for 90 days: same sequence and activatedAt, later
	// issuedAt and lease. The envelope window ended after 21 days.
	for day := 1; day <= 90; day++ {
		w.clock.Advance(24 * time.Hour)
		now := w.clock.Now()
		s.issuedAt, s.leaseFrom, s.leaseTo = now, now.Add(-time.Minute), now.Add(36*time.Hour)
		w.srv.set(w.build(s), nil)
		ev := loadWant(t, c, client.OutcomeApplied, client.ReasonLeaseRenewed)
		if ev.FailedClosed {
			t.Fatalf("day %d: failed closed", day)
		}
	}
	if _, err := c.Current(); err != nil {
		t.Fatalf("after 90 days of renewals: %v", err)
	}

	// A pointer move to a snapshot whose window has passed is refused even
	// with a fresh lease: it was activated outside its window.
	late := w.spec(2)
	late.envFrom, late.envTo = t0.Add(-24*time.Hour), t0.Add(21*24*time.Hour)
	late.activatedAt = w.clock.Now()
	w.srv.set(w.build(late), nil)
	ev := loadWant(t, c, client.OutcomeRejected, client.ReasonOutsideActivationWindow)
	if ev.CurrentSnapshotID == "" || ev.FailedClosed {
		t.Fatalf("refused move: got current %q failedClosed %v, want release 1 kept", ev.CurrentSnapshotID, ev.FailedClosed)
	}

	// Activated one second before the window ends: accepted.
	edge := w.spec(2)
	edge.sequence = 3
	edge.envFrom, edge.envTo = w.clock.Now().Add(-21*24*time.Hour), w.clock.Now().Add(time.Hour)
	edge.activatedAt = edge.envTo.Add(-time.Second)
	w.srv.set(w.build(edge), nil)
	loadWant(t, c, client.OutcomeApplied, client.ReasonNewSnapshot)

	// Renewals stop: the lease (not the envelope) decides when to fail closed.
	lease := w.clock.Now().Add(2 * time.Hour)
	w.srv.Close()
	w.clock.Advance(2*time.Hour + 29*time.Second)
	if _, err := c.Current(); err != nil {
		t.Fatalf("within lease + skew: %v", err)
	}
	w.clock.Advance(time.Second)
	if _, err := c.Current(); !errors.Is(err, client.ErrExpired) {
		t.Fatalf("at lease %s + skew: got %v, want ErrExpired", lease.Format(time.RFC3339), err)
	}
}

// TestEpochRule: the manifest's revocationEpoch is authoritative. It may be
// above the envelope's, never below it, and never below the highest seen.
func TestEpochRule(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	s1 := w.spec(1) // envelope epoch 3
	w.srv.set(w.build(s1), nil)
	mustLoad(t, c, client.OutcomeApplied)

	// The promoter raises the epoch at a pointer move: manifest 5 > envelope 3.
	s2 := w.spec(2)
	s2.manifestEpoch = 5
	w.srv.set(w.build(s2), nil)
	if ev := loadWant(t, c, client.OutcomeApplied, client.ReasonNewSnapshot); ev.SnapshotID != w.build(s2).Manifest.SnapshotID {
		t.Fatalf("raised epoch: applied %s", ev.SnapshotID)
	}

	// A manifest below its own envelope's epoch.
	s3 := w.spec(3)
	s3.epoch, s3.manifestEpoch = 7, 6
	w.srv.set(w.build(s3), nil)
	if ev := loadWant(t, c, client.OutcomeRejected, client.ReasonEpochBelowEnvelope); ev.Field != "manifest.revocationEpoch" {
		t.Fatalf("field: got %q", ev.Field)
	}

	// A later move signed with epoch 4 < seen 5 (envelope 3 <= 4).
	s4 := w.spec(4)
	s4.manifestEpoch = 4
	w.srv.set(w.build(s4), nil)
	loadWant(t, c, client.OutcomeRejected, client.ReasonRevocationRegression)

	// Replay of release 1's manifest (lower sequence, lower epoch): refused,
	// the epoch being checked first.
	w.srv.set(w.build(s1), nil)
	loadWant(t, c, client.OutcomeRejected, client.ReasonRevocationRegression)
	// Replay of the applied manifest with an older issuedAt: refused.
	older := s2
	older.issuedAt = s2.issuedAt.Add(-time.Minute)
	w.srv.set(w.build(older), nil)
	loadWant(t, c, client.OutcomeRejected, client.ReasonSequenceRegression)

	// A legitimate rollback: release 1's (older) snapshot under a new
	// manifest with a higher sequence and the current epoch.
	back := w.spec(1)
	back.sequence, back.manifestEpoch = 9, 5
	w.srv.set(w.build(back), nil)
	if ev := loadWant(t, c, client.OutcomeApplied, client.ReasonNewSnapshot); ev.ReleaseVersion != 1 || ev.Sequence != 9 {
		t.Fatalf("rollback: got release %d sequence %d", ev.ReleaseVersion, ev.Sequence)
	}

	// The seen epoch survives a restart (seen-state file).
	c2 := w.client()
	s4b := s4 // epoch 4 < 5, at a sequence above every one seen
	s4b.sequence = 10
	w.srv.set(w.build(s4b), nil)
	loadWant(t, c2, client.OutcomeRejected, client.ReasonRevocationRegression)
}

// TestSeenStateOutlivesTheLastKnownGood: the highest position is kept in its
// own file; truncating, corrupting or deleting the last-known-good does not
// forget it, so a replayed older manifest is still refused after a restart.
func TestSeenStateOutlivesTheLastKnownGood(t *testing.T) {
	for _, damage := range []struct {
		name string
		do   func(t *testing.T, path string)
	}{
		{"truncated", func(t *testing.T, p string) { writeRaw(t, p, readFile(t, p)[:20]) }},
		{"corrupted", func(t *testing.T, p string) {
			b := readFile(t, p)
			b[len(b)/2] ^= 0xff
			writeRaw(t, p, b)
		}},
		{"deleted", func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}},
		{"unreadable (a directory)", func(t *testing.T, p string) {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(damage.name, func(t *testing.T) {
			w := newWorld(t)
			r1 := w.build(w.spec(1))
			w.srv.set(r1, nil)
			c := w.client()
			mustLoad(t, c, client.OutcomeApplied)
			w.srv.set(w.build(w.spec(2)), nil)
			mustLoad(t, c, client.OutcomeApplied)
			if _, err := os.Stat(c.SeenPath()); err != nil {
				t.Fatalf("seen-state file: %v", err)
			}
			damage.do(t, c.CachePath())

			w.srv.set(r1, nil) // replay: release 1's authentic manifest, sequence 1 < 2
			c2 := w.client()
			ev, err := c2.Load(context.Background())
			if ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonSequenceRegression {
				t.Fatalf("replay after the last-known-good was %s: got %s %s (%v), want REJECTED SEQUENCE_REGRESSION", damage.name, ev.Outcome, ev.Reason, err)
			}
			if _, err := c2.Current(); err == nil {
				t.Fatal("the replayed release became current")
			}
		})
	}
}

// TestSeenStateFileDamageFailsLoudly: a damaged seen-state file refuses every
// load (nothing is applied) until it is repaired or removed.
func TestSeenStateFileDamageFailsLoudly(t *testing.T) {
	w := newWorld(t)
	w.srv.set(w.build(w.spec(1)), nil)
	c := w.client()
	mustLoad(t, c, client.OutcomeApplied)
	b := readFile(t, c.SeenPath())
	writeRaw(t, c.SeenPath(), b[:len(b)-3])

	w.srv.set(w.build(w.spec(2)), nil)
	c2 := w.client()
	ev, err := c2.Load(context.Background())
	if ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonSeenStateUnreadable || !errors.Is(err, client.ErrRejected) {
		t.Fatalf("got %s %s %v, want REJECTED SEEN_STATE_UNREADABLE", ev.Outcome, ev.Reason, err)
	}
	if _, err := c2.Current(); err == nil {
		t.Fatal("a snapshot was applied without a readable seen-state")
	}
	if err := os.Remove(c.SeenPath()); err != nil {
		t.Fatal(err)
	}
	mustLoad(t, c2, client.OutcomeApplied)
}

// TestSeenStateUnwritableRefusesToApply: when the seen-state cannot be
// persisted the candidate is not applied and the load fails.
func TestSeenStateUnwritableRefusesToApply(t *testing.T) {
	w := newWorld(t)
	w.srv.set(w.build(w.spec(1)), nil)
	blocker := filepath.Join(w.dir, "not-a-directory")
	writeRaw(t, blocker, []byte("x"))
	c := w.client(func(o *client.Options) { o.CacheDir = filepath.Join(blocker, "cache") })
	ev, err := c.Load(context.Background())
	if ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonSeenStateUnwritable || err == nil {
		t.Fatalf("got %s %s %v, want REJECTED SEEN_STATE_UNWRITABLE", ev.Outcome, ev.Reason, err)
	}
	if _, err := c.Current(); err == nil {
		t.Fatal("applied although the seen-state could not be persisted")
	}
}

// TestDistrustedKeyForgetsWhatItSigned: a leaked key signs a sequence far
// ahead; while it is trusted the legitimate manifests are refused as
// replays; removing it from the trusted set discards what it signed.
func TestDistrustedKeyForgetsWhatItSigned(t *testing.T) {
	w := newWorld(t)
	leaked := newKeyPair(t)
	both := func(o *client.Options) { o.TrustedKeys = []signing.TrustedKey{w.key.trusted, leaked.trusted} }
	c := w.client(both)
	w.srv.set(w.build(w.spec(1)), nil)
	mustLoad(t, c, client.OutcomeApplied)

	ff := w.spec(2)
	ff.sequence, ff.manifestEpoch, ff.signer = 1<<50, 1<<40, &leaked
	w.srv.set(w.build(ff), nil)
	mustLoad(t, c, client.OutcomeApplied)

	legit := w.spec(3)
	w.srv.set(w.build(legit), nil)
	loadWant(t, c, client.OutcomeRejected, client.ReasonRevocationRegression)
	loadWant(t, w.client(both), client.OutcomeRejected, client.ReasonRevocationRegression) // after a restart too

	// The operator distrusts the leaked key: its sequence and epoch are gone.
	c2 := w.client()
	ev := loadWant(t, c2, client.OutcomeApplied, client.ReasonNewSnapshot)
	if ev.Sequence != 3 {
		t.Fatalf("got sequence %d, want 3", ev.Sequence)
	}
	// ... and a replay below the legitimate key's own position still fails.
	w.srv.set(w.build(w.spec(1)), nil)
	loadWant(t, c2, client.OutcomeRejected, client.ReasonSequenceRegression)
}

// TestNoRedirectIsFollowed: a Config Server (or anything in front of it)
// answering a redirect to another port of the same host gets neither the
// request nor the token, for loads and for evidence reports.
func TestNoRedirectIsFollowed(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		mu.Lock()
		leaked = append(leaked, r.Method+" "+r.URL.Path+" auth="+r.Header.Get("Authorization"))
		mu.Unlock()
		rw.WriteHeader(http.StatusNoContent)
	}))
	defer other.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		w := newWorld(t)
		w.srv.setRaw(func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, other.URL+r.URL.RequestURI(), code)
		})
		c := w.client()
		ev := loadWant(t, c, client.OutcomeUnavailable, client.ReasonRedirectRefused)
		if !ev.FailedClosed {
			t.Fatalf("%d: got a current snapshot from a redirect", code)
		}
		// Evidence reports go through the same client.
		redirectAll := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			http.Redirect(rw, r, other.URL+r.URL.RequestURI(), code)
		}))
		c2 := w.client(func(o *client.Options) { o.ServerURL = redirectAll.URL; o.HTTPClient = redirectAll.Client() })
		rep := &client.Evidence{Outcome: client.OutcomeRejected, Reason: client.ReasonDigestMismatch, ObservedAt: t0}
		if err := c2.ReportEvidence(context.Background(), rep); err == nil {
			t.Fatalf("%d: evidence report through a redirect succeeded", code)
		}
		redirectAll.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(leaked) != 0 {
		t.Fatalf("requests reached the redirect target: %q", leaked)
	}
}
