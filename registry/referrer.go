package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/errdef"
	orasreg "oras.land/oras-go/v2/registry"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/configpub/configpub/internal/signing"
)

// DeliveryManifestArtifactType is the artifactType (and layer media type)
// of a signed delivery manifest attached to a values artifact as an OCI
// referrer: an image manifest whose subject is the values artifact's
// manifest, with the OCI 1.1 empty config and one layer holding the exact
// canonical delivery-manifest JSON the promoter signed. The signature and
// key id travel in the annotations below; sequence and issuedAt are
// repeated there (unsigned: only for ordering before fetching) so that a
// runtime reads the newest first.
const DeliveryManifestArtifactType = "application/vnd.configpub.delivery-manifest.v1+json"

// Annotations of a delivery-manifest referrer.
const (
	AnnotationManifestSignature = "dev.configpub.manifest-signature" // base64 ECDSA P-256 signature over the layer bytes
	AnnotationManifestKeyID     = "dev.configpub.manifest-key-id"    // sha256: of the signing public key's DER
	AnnotationManifestSequence  = "dev.configpub.manifest-sequence"
	AnnotationManifestIssuedAt  = "dev.configpub.manifest-issued-at"
)

// maxReferrersRead bounds how many delivery-manifest referrers one
// DeliveryManifests call returns, and maxReferrersScan how many it reads
// (manifest and layer) to find them: anyone who can push to the repository
// can attach referrers, so a listing may hold thousands that are not the
// promoter's.
const (
	maxReferrersRead = 8
	maxReferrersScan = 32
)

// SignedDeliveryManifest is a delivery manifest with its signature, as the
// promoter stored it and the Config Server serves it.
type SignedDeliveryManifest struct {
	Manifest  []byte // canonical JSON bytes
	Signature string // base64 signature over Manifest
	KeyID     string // "sha256:<hex>" of the signing key
	Sequence  int64  // the manifest's sequence (ordering only)
	IssuedAt  string // the manifest's issuedAt, RFC 3339 (ordering only)
}

// AttachDeliveryManifest attaches m to the values artifact at ref
// (REPOSITORY@DIGEST) as an OCI referrer (see DeliveryManifestArtifactType)
// and returns the referrer's manifest digest. The referrer is a
// deterministic function of m and the subject, so attaching the same
// manifest again uploads nothing new. Registries without the referrers API
// get oras-go's referrers tag fallback.
func (c *Client) AttachDeliveryManifest(ctx context.Context, ref string, m SignedDeliveryManifest) (string, error) {
	at, err := c.AttachDeliveryManifestKeeping(ctx, ref, m, KeepOptions{})
	return at.Digest, err
}

// Attached is what AttachDeliveryManifestKeeping did.
type Attached struct {
	Digest string // the referrer's manifest digest
	Pruned int    // older delivery-manifest referrers removed
	// PruneErr says why the older referrers could not all be removed; the
	// manifest itself is attached.
	PruneErr error
}

