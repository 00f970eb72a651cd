package promoter

import (
	"context"
	"errors"
	"fmt"
	"time"

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
// second Reconcile settles nothing. Each settlement's outcome.settled event
// is recorded in the transaction that settles it and sent only by the call
// that settled it: two Reconciles racing send it once.
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
		var (
			st *Settlement
			ev *Event
		)
		err := s.runTx(ctx, func(tx pgx.Tx) error {
			var err error
			st, ev, err = s.settle(ctx, tx, envTag, v)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("reconcile %s release %d: %w", envTag, v, err)
		}
		if st != nil {
			res.Settled = append(res.Settled, *st)
			s.emit(ctx, *ev)
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

// settle settles release version's UNCONFIRMED outcome NOT_APPLIED inside
// tx and records its outcome.settled event there, returned for the caller
// to send after the commit. Nothing (nil, nil) when it was settled
// meanwhile.
func (s *Store) settle(ctx context.Context, tx pgx.Tx, envTag string, version int64) (*Settlement, *Event, error) {
	now := s.now()
	e, err := lockEnv(ctx, tx, envTag, now)
	if err != nil {
		return nil, nil, err
	}
	r, err := lockRelease(ctx, tx, envTag, version)
	if err != nil {
		return nil, nil, err
	}
	if r.Outcome != OutcomeUnconfirmed {
		return nil, nil, nil // settled meanwhile (the activation committed, or another Reconcile)
	}
	c, err := loadCommand(ctx, tx, r.LastCmd)
	if err != nil {
		return nil, nil, err
	}
	if err := mutate(ctx, tx, r, event{Kind: "reconcile", ToState: r.State, ToOutcome: OutcomeNotApplied,
		CommandID: c.ID, Hash: c.Hash, Actor: reconcileActor, RecordedAt: now,
		Evidence: map[string]any{"finding": "activation transaction never committed"}}); err != nil {
		return nil, nil, err
	}
	if err := settleCommand(ctx, tx, c.ID, OutcomeNotApplied, nil, now); err != nil {
		return nil, nil, err
	}
	if e.Pending == version {
		if err := setEnv(ctx, tx, e, e.Current, 0, "", now); err != nil {
			return nil, nil, err
		}
	}
	ev := settledEvent(envTag, version, r.State, c, e.Current, now)
	if err := s.recordEvent(ctx, tx, &ev); err != nil {
		return nil, nil, err
	}
	return &Settlement{ReleaseVersion: version, CommandID: c.ID, Action: c.Action, Outcome: OutcomeNotApplied}, &ev, nil
}

// settledEvent is the outcome.settled event of command c, whose outcome
// on release version was UNCONFIRMED and is now NOT_APPLIED: nothing
// moved, current is still the environment's current release.
func settledEvent(envTag string, version int64, state string, c *command, current int64, now time.Time) Event {
	return Event{Kind: EventSettled, EnvTag: envTag, Release: version, State: state, Outcome: OutcomeNotApplied,
		Actor: reconcileActor, At: now,
		Detail: fmt.Sprintf("%s outcome settled NOT_APPLIED (command %s): its transaction never committed, nothing moved, current release %d; re-run the same command to retry",
			c.Action, c.ID, current)}
}
