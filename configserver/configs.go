package configserver

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/auth"
)

// maxQueryValue bounds every query value.
const maxQueryValue = 253

// ignoredParams are accepted for compatibility and never widen the identity;
// configPhase selects the current pointer (default) or the staged candidate
// (requestedPhase).
var ignoredParams = map[string]bool{
	"productId": true, "productVersion": true, "apiId": true, "apiVersion": true, "configPhase": true,
	"wait": true, // read by requestedWait
}

// serveCurrent answers GET|HEAD /configs.
func (h *handler) serveCurrent(w http.ResponseWriter, r *http.Request, rl *reqLog) *httpError {
	if err := readOnly(r); err != nil {
		return err
	}
	claims, herr := h.authenticate(r, rl)
	if herr != nil {
		return herr
	}
	id, herr := requestedIdentity(r.URL.RawQuery, claims)
	if herr != nil {
		return herr
	}
	if requestedPhase(r.URL.RawQuery) == PhaseCandidate {
		return h.serveCandidate(w, r, rl, claims, id)
	}
	// Every answer to a request with wait= from a server that holds
	// requests says so, whatever it answers (wait=0, a bad wait, 404, 410
	// and 503 included): a client without it takes the server for one
	// that does not hold requests and polls.
	if h.notifier != nil && len(queryValues(r.URL.RawQuery, "wait")) > 0 {
		w.Header()[watchMaxKey] = h.watchMax
	}
	wait, herr := requestedWait(r.URL.RawQuery, h.maxWait)
	if herr != nil {
		return herr
	}
	// Current answers from memory; a store that must read bytes applies its
	// own query timeout, and the request context bounds the rest.
	d, err := h.current(r.Context(), id)
	if err != nil {
		if wait > 0 && h.notifier != nil && absence(err) != nil {
			// No snapshot to serve (none yet, revoked, retired): held
			// until there is one, so that the move that ends it — a
			// rollback after a revocation, a first release — is answered
			// at once, not a back-off later.
			rl.route = routeWatch
			return h.watchCurrent(w, r, rl, claims, id, nil, err, wait)
		}
		return storeError(err)
	}
	heldBelow, behind := heldVersus(r, d)
	if behind != nil {
		return behind
	}
	if wait > 0 && h.notifier != nil {
		// A runtime that names the current ETag but holds an older
		// manifest of it (X-Config-Held-Sequence below the pointer's: the
		// pointer moved back to the bytes it has — a rollback across a
		// retirement, a re-added target — or was re-signed while it was
		// not asking) is answered at once, not at the end of the wait.
		if d.Identity == claims.Identity() && d.Audience == claims.ConfigAudience &&
			ifNoneMatch(r.Header["If-None-Match"], etagOf(d)) && !heldBelow {
			rl.route = routeWatch
			return h.watchCurrent(w, r, rl, claims, id, d, nil, wait)
		}
	}
	return h.writeDelivery(w, r, rl, claims, d)
}

// current returns the store's current delivery for id, or ErrLeaseEnded
// when its lease has ended by the server's clock.
func (h *handler) current(ctx context.Context, id bundle.Identity) (*Delivery, error) {
	return h.unexpired(h.store.Current(ctx, id))
}

// unexpired passes a store's answer (d, err) on, unless d's lease has
// ended by the server's clock: then ErrLeaseEnded (503), not a manifest
// every runtime must refuse as EXPIRED and report as a REJECTED snapshot.
func (h *handler) unexpired(d *Delivery, err error) (*Delivery, error) {
	if err != nil {
		return d, err
	}
	if end := d.LeaseEnd(); !end.IsZero() && !h.now().Before(end) {
		return nil, fmt.Errorf("current %s: lease ended at %s: %w", d.Identity, d.ExpiresAt, ErrLeaseEnded)
	}
	return d, nil
}

