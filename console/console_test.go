package console

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/pointernote"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// viewerPool connects as a new configpub_viewer login, also a member of
// configpub_viewer_bytes when bytes is set.
func viewerPool(t testing.TB, db *pgtest.DB, bytes bool) *pgxpool.Pool {
	t.Helper()
	u := db.URLFor(t, "configpub_viewer")
	if bytes {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Pool(t).Exec(context.Background(), "GRANT configpub_viewer_bytes TO "+pgx.Identifier{pu.User.Username()}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	return db.PoolURL(t, u)
}

// fetcher GETs pages and remembers every body for the leak check.
type fetcher struct {
	t      *testing.T
	base   string
	bodies map[string]string
}

func (f *fetcher) get(path string, want int) string {
	f.t.Helper()
	resp, err := http.Get(f.base + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		f.t.Fatalf("GET %s: status %d, want %d: %s", path, resp.StatusCode, want, b)
	}
	f.bodies[path] = string(b)
	return string(b)
}

func mustContain(t *testing.T, what, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", what, w)
		}
	}
}

func newTestConsole(t *testing.T, pool *pgxpool.Pool, opts Options) (*Console, *fetcher) {
	t.Helper()
	c, err := New(context.Background(), pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(srv.Close)
	return c, &fetcher{t: t, base: srv.URL, bodies: map[string]string{}}
}

func TestPagesOverGeneratedHistory(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "dev", targets: 30, releases: 3, changed: 4, rollback: true})
	now := releaseAt(3).Add(2 * time.Hour)
	_, f := newTestConsole(t, viewerPool(t, db, true), Options{ShowValues: true, Now: func() time.Time { return now }})

	mustContain(t, "overview", f.get("/", 200), "dev", "Release 2", "Targets by state", "APPLIED")
	var envs []Environment
	if err := json.Unmarshal([]byte(f.get("/api/environments", 200)), &envs); err != nil {
		t.Fatal(err)
	}
	// Release 3 was rolled back: it is not staged.
	if len(envs) != 1 || envs[0].CurrentRelease != 2 || envs[0].StagedRelease != 0 || envs[0].Targets != 30 || envs[0].Releases != 3 {
		t.Errorf("overview: got %+v; want current 2, nothing staged, 30 targets, 3 releases", envs)
	}
	tl := f.get("/env/dev", 200)
	mustContain(t, "timeline", tl, "Release 3", "Release 2", "Release 1", "Rollback to release 2",
		"effective policy", "VALIDATED", "Agent snapshot", "Gateway snapshot", "Knowledge snapshot", "CURRENT", "previous release")
	if strings.Index(tl, "Release 3") > strings.Index(tl, "Release 1") {
		t.Errorf("timeline is not newest first")
	}

	rel := f.get("/env/dev/releases/2", 200)
	mustContain(t, "release 2 page", rel, "agentPolicy.limits.requestsPerMinute", "<del>120</del> → <ins>60</ins>",
		"alex@example.com", "sam@example.com", "agents/a.yaml", "4 target(s) changed")
	var api ReleaseDetail
	if err := json.Unmarshal([]byte(f.get("/api/environments/dev/releases/2", 200)), &api); err != nil {
		t.Fatal(err)
	}
	if api.DiffMode != "values" || api.ChangedTotal != 4 || len(api.Changed[0].Changes) != 1 ||
		api.Changed[0].Changes[0] != (Change{Path: "agentPolicy.limits.requestsPerMinute", Old: "120", New: "60"}) {
		t.Errorf("release 2 diff: got mode %s, %d changed, first %+v; want values, 4, one 120 -> 60 change", api.DiffMode, api.ChangedTotal, api.Changed)
	}

	// Release 1 has no base: its targets are new, their values not listed.
	first := f.get("/env/dev/releases/1", 200)
	mustContain(t, "release 1 page", first, "30 target(s) changed", "A new target")
	if strings.Contains(first, "requestsPerMinute") {
		t.Errorf("release 1 page lists the values of new targets")
	}

	tg := f.get("/env/dev/targets/h0.example/svc-0", 200)
	mustContain(t, "target page", tg, "Pointer history", "promote", "Runtime evidence", "Lease expires", "observation")
	var td TargetDetail
	if err := json.Unmarshal([]byte(f.get("/api/environments/dev/targets/h0.example/svc-0", 200)), &td); err != nil {
		t.Fatal(err)
	}
	// svc-0 changed in release 2, was rolled back from 3 (not changed) -> moves: r1, r2.
	if len(td.Moves) != 2 || td.Moves[0].SnapshotRelease != 2 || td.Moves[1].SnapshotRelease != 1 || td.Current == nil || td.Current.Release != 2 {
		t.Errorf("svc-0 history: got %+v current %+v; want moves to releases 2 then 1 (newest first), current release 2", td.Moves, td.Current)
	}

	between := releaseAt(2).Add(-10 * time.Minute).Format(time.RFC3339)
	var envAt struct {
		Env EnvironmentAt `json:"environment"`
	}
	if err := json.Unmarshal([]byte(f.get("/api/environments/dev/at?t="+between, 200)), &envAt); err != nil {
		t.Fatal(err)
	}
	if envAt.Env.Release != 1 || envAt.Env.Targets != 30 || len(envAt.Env.ByRelease) != 1 || envAt.Env.ByRelease[0].Release != 1 {
		t.Errorf("dev at %s: got release %d, %d targets, %+v; want release 1, 30 targets all of release 1", between, envAt.Env.Release, envAt.Env.Targets, envAt.Env.ByRelease)
	}
	page := f.get("/env/dev/at?t="+between, 200)
	mustContain(t, "time travel page", page, "Release 1", envAt.Env.ReleaseDigest)
	var idAt struct {
		Identity IdentityAt `json:"identity"`
	}
	later := releaseAt(2).Add(10 * time.Minute).Format(time.RFC3339)
	if err := json.Unmarshal([]byte(f.get("/api/environments/dev/at?t="+later+"&host=h0.example&service=svc-0", 200)), &idAt); err != nil {
		t.Fatal(err)
	}
	if idAt.Identity.Served == nil || idAt.Identity.Served.SnapshotRelease != 2 {
		t.Errorf("svc-0 at %s: got %+v, want release 2's snapshot", later, idAt.Identity.Served)
	}
	before := genT0.Add(-time.Hour).Format(time.RFC3339)
	var none struct {
		Identity IdentityAt `json:"identity"`
	}
	if err := json.Unmarshal([]byte(f.get("/api/environments/dev/at?t="+before+"&host=h0.example&service=svc-0", 200)), &none); err != nil {
		t.Fatal(err)
	}
	if none.Identity.Served != nil || none.Identity.Host != "h0.example" {
		t.Errorf("svc-0 before the first release: got %+v, want nothing served", none.Identity)
	}

	// Bad input is named; unknown things are 404.
	mustContain(t, "bad time", f.get("/api/environments/dev/at?t=yesterday", 400), "yesterday", "RFC 3339")
	f.get("/api/environments/dev/releases/x", 400)
	f.get("/api/environments/dev/releases/99", 404)
	f.get("/env/nope", 404)
	f.get("/api/environments/dev/targets/h0.example/nope", 404)
	// Time travel in an unknown environment, or to a target never served,
	// is a 404 as the timeline and the target page are; a time before a
	// known target was first served is not (it was not served yet).
	f.get("/api/environments/nope/at?t=2026-01-01T00:00:00Z", 404)
	f.get("/api/environments/dev/at?t=2026-01-01T00:00:00Z&host=h0.example&service=nope", 404)
	if b := f.get("/api/environments/dev/at?t=2000-01-01T00:00:00Z&host=h0.example&service=svc-0", 200); !strings.Contains(b, `"serviceId": "svc-0"`) {
		t.Errorf("time travel to before a target was served: %s", b)
	}
	// A NUL or a byte that is not UTF-8 in the path is a 400, not a store
	// error.
	f.get("/env/dev%00/releases/3", 400)
	f.get("/api/environments/dev%ff/timeline", 400)
	f.get("/api/environments/dev/targets/a%00/b", 400)
	// An unknown API path answers JSON, as every API error does.
	if b := f.get("/api/nope", 404); !strings.Contains(b, `"error": "no such API path"`) {
		t.Errorf("unknown API path: %q, want a JSON error", b)
	}

	metrics := f.get("/metrics", 200)
	mustContain(t, "metrics", metrics, `configpub_environment_current_release{env="dev"} 2`,
		`configpub_rollbacks_total{env="dev"} 1`, `configpub_targets{env="dev",state="APPLIED"} 30`,
		"configpub_ack_lag_seconds_bucket", "configpub_publication_duration_seconds_count{env=\"dev\"} 3",
		`configpub_console_requests_total{code="200",route="timeline"}`)
	lintMetrics(t, metrics)

	noLeaks(t, f.bodies)
}

