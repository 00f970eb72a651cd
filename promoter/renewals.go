package promoter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/configpub/configpub/internal/sqlstate"
)

// DefaultRenewalMinAge is how long superseded lease renewals are kept
// unless told otherwise: long past any lease they carried.
const DefaultRenewalMinAge = 30 * 24 * time.Hour

// defaultRenewalBatch is how many identities one statement of
// CollectRenewals goes through at most.
const defaultRenewalBatch = 1000

// RenewalCollectOptions says which superseded lease renewals
// CollectRenewals removes.
type RenewalCollectOptions struct {
	// MinAge: only renewals issued at least this long ago (by the store's
	// clock) are removed. 0 = DefaultRenewalMinAge; negative is ErrInvalid.
	MinAge time.Duration
	// Batch is how many identities one statement goes through (each
	// statement commits on its own). 0 = 1,000.
	Batch int
	// DryRun: count what would be removed; remove nothing.
	DryRun bool
}

// RenewalCollection is what CollectRenewals removed (with DryRun, would
// remove).
type RenewalCollection struct {
	Manifests int64
	Bytes     int64
	// IssuedBefore is the cutoff: every superseded renewal issued before it
	// was removed.
	IssuedBefore time.Time
	// Oldest and Newest are the issue times of the renewals removed (zero
	// when none).
	Oldest, Newest time.Time
}

// CollectRenewals removes the delivery manifests that lease renewals signed
// and that a later manifest of the same pointer move (same identity and
// sequence, a later issuedAt) supersedes, when they were issued more than
// opts.MinAge ago. `lease renew` appends one manifest per current pointer at
// every run, so without collection the store grows with the number of
// targets times the number of renewals, for ever; the superseded ones carry
// leases that have ended and are never served. A pointer move's own manifest,
// an epoch re-signing and the newest manifest of every move are never
// removed, so every snapshot, current or pinned, is served with the same
// manifest as before. Each statement goes through opts.Batch identities and
// commits on its own; each one that removed anything leaves a summary row
// in configpub.collected_renewals (cutoff, identities, manifests, bytes,
// oldest and newest issue times, when and by whom).
func (s *Store) CollectRenewals(ctx context.Context, opts RenewalCollectOptions) (RenewalCollection, error) {
	if opts.MinAge < 0 {
		return RenewalCollection{}, fmt.Errorf("collect renewals: minimum age %s is negative: %w", opts.MinAge, ErrInvalid)
	}
	if opts.MinAge == 0 {
		opts.MinAge = DefaultRenewalMinAge
	}
	if opts.Batch <= 0 {
		opts.Batch = defaultRenewalBatch
	}
	c := RenewalCollection{IssuedBefore: s.now().Add(-opts.MinAge)}
	var oldest, newest *time.Time
	if opts.DryRun {
		err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(size), 0), min(issued_at), max(issued_at)
			FROM configpub.superseded_renewal WHERE issued_at < $1`,
			c.IssuedBefore).Scan(&c.Manifests, &c.Bytes, &oldest, &newest)
		if err != nil {
			return RenewalCollection{}, dbErr("collect renewals (dry run)", err)
		}
		c.span(oldest, newest)
		return c, nil
	}
	var host, serviceID, envTag *string
	for {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		var scanned int
		var n, size int64
		err := s.pool.QueryRow(ctx, `SELECT last_host, last_service_id, last_env_tag, identities, manifests, bytes,
				oldest_issued_at, newest_issued_at
			FROM configpub.collect_renewals($1, $2, $3, $4, $5)`, c.IssuedBefore, host, serviceID, envTag, opts.Batch).
			Scan(&host, &serviceID, &envTag, &scanned, &n, &size, &oldest, &newest)
		if err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == sqlstate.UndefinedFunction {
				return c, fmt.Errorf("collect renewals: %w: the database has no configpub.collect_renewals (run `configpub db migrate`)", ErrSchema)
			}
			return c, dbErr("collect renewals", err)
		}
		c.Manifests += n
		c.Bytes += size
		c.span(oldest, newest)
		if scanned < opts.Batch {
			return c, nil
		}
	}
}

// span widens c's issue times to [oldest, newest] (nil: nothing removed).
func (c *RenewalCollection) span(oldest, newest *time.Time) {
	if oldest == nil || newest == nil {
		return
	}
	if c.Oldest.IsZero() || oldest.Before(c.Oldest) {
		c.Oldest = oldest.UTC()
	}
	if newest.After(c.Newest) {
		c.Newest = newest.UTC()
	}
}
