package configserver_test

// indieclient_test.go is a runtime client written from docs/wire-contract.md
// alone, as a team outside configpub would write one: it imports nothing of
// configpub, only the standard library. TestIndependentRuntimeFromTheContract
// (independent_runtime_test.go) runs it against a real Config Server.

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
)

// indieManifest is a delivery manifest as the contract's member table lists it.
type indieManifest struct {
	Type                    string  `json:"type"`
	Host                    string  `json:"host"`
	ServiceID               string  `json:"serviceId"`
	EnvTag                  string  `json:"envTag"`
	Audience                string  `json:"audience"`
	SnapshotID              string  `json:"snapshotId"`
	PublicationID           string  `json:"publicationId"`
	PolicySnapshotID        string  `json:"policySnapshotId"`
	ReleaseVersion          int64   `json:"releaseVersion"`
	ArtifactDigest          string  `json:"artifactDigest"`
	ContentDigest           string  `json:"contentDigest"`
	PolicyDigest            string  `json:"policyDigest"`
	PropertySetDigest       string  `json:"propertySetDigest"`
	SchemaVersion           int64   `json:"schemaVersion"`
	CompatibilityGeneration int64   `json:"compatibilityGeneration"`
	RevocationEpoch         int64   `json:"revocationEpoch"`
	Sequence                int64   `json:"sequence"`
	ActivatedAt             string  `json:"activatedAt"`
	IssuedAt                string  `json:"issuedAt"`
	ValidFrom               string  `json:"validFrom"`
	RefreshAfter            string  `json:"refreshAfter"`
	ExpiresAt               string  `json:"expiresAt"`
	Phase                   *string `json:"phase"`
}

// indieHeld is the verified snapshot a runtime runs.
type indieHeld struct {
	body     []byte
	raw      []byte // delivery manifest bytes
	m        indieManifest
	envelope map[string]any
}

// indieResult is the outcome of one load.
type indieResult struct {
	Outcome string // APPLIED, NOT_MODIFIED, RENEWED, REJECTED, UNAVAILABLE
	Reason  string
	Status  int
	Header  http.Header
	Body    []byte
	Close   bool // the answer said "Connection: close"
}

// indieRuntime is the independent runtime client.
type indieRuntime struct {
	base                    string
	host, serviceID, envTag string
	audience                string
	keys                    map[string]*ecdsa.PublicKey // by key id
	skew                    time.Duration
	now                     func() time.Time
	token                   string
	hc                      *http.Client

	held *indieHeld
	// seen-state: the highest (sequence, issuedAt) pair, the manifest hash
	// at it, and the highest epoch.
	seenSeq    int64
	seenIssued time.Time
	seenHash   [32]byte
	seenEpoch  int64
	// failedClosed is set once the held lease ran out.
	failedClosed bool
	// pinned is set during a re-check of a pinned snapshot, which skips
	// the replay rule on sequence (the epoch still holds).
	pinned bool
}

