package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2/content"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/signing"
)

// VerifyOptions say what a verified artifact must satisfy.
type VerifyOptions struct {
	// Keys are the trusted public keys (several during rotation); a
	// signature by any one of them is accepted. Required.
	Keys []signing.TrustedKey
	// Identity, when set, must match the artifact's host, service-id and
	// env-tag annotations (empty fields are not checked). A release
	// artifact never matches an identity.
	Identity *bundle.Identity
}

// Verified is a pulled artifact whose layer digest, signature and identity
// were checked.
type Verified struct {
	Pulled
	// Artifact holds the fields read from a values artifact's annotations
	// (Values is the layer); zero for a release artifact.
	Artifact Artifact
	// KeyID names the trusted key that verified the signature.
	KeyID string
}

// Verify pulls ref (REPOSITORY@DIGEST), checks the layer digest, that a
// cosign signature by a trusted key over a payload naming this very
// manifest digest exists at sha256-<hex>.sig, that the artifact sits in
// its own repository by the OCI layout (the repository path ends with the
// envTag, host and serviceId its annotations name, or with
// "<envTag>/release" for a release artifact; any prefix), and that the
// annotations name the expected identity. Failures are *VerificationError wrapping
// ErrDigestMismatch, ErrSignature, ErrIdentity, ErrNotFound or ErrInvalid.
func (c *Client) Verify(ctx context.Context, ref string, opts VerifyOptions) (v *Verified, err error) {
	defer func() {
		var ve *VerificationError
		if errors.As(err, &ve) {
			v, err = nil, fmt.Errorf("verify %w", err)
		}
	}()
	repoName, dgst, err := ParseRef(ref)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	if len(opts.Keys) == 0 {
		return nil, fmt.Errorf("verify %s: %w: no trusted keys", ref, ErrInvalid)
	}
	repo, err := c.repository(ctx, repoName)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	p, err := pull(ctx, repo, dgst)
	if err != nil {
		return nil, err
	}
	verr := func(sentinel error, format string, args ...any) error {
		return &VerificationError{Ref: repoName, Digest: dgst.String(), Reason: fmt.Sprintf(format, args...), Err: sentinel}
	}
	v = &Verified{Pulled: *p}
	switch p.Manifest.ArtifactType {
	case ValuesArtifactType:
		if p.Layer.MediaType != ValuesLayerType {
			return nil, verr(ErrInvalid, "layer media type %q, want %q", p.Layer.MediaType, ValuesLayerType)
		}
		a, err := artifactFromAnnotations(p.Manifest.Annotations)
		if err != nil {
			return nil, verr(ErrInvalid, "%v", err)
		}
		a.ArtifactDigest, a.Values = p.Layer.Digest.String(), p.Content
		v.Artifact = a
	case ReleaseArtifactType:
	default:
		return nil, verr(ErrInvalid, "artifactType %q is not a configpub artifact", p.Manifest.ArtifactType)
	}

	man, err := fetchSignatureManifest(ctx, repo, SignatureTag(dgst), false)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, verr(ErrUnsigned, "no signature at tag %s", SignatureTag(dgst))
		}
		return nil, fmt.Errorf("verify %s@%s: %w", repoName, dgst, err)
	}
	keyID, reason, err := checkSignatures(ctx, repo, man, dgst, opts.Keys)
	if err != nil {
		return nil, fmt.Errorf("verify %s@%s: %w", repoName, dgst, err)
	}
	if keyID == "" {
		return nil, verr(ErrSignature, "%s", reason)
	}
	v.KeyID = keyID

	if reason := misplaced(repoName, p.Manifest.ArtifactType, p.Manifest.Annotations); reason != "" {
		return nil, verr(ErrIdentity, "%s", reason)
	}
	if id := opts.Identity; id != nil {
		if p.Manifest.ArtifactType != ValuesArtifactType {
			return nil, verr(ErrIdentity, "a release artifact does not belong to target %s/%s/%s", id.EnvTag, id.Host, id.ServiceID)
		}
		for _, f := range []struct{ key, want, got string }{
			{bundle.AnnotationHost, id.Host, v.Artifact.Host},
			{bundle.AnnotationServiceID, id.ServiceID, v.Artifact.ServiceID},
			{bundle.AnnotationEnvTag, id.EnvTag, v.Artifact.EnvTag},
		} {
			if f.want != "" && f.want != f.got {
				return nil, verr(ErrIdentity, "annotation %s is %q, want %q", f.key, f.got, f.want)
			}
		}
	}
	return v, nil
}

