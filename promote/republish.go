package promote

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"iter"
	"sync"

	"github.com/configpub/configpub/internal/textlist"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
)

// RepublishStore is the part of the store Republish reads;
// *promoter.Store satisfies it.
type RepublishStore interface {
	ReleaseArtifacts(ctx context.Context, envTag string, release int64) (int64, iter.Seq2[promoter.StoredArtifact, error], error)
	AttachDeliveryManifestsAt(ctx context.Context, envTag string, reg promoter.ManifestAttacher, prefix string) (*promoter.AttachResult, error)
	RecordSigningKey(ctx context.Context, pub crypto.PublicKey) error
}

var _ RepublishStore = (*promoter.Store)(nil)

// RepublishRegistry pushes the artifacts and attaches the delivery
// manifests; *registry.Client satisfies it.
type RepublishRegistry interface {
	PublishSeq(ctx context.Context, req registry.PublishRequest, artifacts iter.Seq2[registry.Artifact, error]) (*registry.Summary, error)
	promoter.ManifestAttacher
}

var _ RepublishRegistry = (*registry.Client)(nil)

// RepublishOptions configures Republish.
type RepublishOptions struct {
	EnvTag string
	// Release is the release whose targets are pushed; 0 is the active
	// one.
	Release  int64
	Store    RepublishStore
	Registry RepublishRegistry
	// Prefix is "registry[:port][/path]": each artifact goes to
	// Prefix/<env>/<host>/<serviceId>, under the tag promote gave it.
	Prefix string
	// Signer signs every artifact pushed (and adds its signature to one
	// found in place without it), as promote does.
	Signer crypto.Signer
	// Progress, when set, sees every artifact pushed or found in place,
	// serialized.
	Progress func(registry.Result)
}

// RepublishResult is what Republish did (-o json of `configpub registry
// republish`; docs/cli-output.md lists the fields). Its lists name the
// first promoter.SkippedListed targets as "host/serviceId"; its counts
// count them all.
type RepublishResult struct {
	EnvTag   string `json:"envTag"`
	Release  int64  `json:"release"`
	Active   bool   `json:"active"` // Release is the environment's active release
	Registry string `json:"registry"`
	Targets  int    `json:"targets"` // targets of the release read from the store
	// Pushed counts the artifacts for which something was uploaded,
	// Present those found complete and signed (nothing uploaded).
	Pushed         int   `json:"pushed"`
	AlreadyPresent int   `json:"alreadyPresent"`
	Signed         int   `json:"signed"` // artifacts this run signed
	BytesUploaded  int64 `json:"bytesUploaded"`
	// Refused are the targets whose artifact, rebuilt from the store,
	// does not hash to the manifest digest the store recorded (or whose
	// values.yml bytes do not hash to their recorded digest): nothing was
	// pushed for them.
	Refused      []string `json:"refused,omitempty"`
	RefusedCount int      `json:"refusedCount"`
	RefuseError  string   `json:"refuseError,omitempty"` // the first refusal
	// Skipped are the targets with nothing to push: a revoked snapshot,
	// or one the store recorded without an OCI publication.
	Skipped      []string `json:"skipped,omitempty"`
	SkippedCount int      `json:"skippedCount"`
	// Attach is the attach of every current pointer's delivery manifest
	// that followed, nil when none ran (Release is not the active one, or
	// the push failed). The CLI prints it as `registry attach -o json` does.
	Attach *promoter.AttachResult `json:"-"`
}

// ErrRepublishRefused is returned (after every other target was pushed)
// when a target's artifact cannot be rebuilt from the store to the digest
// it recorded. It matches promoter.ErrIntegrity.
var ErrRepublishRefused = fmt.Errorf("artifacts not republished: %w", promoter.ErrIntegrity)