// newIndieRuntime is a runtime for one identity and audience trusting the
// given manifest keys (key id: sha256 of the PKIX DER), with a 30 s skew.
func newIndieRuntime(base, host, serviceID, envTag, audience, token string, now func() time.Time, trusted ...*ecdsa.PublicKey) (*indieRuntime, error) {
	keys := map[string]*ecdsa.PublicKey{}
	for _, k := range trusted {
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			return nil, fmt.Errorf("trusted key: %w", err)
		}
		s := sha256.Sum256(der)
		keys["sha256:"+hex.EncodeToString(s[:])] = k
	}
	return &indieRuntime{base: base, host: host, serviceID: serviceID, envTag: envTag, audience: audience,
		keys: keys, skew: 30 * time.Second, now: now, token: token,
		hc: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

// indieLoadOpts chooses how a load asks.
type indieLoadOpts struct {
	conditional bool   // If-None-Match naming the held ETag
	wait        string // wait= value, "" for none
	heldSeq     string // X-Config-Held-Sequence override; "" sends the held sequence
	noHeldSeq   bool
	path        string // instead of /configs (for /configs/snapshots/{id})
}

// query is the identity query of GET /configs.
func (r *indieRuntime) query() string {
	return "host=" + url.QueryEscape(r.host) + "&serviceId=" + url.QueryEscape(r.serviceID) + "&envTag=" + url.QueryEscape(r.envTag)
}

// load asks the server once and applies what verifies.
func (r *indieRuntime) load(ctx context.Context, o indieLoadOpts) (indieResult, error) {
	u := r.base + "/configs?" + r.query()
	if o.path != "" {
		u = r.base + o.path
	}
	r.pinned = strings.HasPrefix(o.path, "/configs/snapshots/")
	if o.wait != "" {
		u += "&wait=" + url.QueryEscape(o.wait)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return indieResult{}, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	sentINM := false
	if r.held != nil && o.conditional {
		req.Header.Set("If-None-Match", `"`+r.held.m.ArtifactDigest+`"`)
		sentINM = true
	}
	switch {
	case o.heldSeq != "":
		req.Header.Set("X-Config-Held-Sequence", o.heldSeq)
	case r.held != nil && !o.noHeldSeq:
		req.Header.Set("X-Config-Held-Sequence", strconv.FormatInt(r.held.m.Sequence, 10))
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		r.checkLease()
		return indieResult{Outcome: "UNAVAILABLE", Reason: "UNREACHABLE"}, nil
	}
	defer resp.Body.Close()
	res := indieResult{Status: resp.StatusCode, Header: resp.Header, Close: resp.Close}
	switch resp.StatusCode {
	case http.StatusOK:
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20+1))
		if err != nil {
			return r.unavailable(res, "UNREACHABLE"), nil
		}
		if len(body) > 1<<20 {
			return r.reject(res, "TOO_LARGE"), nil
		}
		res.Body = body
		if reason := r.verifyFull(resp, body); reason != "" {
			return r.reject(res, reason), nil
		}
		res.Outcome = "APPLIED"
		return res, nil
	case http.StatusNotModified:
		if r.held == nil || !sentINM {
			return r.reject(res, "UNEXPECTED_NOT_MODIFIED"), nil
		}
		if et := resp.Header.Get("ETag"); et != "" && et != `"`+r.held.m.ArtifactDigest+`"` {
			return r.reject(res, "UNEXPECTED_NOT_MODIFIED"), nil
		}
		raw, err := base64.RawURLEncoding.DecodeString(resp.Header.Get("X-Config-Manifest"))
		if err != nil || len(raw) == 0 || bytes.Equal(raw, r.held.raw) {
			r.checkLease()
			res.Outcome = "NOT_MODIFIED"
			return res, nil
		}
		if reason := r.verifyRenewal(resp, raw); reason != "" {
			return r.reject(res, reason), nil
		}
		res.Outcome = "RENEWED"
		return res, nil
	}
	res.Body, _ = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	reason := "SERVER_ERROR"
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		reason = "UNAUTHORIZED"
	case http.StatusForbidden:
		reason = "FORBIDDEN"
	case http.StatusNotFound:
		reason = "NOT_FOUND"
	case http.StatusGone:
		reason = "RETIRED"
	case http.StatusBadRequest:
		reason = "BAD_REQUEST"
	}
	return r.unavailable(res, reason), nil
}

// unavailable is an answer with no signed manifest: nothing changes.
func (r *indieRuntime) unavailable(res indieResult, reason string) indieResult {
	r.checkLease()
	res.Outcome, res.Reason = "UNAVAILABLE", reason
	return res
}

// reject is a refused answer: the last-known-good stays.
func (r *indieRuntime) reject(res indieResult, reason string) indieResult {
	r.checkLease()
	res.Outcome, res.Reason = "REJECTED", reason
	return res
}

// checkLease fails closed once the held lease's expiresAt (plus skew) passed.
func (r *indieRuntime) checkLease() {
	if r.held == nil {
		r.failedClosed = true
		return
	}
	exp, err := indieTime(r.held.m.ExpiresAt)
	r.failedClosed = err != nil || !r.now().Before(exp.Add(r.skew))
}

// indieTime parses an RFC 3339 UTC time with or without a fraction.
func indieTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q: %w", s, err)
	}
	if !strings.HasSuffix(s, "Z") {
		return time.Time{}, fmt.Errorf("time %q is not UTC", s)
	}
	return t, nil
}

