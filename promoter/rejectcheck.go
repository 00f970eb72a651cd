package promoter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// kindCandidateRejected is the journal event of a release marked FAILED
// because a runtime rejected its candidate.
const kindCandidateRejected = "candidate-rejected"

// twoPhaseStaged reports whether the release an activation moves to (r,
// locked) is STAGED in an environment with two-phase activation (the
// release's rollout policy or the active release's): the activation whose
// moves re-check the candidates' receipts before it commits
// (activateChecked).
func twoPhaseStaged(ctx context.Context, tx pgx.Tx, r *release, e *env) (bool, error) {
	if r.State != StateStaged {
		return false, nil
	}
	ri, err := readRelease(ctx, tx, r.EnvTag, r.Version)
	if err != nil {
		return false, err
	}
	if ri.Rollout.TwoPhase() || e.Current == 0 {
		return ri.Rollout.TwoPhase(), nil
	}
	cur, err := readRelease(ctx, tx, r.EnvTag, e.Current)
	if err != nil {
		return false, err
	}
	return cur.Rollout.TwoPhase(), nil
}

// activateChecked is the activation of a STAGED release in a two-phase
// environment: the readiness wait saw every candidate READY, but a
// receipt writer takes no lock, so a runtime may have REJECTED its
// candidate since that check. The moves are made in a savepoint and, as
// the transaction's last statement before its commit, one indexed query
// reads the latest candidate receipt of every identity moved: a REJECTED
// one rolls the moves back to the savepoint and the release is marked
// FAILED instead (as the wait does: command NOT_APPLIED, the environment's
// pending claim released, the release's candidate pointers removed,
// candidate.rejected and release.failed recorded), all in the same
// transaction, and the refusal is a *RejectedError. A receipt committed
// after that query is not seen: the next check is the health gate's.
func (s *Store) activateChecked(ctx context.Context, tx pgx.Tx, a activation, r *release, e *env, now time.Time) (activateOutcome, error) {
	r0, e0 := *r, *e
	sp, err := tx.Begin(ctx)
	if err != nil {
		return activateOutcome{}, dbErr("open the activation's savepoint", err)
	}
	out, err := s.activateMoves(ctx, sp, a, r, e, now)
	if err != nil {
		return activateOutcome{}, err
	}
	rej, err := rejectedCandidate(ctx, sp, a.cmd.EnvTag, a.cmd.Release, a.cmd.ID)
	if err != nil {
		return activateOutcome{}, err
	}
	if rej == nil {
		if err := sp.Commit(ctx); err != nil {
			return activateOutcome{}, dbErr("release the activation's savepoint", err)
		}
		return out, nil
	}
	if err := sp.Rollback(ctx); err != nil {
		return activateOutcome{}, dbErr("roll the activation back to its savepoint", err)
	}
	*r, *e = r0, e0
	if err := s.fault(ctx, "activate:rejected", tx); err != nil {
		return activateOutcome{}, err
	}
	if err := setEnv(ctx, tx, e, e.Current, 0, "", now); err != nil {
		return activateOutcome{}, err
	}
	events, err := s.failRejected(ctx, tx, r, a.cmd, a.actor, a.reason, &rej.RejectedError, now,
		map[string]any{"evidenceId": rej.evidenceID, "checkedBy": "activation"},
		"candidate rejected before the activation committed; no pointer moved")
	if err != nil {
		return activateOutcome{}, err
	}
	return activateOutcome{refused: &rej.RejectedError, events: events}, nil
}