// noLeaks checks that no body carries a configuration body, a secret
// reference's target or a bearer token.
func noLeaks(t *testing.T, bodies map[string]string) {
	t.Helper()
	for path, b := range bodies {
		for _, bad := range []string{"vault://", "You are generated agent", "Bearer ey", "eyJhbGciOi"} {
			if strings.Contains(b, bad) {
				t.Errorf("GET %s: body contains %q", path, bad)
			}
		}
	}
}

func TestMetadataDiffWithoutBytes(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "prod", targets: 6, releases: 2, changed: 2})
	// Release 3 staged, not activated: the staged release.
	if _, err := db.Pool(t).Exec(context.Background(), `INSERT INTO configpub.config_release (env_tag, release_version,
			base_release_version, row_revision, lifecycle_state, execution_outcome, definition, definition_hash, actor,
			target_count, command_id, last_command_id, created_at, updated_at)
		VALUES ('prod', 3, 2, 1, 'STAGED', 'NOT_REQUESTED', 'x', 'sha256:' || encode(sha256('x'::bytea), 'hex'), 'a', 6,
			gen_random_uuid(), gen_random_uuid(), now(), now())`); err != nil {
		t.Fatal(err)
	}
	_, f := newTestConsole(t, viewerPool(t, db, false), Options{})
	var envs []Environment
	if err := json.Unmarshal([]byte(f.get("/api/environments", 200)), &envs); err != nil {
		t.Fatal(err)
	}
	if len(envs) != 1 || envs[0].CurrentRelease != 2 || envs[0].StagedRelease != 3 {
		t.Errorf("overview: got %+v; want current 2, staged 3", envs)
	}
	rel := f.get("/env/prod/releases/2", 200)
	mustContain(t, "metadata diff", rel, "--show-values", "2 target(s) changed", "agents/a.yaml")
	if strings.Contains(rel, "requestsPerMinute") || strings.Contains(rel, ">120<") {
		t.Errorf("metadata-mode release page shows values")
	}
	// The bytes flag without the bytes grant is refused at start, naming
	// the grant; a grant revoked while the console runs fails closed.
	if _, err := New(context.Background(), viewerPool(t, db, false), Options{ShowValues: true}); err == nil ||
		!strings.Contains(err.Error(), "configpub_viewer_bytes") {
		t.Errorf("--show-values without the bytes grant: %v, want a refusal naming configpub_viewer_bytes", err)
	}
	granted := viewerPool(t, db, true)
	_, f2 := newTestConsole(t, granted, Options{ShowValues: true})
	if _, err := db.Pool(t).Exec(context.Background(), "REVOKE configpub_viewer_bytes FROM "+
		pgx.Identifier{granted.Config().ConnConfig.User}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	granted.Reset() // new sessions, without the grant
	body := f2.get("/env/prod/releases/2", 500)
	if strings.Contains(body, "permission") || strings.Contains(body, "artifact") {
		t.Errorf("500 body names internals: %q", body)
	}
	noLeaks(t, f.bodies)
}

