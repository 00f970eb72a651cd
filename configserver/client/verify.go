package client

import (
	"bytes"
	"errors"
	"strconv"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/jcs"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/signing"
)

// candidate is a configuration to verify: the exact values.yml bytes and the
// signed delivery manifest that vouches for them.
type candidate struct {
	values         []byte
	artifactDigest string // sha256 of values, recomputed by the caller
	manifestBytes  []byte
	signature      string
	keyID          string
	// phase is the manifest phase required: "" (the current configuration;
	// loads, last-known-good, OCI, historical snapshots) or
	// bundle.PhaseCandidate (Prefetch).
	phase string
}

// verified is the outcome of a successful verification.
type verified struct {
	snap     *Snapshot
	manifest *bundle.DeliveryManifest
	issuedAt time.Time
	keyID    string
}

// signed is a delivery manifest whose signature verified with a trusted key
// and that passed every check needing no body: identity and audience,
// regression against what was seen, and the lease.
type signed struct {
	manifest *bundle.DeliveryManifest
	issuedAt time.Time
	lease    window
}

// verifyCandidate runs every check that does not depend on the transport,
// cheapest and body-free first: the manifest signature, its identity,
// replay and epoch rules and lease (checkSigned), then, only for a body the
// signed manifest vouches for, the strict parse, envelope, contentDigest and
// activation window (checkBody). ev is filled with what is learned on the
// way, so that even a rejection names the snapshot and digests involved.
func (c *Client) verifyCandidate(cand candidate, now time.Time, floor seenState, ev *Evidence) (*verified, error) {
	sm, err := c.checkSigned(cand, now, floor, ev)
	if err != nil {
		return nil, err
	}
	return c.checkBody(cand, sm, now, ev)
}

// checkSigned verifies the manifest signature with the trusted key the key
// id names, parses the manifest and checks it against the configured
// identity, the seen floor and the clock. It never looks at the body.
func (c *Client) checkSigned(cand candidate, now time.Time, floor seenState, ev *Evidence) (*signed, error) {
	m, err := c.verifyManifest(cand)
	if err != nil {
		return nil, err
	}
	ev.fromManifest(m)
	if m.Phase != cand.phase {
		return nil, reject(ReasonManifestPhase, "manifest.phase", "phase %q, want %q", m.Phase, cand.phase)
	}
	if err := c.checkManifestIdentity(m); err != nil {
		return nil, err
	}
	lease, err := parseWindow("manifest", m.ValidFrom, m.RefreshAfter, m.ExpiresAt)
	if err != nil {
		err.(*VerificationError).Reason = ReasonManifestInvalid
		return nil, err
	}
	issued, err := parseTime("manifest.issuedAt", m.IssuedAt)
	if err != nil {
		err.(*VerificationError).Reason = ReasonManifestInvalid
		return nil, err
	}
	if err := checkRegression(m, issued, jcs.BytesDigest(cand.manifestBytes), floor); err != nil {
		return nil, err
	}
	if err := c.checkWindow("manifest", lease, m.ValidFrom, m.ExpiresAt, now); err != nil {
		return nil, err
	}
	return &signed{manifest: m, issuedAt: issued, lease: lease}, nil
}