// verifyManifest runs step 1 on the answer's manifest headers.
func (r *indieRuntime) verifyManifest(h http.Header, raw []byte) (indieManifest, string) {
	var m indieManifest
	key, ok := r.keys[h.Get("X-Manifest-Key-Id")]
	if !ok {
		return m, "UNTRUSTED_KEY"
	}
	sig, err := base64.StdEncoding.DecodeString(h.Get("X-Manifest-Signature"))
	if err != nil {
		return m, "SIGNATURE_INVALID"
	}
	sum := sha256.Sum256(raw)
	if !ecdsa.VerifyASN1(key, sum[:], sig) {
		return m, "SIGNATURE_INVALID"
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || dec.More() {
		return m, "MANIFEST_INVALID"
	}
	var generic any
	gd := json.NewDecoder(bytes.NewReader(raw))
	gd.UseNumber()
	if err := gd.Decode(&generic); err != nil {
		return m, "MANIFEST_INVALID"
	}
	canon, err := indieJCS(generic)
	if err != nil || !bytes.Equal(canon, raw) {
		return m, "MANIFEST_NOT_CANONICAL"
	}
	if m.Type != "configpub.dev/delivery-manifest/v1" {
		return m, "MANIFEST_INVALID"
	}
	if m.Phase != nil {
		return m, "MANIFEST_PHASE_MISMATCH"
	}
	if m.Host != r.host || m.ServiceID != r.serviceID || m.EnvTag != r.envTag || m.Audience != r.audience {
		return m, "IDENTITY_MISMATCH"
	}
	for name, want := range map[string]string{
		"X-Config-Snapshot-Id": m.SnapshotID, "X-Policy-Publication-Id": m.PublicationID,
		"X-Policy-Digest": m.PolicyDigest, "X-Content-Digest": m.ContentDigest,
		"X-Config-Release-Version": strconv.FormatInt(m.ReleaseVersion, 10),
	} {
		if v := h.Get(name); v != "" && v != want {
			return m, "HEADER_MISMATCH"
		}
	}
	for name, want := range map[string]string{
		"X-Config-Valid-From": m.ValidFrom, "X-Config-Refresh-After": m.RefreshAfter, "X-Config-Expires-At": m.ExpiresAt,
	} {
		v := h.Get(name)
		if v == "" {
			continue
		}
		a, err1 := indieTime(v)
		b, err2 := indieTime(want)
		if err1 != nil || err2 != nil || !a.Equal(b) {
			return m, "HEADER_MISMATCH"
		}
	}
	return m, ""
}

// noRegression is step 2.
func (r *indieRuntime) noRegression(m indieManifest, raw []byte) string {
	if m.RevocationEpoch < r.seenEpoch {
		return "REVOCATION_REGRESSION"
	}
	if r.pinned {
		return ""
	}
	issued, err := indieTime(m.IssuedAt)
	if err != nil {
		return "MANIFEST_INVALID"
	}
	switch {
	case m.Sequence < r.seenSeq:
		return "SEQUENCE_REGRESSION"
	case m.Sequence == r.seenSeq && issued.Before(r.seenIssued):
		return "SEQUENCE_REGRESSION"
	case m.Sequence == r.seenSeq && issued.Equal(r.seenIssued) && sha256.Sum256(raw) != r.seenHash:
		return "SEQUENCE_REGRESSION"
	}
	return ""
}

// lease is step 3.
func (r *indieRuntime) lease(m indieManifest) string {
	from, err1 := indieTime(m.ValidFrom)
	exp, err2 := indieTime(m.ExpiresAt)
	if err1 != nil || err2 != nil {
		return "MANIFEST_INVALID"
	}
	now := r.now()
	if now.Before(from.Add(-r.skew)) {
		return "NOT_YET_VALID"
	}
	if !now.Before(exp.Add(r.skew)) {
		return "EXPIRED"
	}
	return ""
}

// indieBytesMatch is step 4: the body's digest against ETag,
// X-Artifact-Digest and Repr-Digest (the caller compares the manifest's).
func indieBytesMatch(h http.Header, body []byte) (string, bool) {
	sum := sha256.Sum256(body)
	d := "sha256:" + hex.EncodeToString(sum[:])
	if h.Get("ETag") != `"`+d+`"` || h.Get("X-Artifact-Digest") != d {
		return d, false
	}
	if h.Get("Repr-Digest") != "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":" {
		return d, false
	}
	return d, true
}

