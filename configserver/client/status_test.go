package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/configserver/client/statusmetrics"
	"github.com/configpub/configpub/internal/controltoken"
	"github.com/configpub/configpub/internal/signing"
)

// statusCall sends method path to h with a control token of scope (none
// when scope is "") signed by key for aud, and decodes the answer.
func statusCall(t *testing.T, h http.Handler, method, path, tok string) (int, *bundle.RuntimeStatus, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		var e struct{ Reason string }
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if strings.Contains(rec.Body.String(), tok) && tok != "" {
			t.Fatalf("error body echoes the token: %s", rec.Body)
		}
		return rec.Code, nil, e.Reason
	}
	var st bundle.RuntimeStatus
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("status body: %v: %s", err, rec.Body)
	}
	return rec.Code, &st, ""
}

func TestStatusEndpointReportsCurrentLastKnownGoodAndRejected(t *testing.T) {
	w := newWorld(t)
	control := newKeyPair(t)
	c := w.client()
	h, err := c.StatusHandler(client.StatusOptions{ControlKeys: []signing.TrustedKey{control.trusted}})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(k keyPair, aud, scope string) string {
		tok, err := controltoken.Sign(k.priv, aud, scope, w.clock.Now(), time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	aud := w.id.String()

	r1 := w.build(w.spec(1))
	w.srv.set(r1, nil)
	mustLoad(t, c, client.OutcomeApplied)
	w.clock.Advance(time.Minute)
	r2 := w.build(w.spec(2))
	w.srv.set(r2, func(_ http.Header, b []byte) []byte { // a flipped byte in transit
		b = bytes.Clone(b)
		b[len(b)-2] ^= 1
		return b
	})
	if _, err := c.Load(context.Background()); err == nil {
		t.Fatal("tampered release 2 loaded; want REJECTED")
	}

	for _, tc := range []struct {
		name, method, path, tok, reason string
		status                          int
	}{
		{"no token", http.MethodGet, "/status", "", string(client.ReasonControlTokenMissing), 401},
		{"manifest key is not a control key", http.MethodGet, "/status", sign(w.key, aud, controltoken.ScopeStatus), string(client.ReasonControlTokenUntrusted), 401},
		{"token for another runtime", http.MethodGet, "/status", sign(control, "payments.example/agent-43/prod", controltoken.ScopeStatus), string(client.ReasonControlTokenAudience), 401},
		{"status token on reload", http.MethodPost, "/reload", sign(control, aud, controltoken.ScopeStatus), string(client.ReasonControlTokenScope), 401},
		{"workload token", http.MethodPost, "/reload", "test-token", string(client.ReasonControlTokenInvalid), 401},
		{"GET reload", http.MethodGet, "/reload", sign(control, aud, controltoken.ScopeReload), "METHOD_NOT_ALLOWED", 405},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, reason := statusCall(t, h, tc.method, tc.path, tc.tok)
			if code != tc.status || reason != tc.reason {
				t.Fatalf("got %d %s, want %d %s", code, reason, tc.status, tc.reason)
			}
		})
	}

	_, st, _ := statusCall(t, h, http.MethodGet, "/status", sign(control, aud, controltoken.ScopeStatus))
	if st.Current == nil || st.Current.SnapshotID != r1.Manifest.SnapshotID || st.Current.ArtifactDigest != r1.ArtifactDigest() ||
		st.Current.Result != bundle.ResultApplied || st.Current.LoadedAt != t0.Format(time.RFC3339Nano) {
		t.Fatalf("current: got %+v, want release 1 applied at %s", st.Current, t0)
	}
	if st.LastKnownGood == nil || st.LastKnownGood.SnapshotID != r1.Manifest.SnapshotID {
		t.Fatalf("last-known-good: got %+v, want %s", st.LastKnownGood, r1.Manifest.SnapshotID)
	}
	if st.LastRejected == nil || st.LastRejected.SnapshotID != r2.Manifest.SnapshotID || st.LastRejected.Reason == "" ||
		st.LastRejected.Result != bundle.ResultRejected {
		t.Fatalf("last rejected: got %+v, want %s REJECTED with a reason", st.LastRejected, r2.Manifest.SnapshotID)
	}
	if st.LastLoad == nil || st.LastLoad.Outcome != string(client.OutcomeRejected) || st.FailedClosed {
		t.Fatalf("last load: got %+v failedClosed %v, want REJECTED, not failed closed", st.LastLoad, st.FailedClosed)
	}

	// Metrics on a registry of the caller's.
	reg := prometheus.NewPedanticRegistry()
	if err := statusmetrics.Register(reg, c); err != nil {
		t.Fatal(err)
	}
	slots := gatherSlots(t, reg)
	if slots["current"] != r1.Manifest.SnapshotID || slots["last_known_good"] != r1.Manifest.SnapshotID || slots["last_rejected"] != r2.Manifest.SnapshotID {
		t.Fatalf("metric slots: got %v, want current and last_known_good %s, last_rejected %s", slots, r1.Manifest.SnapshotID, r2.Manifest.SnapshotID)
	}

	// A control-plane reload loads the now intact release 2 and answers
	// with the result; its token is good for one reload only.
	w.srv.set(r2, nil)
	var hooked *client.Evidence
	h, err = c.StatusHandler(client.StatusOptions{ControlKeys: []signing.TrustedKey{control.trusted},
		AfterReload: func(_ context.Context, ev *client.Evidence, _ error) { hooked = ev }})
	if err != nil {
		t.Fatal(err)
	}
	reload := sign(control, aud, controltoken.ScopeReload)
	_, st, _ = statusCall(t, h, http.MethodPost, "/reload", reload)
	if st.Current == nil || st.Current.SnapshotID != r2.Manifest.SnapshotID || st.LastLoad.Outcome != string(client.OutcomeApplied) {
		t.Fatalf("reload answer: got current %+v last load %+v, want release 2 APPLIED", st.Current, st.LastLoad)
	}
	if hooked == nil || hooked.SnapshotID != r2.Manifest.SnapshotID {
		t.Fatalf("AfterReload: got %+v, want the evidence of release 2", hooked)
	}
	if code, _, reason := statusCall(t, h, http.MethodPost, "/reload", reload); code != 401 || reason != string(client.ReasonControlTokenReplayed) {
		t.Fatalf("replayed reload token: got %d %s, want 401 %s", code, reason, client.ReasonControlTokenReplayed)
	}
	// A prefetch request verifies the staged candidate (release 2's
	// snapshot with a candidate manifest) into the candidate slot.
	cs := w.candidateSpec(2)
	cs.sequence = 3
	w.srv.setCandidate(w.build(cs))
	if code, _, reason := statusCall(t, h, http.MethodPost, "/prefetch", sign(control, aud, controltoken.ScopeReload)); code != 401 || reason != string(client.ReasonControlTokenScope) {
		t.Fatalf("reload token on /prefetch: got %d %s, want 401 %s", code, reason, client.ReasonControlTokenScope)
	}
	_, st, _ = statusCall(t, h, http.MethodPost, "/prefetch", sign(control, aud, controltoken.ScopePrefetch))
	if st.Candidate == nil || st.Candidate.SnapshotID != r2.Manifest.SnapshotID || st.Candidate.Result != bundle.ResultReady {
		t.Fatalf("prefetch answer: got candidate %+v, want release 2 READY", st.Candidate)
	}

	late := sign(control, aud, controltoken.ScopeStatus)
	w.clock.Advance(2 * time.Minute)
	if code, _, reason := statusCall(t, h, http.MethodGet, "/status", late); code != 401 || reason != string(client.ReasonControlTokenExpired) {
		t.Fatalf("expired token: got %d %s, want 401 %s", code, reason, client.ReasonControlTokenExpired)
	}

	if _, err := c.StatusHandler(client.StatusOptions{ControlKeys: []signing.TrustedKey{w.key.trusted}}); err == nil {
		t.Fatal("StatusHandler accepted the delivery-manifest key as control key")
	}
	if _, err := c.StatusHandler(client.StatusOptions{}); err == nil {
		t.Fatal("StatusHandler accepted no control key")
	}
	// Nor can the control key become a delivery-manifest key later, and a
	// set SetTrustedKeys refuses changes nothing.
	for name, keys := range map[string][]signing.TrustedKey{
		"the control key":          {w.key.trusted, control.trusted},
		"no key":                   nil,
		"a key under another's id": {{ID: w.key.trusted.ID, Key: control.trusted.Key}},
	} {
		if err := c.SetTrustedKeys(keys); err == nil {
			t.Errorf("SetTrustedKeys with %s: accepted", name)
		}
	}
	if _, err := c.Current(); err != nil {
		t.Fatalf("after refused key sets: %v, want the current snapshot kept", err)
	}
}

// gatherSlots returns slot -> snapshot id of configpub_runtime_snapshot_info.
func gatherSlots(t *testing.T, reg *prometheus.Registry) map[string]string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, mf := range mfs {
		if mf.GetName() != "configpub_runtime_snapshot_info" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var slot, id string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "slot":
					slot = l.GetValue()
				case "snapshot_id":
					id = l.GetValue()
				}
			}
			out[slot] = id
		}
	}
	return out
}
