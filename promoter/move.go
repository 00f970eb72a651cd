package promoter

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// MoveInput asks to point an environment at the snapshots of an existing
// release: Activate (forward: a release newer than the current one, or an
// older one never active) or Rollback (an older one that was active).
// Pointer moves only; no snapshot is edited.
type MoveInput struct {
	// CommandID is the command UUID. Re-running with the same id and
	// fields replays or completes the command; the CLI uses a fresh UUID
	// per invocation unless one is given.
	CommandID string
	EnvTag    string
	Release   int64 // the release to activate (rollback: to)
	Actor     string
	Reason    string
	// BreakGlass overrides a freeze window open when Activate takes the
	// environment's lock: the move then journals "break-glass in freeze
	// window NAME: Reason". Without it such a window refuses the
	// activation (*FreezeError). Rollbacks are never frozen. It is not
	// part of the command.
	BreakGlass bool

	// from, when not 0, is the release that must be active when the move
	// takes the environment's lock (RollbackInput.From).
	from int64
}

// RollbackInput is the input of Rollback (ToRelease < current release).
type RollbackInput struct {
	CommandID string
	EnvTag    string
	ToRelease int64
	Actor     string
	Reason    string
	// From, when not 0, is the release the rollback is decided for (the
	// health gate's evidence is about it): if another release is active
	// when the rollback takes the environment's lock, it is refused
	// (ErrConflict) and nothing moves.
	From int64
}

// Activate moves the environment forward to an existing release newer than
// its active one (for example back to the newest release after a
// rollback), or to an older one that was never active (STAGED or
// RECORDED, which Rollback refuses), restoring exactly that release's
// target mapping: every
// identity of the release moves to its snapshot (a retired one comes back)
// and every identity it does not contain is retired. A revoked snapshot in
// the release is ErrRevoked, a moved snapshot outside its activation
// window a *WindowError, a release that does not exist ErrNotFound;
// nothing is written then.
func (s *Store) Activate(ctx context.Context, in MoveInput) (*ActivationResult, error) {
	res, err := s.move(ctx, ActionActivate, &in)
	s.emitMove(ctx, ActionActivate, in.EnvTag, in.Release, in.Actor, in.Reason, res, err)
	if err != nil {
		return nil, fmt.Errorf("activate %s release %d (command %s): %w", in.EnvTag, in.Release, in.CommandID, err)
	}
	return res, nil
}

// Rollback moves the environment back to an existing older release that
// was active before, restoring exactly its target mapping like Activate.
// The release that was active becomes ROLLED_BACK; it stays recorded, and
// the next release is still built on the head (the latest recorded
// release). A release that was never active (STAGED or RECORDED: a
// two-phase release whose activation timed out, a release promote caught
// up) is ErrNeverActive and nothing moves: a rollback is not frozen and
// waits for no candidate, so it returns only to what ran; ActivateRelease
// moves to such a release with an activation's checks.
func (s *Store) Rollback(ctx context.Context, in RollbackInput) (*ActivationResult, error) {
	mi := MoveInput{CommandID: in.CommandID, EnvTag: in.EnvTag, Release: in.ToRelease, Actor: in.Actor, Reason: in.Reason, from: in.From}
	res, err := s.move(ctx, ActionRollback, &mi)
	s.emitMove(ctx, ActionRollback, in.EnvTag, in.ToRelease, in.Actor, in.Reason, res, err)
	if err != nil {
		return nil, fmt.Errorf("rollback %s to release %d (command %s): %w", in.EnvTag, in.ToRelease, in.CommandID, err)
	}
	return res, nil
}

// errActiveChanged refuses a move decided for an active release that is no
// longer active when the move takes the environment's lock (MoveInput.from).
var errActiveChanged = fmt.Errorf("the active release changed: %w", ErrConflict)

func (in *MoveInput) validate() error {
	if err := checkUUID("commandId", in.CommandID); err != nil {
		return err
	}
	if in.EnvTag == "" {
		return invalid("envTag", "empty")
	}
	if in.Release <= 0 {
		return invalid("release", "%d: want a positive release version", in.Release)
	}
	if in.Actor == "" {
		return invalid("actor", "empty")
	}
	if in.Reason == "" {
		return invalid("reason", "empty")
	}
	return nil
}

// move runs an Activate or Rollback: the intent transaction, then the
// activation. It sets in.Reason to the reason journaled (an activation's
// freeze check may have broken a window).
func (s *Store) move(ctx context.Context, action string, in *MoveInput) (*ActivationResult, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := s.readyToSign(ctx); err != nil {
		return nil, err
	}
	cmd := moveCommand(action, *in)
	if res, ok, err := s.replay(ctx, cmd); err != nil || ok {
		return res, err
	}
	var state intentState
	var recorded *ActivationResult
	asked := in.Reason
	err := s.runTx(ctx, func(tx pgx.Tx) error {
		var err error
		in.Reason = asked // a retried transaction settles it again
		state, recorded, err = s.moveIntent(ctx, tx, cmd, in)
		return err
	})
	if err != nil {
		in.Reason = asked
		return nil, err
	}
	if state == intentReplay {
		return recorded, nil
	}
	return s.activate(ctx, activation{cmd: cmd, actor: in.Actor, reason: in.Reason})
}

// moveCommand is the ledger command of an Activate or Rollback.
func moveCommand(action string, in MoveInput) command {
	h := newHasher(action)
	h.str(in.EnvTag)
	h.int(in.Release)
	h.str(in.Actor)
	h.str(in.Reason)
	return command{ID: in.CommandID, Hash: h.sum(), Action: action, EnvTag: in.EnvTag, Release: in.Release}
}