func TestAccessControl(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "dev", targets: 3, releases: 1})
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := auth.Thumbprint(key.Public())
	v, err := auth.NewVerifier(auth.NewStaticKeys([]auth.Key{{ID: kid, Algorithm: auth.ES256, Public: key.Public()}}),
		auth.Options{Issuer: "https://idp.test", Audience: "console", Operator: true})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := auth.Mint(key, auth.MintOptions{Issuer: "https://idp.test", Audience: "console", Subject: "riley@example.com",
		Host: "-", ServiceID: "-", EnvTag: "-", ConfigAudience: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(context.Background(), viewerPool(t, db, false), Options{Verifier: v, ProxyHeader: "X-Forwarded-User",
		TrustedProxies: mustPrefixes(t, "10.9.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	for _, tc := range []struct {
		name, remote, authz, proxyUser string
		want                           int
	}{
		{"loopback without credentials", "127.0.0.1:5555", "", "", 200},
		{"ipv6 loopback", "[::1]:5555", "", "", 200},
		// DNS rebinding: a page of another domain, re-pointed at 127.0.0.1,
		// reaches the console from the operator's browser with its own
		// name in Host.
		{"loopback under a rebound name", "127.0.0.1:5555", "", "", 401},
		{"remote without credentials", "203.0.113.7:5555", "", "", 401},
		{"remote with a valid bearer", "203.0.113.7:5555", "Bearer " + tok, "", 200},
		{"remote with a bad bearer", "203.0.113.7:5555", "Bearer " + tok[:len(tok)-4] + "AAAA", "", 401},
		{"loopback with a bad bearer", "127.0.0.1:5555", "Bearer nonsense", "", 401},
		{"basic auth is not a bearer", "203.0.113.7:5555", "Basic dXNlcjpwYXNz", "", 401},
		{"trusted proxy with user", "10.9.1.1:5555", "", "riley", 200},
		{"trusted proxy without user", "10.9.1.1:5555", "", "", 401},
		{"untrusted peer sending the proxy header", "203.0.113.7:5555", "", "riley", 401},
	} {
		for _, path := range []string{"/", "/api/environments", "/metrics", "/events"} {
			if path == "/events" && tc.want == 200 {
				continue // streams until closed
			}
			req := httptest.NewRequest("GET", path, nil)
			req.RemoteAddr = tc.remote
			req.Host = "127.0.0.1:8090"
			switch tc.name {
			case "ipv6 loopback":
				req.Host = "[::1]:8090"
			case "loopback under a rebound name":
				req.Host = "rebind.attacker.example:8090"
			}
			if tc.authz != "" {
				req.Header.Set("Authorization", tc.authz)
			}
			if tc.proxyUser != "" {
				req.Header.Set("X-Forwarded-User", tc.proxyUser)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Errorf("%s %s: got %d, want %d", tc.name, path, rec.Code, tc.want)
			}
			if strings.Contains(rec.Body.String(), tok) || strings.Contains(rec.Body.String(), "eyJ") {
				t.Errorf("%s %s: the response echoes a token", tc.name, path)
			}
		}
	}
	// Liveness needs no credentials.
	req := httptest.NewRequest("GET", "/healthz", nil)
	req.RemoteAddr = "203.0.113.7:5555"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Errorf("healthz from a remote peer: got %d, want 200", rec.Code)
	}
}

func TestServeRefusesRemoteListenWithoutCredentials(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		fail bool
	}{
		{Config{DatabaseURL: "postgres://x", Listen: "127.0.0.1:0"}, false},
		{Config{DatabaseURL: "postgres://x", Listen: "[::1]:0"}, false},
		{Config{DatabaseURL: "postgres://x", Listen: "0.0.0.0:8090"}, true},
		{Config{DatabaseURL: "postgres://x", Listen: ":8090"}, true},
		{Config{DatabaseURL: "postgres://x", Listen: ":8090", ProxyHeader: "X-User", TrustedProxies: []string{"10.0.0.1"}}, false},
		{Config{DatabaseURL: "postgres://x", Listen: ":8090", ProxyHeader: "X-User"}, true},
		{Config{DatabaseURL: "postgres://x", Listen: ":8090", JWKS: "k.json"}, true}, // no issuer/audience
		{Config{DatabaseURL: "postgres://x", Listen: ":8090", ProxyHeader: "X-User", TrustedProxies: []string{"nope"}}, true},
	} {
		_, err := tc.cfg.options()
		if (err != nil) != tc.fail {
			t.Errorf("%+v: got %v, want failure %v", tc.cfg, err, tc.fail)
		}
	}
}

func TestLiveUpdatesFollowNotify(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "dev", targets: 3, releases: 1})
	c, f := newTestConsole(t, viewerPool(t, db, false), Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	events := follow(t, ctx, c, db, f.base+"/events?env=dev")
	// Record a release (journal insert -> trigger NOTIFY) in another
	// environment and in dev.
	generate(t, db.Pool(t), generated{env: "prod", targets: 2, releases: 1})
	note, _ := json.Marshal(pointernote.Note{Host: "h0.example", ServiceID: "svc-0", EnvTag: "dev"})
	if _, err := db.Pool(t).Exec(ctx, pointernote.SendSQL, string(note)); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-events:
		if got != `data: {"envTag":"dev"}` {
			t.Errorf("got %s, want the dev change only", got)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no change event within 2 s of the NOTIFY")
	}
}

