package client_test

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
)

// candidateSpec is release n's snapshot with a candidate manifest, as a
// staged release is served for configPhase=candidate.
func (w *world) candidateSpec(n int64) spec {
	s := w.spec(n)
	s.phase = bundle.PhaseCandidate
	return s
}

// TestPrefetchHoldsACandidateWithoutApplyingIt: the current release 1 runs;
// the staged release 2 (with a candidate delivery manifest) is prefetched
// (configPhase=candidate), verified and
// reported READY in the status's candidate slot (a candidate-phase
// receipt) while release 1 stays current, last-known-good and the replay
// floor; a tampered candidate is REJECTED there; with nothing staged the
// prefetch is UNAVAILABLE NOT_FOUND and the slot keeps its last result.
func TestPrefetchHoldsACandidateWithoutApplyingIt(t *testing.T) {
	w := newWorld(t)
	r1, r2 := w.build(w.spec(1)), w.build(w.candidateSpec(2))
	var tamper, staged atomic.Bool
	staged.Store(true)
	w.srv.setRaw(func(rw http.ResponseWriter, r *http.Request) {
		rel := r1
		if r.URL.Query().Get("configPhase") == "candidate" {
			if !staged.Load() {
				http.Error(rw, `{"error":"no candidate"}`, http.StatusNotFound)
				return
			}
			rel = r2
		}
		for k, v := range rel.headers() {
			rw.Header()[k] = v
		}
		body := rel.Values
		if tamper.Load() && rel == r2 {
			body = bytes.Clone(body)
			body[len(body)/2] ^= 1
		}
		rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = rw.Write(body)
	})
	c := w.client()
	mustLoad(t, c, client.OutcomeApplied)

	ev, err := c.Prefetch(context.Background())
	if err != nil || ev.Outcome != client.OutcomeReady || ev.SnapshotID != r2.Manifest.SnapshotID {
		t.Fatalf("prefetch: got %+v, %v; want READY %s", ev, err, r2.Manifest.SnapshotID)
	}
	st := c.Status()
	if st.Current == nil || st.Current.SnapshotID != r1.Manifest.SnapshotID || st.LastKnownGood.SnapshotID != r1.Manifest.SnapshotID {
		t.Fatalf("after prefetch: current %+v lkg %+v, want release 1 in both", st.Current, st.LastKnownGood)
	}
	if st.Candidate == nil || st.Candidate.SnapshotID != r2.Manifest.SnapshotID || st.Candidate.Result != bundle.ResultReady ||
		st.Candidate.ArtifactDigest != r2.ArtifactDigest() {
		t.Fatalf("candidate slot: got %+v, want release 2 READY", st.Candidate)
	}
	var cand *bundle.Receipt
	for _, r := range st.Receipts("http://runtime") {
		if r.Phase == bundle.PhaseCandidate {
			cand = &r
		}
	}
	if cand == nil || cand.Result != bundle.ResultReady || cand.SnapshotID != r2.Manifest.SnapshotID || cand.RunningSnapshotID != r1.Manifest.SnapshotID {
		t.Fatalf("candidate receipt: got %+v, want READY for release 2 while running release 1", cand)
	}
	// The seen floor did not move: release 1 (sequence 1) still loads.
	if ev, err := c.Load(context.Background()); err != nil || ev.Outcome == client.OutcomeRejected {
		t.Fatalf("load of release 1 after prefetching release 2: %+v, %v", ev, err)
	}

	tamper.Store(true)
	if ev, err := c.Prefetch(context.Background()); err == nil || ev.Outcome != client.OutcomeRejected {
		t.Fatalf("tampered candidate: got %+v, %v; want REJECTED", ev, err)
	}
	if st := c.Status(); st.Candidate.Result != bundle.ResultRejected || st.Candidate.Reason == "" || st.Current.SnapshotID != r1.Manifest.SnapshotID {
		t.Fatalf("after a tampered candidate: got candidate %+v current %+v", st.Candidate, st.Current)
	}
	// A candidate signed by a key the runtime does not trust is refused
	// before its manifest is read; the receipt still names the snapshot the
	// server announced, so the staged release can fail.
	tamper.Store(false)
	k := newKeyPair(t)
	untrusted := w.candidateSpec(2)
	untrusted.signer = &k
	r2 = w.build(untrusted)
	if ev, err := c.Prefetch(context.Background()); err == nil || ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonUntrustedKey ||
		ev.SnapshotID != r2.Manifest.SnapshotID {
		t.Fatalf("candidate of an untrusted key: got %+v, %v; want REJECTED UNTRUSTED_KEY about %s", ev, err, r2.Manifest.SnapshotID)
	}
	var rejected *bundle.Receipt
	for _, r := range c.Status().Receipts("http://runtime") {
		if r.Phase == bundle.PhaseCandidate {
			rejected = &r
		}
	}
	if rejected == nil || rejected.Result != bundle.ResultRejected || rejected.SnapshotID != r2.Manifest.SnapshotID {
		t.Fatalf("candidate receipt of an untrusted key: got %+v, want REJECTED about release 2", rejected)
	}
	staged.Store(false)
	if ev, _ := c.Prefetch(context.Background()); ev.Outcome != client.OutcomeUnavailable || ev.Reason != client.ReasonNotFound {
		t.Fatalf("nothing staged: got %s %s, want UNAVAILABLE NOT_FOUND", ev.Outcome, ev.Reason)
	}
	if st := c.Status(); st.Candidate.Result != bundle.ResultRejected {
		t.Fatalf("candidate slot after NOT_FOUND: got %+v, want the last result kept", st.Candidate)
	}
}

