package promoter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
)

// StageResult is the recorded result of Stage. A replay returns the same
// value with Replayed set.
type StageResult struct {
	CommandID      string    `json:"commandId"`
	EnvTag         string    `json:"envTag"`
	ReleaseVersion int64     `json:"releaseVersion"`
	BaseRelease    int64     `json:"baseRelease"`
	ActiveRelease  int64     `json:"activeRelease"` // the active release when staged (0 = none)
	Targets        int       `json:"targets"`
	Moving         int       `json:"moving"` // targets an activation would move now
	TwoPhase       bool      `json:"twoPhase"`
	StagedAt       time.Time `json:"stagedAt"`
	Replayed       bool      `json:"-"`
	// On a replay: the release's lifecycle state now and the environment's
	// active release now (a release staged, then activated and rolled
	// back since, is ROLLED_BACK; nothing is staged again).
	StateNow  string `json:"-"`
	ActiveNow int64  `json:"-"`
}

// Stage records a compiled release as STAGED in one transaction: the same
// checks and rows as RecordAndActivate's intent (command ledger,
// compare-and-swap on the environment's head, artifacts, immutable
// snapshots, release, targets), plus the candidate pointers the Config
// Server serves for configPhase=candidate, each with a signed candidate
// delivery manifest (signCandidates); no current pointer moves and the
// execution outcome is NOT_REQUESTED. Activate activates it later.
// ErrUnconfirmed: re-run the same input.
func (s *Store) Stage(ctx context.Context, in ReleaseInput) (*StageResult, error) {
	res, err := s.stage(ctx, &in)
	if err != nil {
		return nil, fmt.Errorf("stage %s release %d (command %s): %w", in.EnvTag, in.ReleaseVersion, in.CommandID, err)
	}
	return res, nil
}

func (s *Store) stage(ctx context.Context, in *ReleaseInput) (*StageResult, error) {
	cmd, err := unmovedCommand(in, ActionStage)
	if err != nil {
		return nil, err
	}
	if err := s.readyToSign(ctx); err != nil {
		return nil, err // the candidate manifests are signed when staged
	}
	var res StageResult
	asked := in.Reason
	err = s.runTx(ctx, func(tx pgx.Tx) error {
		res, in.Reason = StageResult{}, asked // a retried transaction settles the reason again
		now := s.now()
		replayed, err := claimSingle(ctx, tx, cmd, in.Actor, now, &res)
		if err != nil || replayed {
			res.Replayed = replayed
			return err
		}
		e, err := s.insertUnmoved(ctx, tx, in, cmd, now)
		if err != nil {
			return err
		}
		_, moving, err := s.stageCandidates(ctx, tx, in.EnvTag, in.ReleaseVersion, e.Epoch, now)
		if err != nil {
			return err
		}
		inForce, _, err := rolloutInForce(ctx, tx, in.EnvTag)
		if err != nil {
			return err
		}
		res = StageResult{CommandID: cmd.ID, EnvTag: in.EnvTag, ReleaseVersion: in.ReleaseVersion,
			BaseRelease: in.BaseReleaseVersion, ActiveRelease: e.Current, Targets: len(in.Targets), Moving: moving,
			TwoPhase: in.Rollout.TwoPhase() || inForce.TwoPhase(), StagedAt: now}
		r := &release{EnvTag: in.EnvTag, Version: in.ReleaseVersion, Revision: 1, State: StateRecorded, Outcome: OutcomeUnconfirmed, LastCmd: cmd.ID}
		return s.markStaged(ctx, tx, r, cmd, in.Actor, in.Reason, &res, now)
	})
	if err != nil {
		return nil, err
	}
	if res.Replayed {
		if err := s.pool.QueryRow(ctx, `SELECT r.lifecycle_state, coalesce(e.current_release_version, 0)
			FROM configpub.config_release r JOIN configpub.environment e ON e.env_tag = r.env_tag
			WHERE r.env_tag = $1 AND r.release_version = $2`, res.EnvTag, res.ReleaseVersion).Scan(&res.StateNow, &res.ActiveNow); err != nil {
			return nil, dbErr(fmt.Sprintf("read release %s/%d", res.EnvTag, res.ReleaseVersion), err)
		}
	} else {
		s.emit(ctx, stagedEvent(&res, in.Actor, in.Reason))
	}
	return &res, nil
}

