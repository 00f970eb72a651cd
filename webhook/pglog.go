package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/promoter"
)

// PGLog records delivery attempts in configpub.webhook_delivery (a member
// of configpub_promoter may insert them).
type PGLog struct{ Pool *pgxpool.Pool }

var _ Log = PGLog{}

// Record inserts one attempt.
func (l PGLog) Record(ctx context.Context, a Attempt) error {
	var status, release any
	if a.HTTPStatus != 0 {
		status = a.HTTPStatus
	}
	if a.Release != 0 {
		release = a.Release
	}
	_, err := l.Pool.Exec(ctx, `INSERT INTO configpub.webhook_delivery (event_id, event_kind, env_tag, release_version,
		receiver, attempt, delivered, http_status, error, attempted_at, duration_ms)
		VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		a.EventID, a.EventKind, a.EnvTag, release, a.Receiver, a.Attempt, a.Delivered, status, a.Error,
		a.AttemptedAt, a.Duration.Milliseconds())
	if err != nil {
		return fmt.Errorf("record webhook delivery: %w", err)
	}
	return nil
}

var _ EventLog = PGLog{}
var _ Pending = PGLog{}

// RecordEvent inserts ev into configpub.webhook_event
// (promoter.RecordEvent); an event recorded before (a redelivery, or the
// state change's own transaction) is left as it is.
func (l PGLog) RecordEvent(ctx context.Context, ev promoter.Event) error {
	if err := promoter.RecordEvent(ctx, l.Pool, ev); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}

// Undelivered lists, oldest first, the events recorded in [from, to) that
// were sent to receiver (at least one attempt), or to no receiver at all
// (recorded with the state change, and the process stopped before its
// first attempt), or to other receivers while receiver was in use (it has
// attempts from before and after the event was recorded: the process
// stopped between one receiver's attempt and its own), and that receiver
// has neither accepted nor refused for good (a 4xx other than 408 and
// 429). A receiver configured later is not sent the events other
// receivers were sent before it, nor one no longer configured the events
// after it. The rule is dbschema.UndeliveredEventsSQL, which the console's
// configpub_webhook_undelivered_events gauge counts with.
func (l PGLog) Undelivered(ctx context.Context, receiver string, from, to time.Time) ([]promoter.Event, error) {
	rows, err := l.Pool.Query(ctx, `SELECT o.event FROM (`+dbschema.UndeliveredEventsSQL+`) o
		ORDER BY o.recorded_at, o.event_id`, receiver, from, to)
	if err != nil {
		return nil, fmt.Errorf("undelivered webhook events: %w", err)
	}
	events, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (promoter.Event, error) {
		var raw []byte
		var ev promoter.Event
		if err := row.Scan(&raw); err != nil {
			return ev, err
		}
		return ev, json.Unmarshal(raw, &ev)
	})
	if err != nil {
		return nil, fmt.Errorf("undelivered webhook events: %w", err)
	}
	return events, nil
}
