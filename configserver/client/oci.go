package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/jcs"
)

// OCIArtifact is a values artifact pulled by digest from an OCI registry,
// as handed over by the puller. The puller is trusted for exactly two
// things: it fetched the image manifest by the digest in Ref (so Annotations
// and LayerDigest are the ones that digest names), and SignatureVerified
// reports that a cosign signature over that manifest digest verified with a
// trusted public key. Everything else is checked here, and the artifact is
// applied only together with one of Manifests: a signed delivery manifest
// for exactly these bytes (attached to the artifact in the registry as an
// OCI referrer, or the Config Server's current one).
type OCIArtifact struct {
	Ref               string            // <repository>@sha256:<hex> the manifest was pulled by
	LayerDigest       string            // digest of the values.yml layer descriptor
	Values            []byte            // the layer's bytes as pulled
	Annotations       map[string]string // the image manifest's annotations
	SignatureVerified bool              // cosign signature over the manifest digest verified with a trusted key
	Manifests         []SignedManifest  // candidate signed delivery manifests, unverified
	// Date is when the registry answered the pull, by its clock (its
	// answer's Date header; zero when unknown). Unsigned, it only names
	// this runtime's clock as the cause when a lease is refused by it
	// alone (CLOCK_SKEW), as a Config Server answer's Date does.
	Date time.Time

	dateFromServer bool // Date is the Config Server's (LoadOCI), not the registry's
}

// SignedManifest is a delivery manifest with its signature and key id, as
// the Config Server serves it (X-Config-Manifest, X-Manifest-Signature,
// X-Manifest-Key-Id) or a registry referrer carries it. Nothing about it is
// trusted until the client verifies it.
type SignedManifest struct {
	Bytes     []byte // exact canonical manifest bytes
	Signature string // base64 ECDSA P-256 signature over Bytes
	KeyID     string // "sha256:<hex>" of the signing public key's DER
}

// OCIPuller pulls a values artifact by digest and verifies its cosign
// signature; it also hands over the delivery manifests attached to it. The
// registry package's client is adapted to it in configserver/client/ocipull.
type OCIPuller interface {
	PullVerified(ctx context.Context, ref string) (*OCIArtifact, error)
}

// LoadOCI pulls ref with p and applies it through ApplyOCI. When the client
// has a ServerURL, the Config Server's current delivery manifest for the
// identity (HEAD /configs) is added to the candidates the puller found, so
// an artifact is applied when either source vouches for it. A puller error
// that is a *VerificationError (the puller found a digest or signature
// failure) is REJECTED with its reason; any other pull failure is
// UNAVAILABLE. As Load, the first call restores the last-known-good before
// pulling: a pull that fails, or is interrupted (the runtime told to stop
// during a slow pull), leaves it current until its lease ends.
func (c *Client) LoadOCI(ctx context.Context, p OCIPuller, ref string) (*Evidence, error) {
	c.mu.Lock()
	c.restoreOnce(ctx) // the last-known-good runs on through a registry outage
	c.mu.Unlock()
	a, err := p.PullVerified(ctx, ref)
	if err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		now := c.opts.Clock.Now()
		ev := c.newEvidence(SourceOCI, now)
		var ve *VerificationError
		if errors.As(err, &ve) {
			return c.finish(ev, &VerificationError{Reason: ve.Reason, Field: ref, Detail: ve.Detail, Err: ve.Err})
		}
		return c.finish(ev, &UnavailableError{Reason: ReasonUnreachable, Err: fmt.Errorf("pull %s: %w", ref, err)})
	}
	if c.opts.ServerURL != "" {
		if m, date, err := c.serverManifest(ctx); err == nil {
			a.Manifests = append(a.Manifests, *m)
			if !date.IsZero() {
				a.Date, a.dateFromServer = date, true // the Config Server's clock, as on a load
			}
		} else {
			c.opts.Logger.Debug("config load: no delivery manifest from the Config Server", "error", err)
		}
	}
	return c.ApplyOCI(ctx, a)
}

// ServerManifest asks the Config Server for the identity's current signed
// delivery manifest (HEAD /configs, no body) and returns it unverified.
func (c *Client) ServerManifest(ctx context.Context) (*SignedManifest, error) {
	m, _, err := c.serverManifest(ctx)
	return m, err
}