// stageCandidates writes a candidate pointer for every target of release
// version of envTag (one a target already has is kept) and signs their
// candidate manifests at revocation epoch epoch. It returns how many
// targets the release has and how many of them would move.
func (s *Store) stageCandidates(ctx context.Context, tx pgx.Tx, envTag string, version, epoch int64, now time.Time) (targets, moving int, err error) {
	err = tx.QueryRow(ctx, `WITH c AS (
			INSERT INTO configpub.candidate_pointer (host, service_id, env_tag, release_version, snapshot_id, staged_at)
			SELECT rt.host, rt.service_id, rt.env_tag, rt.release_version, rt.snapshot_id, $3
			FROM configpub.config_release_target rt WHERE rt.env_tag = $1 AND rt.release_version = $2
			ON CONFLICT DO NOTHING
		)
		SELECT count(*), count(*) FILTER (WHERE `+movingTargets+`) FROM configpub.config_release_target rt
		`+targetPointer+`
		WHERE rt.env_tag = $1 AND rt.release_version = $2`, envTag, version, now).Scan(&targets, &moving)
	if err != nil {
		return 0, 0, dbErr("insert candidate pointers", err)
	}
	if _, err := s.signCandidates(ctx, tx, envTag, version, epoch, now); err != nil {
		return 0, 0, err
	}
	return targets, moving, nil
}

// markStaged moves release r to STAGED under command cmd, journaling res
// as the staging's evidence, records its staged event and settles cmd
// APPLIED with res.
func (s *Store) markStaged(ctx context.Context, tx pgx.Tx, r *release, cmd command, actor, reason string, res *StageResult, now time.Time) error {
	if err := mutate(ctx, tx, r, event{Kind: ActionStage, ToState: StateStaged, ToOutcome: OutcomeNotRequested,
		CommandID: cmd.ID, Hash: cmd.Hash, Actor: actor, Reason: reason, RecordedAt: now, Evidence: *res}); err != nil {
		return err
	}
	ev := stagedEvent(res, actor, reason)
	if err := s.recordEvent(ctx, tx, &ev); err != nil {
		return err
	}
	return settleCommand(ctx, tx, cmd.ID, OutcomeApplied, *res, now)
}

// stagedEvent is the event of a staging (its id and time derive from the
// command and the staging: see moveEvent).
func stagedEvent(res *StageResult, actor, reason string) Event {
	return Event{ID: eventID(res.CommandID, EventStaged), Kind: EventStaged, EnvTag: res.EnvTag, Release: res.ReleaseVersion,
		State: StateStaged, Actor: actor, Reason: reason, Detail: fmt.Sprintf("%d targets, %d would move", res.Targets, res.Moving),
		At: res.StagedAt}
}

// unmovedCommand checks in for Stage and Record (action) and returns its
// ledger command.
func unmovedCommand(in *ReleaseInput, action string) (command, error) {
	if err := in.validate(); err != nil {
		return command{}, err
	}
	if err := in.Rollout.Validate(); err != nil {
		return command{}, invalid("rollout", "%v", err)
	}
	if err := in.verifyArtifacts(); err != nil {
		return command{}, err
	}
	h := newHasher(action)
	h.str(in.commandHash())
	return command{ID: in.CommandID, Hash: h.sum(), Action: action, EnvTag: in.EnvTag, Release: in.ReleaseVersion}, nil
}

