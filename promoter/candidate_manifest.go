package promoter

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
)

// signCandidates signs (or re-signs) the candidate delivery manifests of
// the staged release envTag/version that need it at now, in tx, and stores
// them with their candidate pointers: a pointer without a manifest (just
// staged), one whose lease is due for refresh, one whose sequence the
// identity's current pointer has reached since (a re-sign or another move),
// and one whose revocation epoch is below the environment's epoch. A
// candidate manifest is marked phase "candidate" inside the signed bytes,
// so no runtime ever loads it as its current configuration; its sequence
// stays above the identity's current pointer's, its activatedAt is the
// staging time, and a renewal keeps both and issues a later lease. It
// returns how many manifests it signed.
//
// The candidates are read through one cursor in (host, service_id) order,
// Options.MoveBatch at a time, each batch signed and stored before the next
// is fetched, so memory holds one batch whatever the size of the release.
func (s *Store) signCandidates(ctx context.Context, tx pgx.Tx, envTag string, version, epoch int64, now time.Time) (int, error) {
	if err := openCandidates(ctx, tx, envTag, version, epoch, now); err != nil {
		return 0, err
	}
	n := 0
	for {
		ps, more, err := fetchCandidates(ctx, tx, epoch, now, s.opts.MoveBatch)
		if err != nil {
			return 0, err
		}
		if len(ps) > 0 {
			if err := s.signAll(envTag, ps); err != nil {
				return 0, err
			}
			if err := s.storeCandidates(ctx, tx, envTag, version, ps); err != nil {
				return 0, err
			}
		}
		n += len(ps)
		if !more {
			if _, err := tx.Exec(ctx, `CLOSE candidates`); err != nil {
				return 0, dbErr("close the candidates' cursor", err)
			}
			return n, nil
		}
	}
}

// openCandidates declares the cursor candidates over the candidate pointers
// of envTag/version that need signing at now (see signCandidates), locked
// as they are fetched. The candidates are usually written in the same
// transaction (staging), so the planner has no statistics for them: each
// candidate's target, snapshot and pointer are looked up by key (LATERAL …
// LIMIT 1, which the planner does not flatten into a join it could plan as
// a scan per candidate), and the plan is the candidates' scan in key order
// with three index look-ups per row, whatever the statistics say. A
// cursor sees the rows as they were when it was declared: the batches
// stored before a fetch do not change what it returns.
func openCandidates(ctx context.Context, tx pgx.Tx, envTag string, version, epoch int64, now time.Time) error {
	if _, err := tx.Exec(ctx, `SET LOCAL cursor_tuple_fraction = 1`); err != nil {
		return dbErr("read candidate manifests", err)
	}
	_, err := tx.Exec(ctx, `DECLARE candidates NO SCROLL CURSOR FOR
		SELECT c.host, c.service_id, s.audience, s.snapshot_id::text,
			s.publication_id::text, s.policy_snapshot_id::text, s.release_version, s.artifact_digest,
			s.content_digest, s.policy_digest, s.property_set_digest, s.schema_version,
			s.compatibility_generation, s.revocation_epoch, rt.refresh_after_ms, rt.expires_after_ms,
			coalesce(p.sequence, 0), coalesce(c.sequence, 0), coalesce(c.activated_at, $3)
		FROM configpub.candidate_pointer c
		CROSS JOIN LATERAL (SELECT rt.refresh_after_ms, rt.expires_after_ms FROM configpub.config_release_target rt
			WHERE rt.env_tag = c.env_tag AND rt.release_version = c.release_version
			  AND rt.host = c.host AND rt.service_id = c.service_id LIMIT 1) rt
		CROSS JOIN LATERAL (SELECT s.* FROM configpub.config_snapshot s WHERE s.snapshot_id = c.snapshot_id LIMIT 1) s
		LEFT JOIN LATERAL (SELECT p.sequence FROM configpub.current_pointer p
			WHERE p.host = c.host AND p.service_id = c.service_id AND p.env_tag = c.env_tag LIMIT 1) p ON true
		WHERE c.env_tag = $1 AND c.release_version = $2
		  AND (c.manifest IS NULL OR c.lease_refresh_after <= $3 OR c.sequence <= coalesce(p.sequence, 0)
			OR c.revocation_epoch < greatest(s.revocation_epoch, $4))
		ORDER BY c.host, c.service_id
		FOR UPDATE OF c`, envTag, version, now, epoch)
	if err != nil {
		return dbErr("read candidate manifests", err)
	}
	return nil
}