// checkBody verifies the body against a signed manifest: the digest the
// manifest signs first, then the strict parse, the envelope, contentDigest,
// every manifest field against the envelope and the activation window.
func (c *Client) checkBody(cand candidate, sm *signed, now time.Time, ev *Evidence) (*verified, error) {
	m := sm.manifest
	ev.ArtifactDigest = cand.artifactDigest
	if m.ArtifactDigest != cand.artifactDigest {
		return nil, reject(ReasonManifestMismatch, "manifest.artifactDigest", "manifest %q != body %q", m.ArtifactDigest, cand.artifactDigest)
	}
	doc, err := c.verifyDocument(cand.values, ev)
	if err != nil {
		return nil, err
	}
	env := &doc.Envelope
	ev.fromManifest(m)
	if err := compareManifest(m, env); err != nil {
		return nil, err
	}
	if err := checkPropertySet(m, doc); err != nil {
		return nil, err
	}
	envWin, err := parseWindow("runtimePolicy", env.ValidFrom, env.RefreshAfter, env.ExpiresAt)
	if err != nil {
		return nil, err
	}
	refresh, expires := sm.lease.RefreshAfter, sm.lease.ExpiresAt
	if err := c.checkActivation(m, envWin, env, now); err != nil {
		return nil, err
	}
	if m.ActivatedAt == "" {
		// A manifest signed before activatedAt existed: the envelope
		// window is checked against the clock and bounds the lease, as
		// it did then.
		refresh, expires = earliest(refresh, envWin.RefreshAfter), earliest(expires, envWin.ExpiresAt)
	}
	snap := &Snapshot{
		Values:         cand.values,
		Envelope:       *env,
		Namespace:      doc.Namespace,
		Settings:       doc.Settings,
		Manifest:       m,
		ManifestBytes:  cand.manifestBytes,
		Signature:      cand.signature,
		KeyID:          cand.keyID,
		SnapshotID:     m.SnapshotID,
		PublicationID:  m.PublicationID,
		PolicyDigest:   m.PolicyDigest,
		ContentDigest:  m.ContentDigest,
		ArtifactDigest: cand.artifactDigest,
		VerifiedAt:     now,
		RefreshAfter:   refresh,
		ExpiresAt:      expires,
	}
	return &verified{snap: snap, manifest: m, issuedAt: sm.issuedAt, keyID: cand.keyID}, nil
}

// checkActivation requires the manifest's activatedAt (the time of the
// pointer move) to lie inside the envelope's activation window, validFrom
// <= activatedAt < expiresAt. The runtime's own clock plays no part: an
// activated snapshot runs for as long as its signed lease is renewed. A
// manifest without activatedAt (signed before it existed) has the envelope
// window checked against the clock instead.
func (c *Client) checkActivation(m *bundle.DeliveryManifest, envWin window, env *bundle.RuntimePolicy, now time.Time) error {
	if m.ActivatedAt == "" {
		return c.checkWindow("runtimePolicy", envWin, env.ValidFrom, env.ExpiresAt, now)
	}
	at, err := parseTime("manifest.activatedAt", m.ActivatedAt)
	if err != nil {
		err.(*VerificationError).Reason = ReasonManifestInvalid
		return err
	}
	if at.Before(envWin.ValidFrom) || !at.Before(envWin.ExpiresAt) {
		return reject(ReasonOutsideActivationWindow, "manifest.activatedAt",
			"activated at %s, outside the snapshot's activation window [%s, %s) of release %d",
			m.ActivatedAt, env.ValidFrom, env.ExpiresAt, env.ReleaseVersion)
	}
	return nil
}