// failRejected marks STAGED release r FAILED in tx because a runtime
// rejected its candidate (rej), as the readiness wait (failRelease) and
// the activation's last check (activateChecked) both do: journaled with
// the identity, snapshot and reason (and extra evidence), command cmd
// settled NOT_APPLIED, the release's own candidate pointers removed (not
// those of an older release still staged, whose candidates the Config
// Server serves again), candidate.rejected and release.failed recorded.
// It returns those events, for the caller to emit once tx commits.
func (s *Store) failRejected(ctx context.Context, tx pgx.Tx, r *release, cmd command, actor, reason string,
	rej *RejectedError, now time.Time, extra map[string]any, detail string) ([]Event, error) {
	evidence := map[string]any{"identity": rej.Identity, "snapshotId": rej.SnapshotID, "result": CandidateRejected,
		"receiptReason": rej.Reason}
	for k, v := range extra {
		evidence[k] = v
	}
	if err := mutate(ctx, tx, r, event{Kind: kindCandidateRejected, ToState: StateFailed, ToOutcome: OutcomeNotApplied,
		CommandID: cmd.ID, Hash: cmd.Hash, Actor: actor, Reason: reason, RecordedAt: now, Evidence: evidence}); err != nil {
		return nil, err
	}
	if err := settleCommand(ctx, tx, cmd.ID, OutcomeNotApplied, nil, now); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `DELETE FROM configpub.candidate_pointer WHERE env_tag = $1 AND release_version = $2`,
		r.EnvTag, r.Version); err != nil {
		return nil, dbErr("clear the failed release's candidate pointers", err)
	}
	events := []Event{
		{Kind: EventRejected, EnvTag: r.EnvTag, Release: r.Version, Actor: actor,
			Detail: fmt.Sprintf("%s rejected candidate %s: %s", rej.Identity, rej.SnapshotID, rej.Reason)},
		{Kind: EventFailed, EnvTag: r.EnvTag, Release: r.Version, State: StateFailed,
			Outcome: OutcomeNotApplied, Actor: actor, Reason: reason, Detail: detail},
	}
	for i := range events {
		if err := s.recordEvent(ctx, tx, &events[i]); err != nil {
			return nil, err
		}
	}
	return events, nil
}

// rejection is a REJECTED candidate receipt found by rejectedCandidate.
type rejection struct {
	RejectedError
	evidenceID int64
}

// rejectedCandidate returns, of the identities that the activation command
// cmdID moved (its pointer_move rows), the first whose latest candidate
// receipt about exactly the snapshot it moved to, reported since the
// release was staged, is REJECTED; nil when there is none. One query: the
// command's moves by the pointer_move_command index, and each identity's
// newest receipt by the runtime_evidence_receipt index.
func rejectedCandidate(ctx context.Context, q querier, envTag string, version int64, cmdID string) (*rejection, error) {
	rej := rejection{RejectedError: RejectedError{EnvTag: envTag, Release: version}}
	err := q.QueryRow(ctx, `SELECT m.host || '/' || m.service_id, e.snapshot_id::text, e.reason, e.evidence_id
		FROM configpub.pointer_move m
		CROSS JOIN LATERAL (SELECT e.snapshot_id, e.outcome, e.reason, e.evidence_id
			FROM configpub.runtime_evidence e
			WHERE e.env_tag = m.env_tag AND e.host = m.host AND e.service_id = m.service_id AND e.kind = 'receipt'
			  AND e.phase = 'candidate' AND e.snapshot_id = m.next_snapshot_id
			  AND e.reported_at >= coalesce((SELECT j.recorded_at FROM configpub.config_release_journal j
				WHERE j.env_tag = $1 AND j.release_version = $2 AND j.event_kind = '`+ActionStage+`'
				ORDER BY j.sequence LIMIT 1), '-infinity')
			ORDER BY e.evidence_id DESC LIMIT 1) e
		WHERE m.command_id = $3::text::uuid AND m.env_tag = $1 AND e.outcome = '`+CandidateRejected+`'
		ORDER BY m.host, m.service_id LIMIT 1`, envTag, version, cmdID).Scan(&rej.Identity, &rej.SnapshotID, &rej.Reason, &rej.evidenceID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr("re-check the candidates' receipts", err)
	}
	return &rej, nil
}