// follow subscribes to the console's server-sent events at url (c runs)
// and returns their data lines, once the console is LISTENing and counts
// the client.
func follow(t *testing.T, ctx context.Context, c *Console, db *pgtest.DB, url string) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data: ") {
				events <- sc.Text()
			}
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for c.hub.clients() == 0 || !listening(t, db) {
		if time.Now().After(deadline) {
			t.Fatal("console never listened")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return events
}

func listening(t *testing.T, db *pgtest.DB) bool {
	var n int
	_ = db.Pool(t).QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN configpub_console%'`).Scan(&n)
	return n > 0
}

func mustPrefixes(t *testing.T, ps ...string) []netip.Prefix {
	t.Helper()
	var out []netip.Prefix
	for _, p := range ps {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func TestPageCacheDropsEverythingOnAChange(t *testing.T) {
	c := newPageCache(time.Hour, time.Now)
	loads := 0
	load := func() (any, error) { loads++; return loads, nil }
	for _, want := range []int{1, 1} {
		if v, _ := c.get("k", load); v != want {
			t.Fatalf("got %v, want %d", v, want)
		}
	}
	c.invalidate()
	if v, _ := c.get("k", load); v != 2 {
		t.Fatalf("after a change notice: got %v, want a reload (2)", v)
	}
	off := newPageCache(-1, time.Now)
	off.get("k", load)
	if v, _ := off.get("k", load); v != 4 {
		t.Fatalf("disabled cache: got %v, want every call to load (4)", v)
	}
}

// TestOverviewCountsRevokedTargets: a target whose snapshot is revoked, by
// snapshot or by publication, counts as REVOKED in the overview.
func TestOverviewCountsRevokedTargets(t *testing.T) {
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "rev", targets: 6, releases: 2, changed: 2})
	ctx := context.Background()
	now := releaseAt(2).Add(time.Hour)
	c, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, revoked int) {
		t.Helper()
		e, err := c.rd.Environment(ctx, "rev")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, s := range e.ByState {
			got[s.State] = s.Count
		}
		if e.Targets != 6 || got[StateRevoked] != revoked || got[StateApplied] != 6-revoked {
			t.Errorf("overview of rev %s: %d targets by state %v, want 6: %d REVOKED, %d APPLIED", when, e.Targets, got, revoked, 6-revoked)
		}
	}
	check("before any revocation", 0)
	// Release 2 changed svc-0 and svc-1 (its publication); svc-5 keeps release 1's snapshot.
	if _, err := db.Pool(t).Exec(ctx, `INSERT INTO configpub.revocation (publication_id, reason, actor, revoked_at)
		VALUES (md5('rev2')::uuid, 'bad release', 'alex@example.com', now())`); err != nil {
		t.Fatal(err)
	}
	check("with release 2's publication revoked (svc-0, svc-1)", 2)
	revokedReleases := func(when string, want ...int64) {
		t.Helper()
		tl, err := c.rd.Timeline(ctx, "rev", 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, rel := range tl.Releases {
			if rel.Activatable == "revoked" {
				got = append(got, rel.Version)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("timeline of rev %s: releases %v never activatable again, want %v", when, got, want)
		}
	}
	revokedReleases("with release 2's publication revoked", 2)
	if _, err := db.Pool(t).Exec(ctx, `INSERT INTO configpub.revocation (snapshot_id, reason, actor, revoked_at)
		SELECT snapshot_id, E'leaked\u202eevil\x1b[2J', 'alex@example.com', now() FROM configpub.current_pointer WHERE env_tag = 'rev' AND service_id = 'svc-5'`); err != nil {
		t.Fatal(err)
	}
	check("with svc-5's snapshot revoked too", 3)
	revokedReleases("with svc-5's snapshot (release 1's, kept by release 2) revoked too", 2, 1)

	// The timeline lists the revocations, newest first.
	tl, err := c.rd.Timeline(ctx, "rev", 0)
	if err != nil {
		t.Fatal(err)
	}
	if v := tl.Revocations; len(v) != 2 || v[0].ServiceID != "svc-5" || v[0].ReleaseVersion != 1 || v[0].Current != 1 ||
		v[0].Reason != "leaked\u202eevil\x1b[2J" || v[1].PublicationID == "" || v[1].ReleaseVersion != 2 || v[1].Snapshots != 2 ||
		v[1].Current != 2 || v[1].Actor != "alex@example.com" || tl.RevocationsMore {
		t.Errorf("timeline revocations %+v, want svc-5's snapshot (1 current) then release 2's publication (2 snapshots, 2 current)", v)
	}
	page := localGet(c.Handler(), "/env/rev").Body.String()
	mustContain(t, "timeline page", page, `<h2 id="revocations">Revocations</h2>`, "h0.example/svc-5</a>", "(2 snapshots)", "bad release",
		`leaked\u202eevil\x1b[2J`) // a reason's control characters shown as escapes, not interpreted
	if strings.ContainsAny(page, "\u202e\x1b") {
		t.Errorf("timeline page carries a raw bidirectional override or escape character")
	}
}

// TestReleaseChangedTargetsArePaged: a release of more changed targets than
// one page lists them page by page, each exactly once, with the total.
func TestReleaseChangedTargetsArePaged(t *testing.T) {
	db := pgtest.New(t)
	const n = changedListed + 7
	generate(t, db.Pool(t), generated{env: "wide", targets: n, releases: 1})
	ctx := context.Background()
	c, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	from, pages := 0, 0
	for {
		d, err := c.rd.ReleaseDetail(ctx, "wide", 1, from, AgainstBase)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if d.ChangedTotal != n || d.ChangedFrom != from {
			t.Fatalf("page from %d: total %d, from %d; want %d, %d", from, d.ChangedTotal, d.ChangedFrom, n, from)
		}
		for _, td := range d.Changed {
			if seen[td.ServiceID] {
				t.Errorf("%s listed twice", td.ServiceID)
			}
			seen[td.ServiceID] = true
		}
		if d.ChangedNext == 0 {
			break
		}
		if d.ChangedNext != from+len(d.Changed) || pages > 3 {
			t.Fatalf("page from %d: next %d after %d rows", from, d.ChangedNext, len(d.Changed))
		}
		from = d.ChangedNext
	}
	if len(seen) != n || pages != 2 {
		t.Errorf("%d distinct targets over %d pages, want %d over 2", len(seen), pages, n)
	}
	for path, want := range map[string]string{
		"/env/wide/releases/1": `href="/env/wide/releases/1?against=base&amp;from=` + fmt.Sprint(changedListed) + `"`,
		"/env/wide/releases/1?from=" + fmt.Sprint(changedListed): "7 from offset " + fmt.Sprint(changedListed) + " on",
	} {
		rec := localGet(c.Handler(), path)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s: %d, body lacks %q", path, rec.Code, want)
		}
	}
}

// TestReleaseInputChangesAreBounded: a release changing more policy
// sources than a page lists shows the first inputsListed by path, with the
// total, on the page and in the API.
func TestReleaseInputChangesAreBounded(t *testing.T) {
	db := pgtest.New(t)
	const extra = inputsListed + 5
	generate(t, db.Pool(t), generated{env: "src", targets: 3, releases: 2, changed: 1, inputs: extra})
	ctx := context.Background()
	c, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.rd.ReleaseDetail(ctx, "src", 2, 0, AgainstBase)
	if err != nil {
		t.Fatal(err)
	}
	// Release 2 changes agents/a.yaml and every extra tool, not the environment.
	if d.InputsTotal != extra+1 || len(d.Inputs) != inputsListed {
		t.Fatalf("got %d of %d input changes, want %d of %d", len(d.Inputs), d.InputsTotal, inputsListed, extra+1)
	}
	if d.Inputs[0].Path != "agents/a.yaml" || d.Inputs[inputsListed-1].Path != fmt.Sprintf("tools/t%05d.yaml", inputsListed-2) {
		t.Errorf("listed %s .. %s, want agents/a.yaml .. the first tools by path", d.Inputs[0].Path, d.Inputs[inputsListed-1].Path)
	}
	get := func(path string) string {
		t.Helper()
		rec := localGet(c.Handler(), path)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d", path, rec.Code)
		}
		if n := strings.Count(rec.Body.String(), "tools/t"); n > inputsListed {
			t.Errorf("GET %s lists %d tool sources, more than %d", path, n, inputsListed)
		}
		return rec.Body.String()
	}
	if page, want := get("/env/src/releases/2"), fmt.Sprintf("Policy sources changed: %d, the first %d by path shown", extra+1, inputsListed); !strings.Contains(page, want) {
		t.Errorf("release page lacks %q", want)
	}
	// Release 1 (no base) changes every input: the environment's too.
	for v, want := range map[int]int{1: extra + 2, 2: extra + 1} {
		var api struct {
			Inputs []InputChange `json:"inputChanges"`
			Total  int           `json:"inputChangesTotal"`
		}
		if err := json.Unmarshal([]byte(get(fmt.Sprintf("/api/environments/src/releases/%d", v))), &api); err != nil {
			t.Fatal(err)
		}
		if api.Total != want || len(api.Inputs) != inputsListed {
			t.Errorf("API release %d: %d of %d input changes, want %d of %d", v, len(api.Inputs), api.Total, inputsListed, want)
		}
	}
}

