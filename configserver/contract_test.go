package configserver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/pgstore"
	"github.com/configpub/configpub/internal/signing"
)

var idA = bundle.Identity{Host: "h1.example", ServiceID: "svc-a", EnvTag: "prod"}

func yamlBody(marker string) []byte {
	return []byte("schemaVersion: 1\nagentPolicy:\n  marker: " + marker + "\n  rules:\n    - allow: read\n")
}

// TestContractHeaders checks every response header of docs/wire-contract.md against the stored rows.
func TestContractHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sn := e.seed.publish(t, idA, "agent", 3, yamlBody("contract-body-7f3a"))
	ps := e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)

	resp, body := e.do(t, http.MethodGet, configsPath(idA), e.token(t, idA, "agent"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got status %d, want 200: %s", resp.StatusCode, body)
	}
	if !bytes.Equal(body, sn.Body) {
		t.Fatalf("got body %q, want the stored bytes %q", body, sn.Body)
	}
	sum := sha256.Sum256(body)
	reprWant := "sha-256=:" + base64.StdEncoding.EncodeToString(sum[:]) + ":"
	want := map[string]string{
		"Content-Type":             "application/yaml",
		"Content-Length":           strconv.Itoa(len(sn.Body)),
		"ETag":                     `"` + digestOf(body) + `"`,
		"X-Artifact-Digest":        digestOf(body),
		"Repr-Digest":              reprWant,
		"X-Config-Snapshot-Id":     sn.ID,
		"X-Policy-Publication-Id":  sn.PublicationID,
		"X-Policy-Digest":          sn.PolicyDigest,
		"X-Content-Digest":         sn.ContentDigest,
		"X-Config-Release-Version": "3",
		"X-Config-Valid-From":      ps.Parsed.ValidFrom,
		"X-Config-Refresh-After":   ps.Parsed.RefreshAfter,
		"X-Config-Expires-At":      ps.Parsed.ExpiresAt,
		"X-Config-Manifest":        base64.RawURLEncoding.EncodeToString(ps.Manifest),
		"X-Manifest-Key-Id":        ps.KeyID,
		"X-Manifest-Signature":     ps.Signature,
		"Cache-Control":            "private, no-cache",
		"Vary":                     "Authorization",
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("header %s: got %q, want %q", k, got, v)
		}
	}
	if digestOf(body) != sn.ArtifactDigest {
		t.Errorf("body digest %s, want stored artifactDigest %s", digestOf(body), sn.ArtifactDigest)
	}
	manifest, err := base64.RawURLEncoding.DecodeString(resp.Header.Get("X-Config-Manifest"))
	if err != nil {
		t.Fatalf("X-Config-Manifest is not base64url: %v", err)
	}
	if !bytes.Equal(manifest, ps.Manifest) {
		t.Fatalf("decoded manifest %q, want stored %q", manifest, ps.Manifest)
	}
	m, err := bundle.ParseDeliveryManifest(manifest)
	if err != nil {
		t.Fatalf("served manifest does not parse: %v", err)
	}
	if m.ArtifactDigest != digestOf(body) || m.SnapshotID != sn.ID || m.Identity() != idA {
		t.Fatalf("manifest %+v does not describe the served body", m)
	}
	keyID, err := signing.VerifyBlob(e.seed.trusted, manifest, resp.Header.Get("X-Manifest-Signature"), resp.Header.Get("X-Manifest-Key-Id"))
	if err != nil {
		t.Fatalf("manifest signature: %v", err)
	}
	if keyID != ps.KeyID {
		t.Fatalf("verified with key %s, want %s", keyID, ps.KeyID)
	}
}

