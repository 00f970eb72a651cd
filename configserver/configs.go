package configserver

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"strings"

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
	if phase, herr := requestedPhase(r.URL.RawQuery); herr != nil {
		return herr
	} else if phase == PhaseCandidate {
		return h.serveCandidate(w, r, rl, claims, id)
	}
	wait, herr := requestedWait(r.URL.RawQuery, h.maxWait)
	if herr != nil {
		return herr
	}
	// Current answers from memory; a store that must read bytes applies its
	// own query timeout, and the request context bounds the rest.
	d, err := h.store.Current(r.Context(), id)
	if err != nil {
		return storeError(err)
	}
	if wait > 0 && h.notifier != nil {
		w.Header()[watchMaxKey] = h.watchMax
		if d.Identity == claims.Identity() && d.Audience == claims.ConfigAudience &&
			ifNoneMatch(r.Header["If-None-Match"], etagOf(d)) {
			rl.route = routeWatch
			return h.watchCurrent(w, r, rl, claims, id, d, wait)
		}
	}
	return h.writeDelivery(w, r, rl, claims, d)
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
	hv := d.hv
	if hv == nil {
		hv = d.headerValues()
	}
	hdr := w.Header()
	hdr[etagKey] = hv.etag
	hdr["Cache-Control"] = cacheControl
	hdr["Vary"] = varyAuthorization
	hdr["X-Content-Type-Options"] = noSniff
	if hv.reprDigest != nil {
		hdr[bundle.HeaderReprDigest] = hv.reprDigest
	}
	hdr[bundle.HeaderSnapshotID] = hv.snapshotID
	hdr[bundle.HeaderPublicationID] = hv.publicationID
	hdr[bundle.HeaderPolicyDigest] = hv.policyDigest
	hdr[bundle.HeaderContentDigest] = hv.contentDigest
	hdr[bundle.HeaderArtifactDigest] = hv.artifactDigest
	hdr[bundle.HeaderReleaseVersion] = hv.releaseVersion
	if hv.validFrom != nil { // a delivery with a manifest
		hdr[bundle.HeaderValidFrom] = hv.validFrom
		hdr[bundle.HeaderRefreshAfter] = hv.refreshAfter
		hdr[bundle.HeaderExpiresAt] = hv.expiresAt
		hdr[bundle.HeaderManifest] = []string{base64.RawURLEncoding.EncodeToString(d.Manifest)}
		hdr[bundle.HeaderManifestKeyID] = hv.keyID
		hdr[bundle.HeaderManifestSignature] = hv.signature
	}
	etag := hv.etag[0]
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

// reprDigest turns "sha256:<hex>" into the RFC 9530 Repr-Digest value.
func reprDigest(digest string) (string, bool) {
	hexPart, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hexPart) != 64 {
		return "", false
	}
	var raw [32]byte
	if _, err := hex.Decode(raw[:], []byte(hexPart)); err != nil {
		return "", false
	}
	return "sha-256=:" + base64.StdEncoding.EncodeToString(raw[:]) + ":", true
}

// etagKey is the canonical header map key of ETag.
var etagKey = http.CanonicalHeaderKey(bundle.HeaderETag)

// ifNoneMatch reports whether any If-None-Match field matches etag: "*", or
// a list member equal to it under the weak comparison RFC 9110 section 13.1.2
// prescribes for If-None-Match (a W/ prefix is ignored).
func ifNoneMatch(fields []string, etag string) bool {
	for _, f := range fields {
		for _, m := range strings.Split(f, ",") {
			m = strings.TrimPrefix(strings.TrimSpace(m), "W/")
			if m == "*" || m == etag {
				return true
			}
		}
	}
	return false
}

func itoa(i int) string { return strconv.Itoa(i) }

// Constant header values, shared read-only by every response.
var (
	cacheControl      = []string{"private, no-cache"}
	varyAuthorization = []string{"Authorization"}
	noSniff           = []string{"nosniff"}
	contentTypeYAML   = []string{"application/yaml"}
)