// requestedIdentity parses the query and checks it against the claims. host
// is required; an omitted serviceId or envTag is taken from the claims.
// Every mismatch gives the same 403, decided before any store lookup.
func requestedIdentity(rawQuery string, c *auth.Claims) (bundle.Identity, *httpError) {
	var id bundle.Identity
	var hasHost, hasService, hasEnv bool
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		if pair == "" {
			continue
		}
		rawKey, rawVal, _ := strings.Cut(pair, "=")
		key, err1 := queryUnescape(rawKey)
		val, err2 := queryUnescape(rawVal)
		if err1 != nil || err2 != nil || strings.Contains(pair, ";") {
			return bundle.Identity{}, errBadRequest("query string is malformed")
		}
		if len(val) > maxQueryValue {
			return bundle.Identity{}, errBadRequest("query parameter " + safeName(key) + " is too long")
		}
		var dst *string
		var seen *bool
		switch key {
		case "host":
			dst, seen = &id.Host, &hasHost
		case "serviceId":
			dst, seen = &id.ServiceID, &hasService
		case "envTag":
			dst, seen = &id.EnvTag, &hasEnv
		default:
			continue // ignoredParams and anything else never select or widen
		}
		if *seen {
			return bundle.Identity{}, errBadRequest("query parameter " + key + " given more than once")
		}
		*dst, *seen = val, true
	}
	if id.Host == "" {
		return bundle.Identity{}, errBadRequest("query parameter host is required")
	}
	if !hasService {
		id.ServiceID = c.ServiceID
	}
	if !hasEnv {
		id.EnvTag = c.EnvTag
	}
	if id != c.Identity() {
		return bundle.Identity{}, errForbidden("requested identity differs from the token's")
	}
	return id, nil
}

// queryUnescape decodes a query component, without allocating when it has
// nothing to decode.
func queryUnescape(s string) (string, error) {
	if !strings.ContainsAny(s, "%+") {
		return s, nil
	}
	return url.QueryUnescape(s)
}

// safeName returns a query parameter name for an error message, or a
// placeholder when it is not a plain identifier (never echo input blindly).
func safeName(k string) string {
	if ignoredParams[k] || k == "host" || k == "serviceId" || k == "envTag" {
		return k
	}
	return "(unnamed)"
}

// serveSnapshot answers GET|HEAD /configs/snapshots/{snapshotId}.
func (h *handler) serveSnapshot(w http.ResponseWriter, r *http.Request, rl *reqLog, rawID string) *httpError {
	if err := readOnly(r); err != nil {
		return err
	}
	claims, herr := h.authenticate(r, rl)
	if herr != nil {
		return herr
	}
	u, err := uuid.Parse(rawID)
	if err != nil || len(rawID) != 36 {
		return errBadRequest("snapshot id is not a UUID")
	}
	ctx, cancel := h.storeContext(r)
	defer cancel()
	d, err := h.store.Snapshot(ctx, claims.Identity(), u.String())
	if err != nil {
		if herr := storeError(err); herr.status == http.StatusNotFound {
			return errForbidden("snapshot not found for the token's identity")
		}
		return storeError(err)
	}
	return h.writeDelivery(w, r, rl, claims, d)
}

// writeDelivery checks the delivery against the claims and writes the 200,
// 304 or HEAD answer with every header of the wire contract (docs/wire-contract.md).
func (h *handler) writeDelivery(w http.ResponseWriter, r *http.Request, rl *reqLog, c *auth.Claims, d *Delivery) *httpError {
	if d.Identity != c.Identity() {
		return errForbidden("store answered for another identity")
	}
	if d.Audience != c.ConfigAudience {
		return errForbidden("snapshot audience differs from the token's config_audience")
	}
	rl.snapshotID = d.SnapshotID
	hv := d.values()
	hdr := w.Header()
	hdr["Cache-Control"] = cacheControl
	hdr["Vary"] = varyAuthorization
	hdr["X-Content-Type-Options"] = noSniff
	for i := range hv.vals {
		if v := hv.value(i); v != nil {
			hdr[headerKeys[i]] = v
		}
	}
	if hv.has(hvValidFrom) { // a delivery with a manifest
		hdr[bundle.HeaderManifest] = []string{base64.RawURLEncoding.EncodeToString(d.Manifest)}
	}
	etag := hv.vals[hvETag]
	if ifNoneMatch(r.Header["If-None-Match"], etag) {
		w.WriteHeader(http.StatusNotModified)
		rl.notModified = true
		return nil
	}
	hdr["Content-Type"] = contentTypeYAML
	hdr["Content-Length"] = []string{strconv.Itoa(len(d.Body))}
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(d.Body)
	}
	return nil
}