// AttachDeliveryManifestKeeping attaches m as AttachDeliveryManifest does
// and then, with keep.Keep > 0, prunes the artifact's delivery-manifest
// referrers as PruneDeliveryManifests does, with the same repository and
// subject: no second look-up of the artifact, and the registry's referrers
// support already known. The referrer just attached is never removed and
// counts as one of those kept. A failed removal is Attached.PruneErr, not
// an error: the manifest is attached.
func (c *Client) AttachDeliveryManifestKeeping(ctx context.Context, ref string, m SignedDeliveryManifest, keep KeepOptions) (Attached, error) {
	repoName, dgst, err := ParseRef(ref)
	if err != nil {
		return Attached{}, fmt.Errorf("attach delivery manifest: %w", err)
	}
	if len(m.Manifest) == 0 || m.Signature == "" || m.KeyID == "" || m.IssuedAt == "" {
		return Attached{}, fmt.Errorf("attach delivery manifest to %s: %w: manifest, signature, key id and issuedAt are required", ref, ErrInvalid)
	}
	repo, err := c.repository(ctx, repoName)
	if err != nil {
		return Attached{}, fmt.Errorf("attach delivery manifest: %w", err)
	}
	subject, err := repo.Resolve(ctx, dgst.String())
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return Attached{}, fmt.Errorf("attach delivery manifest to %s: %w: artifact not found", ref, ErrNotFound)
		}
		return Attached{}, fmt.Errorf("attach delivery manifest to %s: %w", ref, err)
	}
	subject = ocispec.Descriptor{MediaType: subject.MediaType, Digest: dgst, Size: subject.Size}
	layer := ocispec.Descriptor{MediaType: DeliveryManifestArtifactType, Digest: digest.FromBytes(m.Manifest), Size: int64(len(m.Manifest))}
	man := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: DeliveryManifestArtifactType,
		Config:       emptyConfig,
		Layers:       []ocispec.Descriptor{layer},
		Subject:      &subject,
		Annotations: map[string]string{
			AnnotationManifestSignature: m.Signature,
			AnnotationManifestKeyID:     m.KeyID,
			AnnotationManifestSequence:  strconv.FormatInt(m.Sequence, 10),
			AnnotationManifestIssuedAt:  m.IssuedAt,
			ocispec.AnnotationCreated:   m.IssuedAt,
		},
	}
	b, err := json.Marshal(man)
	if err != nil {
		return Attached{}, fmt.Errorf("attach delivery manifest to %s: %w", ref, err)
	}
	desc := manifestDescriptor(b)
	desc.ArtifactType, desc.Annotations = man.ArtifactType, man.Annotations
	at := Attached{Digest: desc.Digest.String()}
	if ok, err := repo.Exists(ctx, desc); err == nil && ok {
		// Stored: attached before. Listed, or taken off the list by a
		// prune because a newer genuine manifest is listed (a registry
		// without deletes keeps the pruned manifest stored), it stays as
		// it is. Otherwise an attach was interrupted between pushing the
		// referrer and updating the tagged referrers index (no referrers
		// API): push it again, which lists it.
		done, err := listedOrSuperseded(ctx, repo, subject, desc.Digest, m, keep)
		if err != nil {
			return Attached{}, fmt.Errorf("attach delivery manifest to %s: %w", ref, err)
		}
		if done {
			return at, nil
		}
	}
	if _, err := pushBlob(ctx, repo, emptyConfig, emptyConfigData); err != nil {
		return Attached{}, fmt.Errorf("attach delivery manifest to %s: %w", ref, err)
	}
	if _, err := pushBlob(ctx, repo, layer, m.Manifest); err != nil {
		return Attached{}, fmt.Errorf("attach delivery manifest to %s: %w", ref, err)
	}
	if err := repo.Push(ctx, ocispec.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}, bytes.NewReader(b)); err != nil && !errors.Is(err, errdef.ErrAlreadyExists) && !indexCleanupOnly(err) {
		return Attached{}, fmt.Errorf("attach delivery manifest to %s: push referrer: %w", ref, err)
	}
	if keep.Keep > 0 {
		at.Pruned, at.PruneErr = prune(ctx, repo, subject, ref, keep, desc.Digest)
	}
	return at, nil
}

