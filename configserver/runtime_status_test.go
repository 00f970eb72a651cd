package configserver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/readback"
)

// goldenCreatedAt is the golden prod target's createdAt: its activation
// window (the prod lease profile, 504 h) starts here.
var goldenCreatedAt = time.Date(2026, 8, 13, 14, 0, 0, 0, time.UTC)

// goldenRuntime is one compiled golden target activated by the real promoter
// on a real database and served by the real Config Server.
type goldenRuntime struct {
	e       *env
	ps      *promoter.Store
	clock   *simclock.Clock
	trusted signing.TrustedKey
	id      bundle.Identity
	aud     string
	target  promoter.Target
}

// activateGolden records and activates the golden prod advisor target at
// the clock's time with lease, as the promoter does.
func activateGolden(t *testing.T, clock *simclock.Clock, lease promoter.LeaseWindow) *goldenRuntime {
	t.Helper()
	values, f := readGoldenAdvisor(t)
	tg := f.promoterTarget(values)
	tg.Lease = lease
	e := newEnv(t, envOptions{handler: configserver.Options{Clock: clock.Now}})
	ps, key := e.openPromoter(t, clock.Now)
	trusted, err := signing.NewTrustedKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := ps.RecordAndActivate(ctx, promoter.ReleaseInput{
		CommandID: uuid.NewString(), EnvTag: tg.EnvTag, ReleaseVersion: 1, BaseReleaseVersion: 0,
		ManifestBytes: []byte("release manifest bytes of the test\n"), Actor: "configserver-test",
		Targets: []promoter.Target{tg},
	}); err != nil {
		t.Fatalf("promoter: record and activate: %v", err)
	}
	g := &goldenRuntime{e: e, ps: ps, clock: clock, trusted: trusted, target: tg, aud: tg.Audience,
		id: bundle.Identity{Host: tg.Host, ServiceID: tg.ServiceID, EnvTag: tg.EnvTag}}
	waitServed(t, e, g.id, g.aud, tg.SnapshotID)
	return g
}

// client returns a runtime client of the golden identity against url.
func (g *goldenRuntime) client(t *testing.T, url, cacheDir string) *client.Client {
	t.Helper()
	tok := g.e.token(t, g.id, g.aud)
	c, err := client.New(client.Options{ServerURL: url, Identity: g.id, Audience: g.aud,
		TokenSource: func(context.Context) (string, error) { return tok, nil },
		TrustedKeys: []signing.TrustedKey{g.trusted}, Clock: g.clock, CacheDir: cacheDir, Skew: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestStatusKeepsRejectionApartFromWhatRuns: a runtime applies the current
// snapshot, then rejects a tampered response (a proxy flips one body byte)
// and keeps running it. It reports both to the real Config Server with its
// workload token (observations), and the control plane reads its status
// endpoint back (receipts). Status shows the target APPLIED, running the
// desired snapshot, not diverged, acknowledged, with exactly one rejection
// (the receipt's; the observation is not counted again) recorded apart;
// history keeps them with the move they are about.
func TestStatusKeepsRejectionApartFromWhatRuns(t *testing.T) {
	t.Parallel()
	clock := simclock.New(goldenCreatedAt.Add(time.Hour))
	g := activateGolden(t, clock, promoter.LeaseWindow{RefreshAfter: 5 * time.Minute, ExpiresAfter: 15 * time.Minute})
	ctx := context.Background()

	var tamper sync.Mutex
	flip := false
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, g.e.srv.URL+r.URL.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		req.Header.Del("If-None-Match") // always a full response
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		tamper.Lock()
		if flip && len(body) > 0 {
			body[len(body)/2] ^= 1
		}
		tamper.Unlock()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}))
	defer proxy.Close()

	c := g.client(t, proxy.URL, t.TempDir())
	reporter := g.client(t, g.e.srv.URL, "")
	clock.Set(clock.Now().Add(time.Second))
	ev, err := c.Load(ctx)
	if err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("first load: %v (%+v)", err, ev)
	}
	if err := reporter.ReportEvidence(ctx, ev); err != nil {
		t.Fatalf("report APPLIED: %v", err)
	}
	tamper.Lock()
	flip = true
	tamper.Unlock()
	ev, _ = c.Load(ctx)
	if ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonDigestMismatch || ev.CurrentSnapshotID != g.target.SnapshotID {
		t.Fatalf("tampered load: got %s %s current %s, want REJECTED DIGEST_MISMATCH still running %s", ev.Outcome, ev.Reason, ev.CurrentSnapshotID, g.target.SnapshotID)
	}
	if err := reporter.ReportEvidence(ctx, ev); err != nil {
		t.Fatalf("report REJECTED: %v", err)
	}
	if st := targetStatus(t, g); st.State != promoter.TargetPublished || st.AcknowledgedAt != nil || st.RejectionsSinceMove != 0 {
		t.Fatalf("status from observations alone: got %s acknowledged %v rejections %d, want PUBLISHED, unacknowledged, none",
			st.State, st.AcknowledgedAt, st.RejectionsSinceMove)
	}
	col, store, target := g.readbackOf(t, c)
	if res, err := readback.Run(ctx, col, store, []readback.Target{target}); err != nil || len(res) != 1 || res[0].Recorded != 2 {
		t.Fatalf("readback: got %+v, %v; want two receipts (APPLIED, REJECTED) recorded", res, err)
	}

	st, err := g.ps.Status(ctx, g.id.EnvTag)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Targets) != 1 {
		t.Fatalf("got %d targets", len(st.Targets))
	}
	ts := st.Targets[0]
	if ts.State != promoter.TargetApplied || ts.Running == nil || ts.Running.SnapshotID != g.target.SnapshotID || ts.Diverged {
		t.Fatalf("status: got state %s running %+v diverged %v, want APPLIED running %s", ts.State, ts.Running, ts.Diverged, g.target.SnapshotID)
	}
	if ts.Running.ReleaseVersion != g.target.ReleaseVersion || ts.Running.PublicationID != g.target.PublicationID {
		t.Fatalf("running: got release %d publication %s", ts.Running.ReleaseVersion, ts.Running.PublicationID)
	}
	if ts.LastRejection == nil || ts.LastRejection.Reason != string(client.ReasonDigestMismatch) || ts.RejectionsSinceMove != 1 {
		t.Fatalf("status: got last rejection %+v (%d since move), want one DIGEST_MISMATCH", ts.LastRejection, ts.RejectionsSinceMove)
	}
	if ts.LastRejection.Kind != "receipt" || ts.LastRejection.RunningSnapshotID != g.target.SnapshotID ||
		ts.LastRejection.LastKnownGoodSnapshotID != g.target.SnapshotID || ts.LastRejection.PublicationID != g.target.PublicationID {
		t.Fatalf("rejection evidence: got %+v, want a receipt naming the running and last-known-good snapshot and the publication", ts.LastRejection)
	}
	if ts.AcknowledgedAt == nil {
		t.Fatal("status: the APPLIED receipt does not acknowledge the move")
	}
	moves, err := g.ps.History(ctx, g.id.EnvTag, promoter.HistoryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(moves) != 1 || moves[0].AppliedAt == nil || moves[0].Rejections != 1 {
		t.Fatalf("history: got %+v, want one move applied with one rejection", moves)
	}
}

