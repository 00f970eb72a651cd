package webhook

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
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
