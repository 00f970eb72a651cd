// Package ocipull connects the runtime client to an OCI registry: Puller
// implements client.OCIPuller with the registry package, so a Go runtime
// that loads its values artifact by digest (client.LoadOCI) needs no
// adapter of its own. It is a separate package so that runtimes using only
// the Config Server do not carry the registry's dependencies.
package ocipull

import (
	"context"
	"errors"
	"fmt"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/registry"
)

// Puller pulls a values artifact by digest and verifies it: the layer
// digest, a cosign signature by one of Keys over this manifest digest, the
// artifact's place in its own repository, and the identity annotations. It
// also reads the delivery manifests attached to the artifact as OCI
// referrers (registry.DeliveryManifestArtifactType) and hands over up to
// eight whose signature verifies with one of ManifestKeys, newest first,
// for the client to verify again: without one the client never applies the
// artifact.
//
// ManifestKeys are required: PullVerified refuses a Puller without them
// (ErrNoManifestKeys) before any request. Anyone who can push to the
// artifact's repository can attach referrers of the delivery-manifest type
// with any (unsigned) sequence annotation, so a Puller that chose by the
// annotations alone handed over the eight newest junk referrers and never
// the genuine manifest, and the runtime failed closed. With the keys, a
// referrer naming an untrusted key is skipped unread and one whose
// signature does not verify is skipped after reading, before any is chosen
// (registry.DeliveryManifestOptions).
type Puller struct {
	Registry *registry.Client
	Keys     []client.TrustedKey // trusted cosign public keys (client.ParseTrustedKeys); rotated apart from the client's manifest keys
	// ManifestKeys are the client's trusted delivery-manifest keys
	// (client.Options.TrustedKeys); required.
	ManifestKeys []client.TrustedKey
	Identity     bundle.Identity // the runtime's; empty fields are not checked
}

// ErrNoManifestKeys is PullVerified's error for a Puller without
// ManifestKeys: it cannot tell the genuine delivery manifests from junk
// referrers anyone with push access can attach.
var ErrNoManifestKeys = errors.New("ocipull: Puller.ManifestKeys is empty; set it to the client's trusted delivery-manifest keys (client.Options.TrustedKeys): without them junk referrers crowd out the genuine delivery manifests")

var _ client.OCIPuller = (*Puller)(nil)

// PullVerified implements client.OCIPuller. The artifact's Date is the
// registry's latest answer's Date header (zero from a registry.Storage).
// The registry's refusals
// (digest, signature, identity, malformed manifest) become
// *client.VerificationError with the matching reason, so LoadOCI records
// them as REJECTED; any other failure is returned as is (UNAVAILABLE).
//
// A Puller without ManifestKeys fails with ErrNoManifestKeys (UNAVAILABLE
// for LoadOCI: the last-known-good stays current) before any request.
func (p *Puller) PullVerified(ctx context.Context, ref string) (*client.OCIArtifact, error) {
	if len(p.ManifestKeys) == 0 {
		return nil, fmt.Errorf("pull %s: %w", ref, ErrNoManifestKeys)
	}
	ctx, date := registry.WithServerDate(ctx)
	v, err := p.Registry.Verify(ctx, ref, registry.VerifyOptions{Keys: p.Keys, Identity: &p.Identity})
	if err != nil {
		if reason := reasonOf(err); reason != "" {
			return nil, &client.VerificationError{Reason: reason, Err: err}
		}
		return nil, err
	}
	a := &client.OCIArtifact{
		Ref: v.Ref(), LayerDigest: v.Layer.Digest.String(), Values: v.Content,
		Annotations: v.Manifest.Annotations, SignatureVerified: v.KeyID != "",
	}
	ms, err := p.Registry.DeliveryManifests(ctx, v.Ref(), registry.DeliveryManifestOptions{Keys: p.ManifestKeys})
	if err != nil && !errors.Is(err, registry.ErrNotFound) {
		return nil, err
	}
	for _, m := range ms {
		a.Manifests = append(a.Manifests, client.SignedManifest{Bytes: m.Manifest, Signature: m.Signature, KeyID: m.KeyID})
	}
	a.Date = date.Time()
	return a, nil
}

// reasonOf maps a registry verification failure to the client's reason;
// "" for a failure that is not a verdict on the artifact.
func reasonOf(err error) client.Reason {
	switch {
	case errors.Is(err, registry.ErrDigestMismatch):
		return client.ReasonDigestMismatch
	case errors.Is(err, registry.ErrSignature):
		// The artifact's cosign signature, not a delivery manifest's
		// (SIGNATURE_INVALID): the two key sets rotate apart.
		return client.ReasonUnsignedArtifact
	case errors.Is(err, registry.ErrIdentity):
		return client.ReasonIdentityMismatch
	case errors.Is(err, registry.ErrInvalid):
		return client.ReasonManifestInvalid
	}
	return ""
}