// verifyFull runs steps 1–9 on a 200.
func (r *indieRuntime) verifyFull(resp *http.Response, body []byte) string {
	raw, err := base64.RawURLEncoding.DecodeString(resp.Header.Get("X-Config-Manifest"))
	if err != nil || len(raw) == 0 {
		return "MANIFEST_MISSING"
	}
	m, reason := r.verifyManifest(resp.Header, raw)
	if reason != "" {
		return reason
	}
	if reason := r.noRegression(m, raw); reason != "" {
		return reason
	}
	if reason := r.lease(m); reason != "" {
		return reason
	}
	d, ok := indieBytesMatch(resp.Header, body)
	if !ok || d != m.ArtifactDigest {
		return "DIGEST_MISMATCH"
	}
	doc, err := indieParseValues(body)
	if err != nil {
		return "PARSE_FAILED"
	}
	env, reason := r.checkDocument(doc, m)
	if reason != "" {
		return reason
	}
	if reason := r.manifestEqualsEnvelope(m, env); reason != "" {
		return reason
	}
	r.apply(&indieHeld{body: body, raw: raw, m: m, envelope: env})
	return ""
}

// verifyRenewal runs steps 1–3 and 8 on a 304's new manifest against the held bytes.
func (r *indieRuntime) verifyRenewal(resp *http.Response, raw []byte) string {
	m, reason := r.verifyManifest(resp.Header, raw)
	if reason != "" {
		return reason
	}
	if reason := r.noRegression(m, raw); reason != "" {
		return reason
	}
	if reason := r.lease(m); reason != "" {
		return reason
	}
	if m.ArtifactDigest != r.held.m.ArtifactDigest {
		return "DIGEST_MISMATCH"
	}
	if v := resp.Header.Get("X-Artifact-Digest"); v != "" && v != m.ArtifactDigest {
		return "DIGEST_MISMATCH"
	}
	if v := resp.Header.Get("Repr-Digest"); v != "" {
		if _, ok := indieBytesMatch(http.Header{"Etag": {`"` + m.ArtifactDigest + `"`}, "X-Artifact-Digest": {m.ArtifactDigest}, "Repr-Digest": {v}}, r.held.body); !ok {
			return "DIGEST_MISMATCH"
		}
	}
	if reason := r.manifestEqualsEnvelope(m, r.held.envelope); reason != "" {
		return reason
	}
	r.apply(&indieHeld{body: r.held.body, raw: raw, m: m, envelope: r.held.envelope})
	return ""
}

// checkDocument is steps 5–7: the envelope, the namespace, the digests.
func (r *indieRuntime) checkDocument(doc *indieMap, m indieManifest) (map[string]any, string) {
	envV, ok := doc.get("runtimePolicy")
	env, isMap := envV.(*indieMap)
	if !ok || !isMap {
		return nil, "PARSE_FAILED"
	}
	ns := map[string]string{"agent": "agentPolicy", "gateway": "gatewayPolicy", "knowledge": "knowledgePolicy"}[r.audience]
	for _, other := range []string{"agentPolicy", "gatewayPolicy", "knowledgePolicy"} {
		if _, has := doc.get(other); has != (other == ns) {
			return nil, "PARSE_FAILED"
		}
	}
	e := env.plain().(map[string]any)
	for k, want := range map[string]string{"host": r.host, "serviceId": r.serviceID, "envTag": r.envTag, "audience": r.audience} {
		if e[k] != want {
			return nil, "IDENTITY_MISMATCH"
		}
	}
	if fmt.Sprint(e["schemaVersion"]) != "1" {
		return nil, "SCHEMA_UNSUPPORTED"
	}
	nsV, _ := doc.get(ns)
	if d, err := indieDigestJCS(indiePlain(nsV)); err != nil || d != e["contentDigest"] {
		return nil, "CONTENT_DIGEST_MISMATCH"
	}
	props := map[string]any{}
	for _, k := range doc.keys {
		if k != "runtimePolicy" && k != ns {
			props[k] = indiePlain(doc.vals[k])
		}
	}
	if m.PropertySetDigest != "" {
		if d, err := indieDigestJCS(props); err != nil || d != m.PropertySetDigest {
			return nil, "PROPERTY_SET_DIGEST_MISMATCH"
		}
	}
	return e, ""
}