// headerValues are the response header values of one delivery,
// computed once (Delivery.Prepare) and shared read-only by responses. wire
// is the same fields as HTTP/1.1 header lines ("Key: value\r\n", the
// values cleaned as net/http writes them), so that an answer written
// directly on a connection (a parked watch) copies them in one piece; the
// values are substrings of it. The manifest header is not among them: its
// base64 form is encoded per response (about a microsecond, appended to
// the same buffer), so that a server holding 100,000 identities keeps each
// manifest once, as the stored bytes.
type headerValues struct {
	etag, reprDigest, snapshotID, publicationID, policyDigest, contentDigest []string
	artifactDigest, releaseVersion                                           []string
	validFrom, refreshAfter, expiresAt, keyID, signature                     []string
	wire                                                                     string
}

// shareStrings points d's string fields at the equal substrings of its
// prepared header lines, so that a server holding many deliveries keeps
// each value once (the content does not change).
func (d *Delivery) shareStrings() {
	for _, f := range []struct {
		field *string
		hv    []string
	}{
		{&d.SnapshotID, d.hv.snapshotID}, {&d.PublicationID, d.hv.publicationID}, {&d.PolicyDigest, d.hv.policyDigest},
		{&d.ContentDigest, d.hv.contentDigest}, {&d.ArtifactDigest, d.hv.artifactDigest},
		{&d.ManifestSignature, d.hv.signature}, {&d.ManifestKeyID, d.hv.keyID},
	} {
		if len(f.hv) == 1 && f.hv[0] == *f.field {
			*f.field = f.hv[0]
		}
	}
}

// headerValueCleaner does what net/http does to a header value on the wire.
var headerValueCleaner = strings.NewReplacer("\n", " ", "\r", " ")

func (d *Delivery) headerValues() *headerValues {
	hv := &headerValues{}
	type field struct {
		dst        *[]string
		start, end int
	}
	var (
		b      strings.Builder
		fields []field
	)
	b.Grow(640)
	add := func(dst *[]string, key, val string) {
		b.WriteString(key)
		b.WriteString(": ")
		start := b.Len()
		b.WriteString(headerValueCleaner.Replace(strings.TrimSpace(val)))
		fields = append(fields, field{dst, start, b.Len()})
		b.WriteString("\r\n")
	}
	add(&hv.etag, etagKey, `"`+d.ArtifactDigest+`"`)
	b.WriteString("Cache-Control: " + cacheControl[0] + "\r\nVary: " + varyAuthorization[0] +
		"\r\nX-Content-Type-Options: " + noSniff[0] + "\r\n")
	if rd, ok := reprDigest(d.ArtifactDigest); ok {
		add(&hv.reprDigest, bundle.HeaderReprDigest, rd)
	}
	add(&hv.snapshotID, bundle.HeaderSnapshotID, d.SnapshotID)
	add(&hv.publicationID, bundle.HeaderPublicationID, d.PublicationID)
	add(&hv.policyDigest, bundle.HeaderPolicyDigest, d.PolicyDigest)
	add(&hv.contentDigest, bundle.HeaderContentDigest, d.ContentDigest)
	add(&hv.artifactDigest, bundle.HeaderArtifactDigest, d.ArtifactDigest)
	add(&hv.releaseVersion, bundle.HeaderReleaseVersion, strconv.FormatInt(d.ReleaseVersion, 10))
	if len(d.Manifest) > 0 {
		add(&hv.validFrom, bundle.HeaderValidFrom, d.ValidFrom)
		add(&hv.refreshAfter, bundle.HeaderRefreshAfter, d.RefreshAfter)
		add(&hv.expiresAt, bundle.HeaderExpiresAt, d.ExpiresAt)
		add(&hv.keyID, bundle.HeaderManifestKeyID, d.ManifestKeyID)
		add(&hv.signature, bundle.HeaderManifestSignature, d.ManifestSignature)
	}
	// An exact-size copy: the builder's buffer has grown by doubling, and
	// a server holds one of these per identity.
	hv.wire = strings.Clone(b.String())
	for _, f := range fields {
		*f.dst = []string{hv.wire[f.start:f.end]}
	}
	return hv
}
