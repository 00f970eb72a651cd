package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
)

// gatewayWorld returns a Gateway runtime whose projection accepts, for the
// bound Agent "advisor", the current and previous publications.
func gatewayWorld(t *testing.T, current, previous client.AcceptedPublication) (*world, *client.Client) {
	t.Helper()
	w := newWorld(t)
	w.aud = bundle.AudienceGateway
	s := w.spec(1)
	s.namespace = map[string]any{
		"routes": []any{"/v1/chat"},
		"acceptedPublications": []any{
			map[string]any{"agent": "advisor", "publications": []any{
				map[string]any{"publicationId": current.PublicationID, "policyDigest": current.PolicyDigest},
				map[string]any{"publicationId": previous.PublicationID, "policyDigest": previous.PolicyDigest},
			}},
		},
	}
	w.srv.set(w.build(s), nil)
	c := w.client()
	mustLoad(t, c, client.OutcomeApplied)
	return w, c
}

func TestMiddlewareAcceptsCurrentAndPreviousPublication(t *testing.T) {
	cur := client.AcceptedPublication{PublicationID: uuidN(12), PolicyDigest: digestOf("policy-12")}
	prev := client.AcceptedPublication{PublicationID: uuidN(11), PolicyDigest: digestOf("policy-11")}
	_, gw := gatewayWorld(t, cur, prev)

	var got client.AcceptedPublication
	h := gw.Middleware(client.AcceptedFromProjection(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = client.PeerFromContext(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	cases := []struct {
		name          string
		pub, digest   string
		status        int
		reason        string
		wantPeerAgent string
	}{
		{"current publication", cur.PublicationID, cur.PolicyDigest, http.StatusNoContent, "", "advisor"},
		{"previous publication", prev.PublicationID, prev.PolicyDigest, http.StatusNoContent, "", "advisor"},
		{"unknown publication", uuidN(99), digestOf("policy-99"), http.StatusForbidden, "UNKNOWN_PUBLICATION", ""},
		{"known id with the wrong digest", cur.PublicationID, prev.PolicyDigest, http.StatusForbidden, "POLICY_DIGEST_MISMATCH", ""},
		{"no identity headers", "", "", http.StatusForbidden, "PEER_IDENTITY_MISSING", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got = client.AcceptedPublication{}
			req := httptest.NewRequest(http.MethodPost, "/v1/chat", nil)
			if tc.pub != "" {
				req.Header.Set("X-Policy-Publication-Id", tc.pub)
				req.Header.Set("X-Policy-Snapshot-Id", uuidN(2012))
				req.Header.Set("X-Policy-Digest", tc.digest)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status: got %d, want %d (%s)", rec.Code, tc.status, rec.Body)
			}
			if tc.reason != "" {
				var body map[string]string
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["reason"] != tc.reason {
					t.Fatalf("reason: got %q (%v), want %q", body["reason"], err, tc.reason)
				}
			}
			if got.Agent != tc.wantPeerAgent {
				t.Fatalf("peer agent: got %q, want %q", got.Agent, tc.wantPeerAgent)
			}
		})
	}
}

func TestMiddlewareFailsClosedWithoutSnapshot(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	h := c.Middleware(client.AcceptedFromProjection(), http.NotFoundHandler())
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("status: got %d, want 503", rec.Code)
	}
}

func TestRoundTripperStampsPublicationIdentity(t *testing.T) {
	w := newWorld(t)
	r1 := w.build(w.spec(1))
	w.srv.set(r1, nil)
	c := w.client()

	var hdr http.Header
	peer := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { hdr = r.Header.Clone() }))
	defer peer.Close()
	hc := &http.Client{Transport: c.RoundTripper(nil)}

	if _, err := hc.Get(peer.URL); !errors.Is(err, client.ErrNoSnapshot) {
		t.Fatalf("before any load: got %v, want ErrNoSnapshot (fail closed)", err)
	}
	mustLoad(t, c, client.OutcomeApplied)
	resp, err := hc.Get(peer.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for k, want := range map[string]string{
		"X-Policy-Publication-Id": r1.Envelope.PublicationID,
		"X-Policy-Snapshot-Id":    r1.Envelope.PolicySnapshotID,
		"X-Policy-Digest":         r1.Envelope.PolicyDigest,
	} {
		if got := hdr.Get(k); got != want {
			t.Errorf("%s: got %q, want %q", k, got, want)
		}
	}
	// The stamped identity is accepted by a receiver that lists it.
	list := []client.AcceptedPublication{{PublicationID: r1.Envelope.PublicationID, PolicyDigest: r1.Envelope.PolicyDigest}}
	if _, err := client.CheckPeer(hdr, list); err != nil {
		t.Fatalf("CheckPeer of stamped headers: %v", err)
	}
}

func TestReportEvidence(t *testing.T) {
	w := newWorld(t)
	r1 := w.build(w.spec(1))
	w.srv.set(r1, nil)
	c := w.client()
	ev := mustLoad(t, c, client.OutcomeApplied)
	if err := c.ReportEvidence(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	w.srv.mu.Lock()
	body := w.srv.evidence[0]
	w.srv.mu.Unlock()
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"host": w.id.Host, "serviceId": w.id.ServiceID, "envTag": w.id.EnvTag, "outcome": "APPLIED",
		"reason": "NEW_SNAPSHOT", "snapshotId": r1.Manifest.SnapshotID, "artifactDigest": r1.ArtifactDigest(),
		"contentDigest": r1.Envelope.ContentDigest, "policyDigest": r1.Envelope.PolicyDigest,
		"observedAt": "2026-06-01T12:00:00Z", "audience": "agent", "publicationId": r1.Manifest.PublicationID,
		"releaseVersion": float64(1), "sequence": float64(1), "currentSnapshotId": r1.Manifest.SnapshotID,
		"lastKnownGoodSnapshotId": r1.Manifest.SnapshotID,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("fields: got %d, want %d (%v)", len(got), len(want), got)
	}
	unchanged := mustLoad(t, c, client.OutcomeUnchanged)
	if err := c.ReportEvidence(context.Background(), unchanged); !errors.Is(err, client.ErrNotReportable) {
		t.Fatalf("reporting UNCHANGED: got %v, want ErrNotReportable", err)
	}
}

func TestAcceptedPublicationsAtOtherShapes(t *testing.T) {
	ns := map[string]any{"agents": map[string]any{
		"advisor": map[string]any{"accepted": []any{map[string]any{"publicationId": uuidN(1), "policyDigest": digestOf("p1")}}},
	}}
	got, err := client.AcceptedPublicationsAt("agents", "*", "accepted")(&client.Snapshot{Namespace: ns})
	if err != nil || len(got) != 1 || got[0].Agent != "advisor" || got[0].PublicationID != uuidN(1) {
		t.Fatalf("map-shaped list: got %+v %v, want advisor %s", got, err, uuidN(1))
	}
	bad := map[string]any{"agents": map[string]any{"advisor": map[string]any{"accepted": []any{map[string]any{"publicationId": "x"}}}}}
	if _, err := client.AcceptedPublicationsAt("agents", "*", "accepted")(&client.Snapshot{Namespace: bad}); err == nil {
		t.Fatal("malformed entry: got nil error, want one")
	}
}
