package promoter

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/pointernote"
)

// RevokeInput revokes one snapshot, or every snapshot of a publication.
// Exactly one of SnapshotID and PublicationID is set.
type RevokeInput struct {
	CommandID     string // command UUID; the same id and fields replay
	SnapshotID    string
	PublicationID string
	Reason        string
	Actor         string
}

// Revocation is the recorded result of Revoke.
type Revocation struct {
	RevocationID  int64  `json:"revocationId"`
	SnapshotID    string `json:"snapshotId,omitempty"`
	PublicationID string `json:"publicationId,omitempty"`
	// Current lists, in identity order, the first RevokedListed
	// identities ("host/serviceId/envTag") whose current pointer is at a
	// revoked snapshot (they need a new release or a rollback; lease
	// renewal skips them); CurrentCount counts them all.
	Current      []string `json:"current,omitempty"`
	CurrentCount int      `json:"currentCount"`
	// Covers says what the revocation covers: RevokedSnapshots,
	// RevokedViews (a publication that exists only as Workflow views: no
	// runtime configuration is revoked, only Workflow admissions and,
	// per the Workflow service's policy, admitted work) or RevokedBoth.
	// Snapshots and WorkflowViews count them.
	Covers        string `json:"covers"`
	Snapshots     int    `json:"snapshots"`
	WorkflowViews int    `json:"workflowViews"`
	Replayed      bool   `json:"-"`
}

// What a revocation covers (Revocation.Covers).
const (
	RevokedSnapshots = "snapshots" // configuration snapshots only
	RevokedViews     = "views"     // Workflow views only: no snapshot
	RevokedBoth      = "both"      // snapshots and Workflow views
)

