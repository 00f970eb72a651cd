package promoter

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReleaseEvent is one row of a release's journal: a state or outcome change
// (record, record-only, stage, promote, activate, rollback, candidate-rejected,
// integrity-error, health-gate-passed, ...).
type ReleaseEvent struct {
	ReleaseVersion int64     `json:"releaseVersion"`
	Sequence       int64     `json:"sequence"`
	Kind           string    `json:"kind"`
	FromState      string    `json:"fromState,omitempty"`
	ToState        string    `json:"toState"`
	FromOutcome    string    `json:"fromOutcome,omitempty"`
	ToOutcome      string    `json:"toOutcome"`
	Actor          string    `json:"actor"`
	Reason         string    `json:"reason"`
	CommandID      string    `json:"commandId"`
	RecordedAt     time.Time `json:"recordedAt"`
	// Renewal marks an event of a renewal release (ReleaseStatus.Renewal).
	Renewal bool `json:"renewal,omitempty"`
}

// ReleaseEvents returns the journal of every release of envTag, newest
// first (limit 0 = all). An environment that does not exist is ErrNotFound.
func (s *Store) ReleaseEvents(ctx context.Context, envTag string, limit int) ([]ReleaseEvent, error) {
	var known bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.environment WHERE env_tag = $1)`, envTag).Scan(&known); err != nil {
		return nil, fmt.Errorf("release events of %s: %w", envTag, dbErr("read environment", err))
	}
	if !known {
		return nil, fmt.Errorf("release events of %s: %w", envTag, errNoEnvironment(envTag))
	}
	renewals, err := s.renewalReleases(ctx, envTag)
	if err != nil {
		return nil, fmt.Errorf("release events of %s: %w", envTag, err)
	}
	if limit <= 0 {
		limit = 1 << 30
	}
	rows, err := s.pool.Query(ctx, `SELECT release_version, sequence, event_kind, coalesce(from_state, ''), to_state,
			coalesce(from_outcome, ''), to_outcome, actor, coalesce(reason, ''), command_id::text, recorded_at
		FROM configpub.config_release_journal WHERE env_tag = $1
		ORDER BY recorded_at DESC, release_version DESC, sequence DESC LIMIT $2`, envTag, limit)
	if err != nil {
		return nil, fmt.Errorf("release events of %s: %w", envTag, dbErr("read journal", err))
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ReleaseEvent, error) {
		var e ReleaseEvent
		err := r.Scan(&e.ReleaseVersion, &e.Sequence, &e.Kind, &e.FromState, &e.ToState, &e.FromOutcome, &e.ToOutcome,
			&e.Actor, &e.Reason, &e.CommandID, &e.RecordedAt)
		e.RecordedAt = e.RecordedAt.UTC()
		e.Renewal = renewals[e.ReleaseVersion]
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("release events of %s: %w", envTag, dbErr("read journal", err))
	}
	return evs, nil
}
