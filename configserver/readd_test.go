package configserver_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
)

// TestRetiredIdentityReAddedIsTakenByARuntimeThatKeptItsCache follows one
// runtime (agent advisor) that keeps its cache dir for weeks while its
// target is retired and re-added with the same identity: release 1 has it,
// an epoch raise signs it at epoch 2, release 2 drops it (410, RETIRED, the
// last-known-good kept until its lease ends, then failed closed), release
// 3 — a week later — brings the same identity back. A runtime restarted on
// the same cache dir (its seen-state holding the highest sequence and epoch
// 2) takes release 3's pointer: the sequence continued above everything it
// had seen, the epoch is not below 2. A rollback to 2 retires it again and
// a forward activation of 3 brings it back once more, each with a higher
// sequence.
func TestRetiredIdentityReAddedIsTakenByARuntimeThatKeptItsCache(t *testing.T) {
	t.Parallel()
	advValues, adv := readGoldenAdvisor(t)
	accValues, acc := readGolden(t, "com.networknt.agent-account-1.0.0")
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	clock := simclock.New(goldenCreatedAt.Add(time.Hour))
	ps, key := e.openPromoter(t, clock.Now)
	trusted, err := signing.NewTrustedKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	advT, accT := adv.promoterTarget(advValues), acc.promoterTarget(accValues)
	id := bundle.Identity{Host: adv.Host, ServiceID: adv.ServiceID, EnvTag: adv.EnvTag}
	tok := e.token(t, id, adv.Audience)
	cache := t.TempDir()
	runtime := func() *client.Client {
		c, err := client.New(client.Options{ServerURL: e.srv.URL, Identity: id, Audience: adv.Audience,
			TokenSource: func(context.Context) (string, error) { return tok, nil },
			TrustedKeys: []signing.TrustedKey{trusted}, Clock: clock, CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	release := func(v int64, ts ...promoter.Target) promoter.ReleaseInput {
		return promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: "prod", ReleaseVersion: v,
			BaseReleaseVersion: v - 1, ManifestBytes: []byte("release manifest of the re-add test\n"),
			Actor: "ci", Reason: "r", Targets: ts}
	}

	if _, err := ps.RecordAndActivate(ctx, release(1, advT, accT)); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusOK, adv.SnapshotID)
	rt := runtime()
	ev, err := rt.Load(ctx)
	if err != nil {
		t.Fatalf("release 1: %v (%+v)", err, ev)
	}
	clock.Advance(time.Minute)
	if _, err := ps.RaiseEpoch(ctx, promoter.EpochInput{CommandID: uuid.NewString(), EnvTag: "prod", Epoch: 2,
		Actor: "sec", Reason: "raise"}); err != nil {
		t.Fatal(err)
	}
	waitSequenceAbove(t, e, id, ev.Sequence)
	if ev, err = rt.Load(ctx); err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("epoch 2: %v (%+v)", err, ev)
	}
	seen := ev.Sequence

	// Release 2 retires it: 410, RETIRED, the last-known-good kept until
	// its lease ends, then failed closed.
	clock.Advance(time.Minute)
	if _, err := ps.RecordAndActivate(ctx, release(2, accT)); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusGone, "")
	ev, err = rt.Load(ctx)
	if !errors.Is(err, client.ErrUnavailable) || ev.Reason != client.ReasonRetired || ev.CurrentSnapshotID != adv.SnapshotID {
		t.Fatalf("retired: %v (%+v), want UNAVAILABLE RETIRED with the snapshot kept", err, ev)
	}
	clock.Advance(20 * time.Minute)
	if ev, err = rt.Load(ctx); !errors.Is(err, client.ErrExpired) {
		t.Fatalf("retired past the lease: %v (%+v), want a fail-closed EXPIRED", err, ev)
	}

	// A week later release 3 brings the same identity back; the runtime
	// restarts on the cache dir it kept.
	clock.Advance(7 * 24 * time.Hour)
	if _, err := ps.RecordAndActivate(ctx, release(3, advT, accT)); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusOK, adv.SnapshotID)
	// The runtime that failed closed takes it, and so does one restarted
	// on the cache dir.
	if ev, err = rt.Load(ctx); err != nil || ev.Sequence <= seen {
		t.Fatalf("re-added, the runtime that failed closed: %v (%+v), want it applied above %d", err, ev, seen)
	}
	rt = runtime()
	ev, err = rt.Load(ctx)
	if err != nil || ev.Sequence <= seen || ev.CurrentSnapshotID != adv.SnapshotID {
		t.Fatalf("re-added: %v (%+v), want it applied with a sequence above %d", err, ev, seen)
	}
	seen = ev.Sequence

	// Rollback to 2 retires it again; activating 3 brings it back above.
	clock.Advance(time.Hour)
	if _, err := ps.Rollback(ctx, promoter.RollbackInput{CommandID: uuid.NewString(), EnvTag: "prod", ToRelease: 2,
		Actor: "oncall", Reason: "back"}); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusGone, "")
	if ev, err = rt.Load(ctx); ev.Reason != client.ReasonRetired {
		t.Fatalf("rolled back: %v (%+v), want RETIRED", err, ev)
	}
	clock.Advance(time.Hour)
	if _, err := ps.Activate(ctx, promoter.MoveInput{CommandID: uuid.NewString(), EnvTag: "prod", Release: 3,
		Actor: "oncall", Reason: "forward"}); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusOK, adv.SnapshotID)
	if ev, err = runtime().Load(ctx); err != nil || ev.Sequence <= seen {
		t.Fatalf("forward again: %v (%+v), want it applied with a sequence above %d", err, ev, seen)
	}
}

