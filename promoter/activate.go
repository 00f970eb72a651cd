package promoter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/pointernote"
)

// activation identifies the command whose recorded intent is activated.
type activation struct {
	cmd       command // Release = the release to activate
	actor     string
	reason    string
	reviewers []string
	pre       *presigned // speculative manifests (may be nil)
}

// activate is the activation transaction shared by RecordAndActivate,
// Activate and Rollback: under the environment's lock it moves every target
// of the release whose pointer is elsewhere, signs and stores their delivery
// manifests, writes pointer_move and journal rows, settles the command and
// NOTIFYs, all in one transaction.
func (s *Store) activate(ctx context.Context, a activation) (*ActivationResult, error) {
	var out activateOutcome
	err := s.runTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = s.activateTx(ctx, tx, a)
		return err
	})
	if err != nil && !errors.Is(err, ErrUnconfirmed) && lostDatabase(err) {
		return nil, fmt.Errorf("%w: %w", ErrPending, err)
	}
	if err != nil {
		return nil, err
	}
	if out.refused != nil {
		for _, ev := range out.events {
			s.emit(ctx, ev)
		}
		return nil, out.refused
	}
	return out.res, nil
}

// activateOutcome is what an activation transaction settled when it
// commits: the result of the activation, or a refusal (a revoked snapshot,
// a target outside its activation window) that was recorded in the
// transaction and is returned to the caller only after the commit.
type activateOutcome struct {
	res     *ActivationResult
	refused error
	// events are recorded with a refusal and sent once it has committed.
	events []Event
}

func (s *Store) activateTx(ctx context.Context, tx pgx.Tx, a activation) (activateOutcome, error) {
	now := s.now()
	envTag, version := a.cmd.EnvTag, a.cmd.Release
	if err := s.fault(ctx, "activate:begin", tx); err != nil {
		return activateOutcome{}, err
	}
	e, err := lockEnv(ctx, tx, envTag, now)
	if err != nil {
		return activateOutcome{}, err
	}
	r, err := lockRelease(ctx, tx, envTag, version)
	if err != nil {
		return activateOutcome{}, err
	}
	if r.Outcome != OutcomeUnconfirmed || r.LastCmd != a.cmd.ID {
		// Another run of the same command (or Reconcile) settled it first.
		c, err := loadCommand(ctx, tx, a.cmd.ID)
		if err != nil {
			return activateOutcome{}, err
		}
		if c.Outcome == OutcomeApplied {
			res, err := decodeResult(c)
			return activateOutcome{res: res}, err
		}
		if refused, err := recordedRefusal(ctx, tx, envTag, version, c.ID); err != nil || refused != nil {
			// Another run of the command was refused: the same answer.
			return activateOutcome{refused: refused}, err
		}
		return activateOutcome{}, fmt.Errorf("command %s was settled %s before it could be activated (re-run to retry): %w", a.cmd.ID, c.Outcome, ErrConflict)
	}
	if e.Pending != version || e.PendingCmd != a.cmd.ID {
		return activateOutcome{}, fmt.Errorf("environment %s: pending release %d (command %q), want %d (command %s): %w",
			envTag, e.Pending, e.PendingCmd, version, a.cmd.ID, ErrIntegrity)
	}
	if err := s.fault(ctx, "activate:locked", tx); err != nil {
		return activateOutcome{}, err
	}
	// A revocation committing from here on waits for this transaction.
	if err := s.lockRevocations(ctx, tx, false); err != nil {
		return activateOutcome{}, err
	}
	if id, err := revokedTarget(ctx, tx, envTag, version); err != nil {
		return activateOutcome{}, err
	} else if id != "" {
		// Definitely not applied: settle it so the environment is free.
		if err := refuseActivation(ctx, tx, a, r, e, now, "refused-revoked", map[string]any{"revokedSnapshotId": id}); err != nil {
			return activateOutcome{}, err
		}
		return activateOutcome{refused: revokedReleaseError(envTag, version, id)}, nil
	}
	if w, err := outsideWindow(ctx, tx, envTag, version, now); err != nil {
		return activateOutcome{}, err
	} else if w != nil {
		if err := refuseActivation(ctx, tx, a, r, e, now, "refused-window", map[string]any{
			"snapshotId": w.SnapshotID, "identity": w.Identity, "validFrom": formatTime(w.ValidFrom),
			"expiresAt": formatTime(w.ExpiresAt), "at": formatTime(now)}); err != nil {
			return activateOutcome{}, err
		}
		return activateOutcome{refused: w}, nil
	}
	checked, err := twoPhaseStaged(ctx, tx, r, e)
	if err != nil {
		return activateOutcome{}, err
	}
	if checked {
		return s.activateChecked(ctx, tx, a, r, e, now)
	}
	return s.activateMoves(ctx, tx, a, r, e, now)
}