// reprDigestLen is the length of a Repr-Digest value of a SHA-256 digest.
const reprDigestLen = len("sha-256=::") + 44

// appendReprDigest appends the RFC 9530 Repr-Digest value of
// "sha256:<hex>" to dst.
// It reports false, appending nothing, for any other digest.
func appendReprDigest(dst []byte, digest string) ([]byte, bool) {
	hexPart, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hexPart) != 64 {
		return dst, false
	}
	var hx [64]byte
	var raw [32]byte
	copy(hx[:], hexPart)
	if _, err := hex.Decode(raw[:], hx[:]); err != nil {
		return dst, false
	}
	dst = append(dst, "sha-256=:"...)
	dst = base64.StdEncoding.AppendEncode(dst, raw[:])
	return append(dst, ':'), true
}

// etagKey is the canonical header map key of ETag.
var etagKey = http.CanonicalHeaderKey(bundle.HeaderETag)

// ifNoneMatch reports whether the If-None-Match field lines match etag as
// RFC 9110 (13.1.2) says: their combined value is "*", or a list of
// entity-tags one of which equals etag under the weak comparison (a W/
// prefix is ignored). A value of neither form — a "*" among entity-tags,
// W/*, an unquoted or unterminated tag, a line that is not a list of
// tags — matches nothing: the request is answered as an unconditional one,
// never 304 for a header the grammar refuses.
func ifNoneMatch(fields []string, etag string) bool {
	if len(fields) == 1 && strings.Trim(fields[0], " \t") == "*" {
		return true
	}
	matched := false
	for _, f := range fields {
		valid, m := matchEntityTags(f, etag)
		if !valid {
			return false
		}
		matched = matched || m
	}
	return matched
}

