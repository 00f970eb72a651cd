package configserver

import (
	"errors"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/internal/strictjson"
)

// Evidence bounds. A runtime reports once per load that applied or
// rejected something; these bounds leave room for that and refuse floods.
const (
	// DefaultEvidencePerMinute is the sustained rate of reports accepted
	// per identity when Options.EvidencePerMinute is 0.
	DefaultEvidencePerMinute = 30
	// DefaultEvidenceBurst is the burst of reports accepted per identity
	// when Options.EvidenceBurst is 0.
	DefaultEvidenceBurst = 10
	// EvidenceMaxAge and EvidenceMaxAhead bound observedAt relative to the
	// server's clock: older or later reports are refused (400).
	EvidenceMaxAge   = 7 * 24 * time.Hour
	EvidenceMaxAhead = 10 * time.Minute
	// maxLimiterEntries bounds the identities the rate limiter remembers.
	maxLimiterEntries = 100_000
)

// evidenceRequest is the JSON body of POST /configs/evidence.
type evidenceRequest bundle.EvidenceReport

// reasonRE is the grammar of a stable reason code (APPLIED: NEW_SNAPSHOT,
// REJECTED: DIGEST_MISMATCH, ...).
var reasonRE = regexp.MustCompile(`^[A-Z][A-Z0-9_]{0,63}$`)

// uuidRE is a lowercase 8-4-4-4-12 UUID.
var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// serveEvidence answers POST /configs/evidence: a runtime reports, for its
// own identity and audience only, that it applied or rejected a snapshot.
// The report is stored as an unverified observation. Every refusal is a
// JSON error: 400 malformed or implausible, 403 another identity or
// audience, 413 too large, 429 too many reports for the identity.
func (h *handler) serveEvidence(w http.ResponseWriter, r *http.Request, rl *reqLog) *httpError {
	if r.Method != http.MethodPost {
		return errMethod("POST")
	}
	claims, herr := h.authenticate(r, rl)
	if herr != nil {
		return herr
	}
	if r.ContentLength > h.maxEvidenceBytes {
		return errTooLarge(h.maxEvidenceBytes)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxEvidenceBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errTooLarge(h.maxEvidenceBytes)
		}
		return errBadRequest("request body could not be read")
	}
	id := claims.Identity()
	if wait, ok := h.evidenceLimit.allow(id, h.now()); !ok {
		return errTooMany(wait)
	}
	req, ev, herr := decodeEvidence(body, h.now())
	if herr != nil {
		return herr
	}
	if ev.Identity != id {
		return errForbidden("evidence identity differs from the token's")
	}
	if req.Audience != "" && req.Audience != claims.ConfigAudience {
		return errForbidden("evidence audience differs from the token's")
	}
	ev.Audience = claims.ConfigAudience
	ev.ReportedAt = h.now()
	rl.snapshotID = ev.SnapshotID
	ctx, cancel := h.storeContext(r)
	defer cancel()
	if d, err := h.store.Current(ctx, id); err == nil && d.Audience != claims.ConfigAudience {
		return errForbidden("token audience differs from the identity's")
	}
	if err := h.store.RecordEvidence(ctx, ev); err != nil {
		if errors.Is(err, ErrInvalidEvidence) {
			return errBadRequest("evidence names a snapshot that is not one of this identity and audience, or a publication that is not the snapshot's")
		}
		return storeError(err)
	}
	w.Header()["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// decodeEvidence reads a POST /configs/evidence body: one JSON object of
// the documented fields, each of its form (validate); now bounds
// observedAt.
func decodeEvidence(body []byte, now time.Time) (*evidenceRequest, *Evidence, *httpError) {
	var req evidenceRequest
	if err := strictjson.Decode(body, &req); err != nil {
		return nil, nil, errBadRequest("evidence body is not one JSON object of the documented fields")
	}
	ev, herr := req.validate(now)
	if herr != nil {
		return nil, nil, herr
	}
	return &req, ev, nil
}

// validate checks every field's form; now bounds observedAt.
func (req *evidenceRequest) validate(now time.Time) (*Evidence, *httpError) {
	for _, f := range []struct{ name, v string }{{"host", req.Host}, {"serviceId", req.ServiceID}, {"envTag", req.EnvTag}} {
		if f.v == "" {
			return nil, errBadRequest("evidence fields host, serviceId and envTag are required")
		}
		if !printable(f.v) {
			return nil, errBadRequest("evidence field " + f.name + " holds a control character")
		}
	}
	if req.Outcome != bundle.OutcomeApplied && req.Outcome != bundle.OutcomeRejected {
		return nil, errBadRequest("evidence field outcome must be APPLIED or REJECTED")
	}
	if req.Reason != "" && !reasonRE.MatchString(req.Reason) {
		return nil, errBadRequest("evidence field reason must be a reason code (A-Z, 0-9, _; at most 64)")
	}
	if req.Audience != "" && bundle.Namespace(req.Audience) == "" {
		return nil, errBadRequest("evidence field audience must be agent, gateway or knowledge")
	}
	ev := &Evidence{
		Identity:       bundle.Identity{Host: req.Host, ServiceID: req.ServiceID, EnvTag: req.EnvTag},
		Outcome:        req.Outcome,
		Reason:         req.Reason,
		ReleaseVersion: req.ReleaseVersion,
		Sequence:       req.Sequence,
	}
	for _, f := range []struct {
		name string
		val  string
		dst  *string
	}{
		{"snapshotId", req.SnapshotID, &ev.SnapshotID},
		{"publicationId", req.PublicationID, &ev.PublicationID},
		{"currentSnapshotId", req.CurrentSnapshotID, &ev.RunningSnapshotID},
		{"lastKnownGoodSnapshotId", req.LastKnownGoodSnapshotID, &ev.LastKnownGoodSnapshotID},
	} {
		if f.val == "" {
			continue
		}
		if !uuidRE.MatchString(f.val) {
			return nil, errBadRequest("evidence field " + f.name + " is not a lowercase UUID")
		}
		if f.val == "00000000-0000-0000-0000-000000000000" || f.val == "ffffffff-ffff-ffff-ffff-ffffffffffff" {
			return nil, errBadRequest("evidence field " + f.name + " is the nil or max UUID")
		}
		*f.dst = f.val
	}
	if req.Outcome == bundle.OutcomeApplied && ev.SnapshotID == "" {
		return nil, errBadRequest("evidence field snapshotId is required with outcome APPLIED")
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"releaseVersion", req.ReleaseVersion}, {"sequence", req.Sequence}} {
		if f.v < 0 || f.v > math.MaxInt64/2 {
			return nil, errBadRequest("evidence field " + f.name + " is out of range")
		}
	}
	for _, f := range []struct {
		name string
		val  string
		dst  *string
	}{
		{"artifactDigest", req.ArtifactDigest, &ev.ArtifactDigest},
		{"contentDigest", req.ContentDigest, &ev.ContentDigest},
		{"policyDigest", req.PolicyDigest, &ev.PolicyDigest},
	} {
		if f.val != "" && !digest.Valid(f.val) {
			return nil, errBadRequest("evidence field " + f.name + " is not sha256:<64 hex>")
		}
		*f.dst = f.val
	}
	if req.ObservedAt != "" {
		t, err := time.Parse(time.RFC3339Nano, req.ObservedAt)
		if err != nil {
			return nil, errBadRequest("evidence field observedAt is not RFC 3339")
		}
		if t.Before(now.Add(-EvidenceMaxAge)) || t.After(now.Add(EvidenceMaxAhead)) {
			return nil, errBadRequest("evidence field observedAt is more than 7 days before or 10 minutes after the server's clock")
		}
		ev.ObservedAt = t
	}
	return ev, nil
}