// waitServed polls until the current snapshot of id is snapshotID.
func waitServed(t testing.TB, e *env, id bundle.Identity, aud, snapshotID string) time.Duration {
	t.Helper()
	tok := e.token(t, id, aud)
	start := time.Now()
	for time.Since(start) < 5*time.Second {
		resp, _ := e.do(t, http.MethodHead, configsPath(id), tok)
		if resp.StatusCode == http.StatusOK && resp.Header.Get("X-Config-Snapshot-Id") == snapshotID {
			return time.Since(start)
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("snapshot %s of %s not served within 5s", snapshotID, id)
	return 0
}

func TestConditionalAndHead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sn := e.seed.publish(t, idA, "agent", 1, yamlBody("conditional-body-91c2"))
	e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)
	tok := e.token(t, idA, "agent")
	etag := `"` + sn.ArtifactDigest + `"`
	tests := []struct {
		name       string
		method     string
		inm        []string
		wantStatus int
		wantBody   bool
	}{
		{name: "exact etag", method: "GET", inm: []string{etag}, wantStatus: 304},
		{name: "list containing it", method: "GET", inm: []string{`"sha256:0000", ` + etag + `, "x"`}, wantStatus: 304},
		{name: "two fields", method: "GET", inm: []string{`"nope"`, etag}, wantStatus: 304},
		{name: "star", method: "GET", inm: []string{"*"}, wantStatus: 304},
		{name: "weak form of it", method: "GET", inm: []string{"W/" + etag}, wantStatus: 304},
		{name: "other etag", method: "GET", inm: []string{`"sha256:` + string(bytes.Repeat([]byte("a"), 64)) + `"`}, wantStatus: 200, wantBody: true},
		{name: "unquoted digest", method: "GET", inm: []string{sn.ArtifactDigest}, wantStatus: 200, wantBody: true},
		{name: "none", method: "GET", wantStatus: 200, wantBody: true},
		// Values RFC 9110's grammar refuses match nothing (FuzzIfNoneMatch).
		{name: "it and a line that is no entity-tag", method: "GET", inm: []string{etag, "0"}, wantStatus: 200, wantBody: true},
		{name: "star among tags", method: "GET", inm: []string{`"x", *`}, wantStatus: 200, wantBody: true},
		{name: "weak star", method: "GET", inm: []string{"W/*"}, wantStatus: 200, wantBody: true},
		{name: "it inside an unterminated tag", method: "GET", inm: []string{`"x, ` + etag}, wantStatus: 200, wantBody: true},
		{name: "HEAD", method: "HEAD", wantStatus: 200},
		{name: "HEAD conditional", method: "HEAD", inm: []string{etag}, wantStatus: 304},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var hdr []string
			for _, v := range tc.inm {
				hdr = append(hdr, "If-None-Match", v)
			}
			resp, body := e.do(t, tc.method, configsPath(idA), tok, hdr...)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("got status %d, want %d", resp.StatusCode, tc.wantStatus)
			}
			if tc.wantBody != (len(body) > 0) {
				t.Fatalf("got %d body bytes, want body=%v", len(body), tc.wantBody)
			}
			if tc.wantBody && !bytes.Equal(body, sn.Body) {
				t.Fatalf("got body %q, want stored bytes", body)
			}
			for _, h := range []string{"ETag", "X-Config-Snapshot-Id", "X-Artifact-Digest", "X-Config-Manifest",
				"X-Manifest-Signature", "X-Manifest-Key-Id", "X-Config-Expires-At", "Cache-Control", "Vary"} {
				if resp.Header.Get(h) == "" {
					t.Errorf("header %s missing on %d", h, resp.StatusCode)
				}
			}
			if tc.method == "HEAD" && tc.wantStatus == 200 && resp.Header.Get("Content-Length") != strconv.Itoa(len(sn.Body)) {
				t.Errorf("HEAD Content-Length %q, want %d", resp.Header.Get("Content-Length"), len(sn.Body))
			}
		})
	}
}

func TestPointerMoveVisibleWithinOneSecond(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	first := e.seed.publish(t, idA, "agent", 1, yamlBody("move-first"))
	second := e.seed.publish(t, idA, "agent", 2, yamlBody("move-second"))
	e.seed.move(t, first)
	waitServed(t, e, idA, "agent", first.ID)
	for i, sn := range []*snapshot{second, first, second} { // promote, roll back, roll forward
		e.seed.move(t, sn)
		if d := waitServed(t, e, idA, "agent", sn.ID); d > time.Second {
			t.Fatalf("move %d to %s visible after %s, want within 1s", i, sn.ID, d)
		}
	}
	// A pointer move for an identity that had none is picked up too.
	idB := bundle.Identity{Host: "h2.example", ServiceID: "svc-b", EnvTag: "prod"}
	nb := e.seed.publish(t, idB, "gateway", 1, yamlBody("move-new-identity"))
	e.seed.move(t, nb)
	if d := waitServed(t, e, idB, "gateway", nb.ID); d > time.Second {
		t.Fatalf("new identity visible after %s, want within 1s", d)
	}
	if st := e.store.Stats(); st.PointerRefreshes == 0 {
		t.Fatalf("got 0 NOTIFY refreshes, want the moves to arrive by NOTIFY")
	}
}

