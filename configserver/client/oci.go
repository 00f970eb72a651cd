package client

import (
	"context"
	"errors"
	"fmt"
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
// trusted public key. Everything else is checked here.
type OCIArtifact struct {
	Ref               string            // <repository>@sha256:<hex> the manifest was pulled by
	LayerDigest       string            // digest of the values.yml layer descriptor
	Values            []byte            // the layer's bytes as pulled
	Annotations       map[string]string // the image manifest's annotations
	SignatureVerified bool              // cosign signature over the manifest digest verified with a trusted key
}

// OCIPuller pulls a values artifact by digest and verifies its cosign
// signature. The registry package's client is adapted to it where the two
// are wired together (cmd/configpub).
type OCIPuller interface {
	PullVerified(ctx context.Context, ref string) (*OCIArtifact, error)
}

// LoadOCI pulls ref with p and applies it through ApplyOCI. A puller error
// that is a *VerificationError (the puller found a digest or signature
// failure) is REJECTED with its reason; any other pull failure is
// UNAVAILABLE.
func (c *Client) LoadOCI(ctx context.Context, p OCIPuller, ref string) (*Evidence, error) {
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
	return c.ApplyOCI(ctx, a)
}

// ApplyOCI runs the verification checks that apply to an artifact without a
// delivery manifest: a verified cosign signature, the layer digest recomputed
// from the bytes, strict parse, envelope identity/audience/schema,
// contentDigest, every annotation equal to the envelope, the envelope's
// validity window with skew, and a revocation epoch not lower than seen.
// Then the snapshot becomes current (in memory only: an OCI-sourced snapshot
// has no signed delivery manifest to re-verify later, so it is not written
// as last-known-good). Its lease is the envelope's.
func (c *Client) ApplyOCI(ctx context.Context, a *OCIArtifact) (*Evidence, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	ev := c.newEvidence(SourceOCI, now)
	if err := ctx.Err(); err != nil {
		return c.finish(ev, &UnavailableError{Reason: ReasonUnreachable, Err: err})
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
	if seen := c.seen.floor().RevocationEpoch; env.RevocationEpoch < seen {
		return reject(ReasonRevocationRegression, "runtimePolicy.revocationEpoch", "epoch %d < seen %d", env.RevocationEpoch, seen)
	}
	w, err := parseWindow("runtimePolicy", env.ValidFrom, env.RefreshAfter, env.ExpiresAt)
	if err != nil {
		return err
	}
	if err := c.checkWindow("runtimePolicy", w, env.ValidFrom, env.ExpiresAt, now); err != nil {
		return err
	}
	snap := &Snapshot{
		Values: a.Values, Envelope: *env, Namespace: doc.Namespace, Settings: doc.Settings,
		SnapshotID: sid, PublicationID: env.PublicationID, PolicyDigest: env.PolicyDigest,
		ContentDigest: env.ContentDigest, ArtifactDigest: digest, Source: SourceOCI,
		VerifiedAt: now, RefreshAfter: w.RefreshAfter, ExpiresAt: w.ExpiresAt,
	}
	ev.fromSnapshot(snap)
	if cur := c.current(); cur != nil && cur.ArtifactDigest == digest && cur.Source == SourceOCI {
		ev.Outcome, ev.Reason = OutcomeUnchanged, ReasonNotModified
		return nil
	}
	c.publish(snap, now)
	ev.Outcome, ev.Reason = OutcomeApplied, ReasonNewSnapshot
	return nil
}