// TestReleasePageSaysUntilWhenItCanBeActivated: a release's page and API
// give the latest start and earliest end of its snapshots' activation
// windows (those it created and those it kept), as of the console's clock:
// from before they open, until inside, ended after.
func TestReleasePageSaysUntilWhenItCanBeActivated(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	// Release 3 keeps most snapshots from release 1 (window from releaseAt(1)
	// for 21 days) and creates some of its own (from releaseAt(3)).
	generate(t, db.Pool(t), generated{env: "dev", targets: 12, releases: 3, changed: 3})
	ctx := context.Background()
	var wantFrom, wantUntil time.Time
	if err := db.Pool(t).QueryRow(ctx, `SELECT max(s.valid_from), min(s.expires_at)
		FROM configpub.config_release_target t JOIN configpub.config_snapshot s ON s.snapshot_id = t.snapshot_id
		WHERE t.env_tag = 'dev' AND t.release_version = 3`).Scan(&wantFrom, &wantUntil); err != nil {
		t.Fatal(err)
	}
	if !wantFrom.Equal(releaseAt(3)) || !wantUntil.Equal(releaseAt(1).Add(21*24*time.Hour)) {
		t.Fatalf("generated release 3's window %s..%s, want from release 3 to the end of release 1's", wantFrom, wantUntil)
	}
	for _, c := range []struct {
		now         time.Time
		state, html string
	}{
		{releaseAt(3).Add(-time.Minute), "from", "from <time datetime=\"" + wantFrom.Format(time.RFC3339Nano) + "\">"},
		{releaseAt(3).Add(10 * 24 * time.Hour), "until", "until <time datetime=\"" + wantUntil.Format(time.RFC3339Nano) + "\">"},
		{wantUntil.Add(90 * 24 * time.Hour), "ended", "ended <time datetime=\"" + wantUntil.Format(time.RFC3339Nano) + "\">"},
	} {
		now := c.now
		con, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		d, err := con.rd.ReleaseDetail(ctx, "dev", 3, 0, AgainstBase)
		if err != nil {
			t.Fatal(err)
		}
		if d.Activatable != c.state || d.ActivatableFrom == nil || !d.ActivatableFrom.Equal(wantFrom) ||
			d.ActivatableUntil == nil || !d.ActivatableUntil.Equal(wantUntil) {
			t.Errorf("at %s: release 3 activatable %q from %v until %v, want %q from %s until %s", now, d.Activatable,
				d.ActivatableFrom, d.ActivatableUntil, c.state, wantFrom, wantUntil)
		}
		rec := localGet(con.Handler(), "/env/dev/releases/3")
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `id="activatable"`) || !strings.Contains(rec.Body.String(), c.html) {
			t.Errorf("at %s: GET /env/dev/releases/3: %d, body lacks the activatable %q", now, rec.Code, c.html)
		}

		// The timeline says it for every release on the page, so a rollback
		// target can be chosen there.
		tl, err := con.rd.Timeline(ctx, "dev", 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(tl.Releases) != 3 {
			t.Fatalf("timeline lists %d releases, want 3", len(tl.Releases))
		}
		for _, rel := range tl.Releases {
			var from, until time.Time
			if err := db.Pool(t).QueryRow(ctx, `SELECT max(s.valid_from), min(s.expires_at)
				FROM configpub.config_release_target t JOIN configpub.config_snapshot s ON s.snapshot_id = t.snapshot_id
				WHERE t.env_tag = 'dev' AND t.release_version = $1`, rel.Version).Scan(&from, &until); err != nil {
				t.Fatal(err)
			}
			want := "until"
			if now.Before(from) {
				want = "from"
			}
			if !now.Before(until) {
				want = "ended"
			}
			if rel.Activatable != want || rel.ActivatableFrom == nil || !rel.ActivatableFrom.Equal(from) ||
				rel.ActivatableUntil == nil || !rel.ActivatableUntil.Equal(until) {
				t.Errorf("at %s: timeline release %d activatable %q from %v until %v, want %q from %s until %s",
					now, rel.Version, rel.Activatable, rel.ActivatableFrom, rel.ActivatableUntil, want, from, until)
			}
		}
		rec = localGet(con.Handler(), "/env/dev")
		card := rec.Body.String()
		if i := strings.Index(card, `id="release-3"`); i >= 0 {
			card = card[i:]
			if j := strings.Index(card, `id="release-2"`); j >= 0 {
				card = card[:j]
			}
		}
		if rec.Code != 200 || !strings.Contains(card, `class="window"`) || !strings.Contains(card, c.html) {
			t.Errorf("at %s: GET /env/dev: %d, release 3's card lacks the activatable %q", now, rec.Code, c.html)
		}

		// /metrics gives the current release's end, for an alert to renew.
		var current int64
		var currentUntil time.Time
		if err := db.Pool(t).QueryRow(ctx, `SELECT e.current_release_version, min(s.expires_at)
			FROM configpub.environment e JOIN configpub.config_release_target t
				ON t.env_tag = e.env_tag AND t.release_version = e.current_release_version
			JOIN configpub.config_snapshot s ON s.snapshot_id = t.snapshot_id
			WHERE e.env_tag = 'dev' GROUP BY 1`).Scan(&current, &currentUntil); err != nil {
			t.Fatal(err)
		}
		rec = localGet(con.Handler(), "/metrics")
		const name = `configpub_environment_current_release_activatable_until_seconds{env="dev"} `
		_, value, found := strings.Cut(rec.Body.String(), "\n"+name)
		value, _, _ = strings.Cut(value, "\n")
		if v, err := strconv.ParseFloat(value, 64); !found || err != nil || v != float64(currentUntil.Unix()) {
			t.Errorf("at %s: /metrics says release %d's window ends at %q, want %d", now, current, value, currentUntil.Unix())
		}
	}
}