// activateMoves is the part of the activation transaction that moves the
// pointers and settles the release, the command and the environment.
func (s *Store) activateMoves(ctx context.Context, tx pgx.Tx, a activation, r *release, e *env, now time.Time) (activateOutcome, error) {
	envTag, version := a.cmd.EnvTag, a.cmd.Release
	moved, err := s.moveAll(ctx, tx, a, e, now)
	if err != nil {
		return activateOutcome{}, err
	}
	retired, err := retireOthers(ctx, tx, envTag, a, e.Current, now)
	if err != nil {
		return activateOutcome{}, err
	}
	if err := s.fault(ctx, "activate:retire", tx); err != nil {
		return activateOutcome{}, err
	}
	if err := recordWorkflowViews(ctx, tx, envTag, version, a.cmd.ID, now); err != nil {
		return activateOutcome{}, err
	}
	res := &ActivationResult{
		CommandID: a.cmd.ID, Action: a.cmd.Action, EnvTag: envTag, ReleaseVersion: version,
		PreviousRelease: e.Current, Moved: moved, Unchanged: r.TargetCount - moved, Retired: retired,
		Outcome: OutcomeApplied, ActivatedAt: now,
	}
	if e.Current != 0 && e.Current != version {
		prev, err := lockRelease(ctx, tx, envTag, e.Current)
		if err != nil {
			return activateOutcome{}, err
		}
		// Read through to_jsonb: on a schema before the column (a binary
		// ahead of its migration) it is NULL, not an error that would abort
		// the activation.
		err = tx.QueryRow(ctx, `SELECT (to_jsonb(x) ->> 'activatable_until')::timestamptz FROM configpub.release_target_summary x
			WHERE env_tag = $1 AND release_version = $2`, envTag, e.Current).Scan(&res.PreviousActivatableUntil)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return activateOutcome{}, dbErr("read the previous release's activation window", err)
		}
		if u := res.PreviousActivatableUntil; u != nil {
			*u = u.UTC()
		}
		to := StateSuperseded
		if a.cmd.Action == ActionRollback {
			to = StateRolledBack
		}
		if err := mutate(ctx, tx, prev, event{Kind: "deactivate", ToState: to, ToOutcome: prev.Outcome,
			CommandID: a.cmd.ID, Hash: a.cmd.Hash, Actor: a.actor, Reason: a.reason, RecordedAt: now,
			Evidence: map[string]any{"activatedRelease": version}}); err != nil {
			return activateOutcome{}, err
		}
	}
	if err := mutate(ctx, tx, r, event{Kind: a.cmd.Action, ToState: StateActive, ToOutcome: OutcomeApplied,
		CommandID: a.cmd.ID, Hash: a.cmd.Hash, Actor: a.actor, Reason: a.reason, RecordedAt: now,
		Evidence: res}); err != nil {
		return activateOutcome{}, err
	}
	if err := s.fault(ctx, "activate:journal", tx); err != nil {
		return activateOutcome{}, err
	}
	if err := settleCommand(ctx, tx, a.cmd.ID, OutcomeApplied, res, now); err != nil {
		return activateOutcome{}, err
	}
	if err := setEnv(ctx, tx, e, version, 0, "", now); err != nil {
		return activateOutcome{}, err
	}
	if err := clearCandidates(ctx, tx, envTag, version); err != nil {
		return activateOutcome{}, err
	}
	if err := s.fault(ctx, "activate:environment", tx); err != nil {
		return activateOutcome{}, err
	}
	ev := moveEvent(a.cmd.Action, envTag, version, a.actor, a.reason, res)
	if err := s.recordEvent(ctx, tx, &ev); err != nil {
		return activateOutcome{}, err
	}
	return activateOutcome{res: res}, nil
}