// fetchCandidates fetches the next limit candidates of the cursor
// candidates, ready to sign at now and epoch, and whether more may follow
// (limit were read).
func fetchCandidates(ctx context.Context, tx pgx.Tx, epoch int64, now time.Time, limit int) ([]pointerTarget, bool, error) {
	rows, err := tx.Query(ctx, `FETCH FORWARD `+strconv.Itoa(limit)+` FROM candidates`)
	if err != nil {
		return nil, false, dbErr("read candidate manifests", err)
	}
	defer rows.Close()
	var ps []pointerTarget
	for rows.Next() {
		var p pointerTarget
		var schema int32
		var current, seq int64
		if err := rows.Scan(&p.Host, &p.ServiceID, &p.Audience, &p.SnapshotID, &p.PublicationID, &p.PolicySnapshotID,
			&p.SnapshotRelease, &p.ArtifactDigest, &p.ContentDigest, &p.PolicyDigest, &p.PropertySetDigest, &schema,
			&p.CompatibilityGeneration, &p.RevocationEpoch, &p.RefreshMS, &p.ExpiresMS, &current, &seq, &p.ActivatedAt); err != nil {
			return nil, false, dbErr("read candidate manifests", err)
		}
		p.SchemaVersion = int(schema)
		p.Phase = bundle.PhaseCandidate
		p.RevocationEpoch = max(p.RevocationEpoch, epoch)
		p.Sequence = seq
		if seq <= current {
			p.Sequence = nextSequence(current, now)
		}
		p.IssuedAt = now
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
		return nil, false, dbErr("read candidate manifests", err)
	}
	return ps, len(ps) == limit, nil
}

// storeCandidates writes the signed candidate manifests ps to their
// candidate pointers of envTag/version.
func (s *Store) storeCandidates(ctx context.Context, tx pgx.Tx, envTag string, version int64, ps []pointerTarget) error {
	n := len(ps)
	hosts, svcs, seqs, acts, issued := make([]string, n), make([]string, n), make([]int64, n), make([]time.Time, n), make([]time.Time, n)
	refresh, expires, epochs := make([]time.Time, n), make([]time.Time, n), make([]int64, n)
	bodies, sigs := make([][]byte, n), make([]string, n)
	for i, p := range ps {
		hosts[i], svcs[i], seqs[i], acts[i], issued[i] = p.Host, p.ServiceID, p.Sequence, p.ActivatedAt, p.IssuedAt
		refresh[i], expires[i], epochs[i], bodies[i], sigs[i] = p.RefreshAt, p.ExpiresAt, p.RevocationEpoch, p.Manifest, p.Signature
	}
	tag, err := tx.Exec(ctx, `UPDATE configpub.candidate_pointer c SET sequence = u.seq, activated_at = u.act,
			issued_at = u.iss, lease_refresh_after = u.ref, lease_expires_at = u.exp, revocation_epoch = u.ep,
			manifest = u.m, manifest_signature = u.sig, manifest_key_id = $3
		FROM (SELECT u.*, k.tid FROM unnest($4::text[], $5::text[], $6::bigint[], $7::timestamptz[], $8::timestamptz[],
				$9::timestamptz[], $10::timestamptz[], $11::bigint[], $12::bytea[], $13::text[])
				AS u(host, svc, seq, act, iss, ref, exp, ep, m, sig)
			CROSS JOIN LATERAL (SELECT k.ctid AS tid FROM configpub.candidate_pointer k
				WHERE k.host = u.host AND k.service_id = u.svc AND k.env_tag = $1 AND k.release_version = $2 LIMIT 1) k) u
		WHERE c.ctid = u.tid`,
		envTag, version, s.keyID, hosts, svcs, seqs, acts, issued, refresh, expires, epochs, bodies, sigs)
	if err != nil {
		return dbErr("store candidate manifests", err)
	}
	if int(tag.RowsAffected()) != n {
		return fmt.Errorf("environment %s release %d: %d of %d candidate pointers changed while they were signed: %w",
			envTag, version, n-int(tag.RowsAffected()), n, ErrConflict)
	}
	return nil
}

// RenewCandidates re-signs, in one short transaction, the candidate
// manifests of the staged release envTag/version whose lease is due for
// refresh (or whose sequence or epoch fell behind the identity's current
// pointer or the environment), so that a runtime prefetching the candidate
// always gets a live lease while the release stays staged. A two-phase
// activation calls it before every readiness check. It returns how many
// manifests it signed; a release that is not staged has none.
func (s *Store) RenewCandidates(ctx context.Context, envTag string, version int64) (int, error) {
	if err := s.readyToSign(ctx); err != nil {
		return 0, err
	}
	var n int
	err := s.runTx(ctx, func(tx pgx.Tx) error {
		var epoch int64
		if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT revocation_epoch FROM configpub.environment
			WHERE env_tag = $1), 0)`, envTag).Scan(&epoch); err != nil {
			return dbErr("read revocation epoch", err)
		}
		var err error
		n, err = s.signCandidates(ctx, tx, envTag, version, epoch, s.now())
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("renew candidate manifests of %s release %d: %w", envTag, version, err)
	}
	return n, nil
}

// renewStagedCandidates re-signs the due candidate manifests of every
// staged release of envTag in tx and returns how many it signed.
func (s *Store) renewStagedCandidates(ctx context.Context, tx pgx.Tx, envTag string, epoch int64, now time.Time) (int, error) {
	rows, err := tx.Query(ctx, `SELECT DISTINCT release_version FROM configpub.candidate_pointer
		WHERE env_tag = $1 ORDER BY release_version`, envTag)
	if err != nil {
		return 0, dbErr("read staged releases", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, dbErr("read staged releases", err)
	}
	total := 0
	for _, v := range versions {
		n, err := s.signCandidates(ctx, tx, envTag, v, epoch, now)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}
