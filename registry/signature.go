package registry

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"oras.land/oras-go/v2/errdef"

	"github.com/configpub/configpub/internal/signing"
)

// cosign's signature layout.
const (
	SimpleSigningMediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	SignatureAnnotation    = "dev.cosignproject.cosign/signature"
)

// maxManifestBytes bounds manifests and signature payloads read from a
// registry.
const maxManifestBytes = 4 << 20

// SignaturePayload returns cosign's simple-signing payload for the
// manifest dgst in repository: {"critical":{"identity":{"docker-reference":
// repository},"image":{"docker-manifest-digest":dgst},"type":"cosign
// container image signature"},"optional":null}.
func SignaturePayload(repository string, dgst digest.Digest) ([]byte, error) {
	ref, err := name.NewDigest(repository + "@" + dgst.String())
	if err != nil {
		return nil, fmt.Errorf("%w signature payload for %s@%s: %w", ErrInvalid, repository, dgst, err)
	}
	b, err := payload.Cosign{Image: ref}.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("signature payload for %s@%s: %w", repository, dgst, err)
	}
	return b, nil
}

// ensureSignature makes sure the signature manifest at sha256-<hex>.sig
// holds a signature by signer over the payload for dgst. Signatures by
// other keys already there are kept (key rotation). It returns the bytes
// uploaded (0 when a matching signature was present). With recheck, a
// matching signature whose payload blob is missing has the payload pushed
// again.
func ensureSignature(ctx context.Context, repo *repo, dgst digest.Digest, signer crypto.Signer, recheck bool) (int64, error) {
	pl, err := SignaturePayload(repo.name, dgst)
	if err != nil {
		return 0, err
	}
	pub, ok := signer.Public().(*ecdsa.PublicKey)
	if !ok {
		return 0, fmt.Errorf("%w: signer key is %T, want ECDSA P-256", ErrInvalid, signer.Public())
	}
	trusted, err := signing.NewTrustedKey(pub)
	if err != nil {
		return 0, err
	}
	plDesc := ocispec.Descriptor{MediaType: SimpleSigningMediaType, Digest: digest.FromBytes(pl), Size: int64(len(pl))}
	tag := SignatureTag(dgst)

	existing, err := fetchSignatureManifest(ctx, repo, tag, true)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return 0, err
	}
	var layers []ocispec.Descriptor
	if existing != nil {
		for _, l := range existing.Layers {
			if l.Digest == plDesc.Digest && l.Size == plDesc.Size {
				if _, err := signing.VerifyBlob([]signing.TrustedKey{trusted}, pl, l.Annotations[SignatureAnnotation], ""); err == nil {
					if !recheck {
						return 0, nil // already signed by this key
					}
					up, err := pushBlob(ctx, repo, plDesc, pl)
					if err != nil || !up {
						return 0, err
					}
					return plDesc.Size, nil
				}
			}
		}
		layers = existing.Layers
	}
	sig, err := signing.SignBlob(signer, pl)
	if err != nil {
		return 0, err
	}
	l := plDesc
	l.Annotations = map[string]string{SignatureAnnotation: sig}
	m := ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    emptyConfig,
		Layers:    append(append([]ocispec.Descriptor(nil), layers...), l),
	}
	mb, err := json.Marshal(m)
	if err != nil {
		return 0, fmt.Errorf("signature manifest: %w", err)
	}
	// The empty config is already in this repository: publishOne pushed it
	// for the artifact manifest, or that manifest, which the registry
	// accepted, references it.
	//
	// The payload names this manifest digest in this repository, so no
	// other artifact shares it: when no signature manifest exists yet it
	// is uploaded without asking first (at worst a payload left by a
	// publish interrupted between the two requests is stored again).
	var n int64
	if existing == nil {
		if err := repo.uploadBlob(ctx, plDesc, pl); err != nil {
			return 0, err
		}
		n += plDesc.Size
	} else {
		up, err := pushBlob(ctx, repo, plDesc, pl)
		if err != nil {
			return 0, err
		}
		if up {
			n += plDesc.Size
		}
	}
	md := manifestDescriptor(mb)
	if err := repo.pushReference(ctx, md, mb, tag); err != nil {
		return n, fmt.Errorf("push signature %s: %w", tag, err)
	}
	return n + md.Size, nil
}

