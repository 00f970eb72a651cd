package promoter

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/pointernote"
)

// nextSequence is the sequence of an identity's next pointer move at time
// at: one more than the previous, and never below the move time in
// microseconds since the Unix epoch, so that a store restored from a backup
// (whose rows hold older, lower sequences) still issues sequences above any
// a runtime has already seen.
func nextSequence(prev int64, at time.Time) int64 {
	return max(prev+1, at.UnixMicro())
}

// targetPointer joins to config_release_target rt the current pointer p of
// its identity, if any (snapshot_id, retired_at, sequence), looked up by
// key: LATERAL … LIMIT 1 is not flattened into a join, so the plan is one
// index probe per target whatever the statistics say. The release's
// targets, and in an activation the pointers, are written in the same
// transaction and have none; a plain join was planned as a scan of the
// environment's pointers per target.
const targetPointer = `LEFT JOIN LATERAL (SELECT p.snapshot_id, p.retired_at, p.sequence
		FROM configpub.current_pointer p
		WHERE p.host = rt.host AND p.service_id = rt.service_id AND p.env_tag = rt.env_tag LIMIT 1) p ON true`

// movingTargets is the condition on config_release_target rt and its
// targetPointer p that selects the targets an activation moves: no
// pointer yet, a pointer at another snapshot, or a retired pointer.
const movingTargets = `(p.snapshot_id IS DISTINCT FROM rt.snapshot_id OR p.retired_at IS NOT NULL)`

// outsideWindow returns a *WindowError for the first target of the release
// that an activation at time at would move to a snapshot whose activation
// window does not contain at, or nil. Snapshots recorded without a window
// are not checked.
func outsideWindow(ctx context.Context, q querier, envTag string, version int64, at time.Time) (*WindowError, error) {
	w := WindowError{EnvTag: envTag, Release: version, At: at}
	err := q.QueryRow(ctx, `SELECT rt.host || '/' || rt.service_id || '/' || rt.env_tag, s.snapshot_id::text,
			s.valid_from, s.expires_at
		FROM configpub.config_release_target rt
		JOIN configpub.config_snapshot s ON s.snapshot_id = rt.snapshot_id
		`+targetPointer+`
		WHERE rt.env_tag = $1 AND rt.release_version = $2 AND `+movingTargets+`
		  AND s.valid_from IS NOT NULL AND s.expires_at IS NOT NULL
		  AND NOT (s.valid_from <= $3 AND $3 < s.expires_at)
		ORDER BY rt.host, rt.service_id LIMIT 1`, envTag, version, at).
		Scan(&w.Identity, &w.SnapshotID, &w.ValidFrom, &w.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr("check activation windows", err)
	}
	w.ValidFrom, w.ExpiresAt = w.ValidFrom.UTC(), w.ExpiresAt.UTC()
	return &w, nil
}

// retireOthers retires every current pointer of envTag whose identity the
// release does not contain: the pointer keeps its snapshot and sequence,
// is marked retired (the Config Server answers 410 Gone, lease renewal
// skips it), and gets a pointer_move audit row with retired = true; the
// retirements are notified in batches (internal/pointernote). It returns
// the number of identities retired.
//
// The identities to retire are a set difference (EXCEPT: hashed or sorted,
// linear whatever the statistics say), not a NOT EXISTS anti-join: right
// after a large release is recorded its targets' statistics are stale, and
// the planner then chose a nested loop scanning every release target once
// per pointer (100,000 pointers: minutes of CPU, found by make scale). The
// set is computed once (MATERIALIZED) and each of its identities is found
// by key (LATERAL … LIMIT 1 to the row's ctid): joined by host and service,
// the update was planned as a rescan of the set per pointer of the
// environment (10,000 pointers, none to retire: 0.7 s).
func retireOthers(ctx context.Context, tx pgx.Tx, envTag string, a activation, prevRelease int64, now time.Time) (int, error) {
	reviewers := a.reviewers
	if reviewers == nil {
		reviewers = []string{}
	}
	var n int
	err := tx.QueryRow(ctx, `WITH gone AS MATERIALIZED (
			SELECT host, service_id FROM configpub.current_pointer
			WHERE env_tag = $1 AND retired_at IS NULL
			EXCEPT
			SELECT host, service_id FROM configpub.config_release_target
			WHERE env_tag = $1 AND release_version = $2
		), r AS (
			UPDATE configpub.current_pointer p
			SET retired_at = $3, retired_release_version = $2, updated_at = $3
			FROM gone CROSS JOIN LATERAL (SELECT k.ctid AS tid FROM configpub.current_pointer k
				WHERE k.host = gone.host AND k.service_id = gone.service_id AND k.env_tag = $1 LIMIT 1) k
			WHERE p.ctid = k.tid
			RETURNING p.host, p.service_id, p.snapshot_id, p.sequence
		), m AS (
			INSERT INTO configpub.pointer_move (host, service_id, env_tag, previous_snapshot_id, next_snapshot_id,
				publication_id, release_version, previous_release_version, sequence, action, actor, reviewers,
				reason, command_id, moved_at, retired)
			SELECT r.host, r.service_id, $1, r.snapshot_id, r.snapshot_id, s.publication_id, $2, nullif($4, 0),
				r.sequence, $5, $6, $7, $8, $9::text::uuid, $3, true
			FROM r JOIN configpub.config_snapshot s ON s.snapshot_id = r.snapshot_id
			RETURNING host, service_id
		), n AS (`+pointernote.BatchesSQL("$1::text", "host", "service_id", "m")+`)
		SELECT (SELECT count(*) FROM m) FROM n`,
		envTag, a.cmd.Release, now, prevRelease, a.cmd.Action, a.actor, reviewers, a.reason, a.cmd.ID).Scan(&n)
	if err != nil {
		return 0, dbErr("retire identities", err)
	}
	return n, nil
}