// TestTimelineMarksRenewals: a release recorded with the same sources
// digest as its base release is a renewal (configpub compile --renew); the
// timeline, the release page and the API say so, and of no other release.
func TestTimelineMarksRenewals(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	// Releases 3 and 4 renew release 2's sources; 5 changes policy again.
	generate(t, db.Pool(t), generated{env: "dev", targets: 12, releases: 5, changed: 3,
		renewal: func(r int) bool { return r == 3 || r == 4 }})
	ctx := context.Background()
	con, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := con.rd.Timeline(ctx, "dev", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Releases) != 5 {
		t.Fatalf("timeline lists %d releases, want 5", len(tl.Releases))
	}
	for _, rel := range tl.Releases {
		if want := rel.Version == 3 || rel.Version == 4; rel.Renewal != want {
			t.Errorf("timeline release %d: renewal %v, want %v", rel.Version, rel.Renewal, want)
		}
	}
	get := func(path string) string {
		t.Helper()
		rec := localGet(con.Handler(), path)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d", path, rec.Code)
		}
		return rec.Body.String()
	}
	page := get("/env/dev")
	for v := 1; v <= 5; v++ {
		card := page[strings.Index(page, fmt.Sprintf(`id="release-%d"`, v)):]
		if end := strings.Index(card, "</li>"); end >= 0 {
			card = card[:end]
		}
		if want := v == 3 || v == 4; strings.Contains(card, "RENEWAL") != want {
			t.Errorf("timeline card of release %d marked a renewal: %v, want %v", v, !want, want)
		}
	}
	if body := get("/env/dev/releases/4"); !strings.Contains(body, `id="renewal"`) || !strings.Contains(body, "compiled from the same policy sources as release 3") {
		t.Errorf("release 4's page does not say it is a renewal of release 3")
	}
	if body := get("/env/dev/releases/5"); strings.Contains(body, `id="renewal"`) {
		t.Errorf("release 5's page calls a policy change a renewal")
	}
	for v, want := range map[int]bool{2: false, 3: true} {
		var rel struct {
			Renewal bool `json:"renewal"`
		}
		if err := json.Unmarshal([]byte(get(fmt.Sprintf("/api/environments/dev/releases/%d", v))), &rel); err != nil || rel.Renewal != want {
			t.Errorf("the API of release %d: renewal %v (%v), want %v", v, rel.Renewal, err, want)
		}
	}
}

// localGet serves GET path from the loopback address, as a browser on the
// console's machine would ask it.
func localGet(h http.Handler, path string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", path, nil)
	req.RemoteAddr, req.Host = "127.0.0.1:1", "localhost:8090"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// localJSON GETs path from h as localGet does and decodes its 200 answer
// into a T, failing the test on any other status.
func localJSON[T any](t *testing.T, h http.Handler, path string) T {
	t.Helper()
	rec := localGet(h, path)
	if rec.Code != 200 {
		t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
	}
	var v T
	if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return v
}

// /metrics counts, per receiver, the notifications a webhook receiver was
// sent and neither accepted nor refused for good within 7 days (what
// `configpub webhook redeliver` would send it), through the viewer role.
func TestMetricsCountUndeliveredWebhookEvents(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	pool := db.Pool(t)
	event := func(id, recorded string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO configpub.webhook_event (event_id, event_kind, env_tag, release_version, event, recorded_at)
			VALUES ($1::uuid, 'release.activated', 'prod', 2, '{}', now() - $2::interval)`, id, recorded); err != nil {
			t.Fatal(err)
		}
	}
	attempt := func(id, receiver string, n int, delivered bool, status int) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO configpub.webhook_delivery (event_id, event_kind, env_tag, release_version,
				receiver, attempt, delivered, http_status, attempted_at, duration_ms)
			VALUES ($1::uuid, 'release.activated', 'prod', 2, $2, $3, $4, nullif($5, 0), now(), 1)`, id, receiver, n, delivered, status); err != nil {
			t.Fatal(err)
		}
	}
	const a, b = "https://hooks.a.example/…#aaaa0000", "https://hooks.b.example/…#bbbb0000"
	ids := []string{"00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002",
		"00000000-0000-4000-8000-000000000003", "00000000-0000-4000-8000-000000000004"}
	event(ids[0], "1 hour")
	attempt(ids[0], a, 1, false, 503) // missed by a
	attempt(ids[0], b, 1, true, 200)
	event(ids[1], "2 hours")
	attempt(ids[1], a, 1, false, 503)
	attempt(ids[1], a, 2, true, 200)  // delivered on a retry
	attempt(ids[1], b, 1, false, 410) // refused for good: not counted
	event(ids[2], "3 hours")
	attempt(ids[2], a, 1, false, 0) // missed by a (no answer: no status, as PGLog records it)
	attempt(ids[2], b, 1, false, 429)
	event(ids[3], "80 hours") // a three-day outage: still to send
	attempt(ids[3], a, 1, false, 503)
	event("00000000-0000-4000-8000-000000000007", "169 hours") // too old to count
	attempt("00000000-0000-4000-8000-000000000007", a, 1, false, 503)
	// b was in use before and after an event only a was sent (the process
	// stopped between their attempts): b's to send, as redeliver does.
	attemptAt := func(id, receiver, ago string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `INSERT INTO configpub.webhook_delivery (event_id, event_kind, env_tag, release_version,
				receiver, attempt, delivered, http_status, attempted_at, duration_ms)
			VALUES ($1::uuid, 'release.activated', 'prod', 2, $2, 1, true, 200, now() - $3::interval, 1)`, id, receiver, ago); err != nil {
			t.Fatal(err)
		}
	}
	event("00000000-0000-4000-8000-000000000008", "6 hours")
	attemptAt("00000000-0000-4000-8000-000000000008", a, "6 hours")
	attemptAt("00000000-0000-4000-8000-000000000008", b, "6 hours")
	event("00000000-0000-4000-8000-000000000009", "5 hours")
	attemptAt("00000000-0000-4000-8000-000000000009", a, "5 hours")
	// Recorded with its state change and sent to no receiver: under
	// "none" once older than redeliver's two minutes.
	event("00000000-0000-4000-8000-000000000005", "10 minutes")
	event("00000000-0000-4000-8000-000000000006", "10 seconds") // its first attempts may still be on their way
	con, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	rec := localGet(con.Handler(), "/metrics")
	mustContain(t, "metrics", rec.Body.String(),
		`configpub_webhook_undelivered_events{receiver="`+a+`"} 3`,
		`configpub_webhook_undelivered_events{receiver="`+b+`"} 2`,
		`configpub_webhook_undelivered_events{receiver="none"} 1`)
}