// printable reports whether s holds no control character (NUL included).
func printable(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}

func errTooLarge(limit int64) *httpError {
	return &httpError{status: http.StatusRequestEntityTooLarge, code: "too_large",
		message: "evidence body larger than " + itoa(int(limit)) + " bytes", reason: "body too large"}
}

func errTooMany(wait time.Duration) *httpError {
	secs := max(int(math.Ceil(wait.Seconds())), 1)
	return &httpError{status: http.StatusTooManyRequests, code: "too_many_requests",
		message: "too many evidence reports for this identity; retry after " + strconv.Itoa(secs) + " s",
		reason:  "evidence rate limited", retryAfter: secs}
}

// rateLimiter is a token bucket per identity.
type rateLimiter struct {
	perSecond float64
	burst     float64

	mu      sync.Mutex
	buckets map[bundle.Identity]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newRateLimiter(perMinute, burst int) *rateLimiter {
	return &rateLimiter{perSecond: float64(perMinute) / 60, burst: float64(burst), buckets: map[bundle.Identity]*bucket{}}
}

// allow takes one token from id's bucket; when there is none it returns how
// long until there is.
func (l *rateLimiter) allow(id bundle.Identity, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[id]
	if b == nil {
		if len(l.buckets) >= maxLimiterEntries {
			l.sweep(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[id] = b
	}
	if el := now.Sub(b.at).Seconds(); el > 0 {
		b.tokens = min(l.burst, b.tokens+el*l.perSecond)
		b.at = now
	}
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) / l.perSecond * float64(time.Second)), false
	}
	b.tokens--
	return 0, true
}

// sweep forgets every bucket that has refilled (it carries no state).
func (l *rateLimiter) sweep(now time.Time) {
	for id, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*l.perSecond >= l.burst {
			delete(l.buckets, id)
		}
	}
}
