package configserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
)

// evidenceNow is the Config Server's clock in the evidence tests.
var evidenceNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func postEvidence(t *testing.T, e *env, token, body string) (int, http.Header, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+"/configs/evidence", strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := readAll(resp)
	return resp.StatusCode, resp.Header, b
}

// TestEvidence: a runtime's own report is stored with the publication, the
// running and last-known-good snapshots; every malformed, implausible or
// foreign report is refused with a JSON error and stores nothing.
func TestEvidence(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{handler: configserver.Options{Clock: func() time.Time { return evidenceNow }, EvidenceBurst: 1000}})
	sn := e.seed.publish(t, idA, "agent", 1, yamlBody("evidence-body"))
	e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)
	other := bundle.Identity{Host: "h2.example", ServiceID: "svc-b", EnvTag: "prod"}
	snOther := e.seed.publish(t, other, "agent", 1, yamlBody("other-body"))
	e.seed.move(t, snOther)
	tokA := e.token(t, idA, "agent")
	tokGateway := e.token(t, idA, "gateway")
	good := map[string]any{
		"host": idA.Host, "serviceId": idA.ServiceID, "envTag": idA.EnvTag, "audience": "agent", "outcome": "REJECTED",
		"reason": "DIGEST_MISMATCH", "snapshotId": sn.ID, "publicationId": sn.PublicationID, "releaseVersion": 1,
		"sequence": 7, "currentSnapshotId": sn.ID, "lastKnownGoodSnapshotId": sn.ID,
		"artifactDigest": sn.ArtifactDigest, "contentDigest": sn.ContentDigest, "policyDigest": sn.PolicyDigest,
		"observedAt": "2026-11-29T12:00:00Z",
	}
	mod := func(kv ...any) string {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
				continue
			}
			m[kv[i].(string)] = kv[i+1]
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	tests := []struct {
		name   string
		method string
		token  string
		body   string
		want   int
	}{
		{name: "own identity", method: "POST", token: tokA, body: mod(), want: 204},
		{name: "rejected without optional fields", method: "POST", token: tokA,
			body: `{"host":"h1.example","serviceId":"svc-a","envTag":"prod","outcome":"REJECTED","reason":"PARSE_ERROR"}`, want: 204},
		{name: "applied without a snapshot id", method: "POST", token: tokA, body: mod("outcome", "APPLIED", "snapshotId", nil, "publicationId", nil), want: 400},
		{name: "other identity", method: "POST", token: tokA, body: mod("host", "h2.example"), want: 403},
		{name: "another identity's snapshot id", method: "POST", token: tokA, body: mod("snapshotId", snOther.ID, "publicationId", nil), want: 400},
		{name: "another identity's snapshot as running", method: "POST", token: tokA, body: mod("currentSnapshotId", snOther.ID), want: 400},
		{name: "another identity's snapshot as last-known-good", method: "POST", token: tokA, body: mod("lastKnownGoodSnapshotId", snOther.ID), want: 400},
		{name: "publication not the snapshot's", method: "POST", token: tokA, body: mod("publicationId", snOther.PublicationID), want: 400},
		{name: "unknown snapshot id", method: "POST", token: tokA, body: mod("snapshotId", "0b8f5a1e-2c3d-8e4f-9a0b-1c2d3e4f5a6b", "publicationId", nil), want: 400},
		{name: "all-zero snapshot id", method: "POST", token: tokA, body: mod("snapshotId", "00000000-0000-0000-0000-000000000000"), want: 400},
		{name: "all-zero publication id", method: "POST", token: tokA, body: mod("publicationId", "00000000-0000-0000-0000-000000000000"), want: 400},
		{name: "upper-case snapshot id", method: "POST", token: tokA, body: mod("snapshotId", strings.ToUpper(sn.ID)), want: 400},
		{name: "year 0", method: "POST", token: tokA, body: mod("observedAt", "0000-01-01T00:00:00Z"), want: 400},
		{name: "year 9999", method: "POST", token: tokA, body: mod("observedAt", "9999-12-31T23:59:59Z"), want: 400},
		{name: "an hour ahead", method: "POST", token: tokA, body: mod("observedAt", "2026-11-30T13:00:00Z"), want: 400},
		{name: "token audience differs from the identity's", method: "POST", token: tokGateway, body: mod("audience", nil), want: 403},
		{name: "audience field differs from the token's", method: "POST", token: tokA, body: mod("audience", "gateway"), want: 403},
		{name: "NUL in reason", method: "POST", token: tokA, body: mod("reason", "DIGEST\u0000MISMATCH"), want: 400},
		{name: "NUL in host", method: "POST", token: tokA, body: mod("host", "h1.example\u0000"), want: 400},
		{name: "free text reason", method: "POST", token: tokA, body: mod("reason", "manifest lease expired"), want: 400},
		{name: "negative sequence", method: "POST", token: tokA, body: mod("sequence", -1), want: 400},
		{name: "unknown field", method: "POST", token: tokA, body: mod("verified", true), want: 400},
		{name: "two objects", method: "POST", token: tokA, body: mod() + mod(), want: 400},
		{name: "no token", method: "POST", body: mod(), want: 401},
		{name: "bad outcome", method: "POST", token: tokA, body: mod("outcome", "MAYBE"), want: 400},
		{name: "bad digest", method: "POST", token: tokA, body: mod("artifactDigest", "md5:abc"), want: 400},
		{name: "bad snapshot id", method: "POST", token: tokA, body: mod("snapshotId", "nope"), want: 400},
		{name: "bad observedAt", method: "POST", token: tokA, body: mod("observedAt", "yesterday"), want: 400},
		{name: "not json", method: "POST", token: tokA, body: "outcome=APPLIED", want: 400},
		{name: "too large", method: "POST", token: tokA, body: mod("reason", strings.Repeat("X", 17<<10)), want: 413},
		{name: "GET", method: "GET", token: tokA, want: 405},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, e.srv.URL+"/configs/evidence", strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := e.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := readAll(resp)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("got %d, want %d: %s", resp.StatusCode, tc.want, body)
			}
			if tc.want >= 400 && tc.method == "POST" {
				var eb struct{ Error, Message string }
				if err := json.Unmarshal(body, &eb); err != nil || eb.Error == "" || eb.Message == "" {
					t.Fatalf("error body is not {error, message} JSON: %q", body)
				}
			}
		})
	}
	var n int
	var outcome, reason, observed, pub, running, lkg string
	var seq int64
	err := e.db.Pool(t).QueryRow(context.Background(), `SELECT count(*) OVER (), outcome, reason, coalesce(detail->>'observedAt', ''),
			publication_id::text, running_snapshot_id::text, lkg_snapshot_id::text, sequence
		FROM configpub.runtime_evidence WHERE host = $1 AND snapshot_id = $2`, idA.Host, sn.ID).Scan(&n, &outcome, &reason, &observed, &pub, &running, &lkg, &seq)
	if err != nil {
		t.Fatalf("read evidence: %v", err)
	}
	if n != 1 || outcome != "REJECTED" || reason != "DIGEST_MISMATCH" || observed != "2026-11-29T12:00:00Z" ||
		pub != sn.PublicationID || running != sn.ID || lkg != sn.ID || seq != 7 {
		t.Fatalf("got %d rows (%s, %q, %q, pub %s, running %s, lkg %s, seq %d), want 1 REJECTED row with every field", n, outcome, reason, observed, pub, running, lkg, seq)
	}
	var total int
	if err := e.db.Pool(t).QueryRow(context.Background(), `SELECT count(*) FROM configpub.runtime_evidence`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != 2 {
		t.Fatalf("got %d evidence rows, want 2 (refused reports are not stored)", total)
	}
	if _, err := e.db.Pool(t).Exec(context.Background(), `UPDATE configpub.runtime_evidence SET reason = 'X'`); err == nil {
		t.Fatal("evidence rows can be rewritten")
	}
}