// waitSequenceAbove waits (at most a second) until the manifest served for
// id has a sequence above seq.
func waitSequenceAbove(t *testing.T, e *env, id bundle.Identity, seq int64) {
	t.Helper()
	tok := e.token(t, id, "agent")
	start := time.Now()
	for {
		resp, _ := e.do(t, http.MethodHead, configsPath(id), tok)
		if raw := resp.Header.Get("X-Config-Manifest"); raw != "" {
			if b, err := base64.RawURLEncoding.DecodeString(raw); err == nil {
				if m, err := bundle.ParseDeliveryManifest(b); err == nil && m.Sequence > seq {
					return
				}
			}
		}
		if time.Since(start) > time.Second {
			t.Fatalf("%s: no manifest above sequence %d a second after the commit", id, seq)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitAgent is waitAnswer for an agent identity.
func waitAgent(t *testing.T, e *env, id bundle.Identity, want int, snapshot string) {
	t.Helper()
	tok := e.token(t, id, "agent")
	start := time.Now()
	for {
		resp, _ := e.do(t, http.MethodHead, configsPath(id), tok)
		if resp.StatusCode == want && (want != http.StatusOK || resp.Header.Get("X-Config-Snapshot-Id") == snapshot) {
			return
		}
		if time.Since(start) > time.Second {
			t.Fatalf("%s: got %d (snapshot %q) a second after the commit, want %d %s", id, resp.StatusCode,
				resp.Header.Get("X-Config-Snapshot-Id"), want, snapshot)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestServiceIDReusedForAnotherAudience: host-1's service id is an agent
// in release 1, retired by release 2 and given to a gateway by release 3.
// While retired, a token of either audience gets 410; once release 3 is
// active the gateway token is served the gateway snapshot under a higher
// sequence and the old agent token gets 403, never the gateway's bytes.
func TestServiceIDReusedForAnotherAudience(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ls := newLifecycleStore(t, e)
	ctx := context.Background()
	id := lifecycleID(1)
	agent := lifecycleTarget(1, 1, true)
	agent.Audience = "agent"
	gw := lifecycleTarget(1, 3, true)
	r1 := lifecycleRelease(1, lifecycleTarget(0, 1, true), agent)
	r2 := lifecycleRelease(2, lifecycleTarget(0, 1, false))
	r3 := lifecycleRelease(3, lifecycleTarget(0, 1, false), gw)
	if _, err := ls.RecordAndActivate(ctx, r1); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusOK, agent.SnapshotID)
	var seq1 int64
	if err := e.db.Pool(t).QueryRow(ctx, `SELECT sequence FROM configpub.current_pointer WHERE host = 'host-1'`).Scan(&seq1); err != nil {
		t.Fatal(err)
	}
	ls.advance(30 * 24 * time.Hour)
	if _, err := ls.RecordAndActivate(ctx, r2); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusGone, "")
	waitAnswer(t, e, id, http.StatusGone, "")
	ls.advance(30 * 24 * time.Hour)
	// The fixture's windows end three weeks after 2026-11-29: release 3's
	// new snapshot is given one around the simulated time.
	gw.ValidFrom, gw.ExpiresAt = ls.now.Add(-time.Hour), ls.now.Add(21*24*time.Hour)
	r3.Targets[1] = gw
	if _, err := ls.RecordAndActivate(ctx, r3); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, e, id, http.StatusOK, gw.SnapshotID)
	resp, _ := e.do(t, http.MethodHead, configsPath(id), e.token(t, id, "agent"))
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Config-Snapshot-Id") != "" {
		t.Fatalf("the old agent token after the reuse: got %d (snapshot %q), want 403", resp.StatusCode, resp.Header.Get("X-Config-Snapshot-Id"))
	}
	var seq3 int64
	if err := e.db.Pool(t).QueryRow(ctx, `SELECT sequence FROM configpub.current_pointer WHERE host = 'host-1'`).Scan(&seq3); err != nil {
		t.Fatal(err)
	}
	if seq3 <= seq1 {
		t.Fatalf("sequence after the reuse %d, want above release 1's %d", seq3, seq1)
	}
	st, err := ls.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range st.Targets {
		if tg.Host == "host-1" && (tg.Audience != "gateway" || tg.State == promoter.TargetRetired) {
			t.Fatalf("status of the reused identity: %+v, want the gateway, not retired", tg)
		}
	}
}

// TestClientWatchTakesTheReAddedTarget: a watching runtime whose target a
// release retires reports RETIRED and keeps asking (each request held
// while the identity is retired); the release that re-adds the identity
// reaches it within a second of its commit, at a higher sequence, its
// lease still running.
func TestClientWatchTakesTheReAddedTarget(t *testing.T) {
	t.Parallel()
	advValues, adv := readGoldenAdvisor(t)
	accValues, acc := readGolden(t, "com.networknt.agent-account-1.0.0")
	e := newEnv(t, envOptions{})
	clock := simclock.New(goldenCreatedAt.Add(time.Hour))
	ps, key := e.openPromoter(t, clock.Now)
	trusted, err := signing.NewTrustedKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	advT, accT := adv.promoterTarget(advValues), acc.promoterTarget(accValues)
	id := bundle.Identity{Host: adv.Host, ServiceID: adv.ServiceID, EnvTag: adv.EnvTag}
	tok := e.token(t, id, adv.Audience)
	c, err := client.New(client.Options{ServerURL: e.srv.URL, Identity: id, Audience: adv.Audience,
		TokenSource: func(context.Context) (string, error) { return tok, nil },
		TrustedKeys: []signing.TrustedKey{trusted}, Clock: clock, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	release := func(v int64, ts ...promoter.Target) {
		t.Helper()
		if _, err := ps.RecordAndActivate(context.Background(), promoter.ReleaseInput{CommandID: uuid.NewString(),
			EnvTag: "prod", ReleaseVersion: v, BaseReleaseVersion: v - 1,
			ManifestBytes: []byte("release manifest of the watch re-add test\n"), Actor: "ci", Reason: "r", Targets: ts}); err != nil {
			t.Fatal(err)
		}
	}
	release(1, advT, accT)
	evs := make(chan *client.Evidence, 256)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Watch(ctx, 2*time.Second, func(ev *client.Evidence, _ error) { evs <- ev })
	}()
	t.Cleanup(func() { cancel(); <-done })
	first := nextApplied(t, evs, 5*time.Second)

	clock.Advance(time.Minute)
	release(2, accT)
	for retired := false; !retired; {
		select {
		case ev := <-evs:
			retired = ev.Reason == client.ReasonRetired
		case <-time.After(5 * time.Second):
			t.Fatal("no RETIRED evidence after the retirement")
		}
	}
	clock.Advance(time.Minute)
	release(3, advT, accT)
	committed := time.Now()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-evs:
			if ev.Sequence > first.Sequence && (ev.Outcome == client.OutcomeApplied || ev.Outcome == client.OutcomeUnchanged) {
				if lag := time.Since(committed); lag > time.Second {
					t.Fatalf("the re-added target reached the watching runtime after %s, want within 1s", lag)
				}
				return
			}
		case <-deadline:
			t.Fatal("the watching runtime did not take the re-added target")
		}
	}
}

// TestWatchAnswersAtOnceARuntimeHoldingAnOlderManifest: release 3 brings
// back, at the same snapshot, an identity release 2 retired. A watch whose
// If-None-Match names that snapshot and whose X-Config-Held-Sequence is
// the pre-retirement manifest's was held until the wait ended (the runtime
// learned of the re-add up to a wait, by default 5 minutes, late); it is
// answered at once with the current manifest (304). A runtime holding the
// current manifest is still held.
func TestWatchAnswersAtOnceARuntimeHoldingAnOlderManifest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ls := newLifecycleStore(t, e)
	ctx := context.Background()
	id := lifecycleID(1)
	r1 := lifecycleRelease(1, lifecycleTarget(0, 1, true), lifecycleTarget(1, 1, true))
	if _, err := ls.RecordAndActivate(ctx, r1); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, e, id, http.StatusOK, r1.Targets[1].SnapshotID)
	seq := func() int64 {
		var n int64
		if err := e.db.Pool(t).QueryRow(ctx, `SELECT sequence FROM configpub.current_pointer WHERE host = $1`, id.Host).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	seq1 := seq()
	ls.advance(time.Hour)
	if _, err := ls.RecordAndActivate(ctx, lifecycleRelease(2, lifecycleTarget(0, 1, false))); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, e, id, http.StatusGone, "")
	ls.advance(24 * time.Hour)
	if _, err := ls.RecordAndActivate(ctx, lifecycleRelease(3, lifecycleTarget(0, 1, false), lifecycleTarget(1, 1, false))); err != nil {
		t.Fatal(err)
	}
	waitAnswer(t, e, id, http.StatusOK, r1.Targets[1].SnapshotID)
	seq3 := seq()
	if seq3 <= seq1 {
		t.Fatalf("re-added at sequence %d, want above %d", seq3, seq1)
	}
	tok := e.token(t, id, "gateway")
	watch := func(held int64, wait string) (*http.Response, time.Duration) {
		req, err := http.NewRequest(http.MethodGet, e.srv.URL+configsPath(id)+"&wait="+wait, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("If-None-Match", `"`+r1.Targets[1].ArtifactDigest+`"`)
		req.Header.Set(bundle.HeaderHeldSequence, fmt.Sprint(held))
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp, time.Since(start)
	}
	resp, took := watch(seq1, "30s")
	if resp.StatusCode != http.StatusNotModified || took > time.Second {
		t.Fatalf("watch holding the pre-retirement manifest: %d after %s, want 304 at once", resp.StatusCode, took)
	}
	raw, err := base64.RawURLEncoding.DecodeString(resp.Header.Get(bundle.HeaderManifest))
	if err != nil {
		t.Fatal(err)
	}
	if m, err := bundle.ParseDeliveryManifest(raw); err != nil || m.Sequence != seq3 {
		t.Fatalf("304 manifest: %+v, %v; want sequence %d", m, err, seq3)
	}
	if resp, took := watch(seq3, "300ms"); resp.StatusCode != http.StatusNotModified || took < 250*time.Millisecond {
		t.Fatalf("watch holding the current manifest: %d after %s, want it held to the end of the wait", resp.StatusCode, took)
	}
}

