package promoter

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/textlist"
)

// RenewResult reports a lease renewal.
type RenewResult struct {
	EnvTag  string    `json:"envTag"`
	Renewed int       `json:"renewed"`
	At      time.Time `json:"at"`
	// Candidates counts the candidate manifests of staged releases that
	// were due and re-signed with the leases.
	Candidates int `json:"candidates,omitempty"`
	// Skipped lists, in identity order, the first SkippedListed
	// identities ("host/serviceId/envTag") not renewed: their snapshot is
	// revoked, or their pointer carries no lease window; SkippedCount
	// counts them all.
	Skipped      []string `json:"skipped,omitempty"`
	SkippedCount int      `json:"skippedCount,omitempty"`
}

// SkippedListed is how many skipped identities a renewal or a re-signing
// lists, and how many attached and skipped pointers an attach lists (their
// counts cover them all): after a publication of 100,000 targets is
// revoked, each renewal skips all of them.
const SkippedListed = 100

// LeaseKeyIDs returns, sorted, the ids of the keys that signed the leases
// of envTag's current, unretired pointers (at most 16): a renewal with
// another key replaces leases every runtime trusts with ones only runtimes
// that trust the new key accept.
func (s *Store) LeaseKeyIDs(ctx context.Context, envTag string) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT manifest_key_id FROM configpub.current_pointer
		WHERE env_tag = $1 AND retired_at IS NULL ORDER BY 1 LIMIT 16`, envTag)
	if err != nil {
		return nil, fmt.Errorf("lease keys of %s: %w", envTag, dbErr("read pointers", err))
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("lease keys of %s: %w", envTag, dbErr("read pointers", err))
	}
	return ids, nil
}

// RenewLeases re-signs a fresh lease for every current pointer of envTag:
// the same snapshot, sequence and activatedAt, a later issuedAt and the
// pointer's rolling window, stored as the pointer's manifest and appended to
// delivery_manifest, in one transaction, Options.MoveBatch pointers at a
// time in (host, service_id) order: each batch is read, signed, written and
// notified (one payload per pointernote.BatchSize identities), so memory
// holds one batch whatever the size of the environment. Revoked
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
	if err := s.readyToSign(ctx); err != nil {
		return nil, fmt.Errorf("renew leases %s: %w", envTag, err)
	}
	var res *RenewResult
	err := s.runTx(ctx, func(tx pgx.Tx) error {
		now := s.now()
		e, err := lockExistingEnv(ctx, tx, envTag)
		if err != nil {
			return err
		}
		res = &RenewResult{EnvTag: envTag, At: now}
		var skipped textlist.First
		if res.Renewed, skipped, err = s.reissueAll(ctx, tx, envTag, e.Epoch, now, writeRenew, ""); err != nil {
			return err
		}
		res.Skipped, res.SkippedCount = skipped.Items, skipped.Count
		cands, err := s.renewStagedCandidates(ctx, tx, envTag, e.Epoch, now)
		if err != nil {
			return err
		}
		res.Candidates = cands
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("renew leases %s: %w", envTag, err)
	}
	return res, nil
}

// reissueAll re-signs every current, unretired, unrevoked pointer of envTag
// at the revocation epoch epoch (at least): a renewal (writeRenew: the same
// sequence) or a re-signing (writeResign: a higher sequence, journalled by
// command cmdID). It reads the pointers through one cursor in (host,
// service_id) order, Options.MoveBatch at a time, each batch signed,
// written as pointers and delivery manifests and notified before the next
// is fetched, so memory holds one batch whatever the size of the
// environment, and the query is planned and run once (a cursor does not
// see the transaction's own later writes). It returns how many it
// re-signed and the identities it skipped (the first SkippedListed and
// their count).
func (s *Store) reissueAll(ctx context.Context, tx pgx.Tx, envTag string, epoch int64, now time.Time, mode writeMode, cmdID string) (int, textlist.First, error) {
	kind := "renew"
	if mode == writeResign {
		kind = "resign"
	}
	// A revocation committing from here on waits for this transaction;
	// one committed before is seen by the cursor.
	if err := s.lockRevocations(ctx, tx, false); err != nil {
		return 0, textlist.First{}, err
	}
	if err := openRenewals(ctx, tx, envTag); err != nil {
		return 0, textlist.First{}, err
	}
	n := 0
	skipped := textlist.First{N: SkippedListed}
	for {
		ps, more, err := fetchRenewals(ctx, tx, envTag, epoch, s.opts.MoveBatch, &skipped)
		if err != nil {
			return 0, textlist.First{}, err
		}
		for i := range ps {
			if mode == writeResign {
				ps[i].Sequence = nextSequence(ps[i].PrevSequence, now)
			}
			// issuedAt strictly increases per pointer, even within one
			// millisecond or under a fixed clock.
			ps[i].IssuedAt = later(ps[i].IssuedAt, now)
		}
		if len(ps) > 0 {
			if err := s.signAll(envTag, ps); err != nil {
				return 0, textlist.First{}, err
			}
			if err := s.fault(ctx, kind+":signed", tx); err != nil {
				return 0, textlist.First{}, err
			}
			if err := s.writePointers(ctx, tx, envTag, ps, now, mode); err != nil {
				return 0, textlist.First{}, err
			}
			if err := s.insertManifests(ctx, tx, envTag, ps, kind, cmdID); err != nil {
				return 0, textlist.First{}, err
			}
			if err := notify(ctx, tx, envTag, ps); err != nil {
				return 0, textlist.First{}, err
			}
		}
		n += len(ps)
		if !more {
			if _, err := tx.Exec(ctx, `CLOSE renewals`); err != nil {
				return 0, textlist.First{}, dbErr("close the pointers' cursor", err)
			}
			return n, skipped, nil
		}
	}
}

// openRenewals declares the cursor renewals over the current, unretired
// pointers of envTag in (host, service_id) order, planned for reading every
// row (cursor_tuple_fraction 1: one join and sort rather than a plan tuned
// for the first rows). The pointers and snapshots it reads were committed
// before the renewal began. The activation reads in keyset batches
// instead: its rows are written in its own transaction, without
// statistics, and a cursor planned for all of them chose a nested loop that
// took more than 30 s per fetch at 100,000 targets (staging's cursor looks
// each row up by key, which no statistics change: see openCandidates).
func openRenewals(ctx context.Context, tx pgx.Tx, envTag string) error {
	if _, err := tx.Exec(ctx, `SET LOCAL cursor_tuple_fraction = 1`); err != nil {
		return dbErr("read pointers", err)
	}
	_, err := tx.Exec(ctx, `DECLARE renewals NO SCROLL CURSOR FOR
		SELECT p.host, p.service_id, s.audience, s.snapshot_id::text,
			s.publication_id::text, s.policy_snapshot_id::text, s.release_version, s.artifact_digest,
			s.content_digest, s.policy_digest, s.property_set_digest, s.schema_version,
			s.compatibility_generation, s.revocation_epoch, p.lease_refresh_after_ms, p.lease_expires_after_ms,
			p.sequence, p.lease_valid_from, p.moved_at, `+snapshotRevokedSQL+`
		FROM configpub.current_pointer p
		JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
		WHERE p.env_tag = $1 AND p.retired_at IS NULL
		ORDER BY p.host, p.service_id`, envTag)
	if err != nil {
		return dbErr("read pointers", err)
	}
	return nil
}

// fetchRenewals fetches the next limit pointers of the cursor renewals and
// returns those to renew, and whether more may follow (limit were read); it
// adds the ones not to renew to skipped. IssuedAt holds the current
// manifest's issuedAt, ActivatedAt the pointer's move time, RevocationEpoch
// the snapshot's epoch raised to the environment's.
func fetchRenewals(ctx context.Context, tx pgx.Tx, envTag string, epoch int64, limit int, skipped *textlist.First) ([]pointerTarget, bool, error) {
	rows, err := tx.Query(ctx, `FETCH FORWARD `+strconv.Itoa(limit)+` FROM renewals`)
	if err != nil {
		return nil, false, dbErr("read pointers", err)
	}
	defer rows.Close()
	var ps []pointerTarget
	read := 0
	for rows.Next() {
		var p pointerTarget
		var schema int32
		var revoked bool
		if err := rows.Scan(&p.Host, &p.ServiceID, &p.Audience, &p.SnapshotID, &p.PublicationID, &p.PolicySnapshotID,
			&p.SnapshotRelease, &p.ArtifactDigest, &p.ContentDigest, &p.PolicyDigest, &p.PropertySetDigest, &schema,
			&p.CompatibilityGeneration, &p.RevocationEpoch, &p.RefreshMS, &p.ExpiresMS, &p.Sequence, &p.IssuedAt,
			&p.ActivatedAt, &revoked); err != nil {
			return nil, false, dbErr("read pointers", err)
		}
		read++
		if revoked || p.RefreshMS <= 0 || p.ExpiresMS <= 0 {
			skipped.Add(p.Host + "/" + p.ServiceID + "/" + envTag)
			continue
		}
		p.SchemaVersion = int(schema)
		p.PrevSequence = p.Sequence
		p.IssuedAt, p.ActivatedAt = p.IssuedAt.UTC(), p.ActivatedAt.UTC()
		p.RevocationEpoch = max(p.RevocationEpoch, epoch)
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
		return nil, false, dbErr("read pointers", err)
	}
	return ps, read == limit, nil
}