// defaultMoveBatch is Options.MoveBatch's default: one notification's
// worth of identities.
const defaultMoveBatch = pointernote.BatchSize

// moveAll moves every target of the release whose pointer is elsewhere,
// s.opts.MoveBatch targets at a time in (host, service_id) order, inside
// the activation transaction: each batch is read, signed (or taken from the
// speculative manifests), written as pointers, delivery manifests and
// pointer_move rows, and notified with one payload per
// pointernote.BatchSize identities. Memory holds one batch, whatever the
// size of the release. It returns the number of pointers moved.
func (s *Store) moveAll(ctx context.Context, tx pgx.Tx, a activation, e *env, now time.Time) (int, error) {
	envTag, version := a.cmd.EnvTag, a.cmd.Release
	moved := 0
	var after *[2]string
	for {
		ps, err := loadMoves(ctx, tx, envTag, version, after, s.opts.MoveBatch)
		if err != nil {
			return 0, err
		}
		if len(ps) == 0 {
			return moved, nil
		}
		if err := s.fault(ctx, "activate:read", tx); err != nil {
			return 0, err
		}
		var unsigned []pointerTarget
		var at []int
		for i := range ps {
			ps[i].RevocationEpoch = max(ps[i].RevocationEpoch, e.Epoch)
			if a.pre.take(&ps[i], now) {
				continue
			}
			ps[i].Sequence = nextSequence(ps[i].PrevSequence, now)
			ps[i].IssuedAt, ps[i].ActivatedAt = now, now
			unsigned = append(unsigned, ps[i])
			at = append(at, i)
		}
		if len(unsigned) > 0 {
			if err := s.signAll(envTag, unsigned); err != nil {
				return 0, err
			}
			for k, i := range at {
				ps[i] = unsigned[k]
			}
		}
		if err := s.fault(ctx, "activate:signed", tx); err != nil {
			return 0, err
		}
		if err := s.writePointers(ctx, tx, envTag, ps, now, writeMove); err != nil {
			return 0, err
		}
		if err := s.fault(ctx, "activate:pointers", tx); err != nil {
			return 0, err
		}
		if err := s.insertManifests(ctx, tx, envTag, ps, "move", a.cmd.ID); err != nil {
			return 0, err
		}
		if err := s.fault(ctx, "activate:manifests", tx); err != nil {
			return 0, err
		}
		if err := insertMoves(ctx, tx, envTag, ps, a, e.Current, now); err != nil {
			return 0, err
		}
		if err := s.fault(ctx, "activate:pointer_move", tx); err != nil {
			return 0, err
		}
		if err := notify(ctx, tx, envTag, ps); err != nil {
			return 0, err
		}
		if err := s.fault(ctx, "activate:notify", tx); err != nil {
			return 0, err
		}
		moved += len(ps)
		last := ps[len(ps)-1]
		after = &[2]string{last.Host, last.ServiceID}
		if len(ps) < s.opts.MoveBatch {
			return moved, nil
		}
	}
}

