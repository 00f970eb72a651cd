package promoter

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/textlist"
	"github.com/configpub/configpub/registry"
)

// snapshotRevokedSQL is true for a row of configpub.config_snapshot s
// whose snapshot or publication is revoked.
const snapshotRevokedSQL = `(s.snapshot_id IN (SELECT snapshot_id FROM configpub.revocation WHERE snapshot_id IS NOT NULL)
	OR s.publication_id IN (SELECT publication_id FROM configpub.revocation WHERE publication_id IS NOT NULL))`

// ManifestAttacher attaches a signed delivery manifest to an artifact in an
// OCI registry as a referrer; *registry.Client satisfies it.
type ManifestAttacher interface {
	AttachDeliveryManifest(ctx context.Context, ref string, m registry.SignedDeliveryManifest) (string, error)
}

var _ ManifestAttacher = (*registry.Client)(nil)

// KeepingAttacher is a ManifestAttacher that also removes an artifact's
// superseded delivery-manifest referrers as it attaches a new one;
// *registry.Client satisfies it. AttachDeliveryManifests keeps every
// artifact's referrers at registry.KeepDeliveryManifests with it.
type KeepingAttacher interface {
	AttachDeliveryManifestKeeping(ctx context.Context, ref string, m registry.SignedDeliveryManifest, keep registry.KeepOptions) (registry.Attached, error)
}

var _ KeepingAttacher = (*registry.Client)(nil)

// attachConcurrency bounds the attaches in flight.
const attachConcurrency = 8

// attachFailedNamed is how many failed pointers an attach's error names.
const attachFailedNamed = 5

// AttachResult reports AttachDeliveryManifests. Its lists name, in
// (host, serviceId) order, the first SkippedListed pointers as
// "host/serviceId" and its counts count them all: an attach after every
// renewal of 100,000 pointers reports 100,000.
type AttachResult struct {
	Attached      []string // whose current manifest is attached (new or already there)
	AttachedCount int
	Skipped       []string // skipped: revoked, or the snapshot has no OCI reference
	SkippedCount  int
	// Failed lists the pointers whose attach failed and FailedCount counts
	// them; FailError is the first failure in (host, serviceId) order.
	// The others are attached all the same.
	Failed      []string
	FailedCount int
	FailError   string
	// Pruned counts the superseded delivery-manifest referrers removed
	// from the attached artifacts (the attacher is a KeepingAttacher).
	Pruned int
	// PruneFailures counts the artifacts whose superseded referrers could
	// not be removed, and PruneError is the first such error: a prune that
	// fails never fails the attach (the new manifest is attached).
	PruneFailures int
	PruneError    string
}

// AttachDeliveryManifests attaches, for every current, unretired pointer of
// envTag, its current signed delivery manifest (the one the Config Server
// serves) to the pointer's artifact in the registry
// (config_snapshot.oci_reference) as an OCI referrer, so that a runtime
// pulling the artifact straight from the registry finds a manifest that
// vouches for it. Run it after every pointer move and lease renewal:
// attaching is idempotent (an attached manifest is not uploaded again),
// and an attacher that is a KeepingAttacher then removes the artifact's
// superseded manifests beyond registry.KeepDeliveryManifests, so that
// renewals do not pile up referrers every runtime lists; an artifact whose
// pointer moved away keeps only manifests that are superseded (a runtime
// refuses them by sequence) and expire with their lease. Revoked snapshots get nothing. It reads the store and writes only
// to the registry: Options.MoveBatch pointers at a time in (host,
// service_id) order, each batch read by one short statement and attached,
// up to eight artifacts at a time, before the next is read, so memory holds
// one batch of manifests whatever the size of the environment and a
// pointer is attached as it was when its batch was read. Each pointer is
// attached on its own: one that fails (an artifact deleted from the
// registry, a refused upload) is counted in AttachResult.Failed and the
// others are attached all the same, so that a rollback still reaches every
// runtime it can; the error, after every pointer was tried, matches
// ErrAttachFailed and names the first failures (re-run to retry them: what
// was attached stays attached). A failure to read the store, or ctx ending,
// stops it with what was attached so far.
func (s *Store) AttachDeliveryManifests(ctx context.Context, envTag string, reg ManifestAttacher) (*AttachResult, error) {
	return s.AttachDeliveryManifestsAt(ctx, envTag, reg, "")
}

