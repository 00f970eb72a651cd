package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry"
)

// Pulled is an artifact fetched by digest with its layer digest checked.
type Pulled struct {
	Repository    string // "registry[:port]/path"
	Digest        string // manifest digest "sha256:<hex>"
	Manifest      ocispec.Manifest
	ManifestBytes []byte
	Layer         ocispec.Descriptor
	Content       []byte // the layer: values.yml, or the release manifest JSON
}

// Ref returns "<repository>@<digest>".
func (p *Pulled) Ref() string { return p.Repository + "@" + p.Digest }

// ParseRef splits "registry[:port]/path[:tag]@sha256:<hex>" into the
// repository and the digest. A reference without a digest is refused:
// pull and verify work by digest only.
func ParseRef(ref string) (repository string, dgst digest.Digest, err error) {
	r, err := registry.ParseReference(ref)
	if err != nil {
		return "", "", fmt.Errorf("%w reference %q: %w; want REPOSITORY@sha256:<hex>, as publish prints it", ErrInvalid, ref, err)
	}
	d, err := r.Digest()
	if err != nil {
		return "", "", fmt.Errorf("%w reference %q: want REPOSITORY@sha256:<hex>, as publish prints it", ErrInvalid, ref)
	}
	return r.Registry + "/" + r.Repository, d, nil
}

// Pull fetches the manifest at ref (REPOSITORY@DIGEST) and its single
// layer, checking both against their digests. A digest mismatch is a
// *VerificationError wrapping ErrDigestMismatch; a missing manifest or blob
// wraps ErrNotFound.
func (c *Client) Pull(ctx context.Context, ref string) (*Pulled, error) {
	repoName, dgst, err := ParseRef(ref)
	if err != nil {
		return nil, fmt.Errorf("pull: %w", err)
	}
	repo, err := c.repository(ctx, repoName)
	if err != nil {
		return nil, fmt.Errorf("pull: %w", err)
	}
	p, err := pull(ctx, repo, dgst)
	var ve *VerificationError
	if errors.As(err, &ve) {
		return nil, fmt.Errorf("pull %w", err)
	}
	return p, err
}

func pull(ctx context.Context, repo *repo, dgst digest.Digest) (*Pulled, error) {
	repoName := repo.name
	verr := func(sentinel error, format string, args ...any) error {
		return &VerificationError{Ref: repoName, Digest: dgst.String(), Reason: fmt.Sprintf(format, args...), Err: sentinel}
	}
	desc, rc, err := repo.fetchReference(ctx, dgst.String())
	if err != nil {
		if errors.Is(err, errdef.ErrNotFound) {
			return nil, verr(ErrNotFound, "manifest not found")
		}
		return nil, fmt.Errorf("pull %s@%s: %w", repoName, dgst, err)
	}
	desc.Digest = dgst // check against what we asked for, not what the registry said
	mb, err := readVerified(rc, desc, maxManifestBytes)
	rc.Close()
	if err != nil {
		var mm *mismatch
		if errors.As(err, &mm) {
			return nil, verr(ErrDigestMismatch, "manifest %s", mm.pair())
		}
		return nil, fmt.Errorf("pull %s@%s: %w", repoName, dgst, err)
	}
	var m ocispec.Manifest
	if err := json.Unmarshal(mb, &m); err != nil {
		return nil, verr(ErrInvalid, "manifest is not JSON: %v", err)
	}
	if m.MediaType != ocispec.MediaTypeImageManifest || len(m.Layers) != 1 {
		return nil, verr(ErrInvalid, "want an OCI image manifest with one layer, got mediaType %q with %d layers", m.MediaType, len(m.Layers))
	}
	layer := m.Layers[0]
	brc, err := repo.Fetch(ctx, layer)
	if err != nil {
		switch {
		case errors.Is(err, errdef.ErrNotFound):
			return nil, verr(ErrNotFound, "layer %s not found", layer.Digest)
		case strings.Contains(err.Error(), "mismatch Content-Length"):
			// oras-go reports a stored blob of the wrong size this way.
			return nil, verr(ErrDigestMismatch, "layer %s: registry returned a different size than the manifest's %d bytes", layer.Digest, layer.Size)
		}
		return nil, fmt.Errorf("pull %s@%s: layer %s: %w", repoName, dgst, layer.Digest, err)
	}
	content, err := readVerified(brc, layer, layerLimit(layer.MediaType))
	brc.Close()
	if err != nil {
		var mm *mismatch
		if errors.As(err, &mm) {
			return nil, verr(ErrDigestMismatch, "layer %s", mm.pair())
		}
		return nil, fmt.Errorf("pull %s@%s: %w", repoName, dgst, err)
	}
	return &Pulled{Repository: repoName, Digest: dgst.String(), Manifest: m, ManifestBytes: mb, Layer: layer, Content: content}, nil
}