// matchEntityTags reads v as RFC 9110's #entity-tag (empty elements
// allowed) and reports whether it is one, and whether a tag in it equals
// etag under the weak comparison.
func matchEntityTags(v, etag string) (valid, matched bool) {
	i := 0
	for {
		for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == ',') {
			i++
		}
		if i == len(v) {
			return true, matched
		}
		if strings.HasPrefix(v[i:], "W/") {
			i += 2
		}
		if i == len(v) || v[i] != '"' {
			return false, false
		}
		start := i
		for i++; i < len(v) && v[i] != '"'; i++ {
			if c := v[i]; c < 0x21 || c == 0x7f { // etagc: %x21 / %x23-7E / obs-text
				return false, false
			}
		}
		if i == len(v) {
			return false, false // unterminated
		}
		i++
		matched = matched || v[start:i] == etag
		for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
			i++
		}
		if i < len(v) && v[i] != ',' {
			return false, false
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Constant header values, shared read-only by every response.
var (
	cacheControl      = []string{"private, no-cache"}
	varyAuthorization = []string{"Authorization"}
	noSniff           = []string{"nosniff"}
	contentTypeYAML   = []string{"application/yaml"}
)

// The response headers a delivery's prepared values carry, in the order
// they are written on a parked answer's connection (Cache-Control, Vary and
// X-Content-Type-Options follow the ETag; the manifest follows the rest).
const (
	hvETag = iota
	hvReprDigest
	hvSnapshotID
	hvPublicationID
	hvPolicyDigest
	hvContentDigest
	hvArtifactDigest
	hvReleaseVersion
	hvValidFrom // this and the rest: only with a manifest
	hvRefreshAfter
	hvExpiresAt
	hvKeyID
	hvSignature
	hvCount
)

// headerKeys are the header map keys of the prepared values.
var headerKeys = [hvCount]string{
	hvETag: etagKey, hvReprDigest: bundle.HeaderReprDigest, hvSnapshotID: bundle.HeaderSnapshotID,
	hvPublicationID: bundle.HeaderPublicationID, hvPolicyDigest: bundle.HeaderPolicyDigest,
	hvContentDigest: bundle.HeaderContentDigest, hvArtifactDigest: bundle.HeaderArtifactDigest,
	hvReleaseVersion: bundle.HeaderReleaseVersion, hvValidFrom: bundle.HeaderValidFrom,
	hvRefreshAfter: bundle.HeaderRefreshAfter, hvExpiresAt: bundle.HeaderExpiresAt,
	hvKeyID: bundle.HeaderManifestKeyID, hvSignature: bundle.HeaderManifestSignature,
}

// headerValues are the response header values of one delivery, cleaned as
// net/http writes them, computed once (Delivery.Prepare) and shared
// read-only by responses. A value is the delivery's own string whenever
// cleaning leaves it unchanged (so a server holding 100,000 identities
// keeps each value once, and the repeated ones as the store shares them);
// only the ETag and Repr-Digest, which the fields do not hold, are new, in
// one string. A response takes each value as a one-element slice of vals
// (no allocation), and a parked answer appends them as header lines
// (appendWire). The manifest header is not among them: its base64 form is
// encoded per response (about a microsecond), so that the manifest is kept
// once, as the stored bytes.
type headerValues struct {
	vals    [hvCount]string
	present uint16 // bit i: vals[i] is sent (it may be empty)
	// sequence is the delivery manifest's sequence (0 without one, or when
	// it cannot be read).
	sequence int64
	// leaseEnd is the lease's end (ExpiresAt) in Unix nanoseconds: 0
	// without a manifest, or when ExpiresAt does not parse.
	leaseEnd int64
}

// has reports whether the value i is sent.
func (hv *headerValues) has(i int) bool { return hv.present&(1<<i) != 0 }

// value returns the value i as a header map value, or nil when it is not
// sent. The slice has capacity 1, so an append by a caller copies.
func (hv *headerValues) value(i int) []string {
	if !hv.has(i) {
		return nil
	}
	return hv.vals[i : i+1 : i+1]
}

// appendWire appends the values as HTTP/1.1 header lines ("Key: value\r\n"),
// with the constant Cache-Control, Vary and X-Content-Type-Options lines
// after the ETag.
func (hv *headerValues) appendWire(buf []byte) []byte {
	for i, v := range hv.vals {
		if !hv.has(i) {
			continue
		}
		buf = append(buf, headerKeys[i]...)
		buf = append(buf, ": "...)
		buf = append(buf, v...)
		buf = append(buf, "\r\n"...)
		if i == hvETag {
			buf = append(buf, constantWire...)
		}
	}
	return buf
}

// constantWire is the header lines every delivery answer carries.
var constantWire = "Cache-Control: " + cacheControl[0] + "\r\nVary: " + varyAuthorization[0] +
	"\r\nX-Content-Type-Options: " + noSniff[0] + "\r\n"

// headerValueCleaner does what net/http does to a header value on the wire.
var headerValueCleaner = strings.NewReplacer("\n", " ", "\r", " ")

// cleanHeaderValue returns v as net/http writes it; v itself (no copy) when
// it needs no cleaning.
func cleanHeaderValue(v string) string {
	return headerValueCleaner.Replace(strings.TrimSpace(v))
}

// headerValues computes d's header values. With share set it also points
// d.ArtifactDigest at the equal substring of the ETag, so that the digest
// is kept once.
func (d *Delivery) headerValues(share bool) *headerValues {
	hv := &headerValues{}
	set := func(i int, v string) {
		hv.vals[i] = cleanHeaderValue(v)
		hv.present |= 1 << i
	}
	// A SHA-256 digest (the only kind stored) needs no cleaning: its ETag,
	// Repr-Digest and own value are substrings of one string.
	var buf [len(`"sha256:"`) + 64 + reprDigestLen]byte
	b := append(append(append(buf[:0], '"'), d.ArtifactDigest...), '"')
	if b, ok := appendReprDigest(b, d.ArtifactDigest); ok {
		n := len(d.ArtifactDigest) + 2
		both := string(b)
		set(hvETag, both[:n])
		set(hvReprDigest, both[n:])
		set(hvArtifactDigest, both[1:n-1])
		if share {
			d.ArtifactDigest = hv.vals[hvArtifactDigest]
		}
	} else {
		set(hvETag, `"`+d.ArtifactDigest+`"`)
		set(hvArtifactDigest, d.ArtifactDigest)
	}
	set(hvSnapshotID, d.SnapshotID)
	set(hvPublicationID, d.PublicationID)
	set(hvPolicyDigest, d.PolicyDigest)
	set(hvContentDigest, d.ContentDigest)
	set(hvReleaseVersion, strconv.FormatInt(d.ReleaseVersion, 10))
	if len(d.Manifest) > 0 {
		set(hvValidFrom, d.ValidFrom)
		set(hvRefreshAfter, d.RefreshAfter)
		set(hvExpiresAt, d.ExpiresAt)
		set(hvKeyID, d.ManifestKeyID)
		set(hvSignature, d.ManifestSignature)
		var m struct {
			Sequence int64 `json:"sequence"`
		}
		if json.Unmarshal(d.Manifest, &m) == nil {
			hv.sequence = m.Sequence
		}
		if t, err := time.Parse(time.RFC3339Nano, d.ExpiresAt); err == nil {
			hv.leaseEnd = t.UnixNano()
		}
	}
	return hv
}

// LeaseEnd returns the end of d's lease (ExpiresAt): zero when d carries
// no delivery manifest, or when ExpiresAt is not an RFC 3339 time.
func (d *Delivery) LeaseEnd() time.Time {
	if ns := d.values().leaseEnd; ns != 0 {
		return time.Unix(0, ns).UTC()
	}
	return time.Time{}
}

// values returns d's header values: those Prepare built, else built now.
func (d *Delivery) values() *headerValues {
	if d.hv != nil {
		return d.hv
	}
	return d.headerValues(false)
}

// parseSequence reads a sequence as the wire contract sends it: decimal
// digits only (no sign, no space), within int64.
func parseSequence(v string) (int64, bool) {
	if v == "" || strings.Trim(v, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// heldVersus compares the delivery-manifest sequence the runtime says it
// holds (X-Config-Held-Sequence) with d's: below is true when a newer
// manifest of d is waiting for it, and behind is the 503 when it holds a
// higher one — this server's store is behind the one that answered the
// runtime before (a hot standby that lags, behind a load balancer), and
// d's older pointer would only be refused. Neither without the header (or
// one it cannot read: not one line of decimal digits), or when d has no
// manifest.
func heldVersus(r *http.Request, d *Delivery) (below bool, behind *httpError) {
	v := r.Header[bundle.HeaderHeldSequence]
	if len(v) != 1 {
		return false, nil
	}
	held, ok := parseSequence(v[0])
	seq := d.values().sequence
	if !ok || seq == 0 {
		return false, nil
	}
	if held > seq {
		return false, &httpError{status: http.StatusServiceUnavailable, code: "unavailable",
			message: "this server is behind the configuration the runtime holds; retry later", reason: "behind the runtime",
			err: fmt.Errorf("the runtime holds sequence %d, the current pointer here is at %d: %w", held, seq, ErrUnavailable)}
	}
	return held < seq, nil
}
