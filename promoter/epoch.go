package promoter

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ActionEpoch is the command-ledger action of RaiseEpoch.
const ActionEpoch = "epoch"

// EpochInput raises an environment's revocation epoch.
type EpochInput struct {
	CommandID string // command UUID; the same id and fields replay
	EnvTag    string
	Epoch     int64 // the new epoch: above the environment's current one
	Actor     string
	Reason    string
}

// EpochResult is the recorded result of RaiseEpoch.
type EpochResult struct {
	CommandID string    `json:"commandId"`
	EnvTag    string    `json:"envTag"`
	From      int64     `json:"from"`
	To        int64     `json:"to"`
	Release   int64     `json:"release"`  // the active release, whose journal records the raise
	Resigned  int       `json:"resigned"` // current pointers re-signed with the new epoch
	At        time.Time `json:"at"`
	// Skipped lists, in identity order, the first SkippedListed current
	// identities not re-signed: their snapshot is revoked (its lease runs
	// out), or their pointer has no lease window; SkippedCount counts them
	// all.
	Skipped      []string `json:"skipped,omitempty"`
	SkippedCount int      `json:"skippedCount,omitempty"`
	Replayed     bool     `json:"-"`
}

// RaiseEpoch raises envTag's revocation epoch, the authoritative epoch of
// its delivery manifests (never below a snapshot's compiled epoch), and
// re-signs every current, unretired, unrevoked pointer with it in the same
// transaction: same snapshot and activatedAt, a higher sequence, a fresh
// lease and one delivery_manifest row (kind 'resign') each, one NOTIFY
// payload per batch of identities, and one journal row on the active
// release. A runtime that has seen the new
// epoch then refuses any manifest with a lower one. The epoch is never
// lowered: an epoch not above the current one is ErrInvalid. Every later
// pointer move and renewal signs at least this epoch.
func (s *Store) RaiseEpoch(ctx context.Context, in EpochInput) (*EpochResult, error) {
	res, err := s.raiseEpoch(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("raise revocation epoch of %s to %d (command %s): %w", in.EnvTag, in.Epoch, in.CommandID, err)
	}
	return res, nil
}

func (s *Store) raiseEpoch(ctx context.Context, in EpochInput) (*EpochResult, error) {
	if in.Epoch <= 0 {
		return nil, invalid("epoch", "%d: want a positive epoch", in.Epoch)
	}
	cmd, err := s.resignCommand(ActionEpoch, ResignInput{CommandID: in.CommandID, EnvTag: in.EnvTag, Actor: in.Actor, Reason: in.Reason}, in.Epoch)
	if err != nil {
		return nil, err
	}
	return s.resignAll(ctx, cmd, in.EnvTag, in.Epoch, in.Actor, in.Reason)
}

// resignCommand checks the input of RaiseEpoch (action ActionEpoch, epoch
// the new one) or Resign (ActionResign) and returns its ledger command.
func (s *Store) resignCommand(action string, in ResignInput, epoch int64) (command, error) {
	if err := checkUUID("commandId", in.CommandID); err != nil {
		return command{}, err
	}
	switch {
	case in.EnvTag == "":
		return command{}, invalid("envTag", "empty")
	case in.Actor == "":
		return command{}, invalid("actor", "empty")
	case in.Reason == "":
		return command{}, invalid("reason", "empty")
	case s.opts.Signer == nil:
		return command{}, ErrNoSigner
	}
	h := newHasher(action)
	h.str(in.EnvTag)
	if action == ActionEpoch {
		h.int(epoch) // where RaiseEpoch's recorded commands hash it
	}
	h.str(in.Actor)
	h.str(in.Reason)
	return command{ID: in.CommandID, Hash: h.sum(), Action: action, EnvTag: in.EnvTag}, nil
}

// ActionResign is the command-ledger action of Resign.
const ActionResign = "resign"

// ResignInput re-signs an environment's current pointers.
type ResignInput struct {
	CommandID string // command UUID; the same id and fields replay
	EnvTag    string
	Actor     string
	Reason    string
}

