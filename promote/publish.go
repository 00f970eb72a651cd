package promote

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promote/review"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
	"github.com/configpub/configpub/registry/compiled"
	"golang.org/x/sync/errgroup"
)

// StaleManifestError reports a committed release manifest that is not what
// the sources at its commit compile to (else STALE, nothing changes).
// It matches promoter.ErrStale and compiler.ErrStale.
type StaleManifestError struct {
	Commit string // full hex commit hash
	EnvTag string
	Err    error // the compiler's error naming the first difference
}

func (e *StaleManifestError) Error() string {
	return fmt.Sprintf("promote %s@%s: %v", e.EnvTag, short(e.Commit), e.Err)
}

// Unwrap returns promoter.ErrStale and the compiler's error.
func (e *StaleManifestError) Unwrap() []error { return []error{promoter.ErrStale, e.Err} }

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// releaseInput maps a compile result and its review to the store input and
// the registry artifacts, target by target in the same order. The targets
// come from res.EachTarget: a result compiled ManifestOnly is compiled
// again host by host, and only what the store and the registry take of each
// target (its bytes and identity, digests, window and inputs) is kept.
func releaseInput(ctx context.Context, rev *review.Review, res *compiler.Result, env string) (promoter.ReleaseInput, []registry.Artifact, error) {
	m := res.Manifest
	in := promoter.ReleaseInput{
		CommandID:          CommandID(rev.Commit, env),
		EnvTag:             env,
		ReleaseVersion:     m.ReleaseVersion,
		BaseReleaseVersion: m.BaseReleaseVersion,
		ManifestBytes:      res.ManifestBytes,
		ReleaseDigest:      m.ReleaseDigest,
		SourceCommit:       rev.Commit,
		SourceRef:          rev.Ref,
		Actor:              rev.Author.String(),
		Reviewers:          rev.Reviewers,
		Reason:             rev.Subject,
		Targets:            make([]promoter.Target, 0, len(m.Targets)),
		Rollout:            res.Rollout,
	}
	artifacts := make([]registry.Artifact, 0, len(m.Targets))
	err := res.EachTarget(ctx, func(t *compiler.Target) error {
		e := &t.Envelope
		created, err := time.Parse(time.RFC3339, e.CreatedAt)
		if err != nil {
			return fmt.Errorf("promote %s: target %s/%s: envelope createdAt %q: %w", env, t.Host, t.ServiceID, e.CreatedAt, promoter.ErrInvalid)
		}
		validFrom, err := time.Parse(time.RFC3339, e.ValidFrom)
		if err != nil {
			return fmt.Errorf("promote %s: target %s/%s: envelope validFrom %q: %w", env, t.Host, t.ServiceID, e.ValidFrom, promoter.ErrInvalid)
		}
		expiresAt, err := time.Parse(time.RFC3339, e.ExpiresAt)
		if err != nil {
			return fmt.Errorf("promote %s: target %s/%s: envelope expiresAt %q: %w", env, t.Host, t.ServiceID, e.ExpiresAt, promoter.ErrInvalid)
		}
		in.Targets = append(in.Targets, promoter.Target{
			Host: t.Host, ServiceID: t.ServiceID, EnvTag: t.EnvTag, Audience: t.Audience,
			SubjectKind: t.SubjectKind, SubjectName: t.SubjectName,
			SnapshotID: t.SnapshotID, PublicationID: t.PublicationID, PolicySnapshotID: t.PolicySnapshotID,
			ReleaseVersion: t.ReleaseVersion, PolicyVersion: t.PolicyVersion,
			PolicyDigest: t.PolicyDigest, ContentDigest: t.ContentDigest,
			PropertySetDigest: t.PropertySetDigest, ArtifactDigest: t.ArtifactDigest,
			SchemaVersion: e.SchemaVersion, CompatibilityGeneration: e.CompatibilityGeneration,
			RevocationEpoch: e.RevocationEpoch, SourceEventSequence: e.SourceEventSequence,
			CreatedAt: created, ValidFrom: validFrom, ExpiresAt: expiresAt,
			Changed: t.Changed, LeaseProfile: t.LeaseProfile,
			Lease:        t.DeliveryLease,
			InputDigests: t.InputDigests,
			Values:       t.Values,
		})
		a, err := compiled.Artifact(t)
		if err != nil {
			return fmt.Errorf("promote %s: %w: %w", env, promoter.ErrInvalid, err)
		}
		artifacts = append(artifacts, a)
		return nil
	})
	if err != nil {
		return promoter.ReleaseInput{}, nil, err
	}
	return in, artifacts, nil
}

