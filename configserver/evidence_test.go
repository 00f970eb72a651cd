package configserver_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func TestEvidence(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sn := e.seed.publish(t, idA, "agent", 1, yamlBody("evidence-body"))
	e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)
	tokA := e.token(t, idA, "agent")
	good := map[string]any{
		"host": idA.Host, "serviceId": idA.ServiceID, "envTag": idA.EnvTag, "outcome": "REJECTED",
		"reason": "manifest lease expired", "snapshotId": sn.ID, "artifactDigest": sn.ArtifactDigest,
		"contentDigest": sn.ContentDigest, "policyDigest": sn.PolicyDigest, "observedAt": "2026-11-29T12:00:00Z",
	}
	mod := func(kv ...any) string {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
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
		{name: "applied without optional fields", method: "POST", token: tokA,
			body: `{"host":"h1.example","serviceId":"svc-a","envTag":"prod","outcome":"APPLIED"}`, want: 204},
		{name: "other identity", method: "POST", token: tokA, body: mod("host", "h2.example"), want: 403},
		{name: "no token", method: "POST", body: mod(), want: 401},
		{name: "bad outcome", method: "POST", token: tokA, body: mod("outcome", "MAYBE"), want: 400},
		{name: "bad digest", method: "POST", token: tokA, body: mod("artifactDigest", "md5:abc"), want: 400},
		{name: "bad snapshot id", method: "POST", token: tokA, body: mod("snapshotId", "nope"), want: 400},
		{name: "bad observedAt", method: "POST", token: tokA, body: mod("observedAt", "yesterday"), want: 400},
		{name: "not json", method: "POST", token: tokA, body: "outcome=APPLIED", want: 400},
		{name: "too large", method: "POST", token: tokA, body: mod("reason", strings.Repeat("x", 17<<10)), want: 413},
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
		})
	}
	var n int
	var outcome, reason, observed string
	err := e.db.Pool(t).QueryRow(context.Background(), `SELECT count(*) OVER (), outcome, reason, coalesce(detail->>'observedAt', '')
		FROM configpub.runtime_evidence WHERE host = $1 AND snapshot_id = $2`, idA.Host, sn.ID).Scan(&n, &outcome, &reason, &observed)
	if err != nil {
		t.Fatalf("read evidence: %v", err)
	}
	if n != 1 || outcome != "REJECTED" || reason != "manifest lease expired" || observed != "2026-11-29T12:00:00Z" {
		t.Fatalf("got %d rows (%s, %q, %q), want 1 REJECTED row with reason and observedAt", n, outcome, reason, observed)
	}
	var total int
	if err := e.db.Pool(t).QueryRow(context.Background(), `SELECT count(*) FROM configpub.runtime_evidence`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total != 2 {
		t.Fatalf("got %d evidence rows, want 2 (refused reports are not stored)", total)
	}
}
