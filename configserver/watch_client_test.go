package configserver_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/simclock"
)

// goldenIssued is inside the golden advisor envelope's activation window.
var goldenIssued = time.Date(2026, 8, 13, 14, 0, 0, 0, time.UTC)

// goldenRelease returns the golden prod advisor target as release n of its
// identity: release 1 is the fixture's exact bytes; a later one is the same
// namespace (so the same contentDigest) under its own publication, policy
// snapshot and release version, as a recompile would give it.
func goldenRelease(t *testing.T, n int64) *snapshot {
	t.Helper()
	values, tg := readGoldenAdvisor(t)
	sn := &snapshot{ID: tg.SnapshotID, PublicationID: tg.PublicationID, PolicySnapshotID: tg.PolicySnapshotID,
		Identity: bundle.Identity{Host: tg.Host, ServiceID: tg.ServiceID, EnvTag: tg.EnvTag}, Audience: tg.Audience,
		ReleaseVersion: tg.ReleaseVersion, ContentDigest: tg.ContentDigest, PolicyDigest: tg.PolicyDigest,
		PropertySetDigest: tg.PropertySetDigest, CompatibilityGeneration: tg.CompatibilityGeneration, Body: values}
	if n > 1 {
		name := func(kind string) string { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(fmt.Sprint(kind, n))).String() }
		pub, pol := name("publication"), name("policy")
		sn.Body = bytes.Replace(sn.Body, []byte(`publicationId: "`+tg.PublicationID+`"`), []byte(`publicationId: "`+pub+`"`), 1)
		sn.Body = bytes.Replace(sn.Body, []byte(`policySnapshotId: "`+tg.PolicySnapshotID+`"`), []byte(`policySnapshotId: "`+pol+`"`), 1)
		sn.Body = bytes.Replace(sn.Body, []byte(fmt.Sprintf("releaseVersion: %d\n", tg.ReleaseVersion)), []byte(fmt.Sprintf("releaseVersion: %d\n", n)), 1)
		sn.ID, sn.PublicationID, sn.PolicySnapshotID, sn.ReleaseVersion = name("snapshot"), pub, pol, n
	}
	sn.ArtifactDigest = digestOf(sn.Body)
	return sn
}

// goldenEnv is a server with releases 1 and 2 of the golden advisor
// stored and its pointer on release 1, running on goldenClock.
func goldenEnv(t *testing.T) (e *env, r1, r2 *snapshot) {
	t.Helper()
	e = newEnv(t, envOptions{})
	e.runOn(goldenClock) // the leases' time, as goldenClient's
	r1, r2 = goldenRelease(t, 1), goldenRelease(t, 2)
	e.seed.insert(t, r1)
	e.seed.insert(t, r2)
	e.seed.moveAt(t, r1, goldenIssued, 5*time.Minute, 15*time.Minute)
	waitServed(t, e, r1.Identity, r1.Audience, r1.ID)
	return e, r1, r2
}

// goldenClock stands a minute after goldenIssued: goldenEnv's server and
// goldenClient's runtime run on it, inside the golden leases.
func goldenClock() time.Time { return goldenIssued.Add(time.Minute) }