// refuseActivation settles an activation that definitely did not happen
// (a revoked snapshot, a snapshot outside its activation window):
// NOT_APPLIED in the release journal and the command ledger, and the
// environment's pending claim released. No pointer is touched.
func refuseActivation(ctx context.Context, tx pgx.Tx, a activation, r *release, e *env, now time.Time, kind string, evidence map[string]any) error {
	if err := mutate(ctx, tx, r, event{Kind: kind, ToState: r.State, ToOutcome: OutcomeNotApplied,
		CommandID: a.cmd.ID, Hash: a.cmd.Hash, Actor: a.actor, Reason: a.reason, RecordedAt: now,
		Evidence: evidence}); err != nil {
		return err
	}
	if err := settleCommand(ctx, tx, a.cmd.ID, OutcomeNotApplied, nil, now); err != nil {
		return err
	}
	return setEnv(ctx, tx, e, e.Current, 0, "", now)
}

// recordedRefusal returns the refusal (ErrRevoked, a *WindowError, a
// *RejectedError) with which an activation of command cmdID settled it
// NOT_APPLIED on release version, as the refused run returned it, so that
// another run of the same command that waited on the environment's lock
// meanwhile answers the same; nil when the command's last journal row
// there is not a refusal (Reconcile settled it).
func recordedRefusal(ctx context.Context, tx pgx.Tx, envTag string, version int64, cmdID string) (error, error) {
	var kind string
	var ev struct {
		RevokedSnapshotID string `json:"revokedSnapshotId"`
		SnapshotID        string `json:"snapshotId"`
		Identity          string `json:"identity"`
		ValidFrom         string `json:"validFrom"`
		ExpiresAt         string `json:"expiresAt"`
		At                string `json:"at"`
		ReceiptReason     string `json:"receiptReason"`
	}
	err := tx.QueryRow(ctx, `SELECT event_kind, evidence FROM configpub.config_release_journal
		WHERE env_tag = $1 AND release_version = $2 AND command_id = $3::text::uuid
		ORDER BY sequence DESC LIMIT 1`, envTag, version, cmdID).Scan(&kind, &ev)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr("read the command's refusal", err)
	}
	switch kind {
	case kindCandidateRejected:
		return &RejectedError{EnvTag: envTag, Release: version, Identity: ev.Identity, SnapshotID: ev.SnapshotID,
			Reason: ev.ReceiptReason}, nil
	case "refused-revoked":
		return revokedReleaseError(envTag, version, ev.RevokedSnapshotID), nil
	case "refused-window":
		w := &WindowError{EnvTag: envTag, Release: version, Identity: ev.Identity, SnapshotID: ev.SnapshotID}
		for _, f := range []struct {
			s string
			t *time.Time
		}{{ev.ValidFrom, &w.ValidFrom}, {ev.ExpiresAt, &w.ExpiresAt}, {ev.At, &w.At}} {
			if *f.t, err = time.Parse(time.RFC3339Nano, f.s); err != nil {
				return nil, fmt.Errorf("command %s: recorded refusal: %v: %w", cmdID, err, ErrIntegrity)
			}
		}
		return w, nil
	}
	return nil, nil
}

// revokedReleaseError is the refusal of a move to release version of
// envTag, which contains revoked snapshot id: it names what the operator
// can do instead.
func revokedReleaseError(envTag string, version int64, id string) error {
	return fmt.Errorf("release %s/%d: snapshot %s: %w; nothing moved (a release with a revoked snapshot is never "+
		"activated again: promote a new release, or move to one `configpub status --env %s` shows as activatable)",
		envTag, version, id, ErrRevoked, envTag)
}

// revokedTarget returns a revoked snapshot of the release ("" if none).
func revokedTarget(ctx context.Context, q querier, envTag string, version int64) (string, error) {
	var id string
	err := q.QueryRow(ctx, `SELECT s.snapshot_id::text
		FROM configpub.config_release_target rt
		JOIN configpub.config_snapshot s ON s.snapshot_id = rt.snapshot_id
		WHERE rt.env_tag = $1 AND rt.release_version = $2
		  AND `+snapshotRevokedSQL+`
		ORDER BY rt.host, rt.service_id LIMIT 1`, envTag, version).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", dbErr("check revocations", err)
	}
	return id, nil
}