// misplaced returns why an artifact of artifactType with annotations ann
// does not belong in repository repoName by the OCI layout publish writes
// (Repository: "<prefix>/<envTag>/<host>/<serviceId>"; ReleaseRepository:
// "<prefix>/<envTag>/release"), or "" when it does. The prefix is not
// checked: a mirror may use another. A validly signed artifact copied into
// another target's (or environment's) repository is refused here, whether
// or not the caller names an identity to expect.
func misplaced(repoName, artifactType string, ann map[string]string) string {
	type field struct{ key, what string }
	var fields []field
	var layout string
	switch artifactType {
	case ValuesArtifactType:
		layout = "<prefix>/<envTag>/<host>/<serviceId>"
		fields = []field{{bundle.AnnotationEnvTag, "envTag"}, {bundle.AnnotationHost, "host"}, {bundle.AnnotationServiceID, "serviceId"}}
	case ReleaseArtifactType:
		layout = "<prefix>/<envTag>/" + ReleaseRepositoryName
		fields = []field{{bundle.AnnotationEnvTag, "envTag"}, {"", ReleaseRepositoryName}}
	default:
		return ""
	}
	parts := strings.Split(repoName, "/")[1:] // the registry host is not a path component
	if len(parts) < len(fields) {
		return fmt.Sprintf("repository %s has %d path components, the layout %s wants at least %d", repoName, len(parts), layout, len(fields))
	}
	parts = parts[len(parts)-len(fields):]
	var diffs []string
	for i, f := range fields {
		want := f.what // the fixed component
		if f.key != "" {
			want = ann[f.key]
		}
		if parts[i] == want {
			continue
		}
		if f.key == "" {
			diffs = append(diffs, fmt.Sprintf("its last path component is %q, want %q", parts[i], want))
			continue
		}
		diffs = append(diffs, fmt.Sprintf("annotation %s is %q, the repository's %s component is %q", f.key, want, f.what, parts[i]))
	}
	if len(diffs) == 0 {
		return ""
	}
	return fmt.Sprintf("the artifact is not in its own repository (%s): %s; an artifact copied into another target's repository is refused", layout, strings.Join(diffs, "; "))
}

// checkSignatures returns the id of a trusted key whose signature covers a
// payload naming dgst. Otherwise it returns "" and the most telling reason:
// a payload naming another digest (a copied signature) outranks a
// signature no trusted key made.
func checkSignatures(ctx context.Context, repo content.Fetcher, man *ocispec.Manifest, dgst digest.Digest, keys []signing.TrustedKey) (string, string, error) {
	reason := "signature manifest has no " + SimpleSigningMediaType + " layer"
	copied := false
	for _, l := range man.Layers {
		if l.MediaType != SimpleSigningMediaType {
			continue
		}
		sig := l.Annotations[SignatureAnnotation]
		if sig == "" {
			if !copied {
				reason = "signature layer " + l.Digest.String() + " has no " + SignatureAnnotation + " annotation"
			}
			continue
		}
		if l.Size > maxManifestBytes {
			continue
		}
		rc, err := repo.Fetch(ctx, l)
		if err != nil {
			return "", "", fmt.Errorf("fetch signature payload %s: %w", l.Digest, err)
		}
		pl, err := readVerified(rc, l, maxManifestBytes)
		rc.Close()
		if err != nil {
			if !copied {
				reason = "signature payload " + l.Digest.String() + ": " + err.Error()
			}
			continue
		}
		keyID, err := signing.VerifyBlob(keys, pl, sig, "")
		if err != nil {
			if !copied {
				reason = "no trusted key verifies the signature over payload " + l.Digest.String()
			}
			continue
		}
		var sp payload.SimpleContainerImage
		if err := json.Unmarshal(pl, &sp); err != nil || sp.Critical.Type != payload.CosignSignatureType {
			if !copied {
				reason = "signature payload " + l.Digest.String() + " is not a cosign simple-signing payload"
			}
			continue
		}
		if got := sp.Critical.Image.DockerManifestDigest; got != dgst.String() {
			copied = true
			reason = fmt.Sprintf("signature (key %s) names manifest %s, not %s: it belongs to another artifact", keyID, got, dgst)
			continue
		}
		return keyID, "", nil
	}
	return "", reason, nil
}

func artifactFromAnnotations(ann map[string]string) (Artifact, error) {
	rv, err := strconv.ParseInt(ann[bundle.AnnotationReleaseVersion], 10, 64)
	if err != nil {
		return Artifact{}, fmt.Errorf("annotation %s %q is not an integer", bundle.AnnotationReleaseVersion, ann[bundle.AnnotationReleaseVersion])
	}
	var created time.Time
	if s := ann[ocispec.AnnotationCreated]; s != "" {
		if created, err = time.Parse(time.RFC3339, s); err != nil {
			return Artifact{}, fmt.Errorf("annotation %s %q is not RFC 3339", ocispec.AnnotationCreated, s)
		}
	}
	return Artifact{
		Host: ann[bundle.AnnotationHost], ServiceID: ann[bundle.AnnotationServiceID], EnvTag: ann[bundle.AnnotationEnvTag],
		Audience: ann[bundle.AnnotationAudience], SnapshotID: ann[bundle.AnnotationSnapshotID],
		PublicationID: ann[bundle.AnnotationPublicationID], PolicyDigest: ann[bundle.AnnotationPolicyDigest],
		ContentDigest: ann[bundle.AnnotationContentDigest], ReleaseVersion: rv, CreatedAt: created,
	}, nil
}
