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
	if err := checkUUID("commandId", in.CommandID); err != nil {
		return nil, err
	}
	switch {
	case in.EnvTag == "":
		return nil, invalid("envTag", "empty")
	case in.Epoch <= 0:
		return nil, invalid("epoch", "%d: want a positive epoch", in.Epoch)
	case in.Actor == "":
		return nil, invalid("actor", "empty")
	case in.Reason == "":
		return nil, invalid("reason", "empty")
	case s.opts.Signer == nil:
		return nil, ErrNoSigner
	}
	h := newHasher(ActionEpoch)
	h.str(in.EnvTag)
	h.int(in.Epoch)
	h.str(in.Actor)
	h.str(in.Reason)
	cmd := command{ID: in.CommandID, Hash: h.sum(), Action: ActionEpoch, EnvTag: in.EnvTag}
	var res EpochResult
	err := s.runTx(ctx, func(tx pgx.Tx) error {
		now := s.now()
		replayed, err := claimSingle(ctx, tx, cmd, in.Actor, now, &res)
		if err != nil || replayed {
			res.Replayed = replayed
			if replayed && res.SkippedCount == 0 {
				res.SkippedCount = len(res.Skipped) // recorded before the count was
			}
			return err
		}
		e, err := lockExistingEnv(ctx, tx, in.EnvTag)
		if err != nil {
			return err
		}
		switch {
		case e.Pending != 0:
			return &CASError{EnvTag: in.EnvTag, Expected: e.Head, Actual: e.Head, Active: e.Current, Pending: e.Pending}
		case e.Current == 0:
			return fmt.Errorf("environment %s has no active release: %w", in.EnvTag, ErrNotFound)
		case in.Epoch <= e.Epoch:
			return invalid("epoch", "%d is not above the current revocation epoch %d of %s (an epoch is never lowered)", in.Epoch, e.Epoch, in.EnvTag)
		}
		if _, err := tx.Exec(ctx, `UPDATE configpub.environment SET revocation_epoch = $2,
			row_revision = row_revision + 1, updated_at = $3 WHERE env_tag = $1`, in.EnvTag, in.Epoch, now); err != nil {
			return dbErr("raise revocation epoch", err)
		}
		resigned, skipped, err := s.reissueAll(ctx, tx, in.EnvTag, in.Epoch, now, writeResign, cmd.ID)
		if err != nil {
			return err
		}
		res = EpochResult{CommandID: cmd.ID, EnvTag: in.EnvTag, From: e.Epoch, To: in.Epoch, Release: e.Current,
			Resigned: resigned, At: now, Skipped: skipped.Items, SkippedCount: skipped.Count}
		r, err := lockRelease(ctx, tx, in.EnvTag, e.Current)
		if err != nil {
			return err
		}
		if err := mutate(ctx, tx, r, event{Kind: "raise-epoch", ToState: r.State, ToOutcome: r.Outcome,
			CommandID: cmd.ID, Hash: cmd.Hash, Actor: in.Actor, Reason: in.Reason, RecordedAt: now,
			Evidence: map[string]any{"fromEpoch": e.Epoch, "toEpoch": in.Epoch, "resigned": resigned}}); err != nil {
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