// loadMoves returns, in (host, service_id) order, up to limit targets of a
// release after the identity after (nil: from the first) whose current
// pointer is not at the release's snapshot (or is retired), with what
// their manifests need.
func loadMoves(ctx context.Context, tx pgx.Tx, envTag string, version int64, after *[2]string, limit int) ([]pointerTarget, error) {
	var afterHost, afterService *string
	if after != nil {
		afterHost, afterService = &after[0], &after[1]
	}
	rows, err := tx.Query(ctx, `SELECT rt.host, rt.service_id, s.audience, s.snapshot_id::text,
			s.publication_id::text, s.policy_snapshot_id::text, s.release_version, s.artifact_digest,
			s.content_digest, s.policy_digest, s.property_set_digest, s.schema_version,
			s.compatibility_generation, s.revocation_epoch, rt.refresh_after_ms, rt.expires_after_ms,
			p.snapshot_id::text, coalesce(p.sequence, 0)
		FROM configpub.config_release_target rt
		JOIN configpub.config_snapshot s ON s.snapshot_id = rt.snapshot_id
		`+targetPointer+`
		WHERE rt.env_tag = $1 AND rt.release_version = $2 AND `+movingTargets+`
		  AND ($3::text IS NULL OR (rt.host, rt.service_id) > ($3::text, $4::text))
		ORDER BY rt.host, rt.service_id
		LIMIT $5`, envTag, version, afterHost, afterService, limit)
	if err != nil {
		return nil, dbErr("read moves", err)
	}
	defer rows.Close()
	ps := make([]pointerTarget, 0, limit)
	for rows.Next() {
		var p pointerTarget
		var schema int32
		if err := rows.Scan(&p.Host, &p.ServiceID, &p.Audience, &p.SnapshotID, &p.PublicationID, &p.PolicySnapshotID,
			&p.SnapshotRelease, &p.ArtifactDigest, &p.ContentDigest, &p.PolicyDigest, &p.PropertySetDigest, &schema,
			&p.CompatibilityGeneration, &p.RevocationEpoch, &p.RefreshMS, &p.ExpiresMS, &p.PrevSnapshot, &p.PrevSequence); err != nil {
			return nil, dbErr("read moves", err)
		}
		p.SchemaVersion = int(schema)
		ps = append(ps, p)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("read moves", err)
	}
	return ps, nil
}

// writeMode is what writePointers does to a pointer.
type writeMode int

const (
	// writeMove moves the pointer (or creates it) to a new snapshot with a
	// higher sequence; moved_at (activatedAt) becomes the manifest's
	// issuedAt and a retired pointer is restored.
	writeMove writeMode = iota
	// writeRenew re-signs the lease: same snapshot and sequence, moved_at
	// kept.
	writeRenew
	// writeResign re-signs the same snapshot with a higher sequence (a
	// raised revocation epoch); moved_at kept.
	writeResign
)