// AttachDeliveryManifestsAt is AttachDeliveryManifests to the artifacts
// under another registry prefix ("registry[:port][/path]", as publish and
// promote take it): each pointer's artifact, by the digest its snapshot
// recorded, at prefix/<env>/<host>/<service>. A snapshot records where it
// was first published; after a move to another registry (promote with the
// new prefix publishes every artifact of its release there, carried-over
// ones included) the snapshots a release carried over still name the old
// registry, and runtimes pulling from the new one would find no manifest.
// An empty prefix uses the recorded references.
func (s *Store) AttachDeliveryManifestsAt(ctx context.Context, envTag string, reg ManifestAttacher, prefix string) (*AttachResult, error) {
	if envTag == "" {
		return nil, invalid("envTag", "empty")
	}
	attached, skipped, failed := textlist.First{N: SkippedListed}, textlist.First{N: SkippedListed}, textlist.First{N: SkippedListed}
	var failErr error
	keeper, _ := reg.(KeepingAttacher)
	var keys map[string]signing.TrustedKey
	if keeper != nil {
		var err error
		if keys, err = s.issuingKeys(ctx); err != nil {
			return &AttachResult{}, fmt.Errorf("attach delivery manifests %s: %w", envTag, err)
		}
	}
	var pruneMu sync.Mutex
	var pruned, pruneFailures int
	var pruneErr string
	result := func() *AttachResult {
		r := &AttachResult{Attached: attached.Items, AttachedCount: attached.Count,
			Skipped: skipped.Items, SkippedCount: skipped.Count,
			Failed: failed.Items, FailedCount: failed.Count,
			Pruned: pruned, PruneFailures: pruneFailures, PruneError: pruneErr}
		if failErr != nil {
			r.FailError = failErr.Error()
		}
		return r
	}
	var after attachKey
	for {
		batch, err := s.currentManifests(ctx, envTag, after, s.opts.MoveBatch)
		if err != nil {
			return result(), fmt.Errorf("attach delivery manifests %s: %w", envTag, err)
		}
		var todo []currentManifest
		for _, c := range batch {
			if c.revoked || c.ref == "" {
				skipped.Add(c.id())
				continue
			}
			if prefix != "" {
				_, dgst, ok := strings.Cut(c.ref, "@")
				if !ok {
					return result(), fmt.Errorf("attach delivery manifests %s: %s: recorded reference %q: %w: no digest", envTag, c.id(), c.ref, ErrIntegrity)
				}
				c.ref = registry.Repository(prefix, registry.Artifact{EnvTag: envTag, Host: c.host, ServiceID: c.service}) + "@" + dgst
			}
			dm, err := bundle.ParseDeliveryManifest(c.m.Manifest)
			if err != nil {
				return result(), fmt.Errorf("attach delivery manifests %s: %s: stored manifest: %w: %w", envTag, c.id(), ErrIntegrity, err)
			}
			c.m.IssuedAt = dm.IssuedAt
			todo = append(todo, c)
		}
		// Not errgroup.WithContext: one failed attach must not cancel the
		// others.
		var g errgroup.Group
		g.SetLimit(attachConcurrency)
		errs := make([]error, len(todo))
		for i, c := range todo {
			g.Go(func() error {
				if keeper == nil {
					if _, err := reg.AttachDeliveryManifest(ctx, c.ref, c.m); err != nil {
						errs[i] = err
					}
					return nil
				}
				keep := registry.KeepOptions{Keep: registry.KeepDeliveryManifests, Issued: s.issued(envTag, c.attachKey, keys)}
				at, err := keeper.AttachDeliveryManifestKeeping(ctx, c.ref, c.m, keep)
				if err != nil {
					errs[i] = err
					return nil
				}
				pruneMu.Lock()
				defer pruneMu.Unlock()
				pruned += at.Pruned
				if at.PruneErr != nil && ctx.Err() == nil {
					if pruneFailures == 0 {
						pruneErr = fmt.Sprintf("%s: %v", c.id(), at.PruneErr)
					}
					pruneFailures++
				}
				return nil
			})
		}
		_ = g.Wait() // every func returns nil; failures are in errs
		if err := ctx.Err(); err != nil {
			return result(), fmt.Errorf("attach delivery manifests %s: %w", envTag, err)
		}
		for i, c := range todo {
			if errs[i] != nil {
				failed.Add(c.id())
				if failErr == nil {
					failErr = fmt.Errorf("%s: %w", c.id(), errs[i])
				}
				continue
			}
			attached.Add(c.id())
		}
		if len(batch) < s.opts.MoveBatch {
			if failed.Count > 0 {
				return result(), fmt.Errorf("attach delivery manifests %s: %w: %d of %d (%s); first: %w", envTag, ErrAttachFailed,
					failed.Count, failed.Count+attached.Count, textlist.Join(failed.Items, failed.Count, attachFailedNamed), failErr)
			}
			return result(), nil
		}
		after = batch[len(batch)-1].attachKey
	}
}