// manifestEqualsEnvelope is step 8.
func (r *indieRuntime) manifestEqualsEnvelope(m indieManifest, e map[string]any) string {
	for k, want := range map[string]string{
		"host": m.Host, "serviceId": m.ServiceID, "envTag": m.EnvTag, "audience": m.Audience,
		"publicationId": m.PublicationID, "policySnapshotId": m.PolicySnapshotID, "policyDigest": m.PolicyDigest,
		"contentDigest": m.ContentDigest, "releaseVersion": strconv.FormatInt(m.ReleaseVersion, 10),
		"schemaVersion": strconv.FormatInt(m.SchemaVersion, 10), "compatibilityGeneration": strconv.FormatInt(m.CompatibilityGeneration, 10),
	} {
		if fmt.Sprint(e[k]) != want {
			return "MANIFEST_ENVELOPE_MISMATCH"
		}
	}
	epoch, err := strconv.ParseInt(fmt.Sprint(e["revocationEpoch"]), 10, 64)
	if err != nil || m.RevocationEpoch < epoch {
		return "MANIFEST_ENVELOPE_MISMATCH"
	}
	vf, err1 := indieTime(fmt.Sprint(e["validFrom"]))
	ve, err2 := indieTime(fmt.Sprint(e["expiresAt"]))
	if err1 != nil || err2 != nil {
		return "PARSE_FAILED"
	}
	at := r.now()
	if m.ActivatedAt != "" {
		if at, err = indieTime(m.ActivatedAt); err != nil {
			return "MANIFEST_INVALID"
		}
	}
	if at.Before(vf) || !at.Before(ve) {
		return "OUTSIDE_ACTIVATION_WINDOW"
	}
	return ""
}

// apply is step 9 (kept in memory: this client's seen-state is not durable).
func (r *indieRuntime) apply(h *indieHeld) {
	if r.pinned { // a verified pin re-check: the running snapshot and the floor stay
		r.seenEpoch = max(r.seenEpoch, h.m.RevocationEpoch)
		return
	}
	issued, _ := indieTime(h.m.IssuedAt)
	r.seenSeq, r.seenIssued, r.seenHash = h.m.Sequence, issued, sha256.Sum256(h.raw)
	r.seenEpoch = max(r.seenEpoch, h.m.RevocationEpoch)
	r.held = h
	r.failedClosed = false
}