// listedOrSuperseded reports whether the referrer at dgst, a stored
// manifest carrying m, is among subject's listed referrers, or a listed
// referrer is newer than m: genuine by keep's Keys or Issued and newer by
// its signed sequence and issuedAt, or, when keep has neither, newer by its
// annotations. It reads at most maxPruneRead referrers.
func listedOrSuperseded(ctx context.Context, repo *repo, subject ocispec.Descriptor, dgst digest.Digest, m SignedDeliveryManifest, keep KeepOptions) (bool, error) {
	found, err := deliveryReferrers(ctx, repo, subject)
	if err != nil {
		return false, err
	}
	for _, d := range found {
		if d.Digest == dgst {
			return true, nil
		}
	}
	verify := len(keep.Keys) > 0 || keep.Issued != nil
	for i, d := range found {
		if i == maxPruneRead {
			break
		}
		seq, _ := strconv.ParseInt(d.Annotations[AnnotationManifestSequence], 10, 64)
		if !newer(seq, d.Annotations[AnnotationManifestIssuedAt], m.Sequence, m.IssuedAt) {
			break // newest first by the annotations: nothing further claims to be newer
		}
		if !verify {
			return true, nil
		}
		s, err := readDeliveryManifest(ctx, repo, d)
		if err != nil {
			continue
		}
		ok, err := isGenuine(ctx, keep, s)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		if seq, issued := signedOrder(s.Manifest); newer(seq, issued, m.Sequence, m.IssuedAt) {
			return true, nil
		}
	}
	return false, nil
}

// indexCleanupOnly reports whether err is only the failed deletion of the
// referrers index a push or delete replaced (registries without the
// referrers API keep the list in a tagged index): the referrer itself and
// the new index are in place, and a registry that does not allow deletes
// (Distribution's default) fails every such cleanup.
func indexCleanupOnly(err error) bool {
	var re *remote.ReferrersError
	return errors.As(err, &re) && re.IsReferrersIndexDelete()
}

// DeliveryManifestOptions say which delivery-manifest referrers
// DeliveryManifests returns. The zero value returns the newest by their
// (unsigned) annotations, verifying nothing.
type DeliveryManifestOptions struct {
	// Keys are the trusted delivery-manifest keys. When set, a referrer
	// whose key id annotation names none of them is skipped unread, and one
	// whose signature does not verify with the key it names is skipped
	// after reading: junk referrers anyone with push access can attach
	// never crowd out the genuine ones.
	Keys []signing.TrustedKey
}