// Republish pushes to Prefix, for every target of release Release of
// EnvTag (0: the active one), the artifact promote published for it,
// rebuilt from the store alone: the snapshot's identity, digests,
// release version and createdAt and its exact values.yml bytes make the
// same manifest, config and layer, so the same manifest digest, which is
// checked against the one the store recorded before anything is pushed
// for the target (a target whose artifact hashes otherwise is refused,
// named, and nothing is pushed for it; the others are pushed). Each is
// tagged r<release that created the snapshot> and signed by Signer (its
// key recorded in the store first), as promote does; the release artifact is not (the store does not record
// its digest). Revoked snapshots and snapshots recorded without a
// publication are skipped. The targets stream from the store in batches
// and are pushed at most the client's concurrency at a time
// (registry.Client.PublishSeq): memory does not grow with the release.
// It is idempotent and resumable: an artifact already tagged and signed
// by Signer costs one tag look-up and a signature check, and a run that
// stopped is finished by the next. When Release is the active release,
// every current pointer's delivery manifest is then attached to its
// artifact under Prefix (as `registry attach --registry`); the attach's
// error (promoter.ErrAttachFailed) is returned with its result.
func Republish(ctx context.Context, o RepublishOptions) (*RepublishResult, error) {
	if o.EnvTag == "" || o.Store == nil || o.Registry == nil || o.Prefix == "" || o.Signer == nil {
		return nil, fmt.Errorf("republish: %w: envTag, store, registry, prefix and signer are required", promoter.ErrInvalid)
	}
	// The active release's targets are read when it is the one asked for
	// (Release 0 or its version); another release's otherwise.
	active, arts, err := o.Store.ReleaseArtifacts(ctx, o.EnvTag, 0)
	if err != nil && (o.Release == 0 || !errors.Is(err, promoter.ErrNotFound)) {
		return nil, fmt.Errorf("republish %s: %w", o.EnvTag, err)
	}
	release := active
	if o.Release != 0 && o.Release != active {
		if release, arts, err = o.Store.ReleaseArtifacts(ctx, o.EnvTag, o.Release); err != nil {
			return nil, fmt.Errorf("republish %s: %w", o.EnvTag, err)
		}
	}
	// Recorded before anything is signed with it, as promote does: no
	// signature of the store's artifacts is by a key it has not recorded.
	if err := o.Store.RecordSigningKey(ctx, o.Signer.Public()); err != nil {
		return nil, fmt.Errorf("republish %s: %w (nothing pushed)", o.EnvTag, err)
	}
	res := &RepublishResult{EnvTag: o.EnvTag, Release: release, Active: release == active, Registry: o.Prefix}
	refused, skipped := textlist.First{N: promoter.SkippedListed}, textlist.First{N: promoter.SkippedListed}
	var (
		firstRefusal error
		mu           sync.Mutex
		mismatch     error
		want         = map[string]string{} // repository -> recorded manifest digest, while in flight
	)
	targets := func(yield func(registry.Artifact, error) bool) {
		for a, err := range arts {
			if err != nil {
				yield(registry.Artifact{}, err)
				return
			}
			res.Targets++
			if a.Revoked || a.ManifestDigest == "" {
				skipped.Add(a.ID())
				continue
			}
			got, err := registry.ManifestDigest(a.Artifact)
			if err == nil && got.String() != a.ManifestDigest {
				err = fmt.Errorf("%w: the artifact rebuilt from the store has manifest digest %s, the store recorded %s", promoter.ErrIntegrity, got, a.ManifestDigest)
			}
			if err != nil {
				refused.Add(a.ID())
				if firstRefusal == nil {
					firstRefusal = fmt.Errorf("%s (snapshot %s): %w", a.ID(), a.SnapshotID, err)
				}
				continue
			}
			mu.Lock()
			want[registry.Repository(o.Prefix, a.Artifact)] = a.ManifestDigest
			mu.Unlock()
			if !yield(a.Artifact, nil) {
				return
			}
		}
	}
	req := registry.PublishRequest{Prefix: o.Prefix, Signer: o.Signer, EnsureSignatures: true, Progress: func(r registry.Result) {
		mu.Lock()
		if d := want[r.Repository]; d != r.Digest && mismatch == nil {
			mismatch = fmt.Errorf("republish %s: pushed %s, the store recorded %s: %w", o.EnvTag, r.Ref(), d, promoter.ErrIntegrity)
		}
		delete(want, r.Repository)
		if r.Signed {
			res.Signed++
		}
		mu.Unlock()
		if o.Progress != nil {
			o.Progress(r)
		}
	}}
	sum, err := o.Registry.PublishSeq(ctx, req, targets)
	if sum != nil {
		res.Pushed, res.AlreadyPresent, res.BytesUploaded = sum.Pushed, sum.AlreadyPresent, sum.Bytes
	}
	res.Refused, res.RefusedCount = refused.Items, refused.Count
	res.Skipped, res.SkippedCount = skipped.Items, skipped.Count
	if firstRefusal != nil {
		res.RefuseError = firstRefusal.Error()
	}
	if err != nil {
		return res, fmt.Errorf("republish %s release %d: %w", o.EnvTag, release, err)
	}
	if mismatch != nil {
		return res, mismatch
	}
	var attachErr error
	if res.Active {
		res.Attach, attachErr = o.Store.AttachDeliveryManifestsAt(ctx, o.EnvTag, o.Registry, o.Prefix)
		if attachErr != nil && !errors.Is(attachErr, promoter.ErrAttachFailed) {
			return res, fmt.Errorf("republish %s release %d: %w", o.EnvTag, release, attachErr)
		}
	}
	if refused.Count > 0 {
		return res, fmt.Errorf("republish %s release %d: %w: %d of %d (%s); first: %w", o.EnvTag, release, ErrRepublishRefused,
			refused.Count, res.Targets, textlist.Join(refused.Items, refused.Count, refusedNamed), firstRefusal)
	}
	if attachErr != nil {
		return res, fmt.Errorf("republish %s release %d: %w", o.EnvTag, release, attachErr)
	}
	return res, nil
}

// refusedNamed is how many refused targets Republish's error names.
const refusedNamed = 5