// revocationScope counts the snapshots and the recorded Workflow views a
// revocation of snapshotID or publicationID ("" when not set) covers, and
// sets res's counts and Covers ("" when it covers nothing).
func revocationScope(ctx context.Context, tx pgx.Tx, snapshotID, publicationID string, res *Revocation) error {
	if err := tx.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM configpub.config_snapshot
				WHERE snapshot_id = nullif($1, '')::uuid OR publication_id = nullif($2, '')::uuid),
			(SELECT count(*) FROM configpub.workflow_release_view WHERE publication_id = nullif($2, '')::uuid)`,
		snapshotID, publicationID).Scan(&res.Snapshots, &res.WorkflowViews); err != nil {
		return dbErr("count what the revocation covers", err)
	}
	switch {
	case res.Snapshots > 0 && res.WorkflowViews > 0:
		res.Covers = RevokedBoth
	case res.Snapshots > 0:
		res.Covers = RevokedSnapshots
	case res.WorkflowViews > 0:
		res.Covers = RevokedViews
	default:
		res.Covers = ""
	}
	return nil
}

// RevokedListed is how many identities a Revocation lists (its count
// covers them all): revoking a publication of 100,000 targets records a
// small result.
const RevokedListed = 100

// Revoke records a revocation (append-only). A publication is one that
// snapshots carry or, for a release that created no snapshot, the one its
// Workflow views are recorded under (revoking it revokes those views). A
// revoked snapshot is never
// activated again: RecordAndActivate, Activate and Rollback refuse a
// release containing it with ErrRevoked, and RenewLeases stops renewing it.
//
// In the same transaction it NOTIFYs 'configpub_pointer' with a
// revocationNote payload, which names no identity: a Config Server reloads
// every current pointer on it, so a revoked current snapshot stops being
// served at once rather than at its next periodic reconcile. A replay sends
// nothing.
func (s *Store) Revoke(ctx context.Context, in RevokeInput) (*Revocation, error) {
	res, err := s.revoke(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("revoke snapshot %q publication %q: %w", in.SnapshotID, in.PublicationID, err)
	}
	return res, nil
}

func (s *Store) revoke(ctx context.Context, in RevokeInput) (*Revocation, error) {
	if err := checkUUID("commandId", in.CommandID); err != nil {
		return nil, err
	}
	if (in.SnapshotID == "") == (in.PublicationID == "") {
		return nil, invalid("snapshotId/publicationId", "exactly one must be set")
	}
	for _, f := range []struct{ name, v string }{{"snapshotId", in.SnapshotID}, {"publicationId", in.PublicationID}} {
		if f.v != "" {
			if err := checkUUID(f.name, f.v); err != nil {
				return nil, err
			}
		}
	}
	if in.Reason == "" {
		return nil, invalid("reason", "empty")
	}
	if in.Actor == "" {
		return nil, invalid("actor", "empty")
	}
	h := newHasher(ActionRevoke)
	for _, v := range []string{in.SnapshotID, in.PublicationID, in.Reason, in.Actor} {
		h.str(v)
	}
	cmd := command{ID: in.CommandID, Hash: h.sum(), Action: ActionRevoke, EnvTag: ""}
	var res Revocation
	err := s.runTx(ctx, func(tx pgx.Tx) error {
		now := s.now()
		replayed, err := claimSingle(ctx, tx, cmd, in.Actor, now, &res)
		if err != nil || replayed {
			res.Replayed = replayed
			if replayed && res.CurrentCount == 0 {
				res.CurrentCount = len(res.Current) // recorded before the count was
			}
			if err == nil && replayed && res.Covers == "" {
				// Recorded before what it covers was: snapshots and
				// recorded views are append-only, so count them now.
				return revocationScope(ctx, tx, in.SnapshotID, in.PublicationID, &res)
			}
			return err
		}
		// Wait for the activations and lease renewals in flight, and hold
		// back new ones, until this revocation commits: each either saw it
		// (and refused or skipped the snapshot) or committed first, and then
		// this transaction sees the pointers it moved and lists them. The
		// environments' rows first (shared), as the movers and renewers
		// take them before the revocation lock: they order this revocation
		// also against an older configpub's, which holds its environment's
		// row but not the revocation lock.
		if err := lockRevokedEnvironments(ctx, tx, in.SnapshotID, in.PublicationID); err != nil {
			return err
		}
		if err := s.lockRevocations(ctx, tx, true); err != nil {
			return err
		}
		// A publication is known by its snapshots or, for a release that
		// created none, by the Workflow views recorded under it.
		res = Revocation{SnapshotID: in.SnapshotID, PublicationID: in.PublicationID}
		if err := revocationScope(ctx, tx, in.SnapshotID, in.PublicationID, &res); err != nil {
			return err
		}
		if res.Covers == "" {
			return fmt.Errorf("no such snapshot, publication or Workflow view publication: %w", ErrNotFound)
		}
		if err := tx.QueryRow(ctx, `INSERT INTO configpub.revocation (snapshot_id, publication_id, reason, actor, revoked_at, command_id)
			VALUES (nullif($1, '')::uuid, nullif($2, '')::uuid, $3, $4, $5, $6::text::uuid) RETURNING revocation_id`,
			in.SnapshotID, in.PublicationID, in.Reason, in.Actor, now, cmd.ID).Scan(&res.RevocationID); err != nil {
			return dbErr("insert revocation", err)
		}
		rows, err := tx.Query(ctx, `SELECT p.host || '/' || p.service_id || '/' || p.env_tag, count(*) OVER ()
			FROM configpub.current_pointer p JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
			WHERE (s.snapshot_id = nullif($1, '')::uuid OR s.publication_id = nullif($2, '')::uuid)
			  AND p.retired_at IS NULL
			ORDER BY 1 LIMIT $3`, in.SnapshotID, in.PublicationID, RevokedListed)
		if err != nil {
			return dbErr("find current pointers", err)
		}
		var id string
		if _, err := pgx.ForEachRow(rows, []any{&id, &res.CurrentCount}, func() error {
			res.Current = append(res.Current, id)
			return nil
		}); err != nil {
			return dbErr("find current pointers", err)
		}
		if err := notifyRevocation(ctx, tx, &res); err != nil {
			return err
		}
		return settleCommand(ctx, tx, cmd.ID, OutcomeApplied, res, now)
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// revocationLockKey is the transaction-scoped advisory lock that orders
// revocations against the transactions that act on what is revoked: a
// revocation holds it exclusively; an activation (its check of the
// release's snapshots against the revocations and its pointer moves) and a
// lease renewal or re-signing (its read of which pointers are revoked and
// its new leases) hold it shared, from before they read the revocations
// until they commit. Without it a revocation that commits between such a
// read and that commit is missed by both sides: the snapshot is activated,
// or leased again, after it was revoked, and the revocation lists no
// current pointer at it.
const revocationLockKey int64 = 0x7265766b // "revk"

// lockRevocations takes the revocation lock in tx, exclusively (a
// revocation) or shared (an activation, a renewal).
func (s *Store) lockRevocations(ctx context.Context, tx pgx.Tx, exclusive bool) error {
	fn := "pg_advisory_xact_lock_shared"
	if exclusive {
		fn = "pg_advisory_xact_lock"
	} else if s.opts.olderBinary {
		// Test-only: a move or renewal of a configpub older than the
		// revocation lock (running beside this one during an upgrade).
		return nil
	}
	if _, err := tx.Exec(ctx, `SELECT `+fn+`($1)`, revocationLockKey); err != nil {
		return dbErr("take the revocation lock", err)
	}
	return nil
}

// lockRevokedEnvironments locks FOR SHARE, in env_tag order, the
// environment rows of the snapshots a revocation of snapshotID or
// publicationID covers: every activation, lease renewal and re-signing
// (of any configpub version) holds its environment's row FOR UPDATE from
// before it reads the revocations until it commits, so one that is in
// flight commits before this revocation reads the current pointers, and
// one that starts later reads the revocation. Revocations share the rows
// and do not wait for each other.
func lockRevokedEnvironments(ctx context.Context, tx pgx.Tx, snapshotID, publicationID string) error {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM configpub.environment
		WHERE env_tag IN (SELECT env_tag FROM configpub.config_snapshot
			WHERE snapshot_id = nullif($1, '')::uuid OR publication_id = nullif($2, '')::uuid)
		ORDER BY env_tag FOR SHARE`, snapshotID, publicationID); err != nil {
		return dbErr("lock the revoked snapshots' environments", err)
	}
	return nil
}

