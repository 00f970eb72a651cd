package promoter

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/configpub/configpub/bundle"
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

// attachConcurrency bounds the attaches in flight.
const attachConcurrency = 8

// AttachResult reports AttachDeliveryManifests.
type AttachResult struct {
	Attached []string // host/serviceId whose current manifest is attached (new or already there)
	Skipped  []string // host/serviceId skipped: revoked, or the snapshot has no OCI reference
}

// AttachDeliveryManifests attaches, for every current, unretired pointer of
// envTag, its current signed delivery manifest (the one the Config Server
// serves) to the pointer's artifact in the registry
// (config_snapshot.oci_reference) as an OCI referrer, so that a runtime
// pulling the artifact straight from the registry finds a manifest that
// vouches for it. Run it after every pointer move and lease renewal:
// attaching is idempotent (an attached manifest is not uploaded again),
// and an artifact whose pointer moved away keeps only manifests that are
// superseded (a runtime refuses them by sequence) and expire with their
// lease. Revoked snapshots get nothing. It reads the store and writes only
// to the registry, up to eight artifacts at a time; a registry failure
// stops it (re-run to finish: what was attached stays attached).
func (s *Store) AttachDeliveryManifests(ctx context.Context, envTag string, reg ManifestAttacher) (*AttachResult, error) {
	if envTag == "" {
		return nil, invalid("envTag", "empty")
	}
	rows, err := s.pool.Query(ctx, `SELECT p.host, p.service_id, s.oci_reference, p.manifest, p.manifest_signature,
			p.manifest_key_id, p.sequence, `+snapshotRevokedSQL+`
		FROM configpub.current_pointer p
		JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
		WHERE p.env_tag = $1 AND p.retired_at IS NULL
		ORDER BY p.host, p.service_id`, envTag)
	if err != nil {
		return nil, fmt.Errorf("attach delivery manifests %s: %w", envTag, dbErr("read pointers", err))
	}
	type current struct {
		id, ref string
		m       registry.SignedDeliveryManifest
		revoked bool
	}
	var cs []current
	for rows.Next() {
		var c current
		var host, svc string
		if err := rows.Scan(&host, &svc, &c.ref, &c.m.Manifest, &c.m.Signature, &c.m.KeyID, &c.m.Sequence, &c.revoked); err != nil {
			rows.Close()
			return nil, fmt.Errorf("attach delivery manifests %s: %w", envTag, dbErr("read pointers", err))
		}
		c.id = host + "/" + svc
		cs = append(cs, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("attach delivery manifests %s: %w", envTag, dbErr("read pointers", err))
	}
	res := &AttachResult{}
	var todo []current
	for _, c := range cs {
		if c.revoked || c.ref == "" {
			res.Skipped = append(res.Skipped, c.id)
			continue
		}
		dm, err := bundle.ParseDeliveryManifest(c.m.Manifest)
		if err != nil {
			return res, fmt.Errorf("attach delivery manifests %s: %s: stored manifest: %w: %w", envTag, c.id, ErrIntegrity, err)
		}
		c.m.IssuedAt = dm.IssuedAt
		todo = append(todo, c)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(attachConcurrency)
	for _, c := range todo {
		g.Go(func() error {
			if _, err := reg.AttachDeliveryManifest(gctx, c.ref, c.m); err != nil {
				return fmt.Errorf("attach delivery manifests %s: %s: %w", envTag, c.id, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return res, err
	}
	for _, c := range todo {
		res.Attached = append(res.Attached, c.id)
	}
	return res, nil
}