// publish makes every target artifact and the release artifact present and
// signed, then verifies each by digest against the trusted keys. It returns
// one registry.Result per target artifact, in order, then the release's.
func publish(ctx context.Context, opts Options, res *compiler.Result, artifacts []registry.Artifact) ([]registry.Result, error) {
	m := res.Manifest
	rel, err := compiled.Release(res)
	if err != nil {
		return nil, fmt.Errorf("promote %s: %w: %w", opts.EnvTag, promoter.ErrInvalid, err)
	}
	sum, err := opts.Registry.Publish(ctx, registry.PublishRequest{
		Prefix:    opts.RegistryPrefix,
		Artifacts: artifacts,
		Release:   rel,
		Signer:    opts.Signer,
	})
	if errors.Is(err, registry.ErrConflict) {
		// A tag r<N> already names other content: another release N was
		// published first. That is a lost compare-and-swap too.
		return nil, fmt.Errorf("promote %s release %d: %w: %w", opts.EnvTag, m.ReleaseVersion, promoter.ErrConflict, err)
	}
	if err != nil {
		return nil, fmt.Errorf("promote %s release %d: %w", opts.EnvTag, m.ReleaseVersion, err)
	}
	if len(sum.Results) != len(artifacts)+1 {
		return nil, fmt.Errorf("promote %s release %d: published %d artifacts, want %d: %w", opts.EnvTag, m.ReleaseVersion, len(sum.Results), len(artifacts)+1, promoter.ErrIntegrity)
	}
	keys := opts.TrustedKeys
	if len(keys) == 0 {
		pub, ok := opts.Signer.Public().(*ecdsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("promote %s: signer is not an ECDSA key: %w", opts.EnvTag, promoter.ErrInvalid)
		}
		k, err := signing.NewTrustedKey(pub)
		if err != nil {
			return nil, fmt.Errorf("promote %s: signer: %w", opts.EnvTag, err)
		}
		keys = []signing.TrustedKey{k}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(verifyConcurrency)
	for i, r := range sum.Results {
		var id *bundle.Identity
		if i < len(artifacts) {
			a := &artifacts[i]
			want, err := registry.ManifestDigest(*a)
			if err != nil {
				return nil, fmt.Errorf("promote %s: %w", opts.EnvTag, err)
			}
			if r.Digest != want.String() {
				return nil, fmt.Errorf("promote %s: published %s for %s/%s, want manifest %s: %w", opts.EnvTag, r.Ref(), a.Host, a.ServiceID, want, promoter.ErrIntegrity)
			}
			id = &bundle.Identity{Host: a.Host, ServiceID: a.ServiceID, EnvTag: a.EnvTag}
		}
		g.Go(func() error {
			v, err := opts.Registry.Verify(gctx, r.Ref(), registry.VerifyOptions{Keys: keys, Identity: id})
			if err != nil {
				return fmt.Errorf("promote %s release %d: %w", opts.EnvTag, m.ReleaseVersion, err)
			}
			if v.Digest != r.Digest {
				return fmt.Errorf("promote %s: verified %s, want %s: %w", opts.EnvTag, v.Ref(), r.Ref(), promoter.ErrIntegrity)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return sum.Results, nil
}

// verifyConcurrency bounds the artifacts verified at once.
const verifyConcurrency = 8