// writePointers upserts the current pointers of ps. Each row is guarded by
// a compare-and-swap on its sequence (and snapshot, unless it moves), so a
// pointer changed since it was read fails the whole write.
func (s *Store) writePointers(ctx context.Context, tx pgx.Tx, envTag string, ps []pointerTarget, now time.Time, mode writeMode) error {
	if len(ps) == 0 {
		return nil
	}
	n := len(ps)
	hosts, svcs, ids, sigs := mk(n), mk(n), mk(n), mk(n)
	rels, seqs, rms, ems := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	bodies := make([][]byte, n)
	issued, refresh, expires := make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
	for i := range ps {
		p := &ps[i]
		hosts[i], svcs[i], ids[i], sigs[i] = p.Host, p.ServiceID, p.SnapshotID, p.Signature
		rels[i], seqs[i], rms[i], ems[i] = p.SnapshotRelease, p.Sequence, p.RefreshMS, p.ExpiresMS
		bodies[i], issued[i], refresh[i], expires[i] = p.Manifest, p.IssuedAt, p.RefreshAt, p.ExpiresAt
	}
	// A move must find the pointer at a lower sequence (the environment
	// lock makes it the one read); a renewal at the same sequence and
	// snapshot; a re-sign at the same snapshot and a lower sequence.
	movedAt, guard := "EXCLUDED.moved_at", "current_pointer.sequence < EXCLUDED.sequence"
	retired, retiredRelease := "NULL", "NULL"
	switch mode {
	case writeRenew:
		movedAt, retired, retiredRelease = "current_pointer.moved_at", "current_pointer.retired_at", "current_pointer.retired_release_version"
		guard = "current_pointer.sequence = EXCLUDED.sequence AND current_pointer.snapshot_id = EXCLUDED.snapshot_id AND current_pointer.retired_at IS NULL"
	case writeResign:
		movedAt, retired, retiredRelease = "current_pointer.moved_at", "current_pointer.retired_at", "current_pointer.retired_release_version"
		guard = "current_pointer.sequence < EXCLUDED.sequence AND current_pointer.snapshot_id = EXCLUDED.snapshot_id AND current_pointer.retired_at IS NULL"
	}
	tag, err := tx.Exec(ctx, `INSERT INTO configpub.current_pointer AS current_pointer (host, service_id, env_tag,
			snapshot_id, release_version, sequence, manifest, manifest_signature, manifest_key_id, lease_valid_from,
			lease_refresh_after, lease_expires_at, lease_refresh_after_ms, lease_expires_after_ms, moved_at, updated_at)
		SELECT h, sv, $1, sid::uuid, rv, seq, m, sig, $2, iss, ra, ea, rms, ems, iss, $3
		FROM unnest($4::text[], $5::text[], $6::text[], $7::bigint[], $8::bigint[], $9::bytea[], $10::text[],
			$11::timestamptz[], $12::timestamptz[], $13::timestamptz[], $14::bigint[], $15::bigint[])
			AS x(h, sv, sid, rv, seq, m, sig, iss, ra, ea, rms, ems)
		ON CONFLICT (host, service_id, env_tag) DO UPDATE SET
			snapshot_id = EXCLUDED.snapshot_id, release_version = EXCLUDED.release_version,
			sequence = EXCLUDED.sequence, manifest = EXCLUDED.manifest,
			manifest_signature = EXCLUDED.manifest_signature, manifest_key_id = EXCLUDED.manifest_key_id,
			lease_valid_from = EXCLUDED.lease_valid_from, lease_refresh_after = EXCLUDED.lease_refresh_after,
			lease_expires_at = EXCLUDED.lease_expires_at, lease_refresh_after_ms = EXCLUDED.lease_refresh_after_ms,
			lease_expires_after_ms = EXCLUDED.lease_expires_after_ms,
			moved_at = `+movedAt+`, retired_at = `+retired+`, retired_release_version = `+retiredRelease+`,
			updated_at = EXCLUDED.updated_at
		WHERE `+guard,
		envTag, s.keyID, now, hosts, svcs, ids, rels, seqs, bodies, sigs, issued, refresh, expires, rms, ems)
	if err != nil {
		return dbErr("write pointers", err)
	}
	if int(tag.RowsAffected()) != n {
		return fmt.Errorf("environment %s: %d of %d pointers changed under the lock: %w", envTag, n-int(tag.RowsAffected()), n, ErrConflict)
	}
	return nil
}