// TestUnchangedTargetRunsForAYearOnRenewedLeases: a target no release
// changes keeps its snapshot for a simulated year while the promoter renews
// its lease every day (real promoter, database and Config Server, injected
// clock), far past the envelope's activation window (21 days); once the
// renewals stop, the runtime keeps its last-known-good only until the
// lease's expiresAt and then fails closed, restarted or not.
func TestUnchangedTargetRunsForAYearOnRenewedLeases(t *testing.T) {
	t.Parallel()
	clock := simclock.New(goldenCreatedAt.Add(time.Hour))
	lease := promoter.LeaseWindow{RefreshAfter: 12 * time.Hour, ExpiresAfter: 36 * time.Hour}
	g := activateGolden(t, clock, lease)
	ctx := context.Background()
	cache := t.TempDir()
	c := g.client(t, g.e.srv.URL, cache)
	if ev, err := c.Load(ctx); err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("first load: %v (%+v)", err, ev)
	}
	tok := g.e.token(t, g.id, g.aud)
	for day := 1; day <= 365; day++ {
		clock.Set(clock.Now().Add(24 * time.Hour))
		if _, err := g.ps.RenewLeases(ctx, g.id.EnvTag); err != nil {
			t.Fatalf("day %d: renew: %v", day, err)
		}
		waitLease(t, g.e, g.id, tok, clock.Now().Add(lease.ExpiresAfter))
		ev, err := c.Load(ctx)
		if err != nil || ev.Outcome != client.OutcomeApplied || ev.Reason != client.ReasonLeaseRenewed || ev.SnapshotID != g.target.SnapshotID {
			t.Fatalf("day %d (%s): got %s %s %v, want APPLIED LEASE_RENEWED of %s", day, clock.Now().Format(time.RFC3339), ev.Outcome, ev.Reason, err, g.target.SnapshotID)
		}
	}
	if _, err := c.Current(); err != nil {
		t.Fatalf("after a year: %v", err)
	}
	expires := clock.Now().Add(lease.ExpiresAfter)

	// Renewals stop. The last-known-good holds until the lease's expiresAt
	// (plus the 30 s skew), in the running runtime and after a restart.
	clock.Set(expires.Add(-time.Minute))
	if ev, err := c.Load(ctx); err != nil || ev.FailedClosed {
		t.Fatalf("a minute before the lease ends: %v (%+v)", err, ev)
	}
	if ev, err := g.client(t, g.e.srv.URL, cache).Restore(ctx); err != nil || ev.Reason != client.ReasonRestored {
		t.Fatalf("restart a minute before the lease ends: %v (%+v)", err, ev)
	}
	// The server answers 503 lease_ended (the lease ended by its clock),
	// not the ended lease for the runtime to refuse and report REJECTED.
	clock.Set(expires.Add(30 * time.Second))
	ev, err := c.Load(ctx)
	if !ev.FailedClosed || !errors.Is(err, client.ErrExpired) || ev.Outcome != client.OutcomeUnavailable {
		t.Fatalf("at the lease's end: got %s %s failedClosed %v (%v), want UNAVAILABLE (503 lease_ended) and failed closed EXPIRED", ev.Outcome, ev.Reason, ev.FailedClosed, err)
	}
	if err := c.Guard(); !errors.Is(err, client.ErrExpired) {
		t.Fatalf("guard at the lease's end: %v", err)
	}
	if _, err := g.client(t, g.e.srv.URL, cache).Restore(ctx); !errors.Is(err, client.ErrNoSnapshot) {
		t.Fatalf("restart at the lease's end: got %v, want no snapshot", err)
	}
}

// waitLease waits until the Config Server serves id's lease ending at want.
func waitLease(t *testing.T, e *env, id bundle.Identity, tok string, want time.Time) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := e.do(t, "HEAD", configsPath(id), tok)
		if got, err := time.Parse(time.RFC3339Nano, resp.Header.Get("X-Config-Expires-At")); err == nil && got.Equal(want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("renewed lease (expiresAt %s) not served within 5s; serving %q", want.Format(time.RFC3339), resp.Header.Get("X-Config-Expires-At"))
		}
		time.Sleep(2 * time.Millisecond)
	}
}