// Resign re-signs every current, unretired, unrevoked pointer of envTag as
// RaiseEpoch does, without raising the epoch: the same snapshot and
// activatedAt, a higher sequence — never below the time of the re-signing
// in microseconds, so above every sequence the store issued before it — a
// fresh lease, one delivery_manifest row (kind 'resign') each and one
// journal row on the active release. It is what makes runtimes take the
// current pointers again after the store was restored from a backup
// taken before pointer moves they applied: a renewal keeps the sequence
// they refuse as a regression, and activating the active release moves
// nothing.
func (s *Store) Resign(ctx context.Context, in ResignInput) (*EpochResult, error) {
	res, err := s.resign(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("re-sign the current pointers of %s (command %s): %w", in.EnvTag, in.CommandID, err)
	}
	return res, nil
}

func (s *Store) resign(ctx context.Context, in ResignInput) (*EpochResult, error) {
	cmd, err := s.resignCommand(ActionResign, in, 0)
	if err != nil {
		return nil, err
	}
	return s.resignAll(ctx, cmd, in.EnvTag, 0, in.Actor, in.Reason)
}

// resignAll re-signs every current pointer of envTag under cmd, with the
// revocation epoch raised to epoch first (0: kept), and journals it on the
// active release.
func (s *Store) resignAll(ctx context.Context, cmd command, envTag string, epoch int64, actor, reason string) (*EpochResult, error) {
	if err := s.readyToSign(ctx); err != nil {
		return nil, err
	}
	var res EpochResult
	err := s.runTx(ctx, func(tx pgx.Tx) error {
		now := s.now()
		replayed, err := claimSingle(ctx, tx, cmd, actor, now, &res)
		if err != nil || replayed {
			res.Replayed = replayed
			if replayed && res.SkippedCount == 0 {
				res.SkippedCount = len(res.Skipped) // recorded before the count was
			}
			return err
		}
		e, err := lockExistingEnv(ctx, tx, envTag)
		if err != nil {
			return err
		}
		switch {
		case e.Pending != 0:
			return &CASError{EnvTag: envTag, Expected: e.Head, Actual: e.Head, Active: e.Current, Pending: e.Pending, PendingCommand: e.PendingCmd}
		case e.Current == 0:
			return fmt.Errorf("environment %s has no active release: %w", envTag, ErrNotFound)
		case epoch != 0 && epoch <= e.Epoch:
			return invalid("epoch", "%d is not above the current revocation epoch %d of %s (an epoch is never lowered)", epoch, e.Epoch, envTag)
		}
		kind, to := "resign", e.Epoch
		if epoch != 0 {
			kind, to = "raise-epoch", epoch
			if _, err := tx.Exec(ctx, `UPDATE configpub.environment SET revocation_epoch = $2,
				row_revision = row_revision + 1, updated_at = $3 WHERE env_tag = $1`, envTag, epoch, now); err != nil {
				return dbErr("raise revocation epoch", err)
			}
		}
		resigned, skipped, err := s.reissueAll(ctx, tx, envTag, to, now, writeResign, cmd.ID)
		if err != nil {
			return err
		}
		res = EpochResult{CommandID: cmd.ID, EnvTag: envTag, From: e.Epoch, To: to, Release: e.Current,
			Resigned: resigned, At: now, Skipped: skipped.Items, SkippedCount: skipped.Count}
		r, err := lockRelease(ctx, tx, envTag, e.Current)
		if err != nil {
			return err
		}
		if err := mutate(ctx, tx, r, event{Kind: kind, ToState: r.State, ToOutcome: r.Outcome,
			CommandID: cmd.ID, Hash: cmd.Hash, Actor: actor, Reason: reason, RecordedAt: now,
			Evidence: map[string]any{"fromEpoch": e.Epoch, "toEpoch": to, "resigned": resigned}}); err != nil {
			return err
		}
		return settleCommand(ctx, tx, cmd.ID, OutcomeApplied, res, now)
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// later returns now, or prev plus a millisecond when now is not after prev,
// so that a pointer's issuedAt strictly increases even under a fixed clock.
func later(prev, now time.Time) time.Time {
	if !now.After(prev) {
		return prev.Add(time.Millisecond)
	}
	return now
}