// moveIntent is the intent transaction of Activate and Rollback. Under the
// environment's lock an activation checks the freeze windows
// (freezeAtMove) and sets in.Reason to the reason to journal; a rollback is
// never frozen.
func (s *Store) moveIntent(ctx context.Context, tx pgx.Tx, cmd command, in *MoveInput) (intentState, *ActivationResult, error) {
	now := s.now()
	prior, err := claimCommand(ctx, tx, cmd, in.Actor, now)
	if err != nil {
		return 0, nil, err
	}
	if prior != nil {
		state, res, retry, err := resumePrior(prior)
		if state == intentContinue && err == nil {
			// The intent decided the reason (a window broken or not).
			in.Reason, err = intentReason(ctx, tx, cmd)
		}
		if !retry {
			return state, res, err
		}
		// Definitely did not happen: retry under the same command.
		if err := settleCommand(ctx, tx, cmd.ID, OutcomeUnconfirmed, nil, now); err != nil {
			return 0, nil, err
		}
	}
	if err := s.fault(ctx, "move:command", tx); err != nil {
		return 0, nil, err
	}
	e, err := lockExistingEnv(ctx, tx, in.EnvTag)
	if err != nil {
		return 0, nil, err
	}
	if e.Pending != 0 {
		return 0, nil, &CASError{EnvTag: in.EnvTag, Expected: e.Current, Actual: e.Current, Pending: e.Pending, PendingCommand: e.PendingCmd}
	}
	if in.from != 0 && e.Current != in.from {
		return 0, nil, fmt.Errorf("release %d of %s is active, not release %d the %s was decided for; nothing moved: %w",
			e.Current, in.EnvTag, in.from, cmd.Action, errActiveChanged)
	}
	r, err := lockRelease(ctx, tx, in.EnvTag, in.Release)
	if errors.Is(err, ErrNotFound) {
		latest := "no release is recorded"
		if e.Head != 0 {
			latest = fmt.Sprintf("the latest recorded release is %d", e.Head)
		}
		return 0, nil, fmt.Errorf("release %d does not exist in %s (%s): %w", in.Release, in.EnvTag, latest, ErrNotFound)
	}
	if err != nil {
		return 0, nil, err
	}
	switch {
	case r.State == StateFailed:
		return 0, nil, fmt.Errorf("release %d of %s is FAILED (a candidate was rejected); nothing moved: %w", in.Release, in.EnvTag, ErrReleaseFailed)
	case r.Outcome == OutcomeIntegrityError:
		return 0, nil, integrityRefusal(in.EnvTag, in.Release)
	case in.Release == e.Current:
		return 0, nil, fmt.Errorf("release %d is already the active release of %s; nothing moved: %w", in.Release, in.EnvTag, ErrConflict)
	case cmd.Action == ActionRollback && in.Release > e.Current:
		return 0, nil, invalid("release", "%d is newer than the active release %d of %s: use activate", in.Release, e.Current, in.EnvTag)
	case cmd.Action == ActionRollback && NeverActive(r.State):
		// A rollback returns to what ran before, and skips what an
		// activation checks (freeze windows; in a two-phase environment,
		// every candidate READY): it never moves to a release that never
		// ran.
		return 0, nil, fmt.Errorf("release %d of %s is %s: it was never the active release, so a rollback cannot return to it; "+
			"nothing moved (to move to it with the checks of an activation — freeze windows, two-phase readiness — use activate: "+
			"configpub activate --env %s --release %d): %w", in.Release, in.EnvTag, r.State, in.EnvTag, in.Release, ErrNeverActive)
	case cmd.Action == ActionActivate && in.Release < e.Current && !NeverActive(r.State):
		return 0, nil, invalid("release", "%d is older than the active release %d of %s: use rollback", in.Release, e.Current, in.EnvTag)
	}
	if cmd.Action == ActionActivate {
		ri, err := readRelease(ctx, tx, in.EnvTag, in.Release)
		if err != nil {
			return 0, nil, err
		}
		breakGlass := ""
		if in.BreakGlass {
			breakGlass = in.Reason
		}
		if in.Reason, err = s.freezeAtMove(ctx, tx, in.EnvTag, &ri.Rollout, e.Current, in.Reason, breakGlass); err != nil {
			return 0, nil, err
		}
	}
	if id, err := revokedTarget(ctx, tx, in.EnvTag, in.Release); err != nil {
		return 0, nil, err
	} else if id != "" {
		return 0, nil, revokedReleaseError(in.EnvTag, in.Release, id)
	}
	if w, err := outsideWindow(ctx, tx, in.EnvTag, in.Release, now); err != nil {
		return 0, nil, err
	} else if w != nil {
		return 0, nil, w
	}
	if err := mutate(ctx, tx, r, event{Kind: cmd.Action + "-intent", ToState: r.State, ToOutcome: OutcomeUnconfirmed,
		CommandID: cmd.ID, Hash: cmd.Hash, Actor: in.Actor, Reason: in.Reason, RecordedAt: now,
		Evidence: map[string]any{"fromRelease": e.Current}}); err != nil {
		return 0, nil, err
	}
	if err := s.fault(ctx, "move:intent", tx); err != nil {
		return 0, nil, err
	}
	return intentNew, nil, setEnv(ctx, tx, e, e.Current, in.Release, cmd.ID, now)
}