// TestCandidateAndCurrentManifestsDoNotMix: the signed manifest's phase
// separates the two paths. A candidate manifest served (or replayed) on a
// load of the current configuration is REJECTED MANIFEST_PHASE_MISMATCH and
// nothing changes; a current-phase manifest served for configPhase=candidate
// is REJECTED the same way on a prefetch; a candidate manifest for another
// snapshot than the body is REJECTED; a candidate whose lease has expired is
// not a verdict (UNAVAILABLE CANDIDATE_LEASE_STALE, the candidate slot
// keeps its last result) and the renewed one is READY.
func TestCandidateAndCurrentManifestsDoNotMix(t *testing.T) {
	w := newWorld(t)
	r1 := w.build(w.spec(1))
	cs := w.candidateSpec(2)
	cand := w.build(cs)
	w.srv.set(r1, nil)
	c := w.client()
	mustLoad(t, c, client.OutcomeApplied)

	// The candidate replayed on the current path.
	w.srv.set(cand, nil)
	ev, err := c.Load(context.Background())
	if err == nil || ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonManifestPhase || ev.Field != "manifest.phase" {
		t.Fatalf("candidate manifest on a load: got %+v, %v; want REJECTED %s", ev, err, client.ReasonManifestPhase)
	}
	if st := c.Status(); st.Current.SnapshotID != r1.Manifest.SnapshotID || st.LastKnownGood.SnapshotID != r1.Manifest.SnapshotID {
		t.Fatalf("after a refused candidate manifest: current %+v lkg %+v, want release 1", st.Current, st.LastKnownGood)
	}

	// A current-phase manifest on the candidate path.
	w.srv.set(r1, nil)
	w.srv.setCandidate(w.build(w.spec(2)))
	ev, err = c.Prefetch(context.Background())
	if err == nil || ev.Outcome != client.OutcomeRejected || ev.Reason != client.ReasonManifestPhase {
		t.Fatalf("current-phase manifest on a prefetch: got %+v, %v; want REJECTED %s", ev, err, client.ReasonManifestPhase)
	}

	// A candidate manifest signed for another snapshot than the body.
	mixed := *w.build(w.candidateSpec(3))
	mixed.Values = cand.Values
	w.srv.setCandidate(&mixed)
	if ev, err := c.Prefetch(context.Background()); err == nil || ev.Outcome != client.OutcomeRejected {
		t.Fatalf("candidate manifest of another snapshot: got %+v, %v; want REJECTED", ev, err)
	}

	// READY, then a stale lease: not a verdict.
	w.srv.setCandidate(cand)
	if ev, err := c.Prefetch(context.Background()); err != nil || ev.Outcome != client.OutcomeReady {
		t.Fatalf("candidate: got %+v, %v; want READY", ev, err)
	}
	stale := cs
	stale.leaseTo = w.clock.Now().Add(-time.Hour)
	stale.leaseFrom = stale.leaseTo.Add(-time.Hour)
	w.srv.setCandidate(w.build(stale))
	ev, err = c.Prefetch(context.Background())
	if err == nil || ev.Outcome != client.OutcomeUnavailable || ev.Reason != client.ReasonCandidateLease {
		t.Fatalf("expired candidate lease: got %+v, %v; want UNAVAILABLE %s", ev, err, client.ReasonCandidateLease)
	}
	if st := c.Status(); st.Candidate == nil || st.Candidate.Result != bundle.ResultReady || st.Candidate.SnapshotID != cand.Manifest.SnapshotID {
		t.Fatalf("candidate slot after a stale lease: %+v, want the READY result kept", st.Candidate)
	}
}