// issued returns a registry.KeepOptions.Issued that vouches for a
// delivery-manifest referrer of the pointer k of envTag when it carries a
// manifest the store issued for that pointer: a prune keeps only such
// referrers, and removes those anyone with push access to the repository
// attached. A manifest the store holds (delivery_manifest: the same bytes,
// signature and key id) is issued. So is a lease renewal db gc has deleted
// since it was attached (CollectRenewals deletes superseded renewals after
// --renewal-min-age, which may be shorter than the time between two
// attaches): its bytes name the pointer and its signature verifies with
// the key it names, a key of keys — those the store recorded as it signed
// (configpub.signing_key) and its own Signer's. Counted as not issued, it
// was removed at the next attach, although it was the newest but one the
// store issued, which the prune keeps. A forgery naming one of the store's
// key ids does not verify; a store that holds no key (registry attach)
// recognises the renewal by the recorded public key.
func (s *Store) issued(envTag string, k attachKey, keys map[string]signing.TrustedKey) func(context.Context, registry.SignedDeliveryManifest) (bool, error) {
	return func(ctx context.Context, m registry.SignedDeliveryManifest) (bool, error) {
		dm, err := bundle.ParseDeliveryManifest(m.Manifest)
		if err != nil {
			return false, nil
		}
		issuedAt, err := time.Parse(time.RFC3339Nano, dm.IssuedAt)
		if err != nil {
			return false, nil
		}
		var ok bool
		err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.delivery_manifest
			WHERE host = $1 AND service_id = $2 AND env_tag = $3 AND sequence = $4 AND issued_at = $5
				AND manifest = $6 AND signature = $7 AND key_id = $8)`,
			k.host, k.service, envTag, dm.Sequence, issuedAt, m.Manifest, m.Signature, m.KeyID).Scan(&ok)
		if err != nil {
			return false, dbErr("read delivery manifests", err)
		}
		key, known := keys[m.KeyID]
		if ok || !known || dm.Host != k.host || dm.ServiceID != k.service || dm.EnvTag != envTag {
			return ok, nil
		}
		_, err = signing.VerifyBlob([]signing.TrustedKey{key}, m.Manifest, m.Signature, m.KeyID)
		return err == nil, nil
	}
}

// issuingKeys returns, by key id, the keys a delivery manifest of the store
// may be signed with: those it recorded as it signed and its Signer's.
func (s *Store) issuingKeys(ctx context.Context) (map[string]signing.TrustedKey, error) {
	recorded, err := s.SigningKeys(ctx)
	if err != nil {
		return nil, err
	}
	keys := make(map[string]signing.TrustedKey, len(recorded)+1)
	for _, k := range recorded {
		keys[k.ID] = k.TrustedKey
	}
	if k := s.signerKey(); k != nil {
		keys[k.ID] = *k
	}
	return keys, nil
}

// signerKey returns the public key of the store's Signer as a trusted key,
// or nil for a store without one.
func (s *Store) signerKey() *signing.TrustedKey {
	if s.opts.Signer == nil {
		return nil
	}
	pub, ok := s.opts.Signer.Public().(*ecdsa.PublicKey)
	if !ok {
		return nil
	}
	tk, err := signing.NewTrustedKey(pub)
	if err != nil {
		return nil
	}
	return &tk
}

// attachKey is a current pointer's key within its environment.
type attachKey struct{ host, service string }

// currentManifest is what AttachDeliveryManifests reads of a current
// pointer.
type currentManifest struct {
	attachKey
	ref     string
	m       registry.SignedDeliveryManifest
	revoked bool
}

func (c currentManifest) id() string { return c.host + "/" + c.service }

// currentManifests reads the next limit current, unretired pointers of
// envTag after the key after (the zero key: from the first) in (host,
// service_id) order: one range of the environment's key index.
func (s *Store) currentManifests(ctx context.Context, envTag string, after attachKey, limit int) ([]currentManifest, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.host, p.service_id, s.oci_reference, p.manifest, p.manifest_signature,
			p.manifest_key_id, p.sequence, `+snapshotRevokedSQL+`
		FROM configpub.current_pointer p
		JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
		WHERE p.env_tag = $1 AND p.retired_at IS NULL AND (p.host, p.service_id) > ($2, $3)
		ORDER BY p.host, p.service_id
		LIMIT $4`, envTag, after.host, after.service, limit)
	if err != nil {
		return nil, dbErr("read pointers", err)
	}
	defer rows.Close()
	var cs []currentManifest
	for rows.Next() {
		var c currentManifest
		if err := rows.Scan(&c.host, &c.service, &c.ref, &c.m.Manifest, &c.m.Signature, &c.m.KeyID, &c.m.Sequence, &c.revoked); err != nil {
			return nil, dbErr("read pointers", err)
		}
		cs = append(cs, c)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("read pointers", err)
	}
	return cs, nil
}
