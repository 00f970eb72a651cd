package registry

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/configpub/configpub/bundle"
)

// Media and artifact types.
const (
	ValuesArtifactType  = "application/vnd.configpub.values.v1+yaml"
	ValuesLayerType     = "application/yaml"
	ValuesTitle         = "values.yml"
	ReleaseArtifactType = "application/vnd.configpub.release.v1+json"
	ReleaseLayerType    = "application/vnd.configpub.release.v1+json"
	ReleaseTitle        = "release.json"
)

// ReleaseRepositoryName is the last path component of the release
// artifact's repository: "<prefix>/<envTag>/release". Target repositories
// have two components after envTag, so the names cannot collide.
const ReleaseRepositoryName = "release"

// Artifact is one target snapshot (the cross-package contract).
type Artifact struct {
	Host, ServiceID, EnvTag, Audience                      string
	SnapshotID, PublicationID, PolicyDigest, ContentDigest string
	ArtifactDigest                                         string // "sha256:<hex>" of Values
	ReleaseVersion                                         int64
	CreatedAt                                              time.Time // -> org.opencontainers.image.created
	Values                                                 []byte    // exact values.yml bytes
}

// Release is the release artifact: the release manifest as JCS JSON.
type Release struct {
	EnvTag         string
	ReleaseVersion int64
	Manifest       []byte    // JCS JSON bytes of the release manifest
	CreatedAt      time.Time // optional; zero omits org.opencontainers.image.created
	// ManifestDigest and ManifestSize name Manifest's bytes without
	// holding them: a Release with these set and Manifest nil can be
	// looked up (Client.Published) but not published. A large release's
	// document is tens of megabytes; a look-up needs only its digest.
	ManifestDigest digest.Digest
	ManifestSize   int64
}

// Repository returns "<prefix>/<envTag>/<host>/<serviceId>"; prefix is
// "registry[:port][/path]".
func Repository(prefix string, a Artifact) string {
	return strings.TrimSuffix(prefix, "/") + "/" + a.EnvTag + "/" + a.Host + "/" + a.ServiceID
}

// ReleaseRepository returns "<prefix>/<envTag>/release".
func ReleaseRepository(prefix, envTag string) string {
	return strings.TrimSuffix(prefix, "/") + "/" + envTag + "/" + ReleaseRepositoryName
}

// Tag returns "r<releaseVersion>".
func Tag(releaseVersion int64) string { return "r" + strconv.FormatInt(releaseVersion, 10) }

// SignatureTag returns cosign's signature tag for a manifest digest:
// "sha256-<hex>.sig".
func SignatureTag(d digest.Digest) string {
	return d.Algorithm().String() + "-" + d.Encoded() + ".sig"
}

// pathComponent is the OCI distribution-spec repository path component.
var pathComponent = regexp.MustCompile(`^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$`)

// packed is a fully built artifact: its blobs and manifest bytes.
type packed struct {
	repository string
	tag        string
	kind       string // KindValues or KindRelease
	layer      ocispec.Descriptor
	layerData  []byte
	manifest   ocispec.Descriptor
	manifestB  []byte
}

func (a Artifact) validate() error {
	for _, f := range []struct{ name, v string }{
		{"envTag", a.EnvTag}, {"host", a.Host}, {"serviceId", a.ServiceID},
	} {
		if !pathComponent.MatchString(f.v) {
			return fmt.Errorf("%w artifact %s/%s/%s: %s %q is not a valid OCI repository path component", ErrInvalid, a.EnvTag, a.Host, a.ServiceID, f.name, f.v)
		}
	}
	if a.Audience == "" || a.SnapshotID == "" {
		return fmt.Errorf("%w artifact %s/%s/%s: audience and snapshotId are required", ErrInvalid, a.EnvTag, a.Host, a.ServiceID)
	}
	if a.ReleaseVersion < 1 {
		return fmt.Errorf("%w artifact %s/%s/%s: releaseVersion %d is not positive", ErrInvalid, a.EnvTag, a.Host, a.ServiceID, a.ReleaseVersion)
	}
	if a.CreatedAt.IsZero() {
		return fmt.Errorf("%w artifact %s/%s/%s: createdAt is zero (the manifest must be deterministic)", ErrInvalid, a.EnvTag, a.Host, a.ServiceID)
	}
	got := digest.FromBytes(a.Values).String()
	if a.ArtifactDigest != got {
		return fmt.Errorf("%w: artifact %s/%s/%s: artifactDigest %s, values.yml hashes to %s", ErrDigestMismatch, a.EnvTag, a.Host, a.ServiceID, a.ArtifactDigest, got)
	}
	return nil
}

// Annotations returns the manifest annotations of a, including a
// deterministic org.opencontainers.image.created.
func (a Artifact) Annotations() map[string]string {
	return map[string]string{
		bundle.AnnotationHost:           a.Host,
		bundle.AnnotationServiceID:      a.ServiceID,
		bundle.AnnotationEnvTag:         a.EnvTag,
		bundle.AnnotationAudience:       a.Audience,
		bundle.AnnotationSnapshotID:     a.SnapshotID,
		bundle.AnnotationPublicationID:  a.PublicationID,
		bundle.AnnotationPolicyDigest:   a.PolicyDigest,
		bundle.AnnotationContentDigest:  a.ContentDigest,
		bundle.AnnotationReleaseVersion: strconv.FormatInt(a.ReleaseVersion, 10),
		ocispec.AnnotationCreated:       a.CreatedAt.UTC().Format(time.RFC3339),
	}
}