// TestOverviewJudgesWhatTheRuntimeRuns: the overview judges a target by
// the receipts about what its runtime runs, as configpub status does. A
// readback that records a runtime's old rejection (of a release it never
// ran) after the receipt of the desired snapshot it runs leaves it
// APPLIED and not divergent — the console called every target of an
// environment PUBLISHED and divergent after a rollback and a release
// forward, while status said APPLIED. A runtime that runs an older
// snapshot is divergent, reported with the release it runs.
func TestOverviewJudgesWhatTheRuntimeRuns(t *testing.T) {
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "run", targets: 6, releases: 2, changed: 2})
	ctx := context.Background()
	now := releaseAt(2).Add(time.Hour)
	c, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	// svc-0 and svc-1 changed in release 2: each has a release-1 snapshot.
	receipt := func(svc, outcome, about, running string) {
		t.Helper()
		if _, err := db.Pool(t).Exec(ctx, `INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, snapshot_id,
				outcome, reason, artifact_digest, reported_at, kind, endpoint, running_snapshot_id)
			SELECT p.host, p.service_id, p.env_tag, s.snapshot_id, $3, CASE WHEN $3 = 'REJECTED' THEN 'UNTRUSTED_KEY' ELSE '' END,
				s.artifact_digest, p.moved_at + interval '1 minute', 'receipt', 'https://' || p.host || '/status',
				CASE $5 WHEN 'current' THEN p.snapshot_id WHEN 'old' THEN s.snapshot_id END
			FROM configpub.current_pointer p JOIN configpub.config_snapshot s
				ON s.host = p.host AND s.service_id = p.service_id AND s.env_tag = p.env_tag
			WHERE p.env_tag = $1 AND p.service_id = $2
				AND s.release_version = CASE $4 WHEN 'old' THEN 1 ELSE p.release_version END`, "run", svc, outcome, about, running); err != nil {
			t.Fatal(err)
		}
	}
	receipt("svc-1", "REJECTED", "old", "current") // an old rejection, read back after what it runs
	receipt("svc-0", "APPLIED", "old", "old")      // runs release 1's snapshot
	receipt("svc-2", "APPLIED", "new", "current")  // ran the desired snapshot,
	receipt("svc-2", "REJECTED", "new", "none")    // then rejected it and failed closed
	e, err := c.rd.Environment(ctx, "run")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, s := range e.ByState {
		got[s.State] = s.Count
	}
	if got[StateApplied] != 4 || got[StatePublished] != 1 || got[StateRejected] != 1 || e.Divergent != 2 {
		t.Errorf("overview: by state %v, %d divergent; want 4 APPLIED, 1 PUBLISHED, 1 REJECTED, 2 divergent (svc-0, svc-2)", got, e.Divergent)
	}
	if len(e.Divergence) != 2 || e.Divergence[0].ServiceID != "svc-0" || e.Divergence[0].ReportedRelease != 1 ||
		e.Divergence[0].CurrentRelease != 2 || e.Divergence[0].Outcome != "APPLIED" || e.Divergence[0].ReportedDigest == "" ||
		e.Divergence[1].ServiceID != "svc-2" || e.Divergence[1].Outcome != "NONE" {
		t.Errorf("divergence %+v, want svc-0 running release 1 where release 2 is desired, svc-2 running nothing", e.Divergence)
	}
	// The target pages say the same.
	for svc, want := range map[string]string{"svc-0": StatePublished, "svc-1": StateApplied, "svc-2": StateRejected} {
		td, err := c.rd.TargetDetail(ctx, "run", "h0.example", svc)
		if err != nil {
			t.Fatal(err)
		}
		if td.Current == nil || td.Current.State != want {
			t.Errorf("target page of %s: %+v, want %s", svc, td.Current, want)
		}
	}
}

// TestMetricsCountFailuresNotIntents: every command journals its intent
// UNCONFIRMED before its transaction, so configpub_publication_failures_total
// counted every successful promotion (and the shipped dashboard summed it).
// It counts NOT_APPLIED and INTEGRITY_ERROR events only; a release left
// UNCONFIRMED for more than two minutes is configpub_unconfirmed_releases,
// what configpub reconcile settles.
func TestMetricsCountFailuresNotIntents(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	pool := db.Pool(t)
	generate(t, pool, generated{env: "unc", targets: 3, releases: 2, changed: 1})
	ctx := context.Background()
	for _, r := range []struct {
		version int
		age     string
	}{{3, "10 minutes"}, {4, "10 seconds"}} {
		if _, err := pool.Exec(ctx, `INSERT INTO configpub.config_release (env_tag, release_version, base_release_version, row_revision,
				lifecycle_state, execution_outcome, definition, definition_hash, release_digest, source_commit, source_ref,
				actor, reviewers, reason, target_count, command_id, last_command_id, created_at, updated_at)
			VALUES ('unc', $1::bigint, $1::bigint - 1, 1, 'RECORDED', 'UNCONFIRMED', 'x'::bytea, 'sha256:' || encode(sha256('x'::bytea), 'hex'),
				'sha256:' || encode(sha256($1::bigint::text::bytea), 'hex'), 'deadbeef', 'refs/heads/main', 'alex@example.com', '{}', '', 3,
				md5('u' || $1::bigint::text)::uuid, md5('u' || $1::bigint::text)::uuid, now() - $2::interval, now() - $2::interval)`, r.version, r.age); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO configpub.config_release_journal (env_tag, release_version, sequence, command_id,
				command_hash, event_kind, to_state, to_outcome, actor, recorded_at)
			VALUES ('unc', $1::bigint, 1, md5('u' || $1::bigint::text)::uuid, 'sha256:00', 'record', 'RECORDED', 'UNCONFIRMED', 'alex@example.com',
				now() - $2::interval)`, r.version, r.age); err != nil {
			t.Fatal(err)
		}
	}
	con, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	body := localGet(con.Handler(), "/metrics").Body.String()
	mustContain(t, "metrics", body, `configpub_unconfirmed_releases{env="unc"} 1`)
	if strings.Contains(body, `outcome="UNCONFIRMED"`) {
		t.Errorf("an intent journaled UNCONFIRMED is counted as a publication failure:\n%s", grepLines(body, "configpub_publication_failures_total"))
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestLeasesAboutToExpireMeanSomething: with leases shorter than the
// lease horizon (15 minutes against 72 hours) every lease ends within it,
// so the overview counted every target as about to expire at all times. A
// lease counts when its renewal is due (past its refresh point), or when
// it is longer than the horizon and ends within it.
func TestLeasesAboutToExpireMeanSomething(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	pool := db.Pool(t)
	generate(t, pool, generated{env: "lease", targets: 5, releases: 1})
	ctx := context.Background()
	now := releaseAt(1).Add(time.Hour)
	lease := func(svc string, from, refresh, expires time.Duration) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE configpub.current_pointer SET lease_valid_from = $2, lease_refresh_after = $3,
				lease_expires_at = $4 WHERE env_tag = 'lease' AND service_id = $1`,
			svc, now.Add(from), now.Add(refresh), now.Add(expires)); err != nil {
			t.Fatal(err)
		}
	}
	lease("svc-0", -10*time.Minute, 20*time.Minute, 50*time.Minute)  // short, renewal not due
	lease("svc-1", -40*time.Minute, -10*time.Minute, 20*time.Minute) // short, renewal due
	lease("svc-2", -10*24*time.Hour, time.Hour, 48*time.Hour)        // long, ends within the horizon
	lease("svc-3", -time.Hour, 29*24*time.Hour, 30*24*time.Hour)     // long, far from its end
	c, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	e, err := c.rd.Environment(ctx, "lease")
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, l := range e.Expiring {
		listed = append(listed, l.ServiceID)
	}
	slices.Sort(listed)
	if e.LeasesExpiring != 2 || !slices.Equal(listed, []string{"svc-1", "svc-2"}) {
		t.Errorf("leases about to expire: %d, listed %v; want 2: svc-1 (renewal due) and svc-2 (ends within the horizon)", e.LeasesExpiring, listed)
	}
}

