package registry

import (
	"fmt"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/jcs"
)

// ArtifactOf maps a compiled target to its values artifact. The manifest is
// stamped with the envelope's createdAt (the snapshot's), so an unchanged
// snapshot re-publishes to the same manifest digest.
func ArtifactOf(t *compiler.Target) (Artifact, error) {
	created, err := time.Parse(time.RFC3339, t.Envelope.CreatedAt)
	if err != nil {
		return Artifact{}, fmt.Errorf("%w target %s/%s/%s: envelope createdAt %q: %w", ErrInvalid, t.EnvTag, t.Host, t.ServiceID, t.Envelope.CreatedAt, err)
	}
	return Artifact{
		Host: t.Host, ServiceID: t.ServiceID, EnvTag: t.EnvTag, Audience: t.Audience,
		SnapshotID: t.SnapshotID, PublicationID: t.PublicationID,
		PolicyDigest: t.PolicyDigest, ContentDigest: t.ContentDigest, ArtifactDigest: t.ArtifactDigest,
		ReleaseVersion: t.ReleaseVersion, CreatedAt: created, Values: t.Values,
	}, nil
}

// ReleaseOf maps a release manifest to the release artifact: the manifest
// as RFC 8785 JSON, stamped with its createdAt.
func ReleaseOf(m *bundle.Manifest) (*Release, error) {
	b, err := jcs.Canonical(m)
	if err != nil {
		return nil, fmt.Errorf("release manifest %s/%d as JCS: %w", m.EnvTag, m.ReleaseVersion, err)
	}
	created, err := time.Parse(time.RFC3339, m.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("%w release manifest %s/%d: createdAt %q: %w", ErrInvalid, m.EnvTag, m.ReleaseVersion, m.CreatedAt, err)
	}
	return &Release{EnvTag: m.EnvTag, ReleaseVersion: m.ReleaseVersion, Manifest: b, CreatedAt: created}, nil
}

// ArtifactsOf maps a compile result to what a publication pushes: one values
// artifact per target, in the result's order, and the release artifact.
func ArtifactsOf(res *compiler.Result) ([]Artifact, *Release, error) {
	arts := make([]Artifact, 0, len(res.Targets))
	for i := range res.Targets {
		a, err := ArtifactOf(&res.Targets[i])
		if err != nil {
			return nil, nil, err
		}
		arts = append(arts, a)
	}
	rel, err := ReleaseOf(res.Manifest)
	if err != nil {
		return nil, nil, err
	}
	return arts, rel, nil
}