// serverManifest is ServerManifest with the answer's Date (zero when it
// has none).
func (c *Client) serverManifest(ctx context.Context) (*SignedManifest, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, c.configsURL, nil)
	if err != nil {
		return nil, time.Time{}, &UnavailableError{Reason: ReasonUnreachable, Err: err}
	}
	if err := c.authorize(ctx, req); err != nil {
		return nil, time.Time{}, &UnavailableError{Reason: ReasonTokenUnavailable, Err: err}
	}
	resp, err := c.do(req)
	if err != nil {
		return nil, time.Time{}, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, time.Time{}, &UnavailableError{Reason: ReasonUnexpectedStatus, Status: resp.StatusCode}
	}
	mb, sig, kid, err := manifestHeaders(resp.Header)
	if err != nil {
		return nil, time.Time{}, err
	}
	return &SignedManifest{Bytes: mb, Signature: sig, KeyID: kid}, dateOf(resp.Header), nil
}

// ApplyOCI verifies a pulled artifact and applies it only with a signed
// delivery manifest for it: a verified cosign signature, the layer digest
// recomputed from the bytes, every identity annotation equal to the
// envelope, and then, for the newest of a.Manifests that passes, every
// check of a Config Server load — manifest signature by a trusted key,
// identity and audience, replay and revocation epoch against the seen
// state, the signed lease against the clock, artifactDigest, strict parse,
// envelope, contentDigest, every manifest field and the activation window.
// An artifact without such a manifest is REJECTED with
// NO_DELIVERY_MANIFEST (a registry signature alone is never enough), an
// old artifact whose manifests are superseded fails their lease or replay
// check. An applied OCI snapshot advances the seen state and is persisted
// as last-known-good like a served one. As Load, the first call restores
// the last-known-good from CacheDir (re-verified) first, so that a refused
// artifact, or a registry that cannot be reached (LoadOCI), leaves a
// restarted runtime on it until its lease ends instead of failing closed.
func (c *Client) ApplyOCI(ctx context.Context, a *OCIArtifact) (*Evidence, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.restoreOnce(ctx)
	now := c.opts.Clock.Now()
	ev := c.newEvidence(SourceOCI, now)
	if err := ctx.Err(); err != nil {
		return c.finish(ev, &UnavailableError{Reason: ReasonUnreachable, Err: err})
	}
	if err := c.ensureSeen(); err != nil {
		return c.finish(ev, err)
	}
	return c.finish(ev, c.applyOCI(a, now, ev))
}