// evidence posts the runtime's own report.
func (r *indieRuntime) evidence(ctx context.Context, outcome, reason string, observedAt time.Time, change ...func(map[string]any)) (int, []byte, error) {
	m := r.held.m
	rep := map[string]any{"host": r.host, "serviceId": r.serviceID, "envTag": r.envTag, "audience": r.audience,
		"outcome": outcome, "reason": reason, "snapshotId": m.SnapshotID, "publicationId": m.PublicationID,
		"releaseVersion": m.ReleaseVersion, "sequence": m.Sequence, "currentSnapshotId": m.SnapshotID,
		"lastKnownGoodSnapshotId": m.SnapshotID, "artifactDigest": m.ArtifactDigest, "contentDigest": m.ContentDigest,
		"policyDigest": m.PolicyDigest, "observedAt": observedAt.UTC().Format("2006-01-02T15:04:05.000Z")}
	for _, f := range change {
		f(rep)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		return 0, nil, fmt.Errorf("evidence: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+"/configs/evidence", bytes.NewReader(b))
	if err != nil {
		return 0, nil, fmt.Errorf("evidence: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("evidence: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, body, nil
}

// --- canonical JSON (RFC 8785) ---

// indieDigestJCS is the sha256: digest of v's JCS bytes.
func indieDigestJCS(v any) (string, error) {
	b, err := indieJCS(v)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:]), nil
}

// indieJCS serializes a JSON value (json.Number numbers) by RFC 8785.
func indieJCS(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := indieJCSTo(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// indieJCSTo appends v's JCS bytes to buf.
func indieJCSTo(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case string:
		indieJCSString(buf, x)
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("number %q has no JSON form", x)
		}
		buf.WriteString(indieES6(f))
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := indieJCSTo(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			a, b := utf16.Encode([]rune(keys[i])), utf16.Encode([]rune(keys[j]))
			for n := 0; n < len(a) && n < len(b); n++ {
				if a[n] != b[n] {
					return a[n] < b[n]
				}
			}
			return len(a) < len(b)
		})
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			indieJCSString(buf, k)
			buf.WriteByte(':')
			if err := indieJCSTo(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("value of type %T has no JSON form", v)
	}
	return nil
}

// indieJCSString appends s with RFC 8785's minimal escapes.
func indieJCSString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	for _, c := range s {
		switch c {
		case '"':
			buf.WriteString(`\"`)
		case '\\':
			buf.WriteString(`\\`)
		case '\b':
			buf.WriteString(`\b`)
		case '\f':
			buf.WriteString(`\f`)
		case '\n':
			buf.WriteString(`\n`)
		case '\r':
			buf.WriteString(`\r`)
		case '\t':
			buf.WriteString(`\t`)
		default:
			if c < 0x20 {
				fmt.Fprintf(buf, `\u%04x`, c)
			} else {
				buf.WriteRune(c)
			}
		}
	}
	buf.WriteByte('"')
}

// indieES6 formats f as ECMAScript's Number.prototype.toString does.
func indieES6(f float64) string {
	if f == 0 {
		return "0"
	}
	a := math.Abs(f)
	if a >= 1e-6 && a < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(s, "e")
	return mant + "e" + exp[:1] + strings.TrimLeft(exp[1:], "0")
}

// --- values.yml: the configpub-yaml/1 subset, by the contract's rules ---

// indieMap is an ordered mapping.
type indieMap struct {
	keys []string
	vals map[string]any
}

// get returns the member k.
func (m *indieMap) get(k string) (any, bool) { v, ok := m.vals[k]; return v, ok }

// plain is m as a JSON value.
func (m *indieMap) plain() any { return indiePlain(m) }

// indiePlain turns parsed values into JSON values.
func indiePlain(v any) any {
	switch x := v.(type) {
	case *indieMap:
		out := make(map[string]any, len(x.keys))
		for _, k := range x.keys {
			out[k] = indiePlain(x.vals[k])
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = indiePlain(e)
		}
		return out
	}
	return v
}

// indieLine is one line of values.yml: its indentation and the rest.
type indieLine struct {
	indent int
	text   string
}

var (
	indiePlainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_./-]*$`)
	indieNumber   = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)
)

// indieYAML11Word reports whether k is a YAML 1.1 boolean or null word in
// any case: such a key is always quoted.
func indieYAML11Word(k string) bool {
	switch strings.ToLower(k) {
	case "y", "yes", "n", "no", "on", "off", "true", "false", "null":
		return true
	}
	return false
}

// indieParseValues parses values.yml, refusing anything outside the profile.
func indieParseValues(b []byte) (*indieMap, error) {
	s := string(b)
	if !strings.HasSuffix(s, "\n") || strings.ContainsAny(s, "\r\t") {
		return nil, errors.New("values.yml: not LF lines with a final newline")
	}
	var lines []indieLine
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		t := strings.TrimLeft(l, " ")
		if t == "" {
			return nil, errors.New("values.yml: empty line")
		}
		lines = append(lines, indieLine{indent: len(l) - len(t), text: t})
	}
	p := &indieParser{lines: lines}
	v, err := p.mapping(0)
	if err != nil {
		return nil, err
	}
	if p.i != len(p.lines) {
		return nil, fmt.Errorf("values.yml: line %d: unexpected indentation", p.i+1)
	}
	return v, nil
}

// indieParser reads indieLines top-down.
type indieParser struct {
	lines []indieLine
	i     int
}

// mapping reads the members at indent.
func (p *indieParser) mapping(indent int) (*indieMap, error) {
	m := &indieMap{vals: map[string]any{}}
	for p.i < len(p.lines) && p.lines[p.i].indent == indent && !strings.HasPrefix(p.lines[p.i].text, "-") {
		key, rest, err := indieKey(p.lines[p.i].text)
		if err != nil {
			return nil, fmt.Errorf("values.yml: line %d: %w", p.i+1, err)
		}
		if _, dup := m.vals[key]; dup {
			return nil, fmt.Errorf("values.yml: line %d: duplicate key %q", p.i+1, key)
		}
		p.i++
		var v any
		if rest == "" {
			if p.i >= len(p.lines) || p.lines[p.i].indent != indent+2 {
				return nil, fmt.Errorf("values.yml: line %d: %q has no value", p.i, key)
			}
			v, err = p.block(indent + 2)
		} else {
			v, err = indieScalar(rest)
		}
		if err != nil {
			return nil, err
		}
		m.keys = append(m.keys, key)
		m.vals[key] = v
	}
	if len(m.keys) == 0 {
		return nil, fmt.Errorf("values.yml: line %d: expected a mapping", p.i+1)
	}
	return m, nil
}

// block reads the nested mapping or list at indent.
func (p *indieParser) block(indent int) (any, error) {
	if strings.HasPrefix(p.lines[p.i].text, "-") {
		return p.list(indent)
	}
	return p.mapping(indent)
}

// list reads the items at indent.
func (p *indieParser) list(indent int) ([]any, error) {
	var out []any
	for p.i < len(p.lines) && p.lines[p.i].indent == indent && strings.HasPrefix(p.lines[p.i].text, "-") {
		t := p.lines[p.i].text
		if t == "-" { // a nested list on the next lines
			p.i++
			if p.i >= len(p.lines) || p.lines[p.i].indent != indent+2 || !strings.HasPrefix(p.lines[p.i].text, "- ") {
				return nil, fmt.Errorf("values.yml: line %d: empty list item", p.i)
			}
			v, err := p.list(indent + 2)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			continue
		}
		if !strings.HasPrefix(t, "- ") {
			return nil, fmt.Errorf("values.yml: line %d: bad list item", p.i+1)
		}
		rest := t[2:]
		if _, _, err := indieKey(rest); err == nil {
			// The first member of a mapping: the item's other members align with it.
			p.lines[p.i] = indieLine{indent: indent + 2, text: rest}
			v, err := p.mapping(indent + 2)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			continue
		}
		v, err := indieScalar(rest)
		if err != nil {
			return nil, fmt.Errorf("values.yml: line %d: %w", p.i+1, err)
		}
		p.i++
		out = append(out, v)
	}
	return out, nil
}

// indieKey splits "key: value" (or "key:") into the key and the value text.
func indieKey(t string) (string, string, error) {
	var key, after string
	if strings.HasPrefix(t, `"`) {
		end := indieQuoteEnd(t)
		if end < 0 {
			return "", "", errors.New("unterminated quoted key")
		}
		if err := json.Unmarshal([]byte(t[:end]), &key); err != nil {
			return "", "", fmt.Errorf("quoted key: %w", err)
		}
		after = t[end:]
	} else {
		i := strings.IndexByte(t, ':')
		if i < 0 {
			return "", "", errors.New("not a mapping member")
		}
		key, after = t[:i], t[i:]
		if !indiePlainKey.MatchString(key) || indieYAML11Word(key) {
			return "", "", fmt.Errorf("key %q must be quoted", key)
		}
	}
	switch {
	case after == ":":
		return key, "", nil
	case strings.HasPrefix(after, ": ") && len(after) > 2:
		return key, after[2:], nil
	}
	return "", "", errors.New("not a mapping member")
}

// indieQuoteEnd is the index just past the closing quote of t's leading string.
func indieQuoteEnd(t string) int {
	for i := 1; i < len(t); i++ {
		switch t[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// indieScalar reads a scalar of the profile: a JSON string, true, false,
// null, a number, {} or [].
func indieScalar(t string) (any, error) {
	switch {
	case t == "true":
		return true, nil
	case t == "false":
		return false, nil
	case t == "null":
		return nil, nil
	case t == "{}":
		return &indieMap{vals: map[string]any{}}, nil
	case t == "[]":
		return []any{}, nil
	case strings.HasPrefix(t, `"`):
		if indieQuoteEnd(t) != len(t) {
			return nil, fmt.Errorf("scalar %q: text after the string", t)
		}
		var s string
		if err := json.Unmarshal([]byte(t), &s); err != nil {
			return nil, fmt.Errorf("scalar %q: %w", t, err)
		}
		return s, nil
	case indieNumber.MatchString(t):
		return json.Number(t), nil
	}
	return nil, fmt.Errorf("scalar %q is outside the profile", t)
}