// insertUnmoved is what Stage and Record write before their own rows: it
// locks the environment and compare-and-swaps its head against
// in.BaseReleaseVersion (*CASError; also while an activation is in
// flight), then stores the release's artifacts, snapshots, release row
// (journaled) and targets, refusing a release with a revoked snapshot. With
// in.BreakGlassReason it sets in.Reason to the reason to journal: the
// window broken now, if any (freezeAtMove). It returns the environment as
// locked.
func (s *Store) insertUnmoved(ctx context.Context, tx pgx.Tx, in *ReleaseInput, cmd command, now time.Time) (*env, error) {
	e, err := lockEnv(ctx, tx, in.EnvTag, now)
	if err != nil {
		return nil, err
	}
	if e.Pending != 0 || e.Head != in.BaseReleaseVersion {
		return nil, &CASError{EnvTag: in.EnvTag, Expected: in.BaseReleaseVersion, Actual: e.Head, Active: e.Current, Pending: e.Pending, PendingCommand: e.PendingCmd}
	}
	if in.BreakGlassReason != "" {
		// Whether a window is broken is settled here, under the lock, and
		// journaled; it is not part of the command, whose hash covers the
		// reason asked (a re-run after the window closed is the same
		// command). Staging and recording are not refused inside a window
		// here: promote refuses them before, without --break-glass.
		if in.Reason, err = s.freezeAtMove(ctx, tx, in.EnvTag, &in.Rollout, e.Current, in.Reason, in.BreakGlassReason); err != nil {
			return nil, err
		}
	}
	if err := s.recordArtifacts(ctx, tx, in); err != nil {
		return nil, err
	}
	if err := insertSnapshots(ctx, tx, in.Targets, s.opts.snapshotBatch); err != nil {
		return nil, err
	}
	if err := insertRelease(ctx, tx, in, cmd, now); err != nil {
		return nil, err
	}
	if err := insertReleaseTargets(ctx, tx, in); err != nil {
		return nil, err
	}
	if id, err := revokedTarget(ctx, tx, in.EnvTag, in.ReleaseVersion); err != nil {
		return nil, err
	} else if id != "" {
		return nil, fmt.Errorf("snapshot %s: %w", id, ErrRevoked)
	}
	return e, nil
}

// releaseInfo is what the rollout layer reads of a release.
type releaseInfo struct {
	State   string
	Outcome string
	Rollout bundle.Rollout
}

// readRelease reads a release's state and rollout policy (ErrNotFound when
// it is not recorded).
func readRelease(ctx context.Context, q querier, envTag string, version int64) (*releaseInfo, error) {
	var ri releaseInfo
	var raw []byte
	err := q.QueryRow(ctx, `SELECT lifecycle_state, execution_outcome, rollout FROM configpub.config_release
		WHERE env_tag = $1 AND release_version = $2`, envTag, version).Scan(&ri.State, &ri.Outcome, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("release %d of %s: %w", version, envTag, ErrNotFound)
	}
	if err != nil {
		return nil, dbErr(fmt.Sprintf("read release %s/%d", envTag, version), err)
	}
	if err := json.Unmarshal(raw, &ri.Rollout); err != nil {
		return nil, fmt.Errorf("release %s/%d: recorded rollout policy: %v: %w", envTag, version, err, ErrIntegrity)
	}
	return &ri, nil
}

// RolloutInForce returns the rollout policy recorded with envTag's active
// release and that release's version; nil and 0 when no release is active
// (or the environment does not exist). Its freeze windows and its
// two-phase requirement hold for any release that would replace the
// active one, whatever that release's own policy says: a release cannot
// lift the policy it is activated under (its own holds once it is
// active). Rollbacks are never frozen.
func (s *Store) RolloutInForce(ctx context.Context, envTag string) (*bundle.Rollout, int64, error) {
	return rolloutInForce(ctx, s.pool, envTag)
}

func rolloutInForce(ctx context.Context, q querier, envTag string) (*bundle.Rollout, int64, error) {
	var v int64
	err := q.QueryRow(ctx, `SELECT coalesce(current_release_version, 0) FROM configpub.environment WHERE env_tag = $1`, envTag).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && v == 0) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, dbErr("read the active release of "+envTag, err)
	}
	ri, err := readRelease(ctx, q, envTag, v)
	if err != nil {
		return nil, 0, err
	}
	return &ri.Rollout, v, nil
}