func (c *Client) applyOCI(a *OCIArtifact, now time.Time, ev *Evidence) error {
	if sid := a.Annotations[bundle.AnnotationSnapshotID]; isUUID(sid) {
		ev.SnapshotID = sid
	}
	if !a.SignatureVerified {
		return reject(ReasonUnsignedArtifact, a.Ref, "no verified cosign signature for the manifest")
	}
	if int64(len(a.Values)) > c.opts.MaxBodyBytes {
		return reject(ReasonBodyTooLarge, "layer", "layer exceeds the limit of %d bytes", c.opts.MaxBodyBytes)
	}
	digest := jcs.BytesDigest(a.Values)
	ev.ArtifactDigest = digest
	if digest != a.LayerDigest {
		return reject(ReasonDigestMismatch, "layer", "layer descriptor %s != recomputed %s", a.LayerDigest, digest)
	}
	doc, err := c.verifyDocument(a.Values, ev)
	if err != nil {
		return err
	}
	env := &doc.Envelope
	for _, p := range []struct{ key, want string }{
		{bundle.AnnotationHost, env.Host},
		{bundle.AnnotationServiceID, env.ServiceID},
		{bundle.AnnotationEnvTag, env.EnvTag},
		{bundle.AnnotationAudience, env.Audience},
		{bundle.AnnotationPublicationID, env.PublicationID},
		{bundle.AnnotationPolicyDigest, env.PolicyDigest},
		{bundle.AnnotationContentDigest, env.ContentDigest},
		{bundle.AnnotationReleaseVersion, strconv.FormatInt(env.ReleaseVersion, 10)},
	} {
		got, ok := a.Annotations[p.key]
		if !ok {
			return reject(ReasonMissingField, "annotation "+p.key, "annotation is absent")
		}
		if got != p.want {
			return reject(ReasonManifestMismatch, "annotation "+p.key, "annotation %q != runtimePolicy %q", got, p.want)
		}
	}
	sid := a.Annotations[bundle.AnnotationSnapshotID]
	if !isUUID(sid) {
		return reject(ReasonManifestMismatch, "annotation "+bundle.AnnotationSnapshotID, "%q is not a lowercase UUID", sid)
	}
	if len(a.Manifests) == 0 {
		return reject(ReasonNoDeliveryManifest, a.Ref, "no signed delivery manifest for the artifact, from the Config Server or attached in the registry: a registry signature alone is never applied")
	}
	// A verified manifest of another snapshot (the Config Server's current
	// one, or a referrer attached after a pointer moved) with a higher
	// sequence says the identity's pointer moved on from this artifact:
	// a runtime that has seen nothing yet (an empty cache) is refused it
	// all the same.
	var moved *bundle.DeliveryManifest
	for _, m := range a.Manifests {
		var scratch Evidence
		sm, err := c.checkSigned(candidate{manifestBytes: m.Bytes, signature: m.Signature, keyID: m.KeyID}, now, c.seen.floor(), &scratch)
		if err == nil && sm.manifest.SnapshotID != sid && (moved == nil || sm.manifest.Sequence > moved.Sequence) {
			moved = sm.manifest
		}
	}
	var firstErr error
	var firstEv Evidence
	for _, m := range newestFirst(a.Manifests) {
		try := *ev
		v, err := c.verifyCandidate(candidate{values: a.Values, artifactDigest: digest, manifestBytes: m.Bytes, signature: m.Signature, keyID: m.KeyID}, now, c.seen.floor(), &try)
		if err == nil && v.manifest.SnapshotID != sid {
			err = reject(ReasonManifestMismatch, "annotation "+bundle.AnnotationSnapshotID, "annotation %s != signed manifest %s", sid, v.manifest.SnapshotID)
		}
		if err == nil && moved != nil && moved.Sequence > v.manifest.Sequence {
			// The decisive reason, whatever was tried before.
			*ev = try
			return reject(ReasonSequenceRegression, "manifest.sequence", "the artifact's manifest (sequence %d) is superseded by a verified manifest of snapshot %s (sequence %d): its pointer moved on",
				v.manifest.Sequence, moved.SnapshotID, moved.Sequence)
		}
		if err == nil {
			*ev = try
			return c.accept(v, SourceOCI, now, ev)
		}
		if firstErr == nil {
			firstErr, firstEv = err, try
		}
	}
	// The snapshot refused is the artifact's, whichever manifest failed
	// (the newest may be the Config Server's, of another snapshot).
	*ev = firstEv
	ev.SnapshotID, ev.ArtifactDigest = sid, digest
	whose := "the registry's"
	if a.dateFromServer {
		whose = "the server's"
	}
	return c.clockSkewBy(firstErr, whose, a.Date, now)
}

// newestFirst orders candidate manifests by their (unverified) sequence and
// issuedAt, newest first; undecodable ones last.
func newestFirst(ms []SignedManifest) []SignedManifest {
	type keyed struct {
		m      SignedManifest
		seq    int64
		issued string
		ok     bool
	}
	ks := make([]keyed, len(ms))
	for i, m := range ms {
		ks[i].m = m
		if dm, err := bundle.ParseDeliveryManifest(m.Bytes); err == nil {
			ks[i].seq, ks[i].issued, ks[i].ok = dm.Sequence, dm.IssuedAt, true
		}
	}
	sort.SliceStable(ks, func(i, j int) bool {
		a, b := ks[i], ks[j]
		if a.ok != b.ok {
			return a.ok
		}
		if a.seq != b.seq {
			return a.seq > b.seq
		}
		ta, _ := time.Parse(time.RFC3339Nano, a.issued)
		tb, _ := time.Parse(time.RFC3339Nano, b.issued)
		return ta.After(tb)
	})
	out := make([]SignedManifest, len(ks))
	for i, k := range ks {
		out[i] = k.m
	}
	return out
}
