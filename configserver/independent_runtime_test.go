package configserver_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
)

// TestIndependentRuntimeFromTheContract runs indieRuntime — a runtime
// client written from docs/wire-contract.md alone, on the standard library
// only — against a real Config Server over PostgreSQL fed by the real
// promoter, on a simulated clock over a simulated week: a first load with
// every digest, the signature, identity, window and lease checked; 304s
// plain and carrying a lease renewal; a watch; X-Config-Held-Sequence;
// 503 lease_ended once renewals stop; the evidence report; a pinned
// snapshot; 401, 403, 404 (revoked) and 410 (retired) as the contract
// says, each changing nothing the runtime holds until its lease ends.
// The harness (database, promoter, token) uses configpub; the client does
// not.
func TestIndependentRuntimeFromTheContract(t *testing.T) {
	t.Parallel()
	advValues, adv := readGoldenAdvisor(t)
	accValues, acc := readGolden(t, "com.networknt.agent-account-1.0.0")
	clock := simclock.New(goldenCreatedAt.Add(time.Hour))
	e := newEnv(t, envOptions{handler: configserver.Options{Clock: clock.Now}})
	ctx := context.Background()
	ps, key := e.openPromoter(t, clock.Now)
	advT, accT := adv.promoterTarget(advValues), acc.promoterTarget(accValues)
	id := bundle.Identity{Host: adv.Host, ServiceID: adv.ServiceID, EnvTag: adv.EnvTag}
	accID := bundle.Identity{Host: acc.Host, ServiceID: acc.ServiceID, EnvTag: acc.EnvTag}
	release := func(v int64, ts ...promoter.Target) promoter.ReleaseInput {
		return promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: "prod", ReleaseVersion: v,
			BaseReleaseVersion: v - 1, ManifestBytes: []byte("release manifest of the independent runtime test\n"),
			Actor: "ci", Reason: "r", Targets: ts}
	}
	if _, err := ps.RecordAndActivate(ctx, release(1, advT, accT)); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusOK, adv.SnapshotID)
	tok := e.token(t, id, adv.Audience)
	rt, err := newIndieRuntime(e.srv.URL, id.Host, id.ServiceID, id.EnvTag, adv.Audience, tok, clock.Now, &key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	load := func(what string, o indieLoadOpts, outcome, reason string, status int) indieResult {
		t.Helper()
		res, err := rt.load(ctx, o)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if res.Outcome != outcome || res.Reason != reason || res.Status != status {
			t.Fatalf("%s: got %d %s %s (%s), want %d %s %s", what, res.Status, res.Outcome, res.Reason, res.Body, status, outcome, reason)
		}
		return res
	}

	// The first load: every step of the verification passes.
	res := load("first load", indieLoadOpts{}, "APPLIED", "", http.StatusOK)
	for k, want := range map[string]string{"Content-Type": "application/yaml", "Cache-Control": "private, no-cache", "Vary": "Authorization"} {
		if got := res.Header.Get(k); got != want {
			t.Errorf("200 header %s: got %q, want %q", k, got, want)
		}
	}
	if rt.held.m.SnapshotID != adv.SnapshotID || rt.held.m.ActivatedAt == "" {
		t.Fatalf("held %+v, want snapshot %s with activatedAt", rt.held.m, adv.SnapshotID)
	}
	seq := rt.held.m.Sequence
	// propertySetDigest covers the flattened settings only: every top-level
	// member but runtimePolicy would take the namespace in too.
	doc, err := indieParseValues(rt.held.body)
	if err != nil {
		t.Fatal(err)
	}
	withNamespace := map[string]any{}
	for _, k := range doc.keys {
		if k != "runtimePolicy" {
			withNamespace[k] = indiePlain(doc.vals[k])
		}
	}
	if d, _ := indieDigestJCS(withNamespace); d == rt.held.m.PropertySetDigest {
		t.Errorf("propertySetDigest %s covers the namespace too", d)
	}
	if moved, _ := indieTime(rt.held.m.ActivatedAt); seq < moved.UnixMicro() {
		t.Errorf("sequence %d is below the move time in microseconds (%d)", seq, moved.UnixMicro())
	}
	// HEAD works and carries the same headers without a body.
	if resp, body := e.do(t, http.MethodHead, configsPath(id), tok); resp.StatusCode != http.StatusOK || len(body) != 0 ||
		resp.Header.Get("X-Config-Manifest") != base64.RawURLEncoding.EncodeToString(rt.held.raw) {
		t.Errorf("HEAD: got %d with %d bytes and manifest %q", resp.StatusCode, len(body), resp.Header.Get("X-Config-Manifest"))
	}

	// A conditional request: 304, nothing changes.
	res = load("conditional", indieLoadOpts{conditional: true}, "NOT_MODIFIED", "", http.StatusNotModified)
	for _, k := range []string{"ETag", "X-Config-Manifest", "X-Manifest-Signature", "X-Manifest-Key-Id", "X-Config-Snapshot-Id", "X-Config-Expires-At"} {
		if res.Header.Get(k) == "" {
			t.Errorf("304 lacks %s: the contract says it carries the same identity and manifest headers", k)
		}
	}
	// If-None-Match: * also answers 304 (a runtime never sends it).
	if resp, _ := e.do(t, http.MethodGet, configsPath(id), tok, "If-None-Match", "*"); resp.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match *: got %d, want 304", resp.StatusCode)
	}

	// A lease renewal reaches the runtime as a 304 with a new manifest.
	renew := func() {
		t.Helper()
		before := rt.held.m.IssuedAt
		if _, err := ps.RenewLeases(ctx, "prod"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for {
			resp, _ := e.do(t, http.MethodHead, configsPath(id), tok)
			if raw, _ := base64.RawURLEncoding.DecodeString(resp.Header.Get("X-Config-Manifest")); resp.StatusCode == http.StatusOK &&
				!strings.Contains(string(raw), `"issuedAt":"`+before+`"`) {
				return
			}
			if time.Since(start) > 2*time.Second {
				t.Fatalf("renewal not served within 2s (status %d)", resp.StatusCode)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	clock.Advance(4 * time.Minute)
	renew()
	oldRaw := append([]byte(nil), rt.held.raw...)
	activated := rt.held.m.ActivatedAt
	load("renewal", indieLoadOpts{conditional: true}, "RENEWED", "", http.StatusNotModified)
	if rt.held.m.Sequence != seq || rt.held.m.ActivatedAt != activated {
		t.Fatalf("renewal changed the sequence from %d to %d or activatedAt from %s to %s", seq, rt.held.m.Sequence, activated, rt.held.m.ActivatedAt)
	}
	// Each lease starts at its issue time; manifest and lease header times
	// carry exactly three fraction digits.
	if rt.held.m.ValidFrom != rt.held.m.IssuedAt {
		t.Errorf("lease from %s, issued at %s", rt.held.m.ValidFrom, rt.held.m.IssuedAt)
	}
	for _, v := range []string{rt.held.m.ActivatedAt, rt.held.m.IssuedAt, rt.held.m.ValidFrom, rt.held.m.RefreshAfter,
		rt.held.m.ExpiresAt, res.Header.Get("X-Config-Valid-From"), res.Header.Get("X-Config-Expires-At")} {
		if len(v) != len("2026-01-31T12:00:00.123Z") || v[19] != '.' || !strings.HasSuffix(v, "Z") {
			t.Errorf("time %q is not RFC 3339 UTC with milliseconds", v)
		}
	}
	// A held watch is ended by the next renewal: 304 with its manifest,
	// with Connection: close.
	watched := make(chan indieResult, 1)
	go func() {
		r, _ := rt.load(ctx, indieLoadOpts{conditional: true, wait: "30s"})
		watched <- r
	}()
	time.Sleep(200 * time.Millisecond) // the watch is held
	clock.Advance(4 * time.Minute)
	renewStart := time.Now()
	if _, err := ps.RenewLeases(ctx, "prod"); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-watched:
		if r.Outcome != "RENEWED" || !r.Close || r.Header.Get("X-Config-Watch-Max") == "" {
			t.Fatalf("watch ended by a renewal: %s %s close %v (%s)", r.Outcome, r.Reason, r.Close, r.Body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a renewal did not end the watch within 10s")
	}
	if d := time.Since(renewStart); d > 5*time.Second {
		t.Errorf("the renewal reached the watch after %s", d)
	}

	// A watch held to the end of its wait answers 304 with X-Config-Watch-Max
	// and Connection: close.
	res = load("watch", indieLoadOpts{conditional: true, wait: "200ms"}, "NOT_MODIFIED", "", http.StatusNotModified)
	if res.Header.Get("X-Config-Watch-Max") != "300" {
		t.Errorf("watch: X-Config-Watch-Max %q, want 300", res.Header.Get("X-Config-Watch-Max"))
	}
	for _, w := range []string{"-1s", "soon"} {
		res = load("wait="+w, indieLoadOpts{wait: w}, "UNAVAILABLE", "BAD_REQUEST", http.StatusBadRequest)
		if res.Header.Get("X-Config-Watch-Max") == "" {
			t.Errorf("wait=%s: 400 without X-Config-Watch-Max", w)
		}
	}
	// wait=0 is answered at once, whole seconds are accepted.
	load("wait=0", indieLoadOpts{conditional: true, wait: "0"}, "NOT_MODIFIED", "", http.StatusNotModified)

	// X-Config-Held-Sequence above the server's: 503 with Retry-After, at once for a watch too.
	for _, w := range []string{"", "5s"} {
		start := time.Now()
		res = load("held sequence ahead "+w, indieLoadOpts{conditional: true, wait: w, heldSeq: strconv.FormatInt(seq+1, 10)},
			"UNAVAILABLE", "SERVER_ERROR", http.StatusServiceUnavailable)
		if res.Header.Get("Retry-After") == "" || time.Since(start) > 2*time.Second {
			t.Errorf("held sequence ahead (wait %q): Retry-After %q after %s", w, res.Header.Get("Retry-After"), time.Since(start))
		}
	}

	// A held sequence that is not one decimal integer is not read: the
	// server ahead of it would otherwise answer 503.
	for _, hdr := range [][]string{
		{"X-Config-Held-Sequence", "ahead"},
		{"X-Config-Held-Sequence", strconv.FormatInt(seq+1, 10), "X-Config-Held-Sequence", strconv.FormatInt(seq+1, 10)},
	} {
		if resp, _ := e.do(t, http.MethodGet, configsPath(id), tok, hdr...); resp.StatusCode != http.StatusOK {
			t.Errorf("held sequence %v: got %d, want 200 as without it", hdr, resp.StatusCode)
		}
	}
	// host is required, and an identity parameter or wait given twice is
	// 400; another parameter is ignored.
	for _, q := range []string{"serviceId=" + id.ServiceID, rt.query() + "&host=" + id.Host, rt.query() + "&envTag=prod",
		rt.query() + "&wait=1&wait=1"} {
		if resp, body := e.do(t, http.MethodGet, "/configs?"+q, tok); resp.StatusCode != http.StatusBadRequest || !json.Valid(body) {
			t.Errorf("/configs?%s: got %d %s, want 400", q, resp.StatusCode, body)
		}
	}
	if resp, _ := e.do(t, http.MethodGet, "/configs?"+rt.query()+"&foo=1&foo=2&productId=x", tok); resp.StatusCode != http.StatusOK {
		t.Errorf("other parameters: got %d, want 200", resp.StatusCode)
	}

	// A replayed older manifest (the one before the renewal) is refused by the runtime.
	var old indieManifest
	if err := json.Unmarshal(oldRaw, &old); err != nil {
		t.Fatal(err)
	}
	if reason := rt.noRegression(old, oldRaw); reason != "SEQUENCE_REGRESSION" {
		t.Errorf("the manifest before the renewal, replayed: %q, want SEQUENCE_REGRESSION", reason)
	}

	// The evidence report: 204; a malformed or implausible one 400 (a
	// snapshot of another identity included), another audience 403.
	for _, tc := range []struct {
		what            string
		outcome, reason string
		at              time.Time
		change          func(map[string]any)
		want            int
	}{
		{"applied", "APPLIED", "", clock.Now(), nil, http.StatusNoContent},
		{"rejected", "REJECTED", "DIGEST_MISMATCH", clock.Now(), nil, http.StatusNoContent},
		{"a week old", "APPLIED", "", clock.Now().Add(-7*24*time.Hour - time.Minute), nil, http.StatusBadRequest},
		{"from the future", "APPLIED", "", clock.Now().Add(11 * time.Minute), nil, http.StatusBadRequest},
		{"reason not a code", "REJECTED", "digest mismatch", clock.Now(), nil, http.StatusBadRequest},
		{"another identity's snapshot", "APPLIED", "", clock.Now(), func(m map[string]any) { m["snapshotId"] = acc.SnapshotID }, http.StatusBadRequest},
		{"another audience", "APPLIED", "", clock.Now(), func(m map[string]any) { m["audience"] = "gateway" }, http.StatusForbidden},
	} {
		var change []func(map[string]any)
		if tc.change != nil {
			change = append(change, tc.change)
		}
		if status, body, err := rt.evidence(ctx, tc.outcome, tc.reason, tc.at, change...); err != nil || status != tc.want {
			t.Errorf("evidence, %s: got %d %s %v, want %d", tc.what, status, body, err, tc.want)
		}
	}
	// The pinned snapshot re-check.
	load("pinned", indieLoadOpts{path: "/configs/snapshots/" + adv.SnapshotID}, "APPLIED", "", http.StatusOK)

	// 401 with WWW-Authenticate: Bearer and a JSON body; 403 another identity.
	if resp, body := e.do(t, http.MethodGet, configsPath(id), ""); resp.StatusCode != http.StatusUnauthorized ||
		resp.Header.Get("WWW-Authenticate") == "" || !json.Valid(body) {
		t.Errorf("no token: got %d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
	}
	// Another method: 405 with Allow and a JSON error.
	for path, allow := range map[string]string{configsPath(id): "GET, HEAD", "/configs/snapshots/" + adv.SnapshotID: "GET, HEAD",
		"/configs/evidence": "POST"} {
		method := http.MethodPost
		if allow == "POST" {
			method = http.MethodGet
		}
		if resp, body := e.do(t, method, path, tok); resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != allow || !json.Valid(body) {
			t.Errorf("%s %s: got %d Allow %q %s, want 405 Allow %q", method, path, resp.StatusCode, resp.Header.Get("Allow"), body, allow)
		}
	}
	// Headers past the server's bound: 431, answered by net/http itself
	// before any handler runs, as text, not a JSON error.
	if resp, body := doURL(t, e.srv.Client(), http.MethodGet, e.serve(t, configserver.ServerOptions{})+configsPath(id), tok,
		"X-Big", strings.Repeat("b", 70<<10)); resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || json.Valid(body) {
		t.Errorf("oversized headers: got %d %q %q, want 431 with net/http's text", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}

	// alg none, HMAC, and a payload changed under its signature: 401.
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("token is not a compact JWS")
	}
	b64 := base64.RawURLEncoding.EncodeToString
	hsHeader := b64([]byte(`{"alg":"HS256","typ":"JWT"}`))
	mac := hmac.New(sha256.New, []byte("a shared secret"))
	mac.Write([]byte(hsHeader + "." + parts[1]))
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	widened := strings.Replace(string(payload), `"`+id.ServiceID+`"`, `"`+accID.ServiceID+`"`, 1)
	for what, bad := range map[string]string{
		"alg none": b64([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + ".",
		"HS256":    hsHeader + "." + parts[1] + "." + b64(mac.Sum(nil)),
		"changed":  parts[0] + "." + b64([]byte(widened)) + "." + parts[2],
	} {
		if resp, body := e.do(t, http.MethodGet, configsPath(id), bad); resp.StatusCode != http.StatusUnauthorized ||
			!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") || strings.Contains(string(body), parts[1]) {
			t.Errorf("token %s: got %d %q %s, want 401 with WWW-Authenticate: Bearer", what, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
	if resp, body := e.do(t, http.MethodGet, configsPath(accID), tok); resp.StatusCode != http.StatusForbidden || !json.Valid(body) {
		t.Errorf("another identity: got %d %s", resp.StatusCode, body)
	}

	// Renewals stop: once the lease ends by the server's clock, 503
	// lease_ended with Retry-After for a plain, conditional and watch request.
	clock.Advance(15*time.Minute + 10*time.Second) // 10s past the lease's end, inside the runtime's 30s skew
	for _, o := range []indieLoadOpts{{}, {conditional: true}, {conditional: true, wait: "1s"}} {
		res = load("lease ended", o, "UNAVAILABLE", "SERVER_ERROR", http.StatusServiceUnavailable)
		var body struct{ Error string }
		if json.Unmarshal(res.Body, &body); body.Error != "lease_ended" || res.Header.Get("Retry-After") == "" {
			t.Errorf("lease ended (%+v): %s, Retry-After %q", o, res.Body, res.Header.Get("Retry-After"))
		}
	}
	if rt.failedClosed {
		t.Fatal("failed closed before the runtime's own lease (plus skew) ended")
	}
	clock.Advance(time.Minute)
	load("lease ended, past the skew", indieLoadOpts{}, "UNAVAILABLE", "SERVER_ERROR", http.StatusServiceUnavailable)
	if !rt.failedClosed {
		t.Fatal("still serving past its lease")
	}
	// The first renewal is served at once and applied.
	renew()
	load("renewed after the outage", indieLoadOpts{conditional: true}, "RENEWED", "", http.StatusNotModified)

	// Release 2 retires the advisor: 410, the snapshot kept until its lease ends.
	clock.Advance(time.Minute)
	if _, err := ps.RecordAndActivate(ctx, release(2, accT)); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusGone, "")
	load("retired", indieLoadOpts{conditional: true}, "UNAVAILABLE", "RETIRED", http.StatusGone)
	if rt.failedClosed || rt.held.m.SnapshotID != adv.SnapshotID {
		t.Fatal("retirement changed what the runtime holds")
	}
	// A week later release 3 brings it back: applied with a higher sequence.
	clock.Advance(7 * 24 * time.Hour)
	if _, err := ps.RecordAndActivate(ctx, release(3, advT, accT)); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusOK, adv.SnapshotID)
	load("re-added", indieLoadOpts{conditional: true}, "RENEWED", "", http.StatusNotModified)
	if rt.held.m.Sequence <= seq {
		t.Fatalf("re-added at sequence %d, not above %d", rt.held.m.Sequence, seq)
	}

	// Revoking the snapshot: 404 on GET /configs, 403 on its pinned re-check.
	clock.Advance(time.Minute)
	if _, err := ps.Revoke(ctx, promoter.RevokeInput{CommandID: uuid.NewString(), SnapshotID: adv.SnapshotID,
		Actor: "sec", Reason: "revoked"}); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusNotFound, "")
	load("revoked", indieLoadOpts{conditional: true}, "UNAVAILABLE", "NOT_FOUND", http.StatusNotFound)
	load("revoked pin", indieLoadOpts{path: "/configs/snapshots/" + adv.SnapshotID}, "UNAVAILABLE", "FORBIDDEN", http.StatusForbidden)

	// A watch on the revoked identity is held (404 has nothing to serve) and
	// answered at once, 200, by the release that brings a new snapshot.
	held := make(chan indieResult, 1)
	go func() {
		r, _ := rt.load(ctx, indieLoadOpts{conditional: true, wait: "30s"})
		held <- r
	}()
	time.Sleep(200 * time.Millisecond)
	select {
	case r := <-held:
		t.Fatalf("a watch on a revoked identity answered at once: %d %s", r.Status, r.Body)
	default:
	}
	next := adv.promoterTarget(append(bytes.Clone(advValues), "# release 4\n"...))
	next.SnapshotID, next.PublicationID, next.ReleaseVersion = uuid.NewString(), bundle.PublicationID("prod", 4), 4
	next.ArtifactDigest = digestOf(next.Values)
	clock.Advance(time.Minute)
	moved := time.Now()
	if _, err := ps.RecordAndActivate(ctx, release(4, next, accT)); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-held:
		// The test's release 4 carries a comment, outside the profile: the
		// runtime refuses it after the signature, digests and lease passed.
		if r.Status != http.StatusOK || r.Header.Get("X-Config-Snapshot-Id") != next.SnapshotID || r.Reason != "PARSE_FAILED" {
			t.Fatalf("held watch after the move: %d %q %s %s", r.Status, r.Header.Get("X-Config-Snapshot-Id"), r.Outcome, r.Reason)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the move did not end the held watch within 10s")
	}
	if d := time.Since(moved); d > 5*time.Second {
		t.Errorf("the move reached the held watch after %s", d)
	}
}

// TestIndependentRuntimeCandidatePhase checks what docs/wire-contract.md
// says of configPhase=candidate with the independent runtime client: the
// candidate manifest is refused on a load (MANIFEST_PHASE_MISMATCH), the
// request is never held (a bad wait= is not read, no X-Config-Watch-Max),
// X-Config-Held-Sequence is not read, and an ended candidate lease is
// served as signed (no 503 lease_ended) — over a simulated day without
// renewals.
func TestIndependentRuntimeCandidatePhase(t *testing.T) {
	t.Parallel()
	e, clock, rt, tok, id, staged := indieStaged(t)
	ctx := context.Background()
	cand := "/configs?" + rt.query() + "&configPhase=candidate"
	if res, err := rt.load(ctx, indieLoadOpts{path: cand}); err != nil || res.Outcome != "REJECTED" || res.Reason != "MANIFEST_PHASE_MISMATCH" {
		t.Fatalf("a load of the candidate: %+v %v, want REJECTED MANIFEST_PHASE_MISMATCH", res, err)
	}
	// The candidate manifest: phase candidate, a sequence above the current
	// pointer's, activatedAt the staging time.
	manifestOf := func(path string) indieManifest {
		t.Helper()
		resp, _ := e.do(t, http.MethodHead, path, tok)
		raw, err := base64.RawURLEncoding.DecodeString(resp.Header.Get("X-Config-Manifest"))
		var m indieManifest
		if err != nil || json.Unmarshal(raw, &m) != nil {
			t.Fatalf("%s: manifest %q", path, resp.Header.Get("X-Config-Manifest"))
		}
		return m
	}
	cm, cur := manifestOf(cand), manifestOf(configsPath(id))
	if cm.Phase == nil || *cm.Phase != "candidate" || cm.Sequence <= cur.Sequence || cm.ActivatedAt != clock.Now().UTC().Format("2006-01-02T15:04:05.000Z") {
		t.Errorf("candidate manifest phase %v sequence %d (current %d) activatedAt %s (staged at %s)", cm.Phase, cm.Sequence, cur.Sequence, cm.ActivatedAt, clock.Now())
	}
	for _, hdr := range [][]string{nil, {"X-Config-Held-Sequence", "9223372036854775807"}} {
		for _, w := range []string{"-1s", "5s"} {
			start := time.Now()
			resp, _ := e.do(t, http.MethodGet, cand+"&wait="+w, tok, hdr...)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Config-Snapshot-Id") != staged.SnapshotID ||
				resp.Header.Get("X-Config-Watch-Max") != "" || time.Since(start) > 2*time.Second {
				t.Errorf("candidate, wait=%s %v: got %d %q X-Config-Watch-Max %q after %s, want 200 %s at once without it",
					w, hdr, resp.StatusCode, resp.Header.Get("X-Config-Snapshot-Id"), resp.Header.Get("X-Config-Watch-Max"), time.Since(start), staged.SnapshotID)
			}
		}
	}
	clock.Advance(24 * time.Hour) // no renewal ran: both leases ended
	if resp, _ := e.do(t, http.MethodGet, configsPath(id), tok); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("current pointer, lease ended: got %d, want 503 lease_ended", resp.StatusCode)
	}
	resp, _ := e.do(t, http.MethodGet, cand, tok)
	exp, err := indieTime(resp.Header.Get("X-Config-Expires-At"))
	if resp.StatusCode != http.StatusOK || err != nil || !exp.Before(clock.Now()) {
		t.Errorf("candidate, lease ended: got %d with lease to %q, want 200 with the ended lease as signed", resp.StatusCode, resp.Header.Get("X-Config-Expires-At"))
	}
}

// indieStaged activates the golden advisor as release 1 and stages
// release 2 with another snapshot of it (never delivered), on a simulated
// clock; it returns the independent runtime for the advisor and its token.
func indieStaged(t *testing.T) (*env, *simclock.Clock, *indieRuntime, string, bundle.Identity, promoter.Target) {
	t.Helper()
	values, adv := readGoldenAdvisor(t)
	clock := simclock.New(goldenCreatedAt.Add(time.Hour))
	e := newEnv(t, envOptions{handler: configserver.Options{Clock: clock.Now}})
	ctx := context.Background()
	ps, key := e.openPromoter(t, clock.Now)
	id := bundle.Identity{Host: adv.Host, ServiceID: adv.ServiceID, EnvTag: adv.EnvTag}
	staged := adv.promoterTarget(append(bytes.Clone(values), "# release 2\n"...))
	staged.SnapshotID, staged.PublicationID, staged.ReleaseVersion = uuid.NewString(), bundle.PublicationID("prod", 2), 2
	staged.ArtifactDigest = digestOf(staged.Values)
	release := func(v int64, tg promoter.Target) promoter.ReleaseInput {
		return promoter.ReleaseInput{CommandID: uuid.NewString(), EnvTag: "prod", ReleaseVersion: v, BaseReleaseVersion: v - 1,
			ManifestBytes: []byte("release manifest of the candidate test\n"), Actor: "ci", Reason: "r", Targets: []promoter.Target{tg}}
	}
	if _, err := ps.RecordAndActivate(ctx, release(1, adv.promoterTarget(values))); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.Stage(ctx, release(2, staged)); err != nil {
		t.Fatal(err)
	}
	waitAgent(t, e, id, http.StatusOK, adv.SnapshotID)
	tok := e.token(t, id, adv.Audience)
	rt, err := newIndieRuntime(e.srv.URL, id.Host, id.ServiceID, id.EnvTag, adv.Audience, tok, clock.Now, &key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return e, clock, rt, tok, id, staged
}

// TestIndependentRuntimeSnapshotEndpoint checks what docs/wire-contract.md
// says of GET /configs/snapshots/{id} with the independent runtime client:
// the current snapshot verifies; an unknown snapshot is 403 like another
// identity's, an id that is not a UUID 400; a snapshot never delivered (only
// staged) is 200 without any manifest header, which the runtime refuses; an
// ended lease is served as signed (never 503 lease_ended) a simulated day
// later, and X-Config-Held-Sequence is not read.
func TestIndependentRuntimeSnapshotEndpoint(t *testing.T) {
	t.Parallel()
	e, clock, rt, tok, _, staged := indieStaged(t)
	ctx := context.Background()
	values, adv := readGoldenAdvisor(t)
	res, err := rt.load(ctx, indieLoadOpts{path: "/configs/snapshots/" + adv.SnapshotID})
	if err != nil || res.Outcome != "APPLIED" {
		t.Fatalf("the current snapshot: %+v %v, want APPLIED", res, err)
	}
	for path, want := range map[string]int{"/configs/snapshots/" + uuid.NewString(): http.StatusForbidden, "/configs/snapshots/x": http.StatusBadRequest} {
		if resp, body := e.do(t, http.MethodGet, path, tok); resp.StatusCode != want {
			t.Errorf("%s: got %d %s, want %d", path, resp.StatusCode, body, want)
		}
	}
	resp, body := e.do(t, http.MethodGet, "/configs/snapshots/"+staged.SnapshotID, tok)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, staged.Values) {
		t.Fatalf("never-delivered snapshot: got %d (%d bytes), want 200 with its bytes", resp.StatusCode, len(body))
	}
	for _, h := range []string{"X-Config-Manifest", "X-Manifest-Signature", "X-Manifest-Key-Id", "X-Config-Valid-From", "X-Config-Refresh-After", "X-Config-Expires-At"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("never-delivered snapshot carries %s %q", h, v)
		}
	}
	if res, _ := rt.load(ctx, indieLoadOpts{path: "/configs/snapshots/" + staged.SnapshotID}); res.Outcome != "REJECTED" || res.Reason != "MANIFEST_MISSING" {
		t.Errorf("never-delivered snapshot: %s %s, want REJECTED MANIFEST_MISSING", res.Outcome, res.Reason)
	}
	clock.Advance(24 * time.Hour) // no renewal ran
	resp, body = e.do(t, http.MethodGet, "/configs/snapshots/"+adv.SnapshotID, tok, "X-Config-Held-Sequence", "9223372036854775807")
	exp, err := indieTime(resp.Header.Get("X-Config-Expires-At"))
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, values) || err != nil || !exp.Before(clock.Now()) {
		t.Errorf("snapshot, lease ended: got %d with lease to %q, want 200 with the ended lease as signed", resp.StatusCode, resp.Header.Get("X-Config-Expires-At"))
	}
	if res, _ := rt.load(ctx, indieLoadOpts{path: "/configs/snapshots/" + adv.SnapshotID}); res.Outcome != "REJECTED" || res.Reason != "EXPIRED" {
		t.Errorf("snapshot, lease ended: %s %s, want REJECTED EXPIRED", res.Outcome, res.Reason)
	}
}
