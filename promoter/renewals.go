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
// CollectRenewals or CollectObservations goes through at most.
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
	c := RenewalCollection{IssuedBefore: s.now().Add(-opts.MinAge)}
	got, err := s.collectByIdentity(ctx, identityCollection{what: "renewals", function: "collect_renewals",
		view: "superseded_renewal", at: "issued_at"}, c.IssuedBefore, opts.Batch, opts.DryRun)
	c.Manifests, c.Bytes, c.Oldest, c.Newest = got.rows, got.bytes, got.oldest, got.newest
	return c, err
}

// identityCollection names a collection that deletes, identity by
// identity, the rows of a view older than a cutoff: the SECURITY DEFINER
// function that deletes them and summarises each call, and the view (with
// its time column and each row's size) a dry run counts.
type identityCollection struct {
	what     string // in errors: "renewals"
	function string // configpub.<function>(cutoff, after host, service, env, n)
	view     string // configpub.<view>
	at       string // the view's time column
}

// collected is what one collection removed: rows, their bytes, and the
// times of the oldest and newest (zero when none).
type collected struct {
	rows, bytes    int64
	oldest, newest time.Time
}

// collectByIdentity runs col's function batch identities per statement
// (each commits on its own) until it has gone through every identity, or
// with dryRun counts what it would remove. What earlier statements removed
// is returned with a later statement's error.
func (s *Store) collectByIdentity(ctx context.Context, col identityCollection, cutoff time.Time, batch int, dryRun bool) (collected, error) {
	if batch <= 0 {
		batch = defaultRenewalBatch
	}
	var c collected
	var oldest, newest *time.Time
	if dryRun {
		err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(size), 0), min(`+col.at+`), max(`+col.at+`)
			FROM configpub.`+col.view+` WHERE `+col.at+` < $1`, cutoff).Scan(&c.rows, &c.bytes, &oldest, &newest)
		if err != nil {
			return collected{}, dbErr("collect "+col.what+" (dry run)", err)
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
		err := s.pool.QueryRow(ctx, `SELECT * FROM configpub.`+col.function+`($1, $2, $3, $4, $5)`,
			cutoff, host, serviceID, envTag, batch).
			Scan(&host, &serviceID, &envTag, &scanned, &n, &size, &oldest, &newest)
		if err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == sqlstate.UndefinedFunction {
				return c, fmt.Errorf("collect %s: %w: the database has no configpub.%s (run `configpub db migrate`)", col.what, ErrSchema, col.function)
			}
			return c, dbErr("collect "+col.what, err)
		}
		c.rows += n
		c.bytes += size
		c.span(oldest, newest)
		if scanned < batch {
			return c, nil
		}
	}
}

// span widens c's times to [oldest, newest] (nil: nothing removed).
func (c *collected) span(oldest, newest *time.Time) {
	if oldest == nil || newest == nil {
		return
	}
	if c.oldest.IsZero() || oldest.Before(c.oldest) {
		c.oldest = oldest.UTC()
	}
	if newest.After(c.newest) {
		c.newest = newest.UTC()
	}
}