func (s *Store) insertManifests(ctx context.Context, tx pgx.Tx, envTag string, ps []pointerTarget, kind, cmdID string) error {
	if len(ps) == 0 {
		return nil
	}
	n := len(ps)
	hosts, svcs, ids, sigs := mk(n), mk(n), mk(n), mk(n)
	seqs := make([]int64, n)
	bodies := make([][]byte, n)
	issued, expires := make([]time.Time, n), make([]time.Time, n)
	for i := range ps {
		p := &ps[i]
		hosts[i], svcs[i], ids[i], sigs[i], seqs[i] = p.Host, p.ServiceID, p.SnapshotID, p.Signature, p.Sequence
		bodies[i], issued[i], expires[i] = p.Manifest, p.IssuedAt, p.ExpiresAt
	}
	_, err := tx.Exec(ctx, `INSERT INTO configpub.delivery_manifest (host, service_id, env_tag, sequence, issued_at,
			snapshot_id, manifest, signature, key_id, expires_at, kind, command_id)
		SELECT h, sv, $1, seq, iss, sid::uuid, m, sig, $2, ea, $3, nullif($4, '')::uuid
		FROM unnest($5::text[], $6::text[], $7::bigint[], $8::timestamptz[], $9::text[], $10::bytea[], $11::text[],
			$12::timestamptz[]) AS x(h, sv, seq, iss, sid, m, sig, ea)`,
		envTag, s.keyID, kind, cmdID, hosts, svcs, seqs, issued, ids, bodies, sigs, expires)
	if err != nil {
		return dbErr("insert delivery manifests", err)
	}
	return nil
}

func insertMoves(ctx context.Context, tx pgx.Tx, envTag string, ps []pointerTarget, a activation, prevRelease int64, now time.Time) error {
	if len(ps) == 0 {
		return nil
	}
	n := len(ps)
	hosts, svcs, ids, pubs := mk(n), mk(n), mk(n), mk(n)
	prevs := make([]*string, n)
	seqs := make([]int64, n)
	for i := range ps {
		p := &ps[i]
		hosts[i], svcs[i], ids[i], pubs[i], prevs[i], seqs[i] = p.Host, p.ServiceID, p.SnapshotID, p.PublicationID, p.PrevSnapshot, p.Sequence
	}
	reviewers := a.reviewers
	if reviewers == nil {
		reviewers = []string{}
	}
	_, err := tx.Exec(ctx, `INSERT INTO configpub.pointer_move (host, service_id, env_tag, previous_snapshot_id,
			next_snapshot_id, publication_id, release_version, previous_release_version, sequence, action, actor,
			reviewers, reason, command_id, moved_at)
		SELECT h, sv, $1, prev::uuid, sid::uuid, pub::uuid, $2, nullif($3, 0), seq, $4, $5, $6, $7, $8::text::uuid, $9
		FROM unnest($10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::bigint[])
			AS x(h, sv, prev, sid, pub, seq)`,
		envTag, a.cmd.Release, prevRelease, a.cmd.Action, a.actor, reviewers, a.reason, a.cmd.ID, now,
		hosts, svcs, prevs, ids, pubs, seqs)
	if err != nil {
		return dbErr("insert pointer moves", err)
	}
	return nil
}

// notify sends the pointer changes of ps on the pointernote channel, one
// payload per pointernote.BatchSize identities (ranges in the database's
// order), delivered when (and only if) the transaction commits.
func notify(ctx context.Context, tx pgx.Tx, envTag string, ps []pointerTarget) error {
	if len(ps) == 0 {
		return nil
	}
	n := len(ps)
	hosts, svcs := mk(n), mk(n)
	for i := range ps {
		hosts[i], svcs[i] = ps[i].Host, ps[i].ServiceID
	}
	_, err := tx.Exec(ctx, pointernote.BatchesSQL("$1::text", "h", "sv", "unnest($2::text[], $3::text[]) AS x(h, sv)"),
		envTag, hosts, svcs)
	if err != nil {
		return dbErr("notify", err)
	}
	return nil
}
