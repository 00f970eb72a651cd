package promoter

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// stageRecorded stages a RECORDED release (one promote caught up, or
// recorded without activation) that a two-phase activation is asked to
// move to: in one transaction under the environment's lock it writes the
// release's candidate pointers and signed candidate manifests, as Stage
// does, and moves the release RECORDED → STAGED with a "stage" journal row
// under a stage command derived from the activation's command (so a
// re-run of the activation finds it staged). Only readiness receipts
// reported from then on count for it. A release no longer RECORDED when
// the lock is taken (staged, activated or failed meanwhile) is left as it
// is; the caller reads its state again. A release with a revoked snapshot
// is ErrRevoked and nothing is written.
func (s *Store) stageRecorded(ctx context.Context, in MoveInput) error {
	if err := s.readyToSign(ctx); err != nil {
		return err // the candidate manifests are signed when staged
	}
	cmd := stageRecordedCommand(in)
	var staged *StageResult
	err := s.runTx(ctx, func(tx pgx.Tx) error {
		staged = nil
		now := s.now()
		e, err := lockExistingEnv(ctx, tx, in.EnvTag)
		if err != nil {
			return err
		}
		if e.Pending != 0 {
			return &CASError{EnvTag: in.EnvTag, Expected: e.Current, Actual: e.Current, Pending: e.Pending, PendingCommand: e.PendingCmd}
		}
		r, err := lockRelease(ctx, tx, in.EnvTag, in.Release)
		if err != nil {
			return err
		}
		if r.State != StateRecorded || r.Outcome == OutcomeIntegrityError || in.Release == e.Current {
			return nil
		}
		if id, err := revokedTarget(ctx, tx, in.EnvTag, in.Release); err != nil {
			return err
		} else if id != "" {
			return fmt.Errorf("release %s/%d: snapshot %s: %w", in.EnvTag, in.Release, id, ErrRevoked)
		}
		if replayed, err := claimSingle(ctx, tx, cmd, in.Actor, now, &StageResult{}); err != nil || replayed {
			return err
		}
		targets, moving, err := s.stageCandidates(ctx, tx, in.EnvTag, in.Release, e.Epoch, now)
		if err != nil {
			return err
		}
		var base int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(base_release_version, 0) FROM configpub.config_release
			WHERE env_tag = $1 AND release_version = $2`, in.EnvTag, in.Release).Scan(&base); err != nil {
			return dbErr(fmt.Sprintf("read release %s/%d", in.EnvTag, in.Release), err)
		}
		res := StageResult{CommandID: cmd.ID, EnvTag: in.EnvTag, ReleaseVersion: in.Release, BaseRelease: base,
			ActiveRelease: e.Current, Targets: targets, Moving: moving, TwoPhase: true, StagedAt: now}
		if err := s.markStaged(ctx, tx, r, cmd, in.Actor, in.Reason, &res, now); err != nil {
			return err
		}
		staged = &res
		return nil
	})
	if err != nil {
		return fmt.Errorf("stage the recorded release %d of %s for its two-phase activation: %w", in.Release, in.EnvTag, err)
	}
	if staged != nil {
		s.emit(ctx, stagedEvent(staged, in.Actor, in.Reason))
	}
	return nil
}

// stageRecordedCommand is the ledger command under which an activation
// (command in.CommandID) stages the RECORDED release it moves to.
func stageRecordedCommand(in MoveInput) command {
	h := newHasher(ActionStage)
	h.str(in.EnvTag)
	h.int(in.Release)
	h.str(in.CommandID)
	return command{ID: uuid.NewSHA1(uuid.NameSpaceOID, []byte("configpub/stage-recorded/"+in.EnvTag+"/"+in.CommandID)).String(),
		Hash: h.sum(), Action: ActionStage, EnvTag: in.EnvTag, Release: in.Release}
}