// goldenClient is a runtime client of the golden advisor identity over base
// whose clock stands a minute after goldenIssued.
func goldenClient(t *testing.T, e *env, base string, mods ...func(*client.Options)) *client.Client {
	t.Helper()
	_, tg := readGoldenAdvisor(t)
	id := bundle.Identity{Host: tg.Host, ServiceID: tg.ServiceID, EnvTag: tg.EnvTag}
	tok := e.token(t, id, tg.Audience)
	o := client.Options{ServerURL: base, Identity: id, Audience: tg.Audience,
		TokenSource: func(context.Context) (string, error) { return tok, nil },
		TrustedKeys: e.seed.trusted, Clock: fixedClock{goldenIssued.Add(time.Minute)}, CacheDir: t.TempDir()}
	for _, m := range mods {
		m(&o)
	}
	c, err := client.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// watchEvents runs c.Watch until the test ends and returns its evidence.
func watchEvents(t *testing.T, c *client.Client, interval time.Duration) <-chan *client.Evidence {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	evs := make(chan *client.Evidence, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Watch(ctx, interval, func(ev *client.Evidence, _ error) {
			select {
			case evs <- ev:
			default:
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return evs
}

// nextApplied returns the next APPLIED evidence within d, failing on any
// other outcome than UNCHANGED.
func nextApplied(t *testing.T, evs <-chan *client.Evidence, d time.Duration) *client.Evidence {
	t.Helper()
	return nextAppliedPassing(t, evs, d, false)
}

// nextAppliedAfterRejections is nextApplied that passes over REJECTED and
// UNAVAILABLE evidence.
func nextAppliedAfterRejections(t *testing.T, evs <-chan *client.Evidence, d time.Duration) *client.Evidence {
	t.Helper()
	return nextAppliedPassing(t, evs, d, true)
}

func nextAppliedPassing(t *testing.T, evs <-chan *client.Evidence, d time.Duration, failures bool) *client.Evidence {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case ev := <-evs:
			if ev.Outcome == client.OutcomeApplied {
				return ev
			}
			if !failures && ev.Outcome != client.OutcomeUnchanged {
				t.Fatalf("watch evidence: %s %s %s", ev.Outcome, ev.Reason, ev.Detail)
			}
		case <-deadline:
			t.Fatalf("no APPLIED evidence within %s", d)
			return nil
		}
	}
}

// TestClientWatchHeldByServer: the runtime client's Watch, against the
// real server, holds its request (no polling: nothing but UNCHANGED at the
// end of each wait) and applies a pointer move within a second of the
// commit, fully verified.
func TestClientWatchHeldByServer(t *testing.T) {
	t.Parallel()
	e, r1, r2 := goldenEnv(t)
	c := goldenClient(t, e, e.srv.URL)
	evs := watchEvents(t, c, time.Minute)
	if ev := nextApplied(t, evs, 5*time.Second); ev.SnapshotID != r1.ID {
		t.Fatalf("first load applied %s, want %s", ev.SnapshotID, r1.ID)
	}
	// Held: with a one-minute interval a polling client would not ask again
	// for a minute; a held one answers only when something changes.
	select {
	case ev := <-evs:
		t.Fatalf("evidence %s %s while nothing changed; want the request held", ev.Outcome, ev.Reason)
	case <-time.After(1500 * time.Millisecond):
	}
	e.seed.moveAt(t, r2, goldenIssued, 5*time.Minute, 15*time.Minute)
	committed := time.Now()
	ev := nextApplied(t, evs, 5*time.Second)
	if lag := time.Since(committed); ev.SnapshotID != r2.ID || lag > time.Second {
		t.Fatalf("after the move: applied %s %s after %s, want %s within 1s", ev.SnapshotID, ev.Reason, lag, r2.ID)
	}
	if s, err := c.Current(); err != nil || s.SnapshotID != r2.ID {
		t.Fatalf("current after the move: %v %v, want %s", s, err, r2.ID)
	}
}

// hiddenNotifier is a Store without the Notifier side, as a server that
// cannot hold requests (an older one) is.
type hiddenNotifier struct{ configserver.Store }

// TestClientWatchFallsBackToPolling: a server that answers wait= at once
// and without X-Config-Watch-Max is polled at the interval, with jitter,
// and a move is applied by the next poll.
func TestClientWatchFallsBackToPolling(t *testing.T) {
	t.Parallel()
	e, r1, r2 := goldenEnv(t)
	old := httptest.NewServer(configserver.NewHandler(hiddenNotifier{e.store}, configserver.Options{Verifier: e.verifier, Clock: goldenClock}))
	t.Cleanup(old.Close)
	c := goldenClient(t, e, old.URL)
	evs := watchEvents(t, c, 300*time.Millisecond)
	if ev := nextApplied(t, evs, 5*time.Second); ev.SnapshotID != r1.ID {
		t.Fatalf("first poll applied %s, want %s", ev.SnapshotID, r1.ID)
	}
	start := time.Now()
	unchanged := 0
	for unchanged < 3 {
		select {
		case ev := <-evs:
			if ev.Outcome != client.OutcomeUnchanged {
				t.Fatalf("poll: got %s %s, want UNCHANGED", ev.Outcome, ev.Reason)
			}
			unchanged++
		case <-time.After(3 * time.Second):
			t.Fatal("no poll within 3s with a 300ms interval")
		}
	}
	if took := time.Since(start); took < 700*time.Millisecond || took > 2*time.Second {
		t.Fatalf("3 polls took %s, want about 3 x 300ms (±10%%)", took)
	}
	e.seed.moveAt(t, r2, goldenIssued, 5*time.Minute, 15*time.Minute)
	if ev := nextApplied(t, evs, 3*time.Second); ev.SnapshotID != r2.ID {
		t.Fatalf("polling applied %s, want %s", ev.SnapshotID, r2.ID)
	}
}

// TestSetTrustedKeysWakesAHeldWatch: a runtime watching through a held
// request removes the key that signed its current lease (SetTrustedKeys):
// the held request ends at once and a load under the new keys follows —
// it was failed closed until the hold ran out (22.5 s with the default
// HTTP timeout) — and putting the key back applies again at once.
func TestSetTrustedKeysWakesAHeldWatch(t *testing.T) {
	t.Parallel()
	e, r1, _ := goldenEnv(t)
	c := goldenClient(t, e, e.srv.URL)
	evs := watchEvents(t, c, time.Minute)
	if ev := nextApplied(t, evs, 5*time.Second); ev.SnapshotID != r1.ID {
		t.Fatalf("first load applied %s, want %s", ev.SnapshotID, r1.ID)
	}
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := client.NewTrustedKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetTrustedKeys([]client.TrustedKey{other}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	select {
	case ev := <-evs:
		if ev.Outcome != client.OutcomeRejected || time.Since(start) > 2*time.Second {
			t.Fatalf("after the signing key was removed: %s %s after %s, want a prompt REJECTED load", ev.Outcome, ev.Reason, time.Since(start))
		}
	case <-time.After(3 * time.Second):
		t.Fatal("no load within 3 s of the trusted keys changing: the held request was waited out")
	}
	if err := c.SetTrustedKeys(e.seed.trusted); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if ev := nextAppliedAfterRejections(t, evs, 3*time.Second); ev.SnapshotID != r1.ID || time.Since(start) > 3*time.Second {
		t.Fatalf("after the key came back: applied %s after %s", ev.SnapshotID, time.Since(start))
	}
}

// TestClientWatchPastRefreshAfterDoesNotPoll: a runtime whose clock
// (simulated) stands past its lease's refreshAfter — renewals stopped, or
// its clock is ahead — while the lease still runs asks the real server once
// without If-None-Match and then holds conditional requests again, about one
// full answer per interval. Each request past refreshAfter went without
// If-None-Match, was answered at once with the full body, and the early
// UNCHANGED answer was taken for a server shutting down (a retry after
// 500 ms): about 2 full GETs a second for as long as renewals stayed away.
func TestClientWatchPastRefreshAfterDoesNotPoll(t *testing.T) {
	t.Parallel()
	e, r1, r2 := goldenEnv(t) // lease from goldenIssued: refreshAfter +5m, expiresAt +15m
	var requests, full atomic.Int32
	counted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/configs" {
			requests.Add(1)
			if r.Header.Get("If-None-Match") == "" {
				full.Add(1)
			}
		}
		e.handler.ServeHTTP(w, r)
	}))
	t.Cleanup(counted.Close)
	clock := simclock.New(goldenIssued.Add(6 * time.Minute)) // past refreshAfter, no renewal
	c := goldenClient(t, e, counted.URL, func(o *client.Options) { o.Clock = clock })
	const interval = 2 * time.Second
	evs := watchEvents(t, c, interval)
	if ev := nextApplied(t, evs, 5*time.Second); ev.SnapshotID != r1.ID {
		t.Fatalf("first load applied %s, want %s", ev.SnapshotID, r1.ID)
	}
	const window = 6 * time.Second
	time.Sleep(window)
	// Held for the interval (2 s), one unconditional request after each
	// hold: about 3 of each in 6 s, where the loop made 12 full ones.
	n, f := requests.Load(), full.Load()
	t.Logf("in %s: %d requests, %d unconditional", window, n, f)
	if f > 5 || n > 9 {
		t.Fatalf("in %s past refreshAfter with a %s interval: %d requests, %d without If-None-Match; want at most 9 and 5", window, interval, n, f)
	}
	// The held requests still bring a pointer move at once.
	e.seed.moveAt(t, r2, goldenIssued.Add(6*time.Minute), 5*time.Minute, 15*time.Minute)
	committed := time.Now()
	ev := nextApplied(t, evs, 5*time.Second)
	if lag := time.Since(committed); ev.SnapshotID != r2.ID || lag > time.Second {
		t.Fatalf("after the move: applied %s %s after %s, want %s within 1s", ev.SnapshotID, ev.Reason, lag, r2.ID)
	}
}