// TestHTMLErrorsArePagesOfTheConsole: an error on an HTML route (a release
// that does not exist, an unknown environment) is a page of the console
// with its status and a way back — it was a bare text/plain line — while
// /api/ routes keep answering JSON.
func TestHTMLErrorsArePagesOfTheConsole(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "err", targets: 2, releases: 1})
	c, err := New(context.Background(), viewerPool(t, db, false), Options{CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	rec := localGet(h, "/env/err/releases/99")
	body := rec.Body.String()
	if rec.Code != http.StatusNotFound || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") ||
		!strings.Contains(body, "404 Not Found") || !strings.Contains(body, `<a href="/">All environments</a>`) ||
		!strings.Contains(body, `<a href="/env/err">Timeline: err</a>`) {
		t.Errorf("a release that does not exist: %d %s\n%s", rec.Code, rec.Header().Get("Content-Type"), body)
	}
	rec = localGet(h, "/env/nosuch")
	if body := rec.Body.String(); rec.Code != http.StatusNotFound || !strings.Contains(body, "All environments") ||
		strings.Contains(body, "Timeline: nosuch") {
		t.Errorf("an unknown environment: %d\n%s", rec.Code, body)
	}
	rec = localGet(h, "/api/env/err/releases/99")
	if rec.Code != http.StatusNotFound || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Errorf("the API: %d %s, want a JSON 404", rec.Code, rec.Header().Get("Content-Type"))
	}
}

// TestTimelineCountsCandidateReceipts: a staged release's audiences count
// the snapshots a prefetch read back READY (or REJECTED) in the candidate
// phase — the timeline showed "STAGED 0/2 applied" while two-phase
// activation waited for READY receipts it did not show.
func TestTimelineCountsCandidateReceipts(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	pool := db.Pool(t)
	generate(t, pool, generated{env: "cand", targets: 4, releases: 2, changed: 2})
	ctx := context.Background()
	for svc, outcome := range map[string]string{"svc-0": "READY", "svc-1": "REJECTED"} {
		if _, err := pool.Exec(ctx, `INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, snapshot_id,
				outcome, reason, artifact_digest, reported_at, kind, phase, endpoint)
			SELECT s.host, s.service_id, s.env_tag, s.snapshot_id, $2, '', s.artifact_digest, now(), 'receipt', 'candidate',
				'https://' || s.host || '/status'
			FROM configpub.config_snapshot s WHERE s.env_tag = 'cand' AND s.release_version = 2 AND s.service_id = $1`, svc, outcome); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := c.rd.Timeline(ctx, "cand", 0)
	if err != nil {
		t.Fatal(err)
	}
	var targets, ready, rejected int
	for _, rel := range tl.Releases {
		if rel.Version == 2 {
			for _, a := range rel.Audiences {
				targets, ready, rejected = targets+a.Targets, ready+a.Ready, rejected+a.CandidateRejected
			}
		}
	}
	if targets != 2 || ready != 1 || rejected != 1 {
		t.Fatalf("release 2's audiences: %d targets, %d ready, %d candidate rejected; want 2, 1, 1", targets, ready, rejected)
	}
}

// TestJournalEventsAreBounded: every lease resignation and epoch raise
// journals an event for the release it re-signs, so a release's events
// grew without bound (150 resignations: 38 KB pages). A page lists the
// newest and says how many older ones it left out.
func TestJournalEventsAreBounded(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	generate(t, db.Pool(t), generated{env: "jr", targets: 2, releases: 3})
	ctx := context.Background()
	c, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	c.rd.journalListed = 2
	tl, err := c.rd.Timeline(ctx, "jr", 0)
	if err != nil {
		t.Fatal(err)
	}
	var total int
	if err := db.Pool(t).QueryRow(ctx, `SELECT count(*) FROM configpub.config_release_journal WHERE env_tag = 'jr'`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	if total <= 2 || len(tl.Events) != 2 || tl.EventsMore != total-2 {
		t.Fatalf("timeline: %d events listed, %d more, of %d; want 2 listed and the rest counted", len(tl.Events), tl.EventsMore, total)
	}
	if body := localGet(c.Handler(), "/env/jr").Body.String(); !strings.Contains(body, fmt.Sprintf("and %d older events", total-2)) {
		t.Errorf("the timeline page does not say how many events it left out")
	}
}

// TestFailureCountersStartAtZero: an environment with releases and no
// failure has configpub_publication_failures_total at 0 for each way a
// command fails, and configpub_snapshot_rejections_total at 0 for each
// audience no runtime rejected. A counter series born at its first failure starts at 1, and
// increase() — the shipped dashboard's and any alert's — never shows that
// first failure or first rejection.
func TestFailureCountersStartAtZero(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	pool := db.Pool(t)
	generate(t, pool, generated{env: "zero", targets: 3, releases: 2, changed: 1})
	ctx := context.Background()
	con, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	body := localGet(con.Handler(), "/metrics").Body.String()
	mustContain(t, "metrics", body,
		`configpub_publication_failures_total{env="zero",outcome="NOT_APPLIED",phase="candidate-rejected"} 0`,
		`configpub_publication_failures_total{env="zero",outcome="NOT_APPLIED",phase="refused-window"} 0`,
		`configpub_publication_failures_total{env="zero",outcome="INTEGRITY_ERROR",phase="integrity-error"} 0`,
		`configpub_snapshot_rejections_total{audience="agent",env="zero"} 1`, // the generated history's one
		`configpub_snapshot_rejections_total{audience="gateway",env="zero"} 0`,
		`configpub_snapshot_rejections_total{audience="knowledge",env="zero"} 0`)
	lintMetrics(t, body)
}