func TestMetricsAndHealth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	sn := e.seed.publish(t, idA, "agent", 1, yamlBody("metrics-body"))
	e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)
	for _, p := range []string{"/healthz", "/readyz"} {
		if resp, _ := e.do(t, "GET", p, ""); resp.StatusCode != 200 {
			t.Fatalf("%s: got %d, want 200", p, resp.StatusCode)
		}
	}
	resp, body := e.do(t, "GET", "/metrics", "")
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: got %d, want 200", resp.StatusCode)
	}
	for _, name := range []string{"configpub_server_requests_total", "configpub_server_request_duration_seconds",
		"configpub_server_artifact_cache_hits_total", "configpub_server_pointer_refresh_lag_seconds",
		"configpub_server_database_errors_total", "configpub_server_token_cache_hits_total", `code="200"`} {
		if !bytes.Contains(body, []byte(name)) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if resp, _ := e.do(t, "POST", "/healthz", ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /healthz: got %d, want 405", resp.StatusCode)
	}
}

// TestLargeActivationVisibleWithinOneSecond: one transaction moves 1,500
// pointers (1,500 NOTIFYs, as a release activation does); every identity
// serves its new snapshot within 1 s of the commit. The time is the
// server's own: from the arrival of the burst's first notification (the
// COMMIT, as the server sees it) to the moment the store reports the last
// of its pointers current (pgstore Options.Visible), so that a loaded
// machine's scheduling of this test's goroutines does not count, while a
// slower reload still fails it.
func TestLargeActivationVisibleWithinOneSecond(t *testing.T) {
	t.Parallel()
	var (
		mu       sync.Mutex
		noticed  time.Time // the first notification of the move arrived
		current  time.Time // the store reported the last group current
		notes    int
		marksLog []string
	)
	e := newEnv(t, envOptions{store: pgstore.Options{Visible: func(burst time.Time, n int) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if noticed.IsZero() || burst.Before(noticed) {
			noticed = burst
		}
		current, notes = now, notes+n
		marksLog = append(marksLog, fmt.Sprintf("%d notes current at +%s", n, now.Sub(noticed).Round(time.Millisecond)))
	}}})
	const n = 1500
	var sns []*snapshot
	for i := range n {
		id := bundle.Identity{Host: fmt.Sprintf("bulk-%04d.example", i), ServiceID: "svc", EnvTag: "prod"}
		sns = append(sns, e.seed.publish(t, id, "agent", 1, yamlBody(fmt.Sprintf("bulk-%d", i))))
	}
	e.seed.moveManyAt(t, sns, time.Now().UTC().Truncate(time.Second), 5*time.Minute, time.Hour)
	returned := time.Now()
	// Poll the store the handler reads until every pointer is current; the
	// poll only tells when to read the server's marks.
	ctx := context.Background()
	for {
		all := true
		for _, sn := range sns {
			if d, err := e.store.Current(ctx, sn.Identity); err != nil || d.SnapshotID != sn.ID {
				all = false
				break
			}
		}
		if all {
			break
		}
		if time.Since(returned) > 10*time.Second {
			t.Fatalf("activation of %d pointers not visible after 10s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	visible, marks, got := current.Sub(noticed), strings.Join(marksLog, "; "), notes
	mu.Unlock()
	if noticed.IsZero() || got == 0 {
		t.Fatalf("every pointer current, but the store reported no notification made current")
	}
	if visible <= 0 || visible > time.Second {
		t.Fatalf("activation of %d pointers fully current %s after its first notification arrived, want within 1s (%s)", n, visible, marks)
	}
	t.Logf("%d pointers current %s after the first notification (server side; %s)", n, visible.Round(time.Millisecond), marks)
	st := e.store.Stats()
	t.Logf("refreshed by NOTIFY %d, full reconciles %d", st.PointerRefreshes, st.Reconciles)
	for _, i := range []int{0, n / 2, n - 1} { // and served over HTTP
		waitServed(t, e, sns[i].Identity, "agent", sns[i].ID)
	}
	if got := e.store.Stats().Pointers; got != n {
		t.Fatalf("got %d pointers in memory, want %d", got, n)
	}
}