// TestRollbackAcrossARetirementAfterItsWindow: release 2 retired host-1
// (host-0 unchanged); a month later, after host-1's snapshot's activation
// window ended, a rollback to release 1 — which would move only host-1,
// back from its retirement — is refused naming host-1, with nothing
// moved: host-1 stays 410, host-0 stays served.
func TestRollbackAcrossARetirementAfterItsWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ls := newLifecycleStore(t, e)
	ctx := context.Background()
	r1 := lifecycleRelease(1, lifecycleTarget(0, 1, true), lifecycleTarget(1, 1, true))
	r2 := lifecycleRelease(2, lifecycleTarget(0, 1, false))
	for _, r := range []promoter.ReleaseInput{r1, r2} {
		if _, err := ls.RecordAndActivate(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	waitAnswer(t, e, lifecycleID(1), http.StatusGone, "")
	ls.advance(30 * 24 * time.Hour)
	if _, err := ls.RenewLeases(ctx, "prod"); err != nil { // or host-0's lease ended a month ago (503)
		t.Fatal(err)
	}
	_, err := ls.Rollback(ctx, promoter.RollbackInput{CommandID: uuid.NewString(), EnvTag: "prod", ToRelease: 1,
		Actor: "oncall", Reason: "bring host-1 back"})
	var we *promoter.WindowError
	if !errors.As(err, &we) || we.Identity != lifecycleID(1).String() {
		t.Fatalf("rollback across the retirement after the windows ended: %v, want a WindowError", err)
	}
	waitAnswer(t, e, lifecycleID(1), http.StatusGone, "")
	waitAnswer(t, e, lifecycleID(0), http.StatusOK, r1.Targets[0].SnapshotID)
}

// TestEnvironmentAddedMidLife: while prod runs (and has moved on to its
// release 2), the first release of a new environment, staging, reaches the
// Config Server within a second, with prod's pointers untouched; a token
// for the prod identity is refused the staging one (403).
func TestEnvironmentAddedMidLife(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	ls := newLifecycleStore(t, e)
	ctx := context.Background()
	for _, r := range []promoter.ReleaseInput{
		lifecycleRelease(1, lifecycleTarget(0, 1, true)),
		lifecycleRelease(2, lifecycleTarget(0, 2, true)),
	} {
		if _, err := ls.RecordAndActivate(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	prod := lifecycleTarget(0, 2, true)
	waitAnswer(t, e, lifecycleID(0), http.StatusOK, prod.SnapshotID)
	ls.advance(40 * 24 * time.Hour)
	if _, err := ls.RenewLeases(ctx, "prod"); err != nil { // or prod's lease ended 40 days ago (503)
		t.Fatal(err)
	}
	st := lifecycleTarget(0, 1, true)
	st.EnvTag = "staging"
	st.SnapshotID = uuid.NewSHA1(uuid.NameSpaceOID, []byte("staging snapshot")).String()
	st.PublicationID = uuid.NewSHA1(uuid.NameSpaceOID, []byte("staging publication")).String()
	st.ValidFrom, st.ExpiresAt = ls.now.Add(-time.Hour), ls.now.Add(21*24*time.Hour)
	in := lifecycleRelease(1, st)
	in.EnvTag, in.CommandID = "staging", uuid.NewString()
	if _, err := ls.RecordAndActivate(ctx, in); err != nil {
		t.Fatal(err)
	}
	sid := bundle.Identity{Host: st.Host, ServiceID: st.ServiceID, EnvTag: "staging"}
	waitAnswer(t, e, sid, http.StatusOK, st.SnapshotID)
	waitAnswer(t, e, lifecycleID(0), http.StatusOK, prod.SnapshotID)
	resp, _ := e.do(t, http.MethodHead, configsPath(sid), e.token(t, lifecycleID(0), "gateway"))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a prod token asking for the staging identity: got %d, want 403", resp.StatusCode)
	}
	s, err := ls.Status(ctx, "staging")
	if err != nil || s.CurrentRelease != 1 || len(s.Targets) != 1 {
		t.Fatalf("status of the new environment: %+v, %v; want release 1 with its one target", s, err)
	}
}