// DeliveryManifests lists the delivery manifests attached to the values
// artifact at ref (REPOSITORY@DIGEST) as referrers and returns up to eight,
// newest first by their sequence and issuedAt annotations, each layer read
// against its digest. With opts.Keys it returns only those whose signature
// verifies with a trusted key, reading at most 32 referrers (those naming
// an untrusted key are not read) to find them. The runtime client checks
// each signature and every field again before using one. A repository that
// cannot list referrers yields ErrNotFound.
func (c *Client) DeliveryManifests(ctx context.Context, ref string, opts DeliveryManifestOptions) ([]SignedDeliveryManifest, error) {
	repoName, dgst, err := ParseRef(ref)
	if err != nil {
		return nil, fmt.Errorf("delivery manifests: %w", err)
	}
	repo, err := c.repository(ctx, repoName)
	if err != nil {
		return nil, fmt.Errorf("delivery manifests: %w", err)
	}
	subject, err := repo.Resolve(ctx, dgst.String())
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return nil, fmt.Errorf("delivery manifests of %s: %w: artifact not found", ref, ErrNotFound)
		}
		return nil, fmt.Errorf("delivery manifests of %s: %w", ref, err)
	}
	subject.Digest = dgst
	found, err := deliveryReferrers(ctx, repo, subject)
	if err != nil {
		return nil, fmt.Errorf("delivery manifests of %s: %w", ref, err)
	}
	out := make([]SignedDeliveryManifest, 0, min(len(found), maxReferrersRead))
	read := 0
	for _, d := range found {
		if len(out) == maxReferrersRead || read == maxReferrersScan {
			break
		}
		if len(opts.Keys) > 0 && !hasKey(opts.Keys, d.Annotations[AnnotationManifestKeyID]) {
			continue
		}
		read++
		s, err := readDeliveryManifest(ctx, repo, d)
		if err != nil {
			continue // a damaged referrer is skipped; the client needs one good one
		}
		if len(opts.Keys) > 0 {
			if _, err := signing.VerifyBlob(opts.Keys, s.Manifest, s.Signature, s.KeyID); err != nil {
				continue
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// deliveryReferrers lists subject's delivery-manifest referrers, newest
// first by their (unsigned) sequence and issuedAt annotations.
func deliveryReferrers(ctx context.Context, repo *repo, subject ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	refs, err := referrers(ctx, repo, subject)
	if err != nil {
		return nil, err
	}
	var found []ocispec.Descriptor
	for _, d := range refs {
		if d.ArtifactType == DeliveryManifestArtifactType && d.MediaType == ocispec.MediaTypeImageManifest {
			found = append(found, d)
		}
	}
	sort.SliceStable(found, func(i, j int) bool {
		a, b := found[i].Annotations, found[j].Annotations
		sa, _ := strconv.ParseInt(a[AnnotationManifestSequence], 10, 64)
		sb, _ := strconv.ParseInt(b[AnnotationManifestSequence], 10, 64)
		return newer(sa, a[AnnotationManifestIssuedAt], sb, b[AnnotationManifestIssuedAt])
	})
	return found, nil
}

// hasKey reports whether id names one of keys.
func hasKey(keys []signing.TrustedKey, id string) bool {
	for _, k := range keys {
		if k.ID == id {
			return true
		}
	}
	return false
}

// referrers lists the referrers of subject through the referrers API where
// the target has it, else through its content graph.
func referrers(ctx context.Context, repo *repo, subject ocispec.Descriptor) ([]ocispec.Descriptor, error) {
	if g, ok := repo.Target.(content.ReadOnlyGraphStorage); ok {
		return orasreg.Referrers(ctx, g, subject, DeliveryManifestArtifactType)
	}
	return nil, fmt.Errorf("%w: the repository cannot list referrers", ErrNotFound)
}

// errLayerMissing is readDeliveryManifest's error for a referrer whose
// manifest is stored and whose layer blob is not: it can never verify.
var errLayerMissing = errors.New("layer blob missing")

// readDeliveryManifest reads the referrer d, manifest and layer, each
// against its digest. A missing manifest is errdef.ErrNotFound (a
// concurrent prune), a missing layer errLayerMissing.
func readDeliveryManifest(ctx context.Context, repo *repo, d ocispec.Descriptor) (SignedDeliveryManifest, error) {
	if d.Size > maxManifestBytes {
		return SignedDeliveryManifest{}, fmt.Errorf("%w: referrer %s too large", ErrInvalid, d.Digest)
	}
	rc, err := repo.Fetch(ctx, d)
	if err != nil {
		return SignedDeliveryManifest{}, err
	}
	mb, err := readVerified(rc, d, maxManifestBytes)
	rc.Close()
	if err != nil {
		return SignedDeliveryManifest{}, err
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil || len(m.Layers) != 1 || m.Layers[0].MediaType != DeliveryManifestArtifactType || m.Layers[0].Size > maxManifestBytes {
		return SignedDeliveryManifest{}, fmt.Errorf("%w: referrer %s is not a delivery manifest", ErrInvalid, d.Digest)
	}
	lrc, err := repo.Fetch(ctx, m.Layers[0])
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			// The manifest is stored, its layer is not: it never heals
			// (a prune deletes manifests, never blobs).
			return SignedDeliveryManifest{}, fmt.Errorf("referrer %s: %w: layer %s: %v", d.Digest, errLayerMissing, m.Layers[0].Digest, err)
		}
		return SignedDeliveryManifest{}, err
	}
	lb, err := readVerified(lrc, m.Layers[0], maxManifestBytes)
	lrc.Close()
	if err != nil {
		return SignedDeliveryManifest{}, err
	}
	seq, _ := strconv.ParseInt(m.Annotations[AnnotationManifestSequence], 10, 64)
	return SignedDeliveryManifest{
		Manifest: lb, Signature: m.Annotations[AnnotationManifestSignature], KeyID: m.Annotations[AnnotationManifestKeyID],
		Sequence: seq, IssuedAt: m.Annotations[AnnotationManifestIssuedAt],
	}, nil
}