// verifyDocument parses values.yml strictly, checks the envelope against the
// configured identity and audience and recomputes contentDigest.
func (c *Client) verifyDocument(values []byte, ev *Evidence) (*document, error) {
	doc, err := parseValues(values, c.opts.Audience)
	if err != nil {
		return nil, err
	}
	env := &doc.Envelope
	ev.fromEnvelope(env)
	if err := c.checkEnvelopeIdentity(env); err != nil {
		return nil, err
	}
	cd, err := render.Digest(doc.namespace)
	if err != nil {
		return nil, &VerificationError{Reason: ReasonInvalidField, Field: bundle.Namespace(c.opts.Audience), Err: err}
	}
	if cd != env.ContentDigest {
		return nil, reject(ReasonContentDigestMismatch, "runtimePolicy.contentDigest", "envelope %s != recomputed %s", env.ContentDigest, cd)
	}
	return doc, nil
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func (c *Client) checkEnvelopeIdentity(env *bundle.RuntimePolicy) error {
	return c.checkIdentity("runtimePolicy", "envelope", bundle.Identity{Host: env.Host, ServiceID: env.ServiceID, EnvTag: env.EnvTag}, env.Audience)
}

// checkIdentity requires got and audience to be the configured identity and
// audience; prefix names the fields ("runtimePolicy", "manifest"), what the
// side they come from.
func (c *Client) checkIdentity(prefix, what string, got bundle.Identity, audience string) error {
	id := c.opts.Identity
	for _, f := range []struct{ name, got, want string }{
		{"host", got.Host, id.Host},
		{"serviceId", got.ServiceID, id.ServiceID},
		{"envTag", got.EnvTag, id.EnvTag},
	} {
		if f.got != f.want {
			return reject(ReasonIdentityMismatch, prefix+"."+f.name, "%s %q != requested %q", what, f.got, f.want)
		}
	}
	if audience != c.opts.Audience {
		return reject(ReasonAudienceMismatch, prefix+".audience", "%s %q != configured %q", what, audience, c.opts.Audience)
	}
	return nil
}

// verifyManifest checks the signature over the exact manifest bytes with the
// trusted key the key id names, then parses the manifest strictly.
func (c *Client) verifyManifest(cand candidate) (*bundle.DeliveryManifest, error) {
	trusted := c.trustedKeys()
	var key *signing.TrustedKey
	for i := range trusted {
		if trusted[i].ID == cand.keyID {
			key = &trusted[i]
			break
		}
	}
	if key == nil {
		return nil, reject(ReasonUntrustedKey, HeaderManifestKeyID, "key %s is not among the %d trusted keys", cand.keyID, len(trusted))
	}
	if _, err := signing.VerifyBlob([]signing.TrustedKey{*key}, cand.manifestBytes, cand.signature, key.ID); err != nil {
		return nil, &VerificationError{Reason: ReasonSignatureInvalid, Field: HeaderManifestSignature, Err: err}
	}
	m, err := bundle.ParseDeliveryManifest(cand.manifestBytes)
	if err != nil {
		return nil, &VerificationError{Reason: ReasonManifestInvalid, Field: HeaderManifest, Err: err}
	}
	return m, nil
}

// checkManifestIdentity requires the signed manifest to name the configured
// identity and audience, and a snapshot id, before any body is read.
func (c *Client) checkManifestIdentity(m *bundle.DeliveryManifest) error {
	if err := c.checkIdentity("manifest", "manifest", m.Identity(), m.Audience); err != nil {
		return err
	}
	if !isUUID(m.SnapshotID) {
		return reject(ReasonManifestInvalid, "manifest.snapshotId", "%q is not a lowercase UUID", m.SnapshotID)
	}
	return nil
}

// compareManifest requires every field the signed manifest shares with the
// envelope to be equal, except the revocation epoch: the manifest's is
// authoritative and may only be at least the envelope's (the minimum the
// snapshot was compiled for).
func compareManifest(m *bundle.DeliveryManifest, env *bundle.RuntimePolicy) error {
	pairs := []struct {
		name     string
		got, env string
	}{
		{"host", m.Host, env.Host},
		{"serviceId", m.ServiceID, env.ServiceID},
		{"envTag", m.EnvTag, env.EnvTag},
		{"audience", m.Audience, env.Audience},
		{"publicationId", m.PublicationID, env.PublicationID},
		{"policySnapshotId", m.PolicySnapshotID, env.PolicySnapshotID},
		{"releaseVersion", strconv.FormatInt(m.ReleaseVersion, 10), strconv.FormatInt(env.ReleaseVersion, 10)},
		{"policyDigest", m.PolicyDigest, env.PolicyDigest},
		{"contentDigest", m.ContentDigest, env.ContentDigest},
		{"schemaVersion", strconv.Itoa(m.SchemaVersion), strconv.Itoa(env.SchemaVersion)},
		{"compatibilityGeneration", strconv.FormatInt(m.CompatibilityGeneration, 10), strconv.FormatInt(env.CompatibilityGeneration, 10)},
	}
	for _, p := range pairs {
		if p.got != p.env {
			return reject(ReasonManifestMismatch, "manifest."+p.name, "manifest %q != runtimePolicy %q", p.got, p.env)
		}
	}
	if m.RevocationEpoch < env.RevocationEpoch {
		return reject(ReasonEpochBelowEnvelope, "manifest.revocationEpoch", "manifest epoch %d < envelope epoch %d", m.RevocationEpoch, env.RevocationEpoch)
	}
	return nil
}

// checkPropertySet recomputes propertySetDigest — SHA-256 over the RFC 8785
// form of the settings properties, every top-level key besides the envelope
// and the namespace — and requires the signed manifest's. The envelope does
// not carry it; a manifest without one (signed before it was recorded) has
// nothing to compare.
func checkPropertySet(m *bundle.DeliveryManifest, doc *document) error {
	if m.PropertySetDigest == "" {
		return nil
	}
	d, err := render.Digest(doc.props)
	if err != nil {
		return &VerificationError{Reason: ReasonInvalidField, Field: "values.yml", Err: err}
	}
	if d != m.PropertySetDigest {
		return reject(ReasonPropertySetMismatch, "manifest.propertySetDigest", "manifest %s != recomputed %s", m.PropertySetDigest, d)
	}
	return nil
}

// checkRegression refuses a revocation epoch, or a (sequence, issuedAt)
// pair, lower than one already seen. A different manifest at exactly the
// seen position is refused too: the signer never issues two.
func checkRegression(m *bundle.DeliveryManifest, issued time.Time, mdigest string, seen seenState) error {
	if m.RevocationEpoch < seen.RevocationEpoch {
		return reject(ReasonRevocationRegression, "manifest.revocationEpoch", "epoch %d < seen %d", m.RevocationEpoch, seen.RevocationEpoch)
	}
	switch {
	case m.Sequence < seen.Sequence:
		return reject(ReasonSequenceRegression, "manifest.sequence", "sequence %d < seen %d (replayed manifest)", m.Sequence, seen.Sequence)
	case m.Sequence == seen.Sequence && issued.Before(seen.IssuedAt):
		return reject(ReasonSequenceRegression, "manifest.issuedAt", "sequence %d issuedAt %s < seen %s (replayed renewal)", m.Sequence, m.IssuedAt, seen.IssuedAt.Format(time.RFC3339))
	case m.Sequence == seen.Sequence && issued.Equal(seen.IssuedAt) && seen.ManifestDigest != "" && mdigest != seen.ManifestDigest:
		return reject(ReasonSequenceRegression, "manifest.sequence", "a different manifest %s for seen sequence %d issuedAt %s (%s)", mdigest, m.Sequence, m.IssuedAt, seen.ManifestDigest)
	}
	return nil
}

// checkWindow requires validFrom - skew <= now < expiresAt + skew.
func (c *Client) checkWindow(prefix string, w window, from, expires string, now time.Time) error {
	skew := c.opts.Skew
	if now.Before(w.ValidFrom.Add(-skew)) {
		ve := reject(ReasonNotYetValid, prefix+".validFrom", "validFrom %s is after now %s (skew %s)", from, now.UTC().Format(time.RFC3339), skew)
		ve.validFrom = w.ValidFrom
		return ve
	}
	if !now.Before(w.ExpiresAt.Add(skew)) {
		ve := reject(ReasonExpired, prefix+".expiresAt", "expiresAt %s is not after now %s (skew %s)", expires, now.UTC().Format(time.RFC3339), skew)
		ve.expiresAt = w.ExpiresAt
		return ve
	}
	return nil
}

// isUUID accepts the lowercase 8-4-4-4-12 hex form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch i {
		case 8, 13, 18, 23:
			if ch != '-' {
				return false
			}
		default:
			if !('0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'f') {
				return false
			}
		}
	}
	return true
}

// sameAs reports whether v carries exactly the bytes and manifest of s.
func (v *verified) sameAs(s *Snapshot) bool {
	return s != nil && s.ArtifactDigest == v.snap.ArtifactDigest && bytes.Equal(s.ManifestBytes, v.snap.ManifestBytes)
}

// reasonOf extracts the stable reason and field of a verification error.
func reasonOf(err error) (Reason, string) {
	var ve *VerificationError
	if errors.As(err, &ve) {
		return ve.Reason, ve.Field
	}
	var ue *UnavailableError
	if errors.As(err, &ue) {
		return ue.Reason, ""
	}
	return "", ""
}
