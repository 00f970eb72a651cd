package configserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/configserver/pgstore"
)

// TestLaggingStandbyDoesNotAnswerARuntimeAheadOfIt: two real Config
// Servers behind one load balancer, one reading the primary and one a real
// hot standby whose replay is paused (within --max-replica-lag, so it
// serves). The pointer moves on the primary; a runtime answered by the
// primary holds the new snapshot. Its next request reaches the standby,
// which still has the older pointer: it answers 503 with Retry-After (the
// runtime holds a higher sequence, X-Config-Held-Sequence), at once for a
// conditional watch too, and the runtime keeps its snapshot and reports
// the load UNAVAILABLE. The standby answered the older pointer, which the
// runtime refused as SEQUENCE_REGRESSION and reported REJECTED — evidence
// against a snapshot nobody offered it as new. A request without the
// header (a runtime that does not send it) is answered as before. Once the
// standby catches up it answers the runtime's conditional request with 304.
func TestLaggingStandbyDoesNotAnswerARuntimeAheadOfIt(t *testing.T) {
	primary, r1, r2 := goldenEnv(t)
	kid, err := auth.Thumbprint(primary.tokenKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	tokenKey := auth.Key{ID: kid, Algorithm: auth.ES256, Public: primary.tokenKey.Public()}
	standby := newEnv(t, envOptions{storeURL: primary.db.ReplicaURLFor(t, "configpub_server"), owner: primary.db.Pool(t),
		store: pgstore.Options{FollowInterval: 20 * time.Millisecond, MaxReplicaLag: time.Hour},
		keys:  func(own auth.Key) auth.KeySource { return auth.NewStaticKeys([]auth.Key{own, tokenKey}) }})
	standby.runOn(goldenClock) // as the primary's server
	waitServed(t, standby, r1.Identity, r1.Audience, r1.ID)

	// The load balancer sends each request to the server chosen last.
	var toStandby atomic.Bool
	pu, _ := url.Parse(primary.srv.URL)
	su, _ := url.Parse(standby.srv.URL)
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := pu
		if toStandby.Load() {
			target = su
		}
		httputil.NewSingleHostReverseProxy(target).ServeHTTP(w, r)
	}))
	t.Cleanup(lb.Close)

	c := goldenClient(t, primary, lb.URL)
	ctx := context.Background()
	if ev, err := c.Load(ctx); err != nil || ev.SnapshotID != r1.ID {
		t.Fatalf("first load: %+v %v", ev, err)
	}
	resume := primary.db.PauseReplay(t)
	primary.seed.moveAt(t, r2, goldenIssued.Add(30*time.Second), 5*time.Minute, 15*time.Minute)
	waitServed(t, primary, r2.Identity, r2.Audience, r2.ID)
	if ev, err := c.Load(ctx); err != nil || ev.Outcome != client.OutcomeApplied || ev.SnapshotID != r2.ID {
		t.Fatalf("load from the primary after the move: %s %s %v, want %s APPLIED", ev.Outcome, ev.SnapshotID, err, r2.ID)
	}
	held := c.Status().Current.Sequence
	time.Sleep(100 * time.Millisecond) // several follow rounds: the standby still has r1
	tok := primary.token(t, r1.Identity, r1.Audience)
	if resp, _ := standby.do(t, http.MethodHead, configsPath(r1.Identity), tok); resp.Header.Get("X-Config-Snapshot-Id") != r1.ID {
		t.Fatalf("the standby with replay paused serves %s, want the older %s", resp.Header.Get("X-Config-Snapshot-Id"), r1.ID)
	}

	toStandby.Store(true)
	ev, err := c.Load(ctx)
	if !errors.Is(err, client.ErrUnavailable) || ev.Outcome != client.OutcomeUnavailable || ev.Reason != client.ReasonServerError {
		t.Fatalf("load answered by the lagging standby: %s %s (%s) %v, want UNAVAILABLE SERVER_ERROR", ev.Outcome, ev.Reason, ev.Detail, err)
	}
	if cur, err := c.Current(); err != nil || cur.SnapshotID != r2.ID {
		t.Fatalf("after the standby's answer: current %v %v, want %s kept", cur, err, r2.ID)
	}
	if st := c.Status(); st.LastRejected != nil {
		t.Fatalf("after the standby's answer: lastRejected %+v, want none", st.LastRejected)
	}
	etag := `"` + r2.ArtifactDigest + `"`
	start := time.Now()
	resp, _ := standby.do(t, http.MethodGet, configsPath(r1.Identity)+"&wait=30s", tok,
		"If-None-Match", etag, bundle.HeaderHeldSequence, strconv.FormatInt(held, 10))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || time.Since(start) > 5*time.Second {
		t.Fatalf("conditional watch on the standby from a runtime ahead of it: %d (Retry-After %q) after %s, want 503 with Retry-After at once",
			resp.StatusCode, resp.Header.Get("Retry-After"), time.Since(start))
	}
	if resp, _ := standby.do(t, http.MethodGet, configsPath(r1.Identity), tok, "If-None-Match", etag); resp.StatusCode != http.StatusOK ||
		resp.Header.Get("X-Config-Snapshot-Id") != r1.ID {
		t.Fatalf("request without %s: %d %s, want 200 with the standby's pointer", bundle.HeaderHeldSequence, resp.StatusCode, resp.Header.Get("X-Config-Snapshot-Id"))
	}

	resume()
	waitServed(t, standby, r2.Identity, r2.Audience, r2.ID)
	if ev, err := c.Load(ctx); err != nil || ev.Outcome != client.OutcomeUnchanged {
		t.Fatalf("load from the standby caught up: %s %s %v, want UNCHANGED", ev.Outcome, ev.Reason, err)
	}
}