// CheckFreezeInForce is CheckFreeze for a release about to replace the
// active one: rollout (the release's own policy) and inForce (the active
// release's, RolloutInForce; nil when none) are both checked, the active
// one first, and a window of the active release's policy is named as such
// (*FreezeError.ActiveRelease).
func CheckFreezeInForce(envTag string, rollout, inForce *bundle.Rollout, activeRelease int64, t time.Time, breakGlass bool, reason string) (string, error) {
	if inForce != nil {
		r, err := CheckFreeze(envTag, inForce, t, breakGlass, reason)
		var fe *FreezeError
		if errors.As(err, &fe) {
			fe.ActiveRelease = activeRelease
		}
		if err != nil || r != reason {
			return r, err
		}
	}
	return CheckFreeze(envTag, rollout, t, breakGlass, reason)
}

// clearCandidates removes the candidate pointers of every release of
// envTag up to version (activated, superseded by it, or failed): the Config
// Server stops serving them as candidates.
func clearCandidates(ctx context.Context, tx pgx.Tx, envTag string, version int64) error {
	if _, err := tx.Exec(ctx, `DELETE FROM configpub.candidate_pointer WHERE env_tag = $1 AND release_version <= $2`,
		envTag, version); err != nil {
		return dbErr("clear candidate pointers", err)
	}
	return nil
}

// freezeAtMove is the freeze check of a forward move (promote's recording
// and activation, activate, activate after a two-phase wait), made inside
// the move's intent transaction once it holds the environment's lock, so
// that no window can open between the check and the move: it reads the
// clock then, and checks rollout (the release's own policy) and the policy
// of current (the active release, 0 = none) with CheckFreezeInForce. It
// returns the reason to journal: reason outside every window; inside one,
// with breakGlass (the operator's reason, "" = not broken), "break-glass
// in freeze window NAME: breakGlass"; without, a *FreezeError.
func (s *Store) freezeAtMove(ctx context.Context, tx pgx.Tx, envTag string, rollout *bundle.Rollout, current int64, reason, breakGlass string) (string, error) {
	var inForce *bundle.Rollout
	if current != 0 {
		ri, err := readRelease(ctx, tx, envTag, current)
		if err != nil {
			return "", err
		}
		inForce = &ri.Rollout
	}
	got, err := CheckFreezeInForce(envTag, rollout, inForce, current, s.now(), breakGlass != "", breakGlass)
	if err != nil {
		return "", err
	}
	if breakGlass != "" && got != breakGlass {
		return got, nil // a window was broken
	}
	return reason, nil
}

// intentReason is the reason the intent of cmd journaled (the one its
// freeze check settled on), which the activation that completes the
// intent journals too.
func intentReason(ctx context.Context, tx pgx.Tx, cmd command) (string, error) {
	var reason string
	err := tx.QueryRow(ctx, `SELECT reason FROM configpub.config_release_journal
		WHERE env_tag = $1 AND release_version = $2 AND command_id = $3::text::uuid
		ORDER BY sequence DESC LIMIT 1`, cmd.EnvTag, cmd.Release, cmd.ID).Scan(&reason)
	if err != nil {
		return "", dbErr(fmt.Sprintf("read the reason of command %s", cmd.ID), err)
	}
	return reason, nil
}

// breakGlassReason is the journaled reason of a command that overrode a
// freeze window.
func breakGlassReason(w *bundle.FreezeWindow, reason string) string {
	return fmt.Sprintf("break-glass in freeze window %q: %s", w.Name, reason)
}

// CheckFreeze returns a *FreezeError when rollout freezes envTag at t and
// the caller does not break the glass. With breakGlass inside a window it
// returns the reason to journal instead of reason ("break-glass in freeze
// window NAME: reason"); outside every window it returns reason unchanged.
func CheckFreeze(envTag string, rollout *bundle.Rollout, t time.Time, breakGlass bool, reason string) (string, error) {
	w := rollout.FrozenAt(t)
	if w == nil {
		return reason, nil
	}
	if !breakGlass {
		return "", &FreezeError{EnvTag: envTag, Window: *w, At: t.UTC()}
	}
	if reason == "" {
		return "", invalid("reason", "--break-glass needs a reason")
	}
	return breakGlassReason(w, reason), nil
}