// Sign adds signer's cosign signature to the artifact at ref
// (REPOSITORY@DIGEST), next to the signatures already there, unless one by
// that key is among them: what publishing does for each artifact it
// pushes, for one published before under another key (after a key
// rotation every unchanged target's artifact carries the old key's only).
// The artifact must exist. It reports whether a signature was added.
func (c *Client) Sign(ctx context.Context, ref string, signer crypto.Signer) (bool, error) {
	repoName, dgst, err := ParseRef(ref)
	if err != nil {
		return false, fmt.Errorf("sign: %w", err)
	}
	repo, err := c.repository(ctx, repoName)
	if err != nil {
		return false, fmt.Errorf("sign %s: %w", ref, err)
	}
	if _, err := repo.Resolve(ctx, dgst.String()); err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return false, fmt.Errorf("sign %s: %w", ref, ErrNotFound)
		}
		return false, fmt.Errorf("sign %s: %w", ref, err)
	}
	n, err := ensureSignature(ctx, repo, dgst, signer, false)
	if err != nil {
		return false, fmt.Errorf("sign %s: %w", ref, err)
	}
	return n > 0, nil
}

// fetchSignatureManifest GETs the manifest at a signature tag (one
// request) and checks its digest against the one the registry reports.
// With headFirst it asks with a HEAD first and GETs by digest only when the
// tag exists: a 404 to a HEAD has no body, so the keep-alive connection
// survives it (oras-go closes a 404's body unread, which costs the
// connection); publishing, where the signature is usually absent, uses it.
func fetchSignatureManifest(ctx context.Context, repo *repo, tag string, headFirst bool) (*ocispec.Manifest, error) {
	ref := tag
	if headFirst {
		d, err := repo.Resolve(ctx, tag)
		if err != nil {
			if errors.Is(err, errdef.ErrNotFound) {
				return nil, fmt.Errorf("signature %s: %w", tag, ErrNotFound)
			}
			return nil, fmt.Errorf("resolve signature %s: %w", tag, err)
		}
		ref = d.Digest.String()
	}
	desc, rc, err := repo.fetchReference(ctx, ref)
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return nil, fmt.Errorf("signature %s: %w", tag, ErrNotFound)
		}
		return nil, fmt.Errorf("fetch signature %s: %w", tag, err)
	}
	defer rc.Close()
	b, err := readVerified(rc, desc, maxManifestBytes)
	if err != nil {
		return nil, fmt.Errorf("signature %s: %w", tag, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("signature %s: %w: not an OCI manifest: %w", tag, ErrInvalid, err)
	}
	return &m, nil
}

// maxLayerBytes bounds a values artifact's layer read from a registry;
// maxReleaseLayerBytes the release artifact's, which holds a whole release
// (about 69 MB at 100,000 targets), as much as configpub reads of a release
// from Git history.
const (
	maxLayerBytes        = 64 << 20
	maxReleaseLayerBytes = 1 << 30
)

// layerLimit is the bound for a layer of the given media type.
func layerLimit(mediaType string) int64 {
	if mediaType == ReleaseLayerType {
		return maxReleaseLayerBytes
	}
	return maxLayerBytes
}

// readVerified reads exactly desc.Size bytes (at most limit) from r and
// checks that they hash to desc.Digest.
func readVerified(r io.Reader, desc ocispec.Descriptor, limit int64) ([]byte, error) {
	if desc.Size < 0 || desc.Size > limit {
		return nil, fmt.Errorf("%w: %s: size %d out of range", ErrInvalid, desc.Digest, desc.Size)
	}
	b, err := io.ReadAll(io.LimitReader(r, desc.Size+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", desc.Digest, err)
	}
	got := digest.FromBytes(b)
	if int64(len(b)) != desc.Size || got != desc.Digest {
		return nil, &mismatch{want: desc.Digest, got: got, wantSize: desc.Size, gotSize: int64(len(b))}
	}
	return b, nil
}

// mismatch is content that does not hash to (or is not the size of) the
// descriptor naming it; it wraps ErrDigestMismatch.
type mismatch struct {
	want, got         digest.Digest
	wantSize, gotSize int64
}

func (m *mismatch) Error() string {
	return fmt.Sprintf("%s (%d bytes) read back as %s (%d bytes): %v", m.want, m.wantSize, m.got, m.gotSize, ErrDigestMismatch)
}

func (m *mismatch) Unwrap() error { return ErrDigestMismatch }

// pair names the digest pair without the sentinel, for a reason.
func (m *mismatch) pair() string {
	return fmt.Sprintf("%s (%d bytes) read back as %s (%d bytes)", m.want, m.wantSize, m.got, m.gotSize)
}