// ManifestDigest returns the digest the manifest of a will have once
// published, computed without any I/O.
func ManifestDigest(a Artifact) (digest.Digest, error) {
	p, err := packArtifact("", a)
	if err != nil {
		return "", err
	}
	return p.manifest.Digest, nil
}

func packArtifact(prefix string, a Artifact) (*packed, error) {
	if err := a.validate(); err != nil {
		return nil, err
	}
	layer := ocispec.Descriptor{
		MediaType:   ValuesLayerType,
		Digest:      digest.Digest(a.ArtifactDigest),
		Size:        int64(len(a.Values)),
		Annotations: map[string]string{ocispec.AnnotationTitle: ValuesTitle},
	}
	return pack(Repository(prefix, a), Tag(a.ReleaseVersion), KindValues, ValuesArtifactType, layer, a.Values, a.Annotations())
}

func packRelease(prefix string, r Release) (*packed, error) {
	if !pathComponent.MatchString(r.EnvTag) {
		return nil, fmt.Errorf("%w release: envTag %q is not a valid OCI repository path component", ErrInvalid, r.EnvTag)
	}
	if r.ReleaseVersion < 1 {
		return nil, fmt.Errorf("%w release %s: releaseVersion %d is not positive", ErrInvalid, r.EnvTag, r.ReleaseVersion)
	}
	layer := ocispec.Descriptor{
		MediaType:   ReleaseLayerType,
		Digest:      r.ManifestDigest,
		Size:        r.ManifestSize,
		Annotations: map[string]string{ocispec.AnnotationTitle: ReleaseTitle},
	}
	switch {
	case r.Manifest != nil:
		if !json.Valid(r.Manifest) {
			return nil, fmt.Errorf("%w release %s r%d: manifest is not JSON", ErrInvalid, r.EnvTag, r.ReleaseVersion)
		}
		layer.Digest, layer.Size = digest.FromBytes(r.Manifest), int64(len(r.Manifest))
		if r.ManifestDigest != "" && (r.ManifestDigest != layer.Digest || r.ManifestSize != layer.Size) {
			return nil, fmt.Errorf("%w release %s r%d: manifest digest %s (%d bytes) given, its bytes are %s (%d bytes)",
				ErrInvalid, r.EnvTag, r.ReleaseVersion, r.ManifestDigest, r.ManifestSize, layer.Digest, layer.Size)
		}
	case r.ManifestDigest.Validate() != nil || r.ManifestDigest.Algorithm() != digest.SHA256 || r.ManifestSize <= 0:
		return nil, fmt.Errorf("%w release %s r%d: no manifest, and no sha256 digest and size of one", ErrInvalid, r.EnvTag, r.ReleaseVersion)
	}
	ann := map[string]string{
		bundle.AnnotationEnvTag:         r.EnvTag,
		bundle.AnnotationReleaseVersion: strconv.FormatInt(r.ReleaseVersion, 10),
	}
	if !r.CreatedAt.IsZero() {
		ann[ocispec.AnnotationCreated] = r.CreatedAt.UTC().Format(time.RFC3339)
	}
	return pack(ReleaseRepository(prefix, r.EnvTag), Tag(r.ReleaseVersion), KindRelease, ReleaseArtifactType, layer, r.Manifest, ann)
}

// emptyConfig is the OCI 1.1 empty config descriptor, without inline data.
var emptyConfig = ocispec.Descriptor{
	MediaType: ocispec.MediaTypeEmptyJSON,
	Digest:    ocispec.DescriptorEmptyJSON.Digest,
	Size:      ocispec.DescriptorEmptyJSON.Size,
}

var emptyConfigData = []byte("{}")

func pack(repo, tag, kind, artifactType string, layer ocispec.Descriptor, data []byte, ann map[string]string) (*packed, error) {
	m := ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: artifactType,
		Config:       emptyConfig,
		Layers:       []ocispec.Descriptor{layer},
		Annotations:  ann,
	}
	b, err := json.Marshal(m) // struct field order and sorted map keys: deterministic
	if err != nil {
		return nil, fmt.Errorf("pack %s:%s: %w", repo, tag, err)
	}
	return &packed{
		repository: repo,
		tag:        tag,
		kind:       kind,
		layer:      layer,
		layerData:  data,
		manifest:   manifestDescriptor(b),
		manifestB:  b,
	}, nil
}

func manifestDescriptor(b []byte) ocispec.Descriptor {
	sum := sha256.Sum256(b)
	return ocispec.Descriptor{
		MediaType: ocispec.MediaTypeImageManifest,
		Digest:    digest.NewDigestFromBytes(digest.SHA256, sum[:]),
		Size:      int64(len(b)),
	}
}
