// Package ocipull connects the runtime client to an OCI registry: Puller
// implements client.OCIPuller with the registry package, so a Go runtime
// that loads its values artifact by digest (client.LoadOCI) needs no
// adapter of its own. It is a separate package so that runtimes using only
// the Config Server do not carry the registry's dependencies.
package ocipull

import (
	"context"
	"errors"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/registry"
)

// Puller pulls a values artifact by digest with a registry.Client and
// verifies it: the layer digest, a cosign signature by one of Keys over
// this manifest digest, and the identity annotations. It also reads the
// signed delivery manifests attached to the artifact as OCI referrers
// (registry.DeliveryManifestArtifactType), newest first, those signed by
// one of ManifestKeys, for the client to verify: without one the client
// never applies the artifact.
type Puller struct {
	Registry *registry.Client
	Keys     []client.TrustedKey // trusted cosign public keys (client.ParseTrustedKeys); rotated apart from the client's manifest keys
	// ManifestKeys are the client's trusted delivery-manifest keys
	// (Options.TrustedKeys). Set, only referrers signed by one of them are
	// handed over: anyone who can push to the repository can attach
	// referrers, and without them eight junk referrers with higher
	// (unsigned) sequence annotations crowd out the genuine manifest.
	// Empty, the newest eight by their annotations are handed over.
	ManifestKeys []client.TrustedKey
	Identity     bundle.Identity // the runtime's; empty fields are not checked
}

var _ client.OCIPuller = (*Puller)(nil)

// PullVerified implements client.OCIPuller. The artifact's Date is the
// registry's latest answer's Date header (zero from a registry.Storage).
// The registry's refusals
// (digest, signature, identity, malformed manifest) become
// *client.VerificationError with the matching reason, so LoadOCI records
// them as REJECTED; any other failure is returned as is (UNAVAILABLE).
func (p *Puller) PullVerified(ctx context.Context, ref string) (*client.OCIArtifact, error) {
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
