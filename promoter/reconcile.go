package promoter

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Settlement is one outcome Reconcile settled.
type Settlement struct {
	ReleaseVersion int64  `json:"releaseVersion"`
	CommandID      string `json:"commandId"`
	Action         string `json:"action"`
	Outcome        string `json:"outcome"` // NOT_APPLIED
}

// ReconcileResult reports what Reconcile found.
type ReconcileResult struct {
	EnvTag         string       `json:"envTag"`
	CurrentRelease int64        `json:"currentRelease"`
	Settled        []Settlement `json:"settled"`
}

// reconcileActor is the journal actor of settlements.
const reconcileActor = "configpub reconcile"

// Reconcile settles the UNCONFIRMED outcomes of envTag from the store.
// Under the environment's and release's locks (so an activation still in
// flight finishes first) an outcome that is still UNCONFIRMED belongs to an
// activation transaction that never committed and now never can (its
// compare-and-swap on row_revision would fail): it becomes NOT_APPLIED, the
// environment's claim is released, and the command may be re-run. An
// activation that did commit is already APPLIED and is left alone, so a
// second Reconcile settles nothing.
func (s *Store) Reconcile(ctx context.Context, envTag string) (*ReconcileResult, error) {
	if envTag == "" {
		return nil, fmt.Errorf("reconcile: %w", invalid("envTag", "empty"))
	}
	rows, err := s.pool.Query(ctx, `SELECT release_version FROM configpub.config_release
		WHERE env_tag = $1 AND execution_outcome = 'UNCONFIRMED' ORDER BY release_version`, envTag)
	if err != nil {
		return nil, fmt.Errorf("reconcile %s: %w", envTag, dbErr("find unconfirmed", err))
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("reconcile %s: %w", envTag, dbErr("find unconfirmed", err))
	}
	res := &ReconcileResult{EnvTag: envTag, Settled: []Settlement{}}
	for _, v := range versions {
		var st *Settlement
		err := s.runTx(ctx, func(tx pgx.Tx) error {
			var err error
			st, err = s.settle(ctx, tx, envTag, v)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("reconcile %s release %d: %w", envTag, v, err)
		}
		if st != nil {
			res.Settled = append(res.Settled, *st)
		}
	}
	err = s.pool.QueryRow(ctx, `SELECT coalesce(current_release_version, 0) FROM configpub.environment
		WHERE env_tag = $1`, envTag).Scan(&res.CurrentRelease)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("reconcile: environment %s: %w", envTag, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reconcile %s: %w", envTag, dbErr("read environment", err))
	}
	return res, nil
}

func (s *Store) settle(ctx context.Context, tx pgx.Tx, envTag string, version int64) (*Settlement, error) {
	now := s.now()
	e, err := lockEnv(ctx, tx, envTag, now)
	if err != nil {
		return nil, err
	}
	r, err := lockRelease(ctx, tx, envTag, version)
	if err != nil {
		return nil, err
	}
	if r.Outcome != OutcomeUnconfirmed {
		return nil, nil // settled meanwhile (the activation committed)
	}
	c, err := loadCommand(ctx, tx, r.LastCmd)
	if err != nil {
		return nil, err
	}
	if err := mutate(ctx, tx, r, event{Kind: "reconcile", ToState: r.State, ToOutcome: OutcomeNotApplied,
		CommandID: c.ID, Hash: c.Hash, Actor: reconcileActor, RecordedAt: now,
		Evidence: map[string]any{"finding": "activation transaction never committed"}}); err != nil {
		return nil, err
	}
	if err := settleCommand(ctx, tx, c.ID, OutcomeNotApplied, nil, now); err != nil {
		return nil, err
	}
	if e.Pending == version {
		if err := setEnv(ctx, tx, e, e.Current, 0, "", now); err != nil {
			return nil, err
		}
	}
	return &Settlement{ReleaseVersion: version, CommandID: c.ID, Action: c.Action, Outcome: OutcomeNotApplied}, nil
}
