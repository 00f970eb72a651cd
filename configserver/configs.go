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

// ignoredParams are accepted for compatibility and never influence selection
// (DESIGN §7); configPhase is an optional content selector with a single
// phase per identity today.
var ignoredParams = map[string]bool{
	"productId": true, "productVersion": true, "apiId": true, "apiVersion": true, "configPhase": true,
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
	ctx, cancel := h.storeContext(r)
	defer cancel()
	d, err := h.store.Current(ctx, id)
	if err != nil {
		return storeError(err)
	}
	return h.writeDelivery(w, r, rl, claims, d)
}

// requestedIdentity parses the query and checks it against the claims. host
// is required; an omitted serviceId or envTag is taken from the claims.
// Every mismatch gives the same 403, decided before any store lookup.
func requestedIdentity(rawQuery string, c *auth.Claims) (bundle.Identity, *httpError) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return bundle.Identity{}, errBadRequest("query string is malformed")
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return bundle.Identity{}, errBadRequest("query parameter " + safeName(k) + " given more than once")
		}
		if len(vs[0]) > maxQueryValue {
			return bundle.Identity{}, errBadRequest("query parameter " + safeName(k) + " is too long")
		}
	}
	id := bundle.Identity{Host: q.Get("host"), ServiceID: q.Get("serviceId"), EnvTag: q.Get("envTag")}
	if id.Host == "" {
		return bundle.Identity{}, errBadRequest("query parameter host is required")
	}
	if !q.Has("serviceId") {
		id.ServiceID = c.ServiceID
	}
	if !q.Has("envTag") {
		id.EnvTag = c.EnvTag
	}
	if id != c.Identity() {
		return bundle.Identity{}, errForbidden("requested identity differs from the token's")
	}
	return id, nil
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
// 304 or HEAD answer with every DESIGN §7 header.
func (h *handler) writeDelivery(w http.ResponseWriter, r *http.Request, rl *reqLog, c *auth.Claims, d *Delivery) *httpError {
	if d.Identity != c.Identity() {
		return errForbidden("store answered for another identity")
	}
	if d.Audience != c.ConfigAudience {
		return errForbidden("snapshot audience differs from the token's config_audience")
	}
	rl.snapshotID = d.SnapshotID
	etag := `"` + d.ArtifactDigest + `"`
	hdr := w.Header()
	hdr["Etag"] = []string{etag}
	hdr["Cache-Control"] = []string{"private, no-cache"}
	hdr["Vary"] = []string{"Authorization"}
	hdr["X-Content-Type-Options"] = []string{"nosniff"}
	if rd, ok := reprDigest(d.ArtifactDigest); ok {
		hdr["Repr-Digest"] = []string{rd}
	}
	hdr["X-Config-Snapshot-Id"] = []string{d.SnapshotID}
	hdr["X-Policy-Publication-Id"] = []string{d.PublicationID}
	hdr["X-Policy-Digest"] = []string{d.PolicyDigest}
	hdr["X-Content-Digest"] = []string{d.ContentDigest}
	hdr["X-Artifact-Digest"] = []string{d.ArtifactDigest}
	hdr["X-Config-Release-Version"] = []string{strconv.FormatInt(d.ReleaseVersion, 10)}
	if len(d.Manifest) > 0 {
		hdr["X-Config-Valid-From"] = []string{d.ValidFrom}
		hdr["X-Config-Refresh-After"] = []string{d.RefreshAfter}
		hdr["X-Config-Expires-At"] = []string{d.ExpiresAt}
		hdr["X-Config-Manifest"] = []string{base64.RawURLEncoding.EncodeToString(d.Manifest)}
		hdr["X-Manifest-Key-Id"] = []string{d.ManifestKeyID}
		hdr["X-Manifest-Signature"] = []string{d.ManifestSignature}
	}
	if ifNoneMatch(r.Header["If-None-Match"], etag) {
		w.WriteHeader(http.StatusNotModified)
		rl.notModified = true
		return nil
	}
	hdr["Content-Type"] = []string{"application/yaml"}
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

// ifNoneMatch reports whether any If-None-Match field matches etag: "*", or
// a list member equal to it under the weak comparison RFC 9110 §13.1.2
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