// notifyRevocation sends the revocation's notification, delivered when (and
// only if) the transaction commits.
func notifyRevocation(ctx context.Context, tx pgx.Tx, res *Revocation) error {
	payload, err := json.Marshal(pointernote.Note{Revoked: true, RevocationID: res.RevocationID,
		SnapshotID: res.SnapshotID, PublicationID: res.PublicationID})
	if err != nil {
		return fmt.Errorf("encode revocation notification: %w", err)
	}
	if _, err := tx.Exec(ctx, pointernote.SendSQL, string(payload)); err != nil {
		return dbErr("notify revocation", err)
	}
	return nil
}

// CheckNotRevoked returns ErrRevoked, naming the target, when a snapshot
// of targets, or its publication, is revoked: what recording them would
// refuse, checked before a promotion publishes anything. It reads every
// revocation (a handful) and compares them in memory.
func (s *Store) CheckNotRevoked(ctx context.Context, envTag string, targets []bundle.TargetEntry) error {
	rows, err := s.pool.Query(ctx, `SELECT coalesce(snapshot_id::text, ''), coalesce(publication_id::text, '')
		FROM configpub.revocation`)
	if err != nil {
		return dbErr("read revocations", err)
	}
	snapshots, publications := map[string]bool{}, map[string]bool{}
	for rows.Next() {
		var snap, pub string
		if err := rows.Scan(&snap, &pub); err != nil {
			rows.Close()
			return dbErr("read revocations", err)
		}
		if snap != "" {
			snapshots[snap] = true
		}
		if pub != "" {
			publications[pub] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return dbErr("read revocations", err)
	}
	for _, t := range targets {
		switch {
		case snapshots[t.SnapshotID]:
			return fmt.Errorf("%s/%s/%s: snapshot %s: %w", t.Host, t.ServiceID, envTag, t.SnapshotID, ErrRevoked)
		case publications[t.PublicationID]:
			return fmt.Errorf("%s/%s/%s: snapshot %s of revoked publication %s: %w", t.Host, t.ServiceID, envTag,
				t.SnapshotID, t.PublicationID, ErrRevoked)
		}
	}
	return nil
}
