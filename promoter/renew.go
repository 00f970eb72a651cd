package promoter

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RenewResult reports a lease renewal.
type RenewResult struct {
	EnvTag  string    `json:"envTag"`
	Renewed int       `json:"renewed"`
	At      time.Time `json:"at"`
	// Candidates counts the candidate manifests of staged releases that
	// were due and re-signed with the leases.
	Candidates int `json:"candidates,omitempty"`
	// Skipped lists identities not renewed: their snapshot is revoked, or
	// their pointer carries no lease window.
	Skipped []string `json:"skipped,omitempty"`
}

// RenewLeases re-signs a fresh lease for every current pointer of envTag:
// the same snapshot, sequence and activatedAt, a later issuedAt and the
// pointer's rolling window, stored as the pointer's manifest and appended to
// delivery_manifest, with a NOTIFY per pointer, in one transaction. Revoked
// snapshots are not renewed, so their leases run out; retired identities
// are not renewed either. A renewal is never refused by a snapshot's
// activation window: that limits pointer moves only. An environment that
// does not exist is ErrNotFound. In the same transaction it re-signs the
// candidate manifests of the environment's staged releases that are due
// (signCandidates), so a staged candidate stays fetchable.
func (s *Store) RenewLeases(ctx context.Context, envTag string) (*RenewResult, error) {
	if envTag == "" {
		return nil, fmt.Errorf("renew leases: %w", invalid("envTag", "empty"))
	}
	if s.opts.Signer == nil {
		return nil, fmt.Errorf("renew leases %s: %w", envTag, ErrNoSigner)
	}
	var res *RenewResult
	err := s.runTx(ctx, func(tx pgx.Tx) error {
		now := s.now()
		e, err := lockExistingEnv(ctx, tx, envTag)
		if err != nil {
			return err
		}
		ps, skipped, err := loadRenewals(ctx, tx, envTag, e.Epoch)
		if err != nil {
			return err
		}
		for i := range ps {
			// issuedAt strictly increases per pointer, even within one
			// millisecond or under a fixed clock.
			ps[i].IssuedAt = later(ps[i].IssuedAt, now)
		}
		if err := s.signAll(envTag, ps); err != nil {
			return err
		}
		if err := s.fault(ctx, "renew:signed", tx); err != nil {
			return err
		}
		if err := s.writePointers(ctx, tx, envTag, ps, now, writeRenew); err != nil {
			return err
		}
		if err := s.insertManifests(ctx, tx, envTag, ps, "renew", ""); err != nil {
			return err
		}
		if err := notify(ctx, tx, envTag, ps); err != nil {
			return err
		}
		cands, err := s.renewStagedCandidates(ctx, tx, envTag, e.Epoch, now)
		if err != nil {
			return err
		}
		res = &RenewResult{EnvTag: envTag, Renewed: len(ps), At: now, Skipped: skipped, Candidates: cands}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases %s: %w", envTag, err)
	}
	return res, nil
}

// loadRenewals reads the current, unretired pointers to renew; IssuedAt
// holds the current manifest's issuedAt, ActivatedAt the pointer's move
// time, RevocationEpoch the snapshot's epoch raised to the environment's.
func loadRenewals(ctx context.Context, tx pgx.Tx, envTag string, epoch int64) ([]pointerTarget, []string, error) {
	rows, err := tx.Query(ctx, `SELECT p.host, p.service_id, s.audience, s.snapshot_id::text,
			s.publication_id::text, s.policy_snapshot_id::text, s.release_version, s.artifact_digest,
			s.content_digest, s.policy_digest, s.property_set_digest, s.schema_version,
			s.compatibility_generation, s.revocation_epoch, p.lease_refresh_after_ms, p.lease_expires_after_ms,
			p.sequence, p.lease_valid_from, p.moved_at, `+snapshotRevokedSQL+`
		FROM configpub.current_pointer p
		JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
		WHERE p.env_tag = $1 AND p.retired_at IS NULL
		ORDER BY p.host, p.service_id`, envTag)
	if err != nil {
		return nil, nil, dbErr("read pointers", err)
	}
	defer rows.Close()
	var ps []pointerTarget
	var skipped []string
	for rows.Next() {
		var p pointerTarget
		var schema int32
		var revoked bool
		if err := rows.Scan(&p.Host, &p.ServiceID, &p.Audience, &p.SnapshotID, &p.PublicationID, &p.PolicySnapshotID,
			&p.SnapshotRelease, &p.ArtifactDigest, &p.ContentDigest, &p.PolicyDigest, &p.PropertySetDigest, &schema,
			&p.CompatibilityGeneration, &p.RevocationEpoch, &p.RefreshMS, &p.ExpiresMS, &p.Sequence, &p.IssuedAt,
			&p.ActivatedAt, &revoked); err != nil {
			return nil, nil, dbErr("read pointers", err)
		}
		if revoked || p.RefreshMS <= 0 || p.ExpiresMS <= 0 {
			skipped = append(skipped, p.Host+"/"+p.ServiceID+"/"+envTag)
			continue
		}
		p.SchemaVersion = int(schema)
		p.PrevSequence = p.Sequence
		p.IssuedAt, p.ActivatedAt = p.IssuedAt.UTC(), p.ActivatedAt.UTC()
		p.RevocationEpoch = max(p.RevocationEpoch, epoch)
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, dbErr("read pointers", err)
	}
	return ps, skipped, nil
}
