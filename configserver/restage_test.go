package configserver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/readback"
)

// TestTwoPhaseRealRestagedSnapshotIsReadAgain: release 2 is staged and the
// first runtime prefetches its candidate snapshot S and is READY; the
// second runtime's candidate is tampered with in transit, it REJECTS it and
// release 2 fails. Release 3 stages the same snapshots again (the first
// runtime's S unchanged; its current pointer never moved). The readback
// store keeps a receipt once per pointer move, and the first runtime's
// receipts about S for release 2 and release 3 differ only in loadedAt:
//
//   - a plain status read after release 3 is staged repeats the candidate
//     slots as release 2 left them (the READY of S and the REJECTED, both
//     verified under release 2's candidate manifests): nothing is
//     recorded, so release 3 neither counts the old READY nor fails on the
//     old rejection (its activation times out naming every identity);
//   - a prefetch after release 3 is staged fetches and verifies release 3's
//     candidate manifest again and stamps a new loadedAt, so the first
//     runtime's READY for the same S is recorded again and release 3
//     activates.
//
// Everything runs on one simulated clock (promoter, runtimes, receipt
// times), moved between the steps as time passes.
func TestTwoPhaseRealRestagedSnapshotIsReadAgain(t *testing.T) {
	t.Parallel()
	var tamper atomic.Bool
	tamper.Store(true)
	var upstream atomic.Value // the Config Server's URL
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		out, _ := http.NewRequestWithContext(req.Context(), req.Method, upstream.Load().(string)+req.URL.RequestURI(), req.Body)
		out.Header = req.Header.Clone()
		resp, err := http.DefaultClient.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if tamper.Load() && req.URL.Query().Get("configPhase") == "candidate" && len(body) > 0 {
			body[len(body)/2] ^= 1
		}
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = w.Write(body)
	}))
	defer proxy.Close()
	r := newRollout(t, rolloutOptions{serverURL: func(i int, srv string) string {
		upstream.Store(srv)
		if i == 1 {
			return proxy.URL
		}
		return srv
	}})
	ctx := context.Background()
	// Receipts stamped on the promoter's clock, so that "since the
	// staging" and "since the pointer moved" compare times of one clock.
	r.receipts = readback.NewStoreAt(r.e.db.PoolURL(t, r.promoterDB), r.clock.Now)
	status, err := readback.NewCollector(readback.Options{Signer: r.ctlKey, Now: r.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	targets := make([]readback.Target, len(r.runtimes))
	for i, rt := range r.runtimes {
		targets[i] = readback.Target{Endpoint: rt.status.URL, Host: rt.id.Host, ServiceID: rt.id.ServiceID, EnvTag: rt.id.EnvTag}
	}
	s := r.r2[0] // the first runtime's snapshot S, staged by releases 2 and 3
	sReceipts := "SELECT count(*) FROM configpub.runtime_evidence WHERE kind = 'receipt' AND phase = 'candidate' AND outcome = 'READY' AND snapshot_id = '" + s.SnapshotID + "'"
	opts := promoter.ActivateOptions{Timeout: 10 * time.Second, Poll: 50 * time.Millisecond}

	// Release 2: S is READY, the second runtime REJECTS its candidate.
	r.clock.Advance(time.Minute)
	res := r.readback(t, 0, 1, 2)
	if c := res[0].Status.Candidate; c == nil || c.Result != bundle.ResultReady || c.SnapshotID != s.SnapshotID {
		t.Fatalf("first runtime, release 2: candidate %+v, want READY for %s", c, s.SnapshotID)
	}
	if c := res[1].Status.Candidate; c == nil || c.Result != bundle.ResultRejected {
		t.Fatalf("tampered runtime, release 2: candidate %+v, want REJECTED", c)
	}
	loaded2 := res[0].Status.Candidate.LoadedAt
	r.clock.Advance(time.Second)
	var rej *promoter.RejectedError
	if _, err := r.ps.ActivateRelease(ctx, activateInput(), opts); !errors.As(err, &rej) {
		t.Fatalf("activate release 2: %v, want the second runtime's rejection", err)
	}
	if n := r.owner(t, sReceipts); n != 1 {
		t.Fatalf("%d READY receipts of S after release 2, want 1", n)
	}

	// The path is fixed (the runtime is not restarted: its candidate slot
	// still holds release 2's REJECTED); release 3 stages the same
	// snapshots ten minutes later.
	tamper.Store(false)
	r.clock.Advance(10 * time.Minute)
	if _, err := r.ps.Stage(ctx, promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: "prod", ReleaseVersion: 3,
		BaseReleaseVersion: 2, ManifestBytes: []byte("release 3\n"), Actor: "test", Reason: "release 3",
		Rollout: bundle.Rollout{Activation: bundle.ActivationTwoPhase}, Targets: r.r2}); err != nil {
		t.Fatal(err)
	}
	act3 := func() promoter.MoveInput {
		in := activateInput()
		in.Release = 3
		return in
	}

	// A plain status read repeats release 2's answers: nothing recorded,
	// nothing counted for release 3, and release 3 does not fail.
	r.clock.Advance(time.Minute)
	plain, err := readback.Run(ctx, status, r.receipts, targets)
	if err != nil {
		t.Fatalf("status readback: %v (%+v)", err, plain)
	}
	for i, rr := range plain {
		if rr.Recorded != 0 {
			t.Fatalf("runtime %d: a status read after release 3 was staged recorded %d receipts (%+v), want none: its candidate slot is release 2's answer", i, rr.Recorded, rr.Receipts)
		}
	}
	if c := plain[1].Status.Candidate; c == nil || c.Result != bundle.ResultRejected {
		t.Fatalf("second runtime's candidate slot %+v, want release 2's REJECTED still", c)
	}
	_, err = r.ps.ActivateRelease(ctx, act3(), promoter.ActivateOptions{Timeout: 300 * time.Millisecond, Poll: 50 * time.Millisecond})
	var nr *promoter.NotReadyError
	if !errors.As(err, &nr) || nr.Ready != 0 || len(nr.Missing) != 3 {
		t.Fatalf("activate release 3 before any prefetch: %v; want a timeout with all three waiting (release 2's answers are not about release 3)", err)
	}

	// A prefetch verifies release 3's candidates: READY for the same S
	// again, with a new loadedAt, recorded.
	r.clock.Advance(time.Minute)
	res = r.readback(t, 0, 1, 2)
	for i, rr := range res {
		if c := rr.Status.Candidate; c == nil || c.Result != bundle.ResultReady || c.SnapshotID != r.r2[i].SnapshotID || rr.Recorded == 0 {
			t.Fatalf("runtime %d, release 3: %+v; want READY for %s recorded", i, rr, r.r2[i].SnapshotID)
		}
	}
	if loaded3 := res[0].Status.Candidate.LoadedAt; loaded3 == loaded2 {
		t.Fatalf("the prefetch for release 3 reports S loaded at %s, as for release 2", loaded3)
	}
	if n := r.owner(t, sReceipts); n != 2 {
		t.Fatalf("%d READY receipts of S, want 2 (release 2's and release 3's)", n)
	}
	r.clock.Advance(time.Second)
	act, err := r.ps.ActivateRelease(ctx, act3(), opts)
	if err != nil {
		t.Fatalf("activate release 3 after its runtimes answered READY: %v", err)
	}
	if act.Moved != 3 {
		t.Fatalf("moved %d, want 3", act.Moved)
	}
	r.pointersAt(t, r.r2)
	if n := r.owner(t, "SELECT count(*) FROM configpub.config_release WHERE env_tag = 'prod' AND release_version = 3 AND lifecycle_state = 'ACTIVE'"); n != 1 {
		t.Fatal("release 3 is not ACTIVE")
	}
}