// TestEvidenceRateLimit: beyond the burst an identity's reports get 429 with
// Retry-After, another identity is unaffected, and the bucket refills.
func TestEvidenceRateLimit(t *testing.T) {
	t.Parallel()
	var now atomic.Int64 // the handler reads it on its own goroutines
	now.Store(evidenceNow.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	e := newEnv(t, envOptions{handler: configserver.Options{Clock: clock, EvidencePerMinute: 6, EvidenceBurst: 3}})
	other := bundle.Identity{Host: "h2.example", ServiceID: "svc-b", EnvTag: "prod"}
	body := func(id bundle.Identity) string {
		return `{"host":"` + id.Host + `","serviceId":"` + id.ServiceID + `","envTag":"prod","outcome":"REJECTED","reason":"PARSE_ERROR"}`
	}
	tokA, tokB := e.token(t, idA, "agent"), e.token(t, other, "agent")
	for i := 0; i < 3; i++ {
		if code, _, b := postEvidence(t, e, tokA, body(idA)); code != 204 {
			t.Fatalf("report %d: got %d %s", i, code, b)
		}
	}
	code, h, b := postEvidence(t, e, tokA, body(idA))
	if code != 429 || h.Get("Retry-After") != "10" || !strings.Contains(string(b), "too_many_requests") {
		t.Fatalf("4th report: got %d Retry-After %q %s, want 429 after 10 s", code, h.Get("Retry-After"), b)
	}
	if code, _, b := postEvidence(t, e, tokB, body(other)); code != 204 {
		t.Fatalf("another identity: got %d %s", code, b)
	}
	now.Add(int64(10 * time.Second))
	if code, _, b := postEvidence(t, e, tokA, body(idA)); code != 204 {
		t.Fatalf("after 10 s: got %d %s", code, b)
	}
	var total int
	if err := e.db.Pool(t).QueryRow(context.Background(), `SELECT count(*) FROM configpub.runtime_evidence`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != 5 {
		t.Fatalf("got %d rows, want 5 (the limited report is not stored)", total)
	}
}
