package promoter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/configpub/configpub/internal/sqlstate"
)

// DefaultCollectMinAge is how old an unreferenced artifact must be before
// CollectArtifacts removes it, unless told otherwise: far longer than any
// promotion runs between storing its artifacts and recording them.
const DefaultCollectMinAge = 24 * time.Hour

// defaultCollectBatch is how many artifacts one statement of
// CollectArtifacts removes at most.
const defaultCollectBatch = 1000

// CollectOptions says which unreferenced artifacts CollectArtifacts removes.
type CollectOptions struct {
	// MinAge: only artifacts stored at least this long ago (by the store's
	// clock against the database's storage time) are removed, so that a
	// promotion still streaming its artifacts keeps them. 0 =
	// DefaultCollectMinAge; negative is ErrInvalid.
	MinAge time.Duration
	// Batch is how many artifacts one statement removes at most (each
	// statement commits on its own). 0 = 1,000.
	Batch int
	// DryRun: count what would be removed; remove nothing.
	DryRun bool
}

// Collection is what CollectArtifacts removed (with DryRun, would remove).
type Collection struct {
	Artifacts int
	Bytes     int64
	// StoredBefore is the cutoff: every artifact no snapshot references and
	// stored before it was removed.
	StoredBefore time.Time
	// Oldest and Newest are the storage times of the artifacts removed
	// (zero when none).
	Oldest, Newest time.Time
}

// CollectArtifacts removes the stored artifacts that no snapshot references
// and that were stored more than opts.MinAge ago: the ones a promotion
// stored ahead of a recording that never happened (it stopped, or lost its
// compare-and-swap and was not retried). They are never served; collecting
// them only returns their space. An artifact any snapshot references, of
// any release, is never removed (the database's foreign key refuses it),
// so every release stays restorable; a promotion that records while the
// collection runs either finds its artifacts in place or fails cleanly
// and stores them again on its next attempt. Each artifact removed is
// recorded in configpub.collected_artifact (digest, media type, size,
// when it was stored and collected, by whom).
func (s *Store) CollectArtifacts(ctx context.Context, opts CollectOptions) (Collection, error) {
	if opts.MinAge < 0 {
		return Collection{}, fmt.Errorf("collect artifacts: minimum age %s is negative: %w", opts.MinAge, ErrInvalid)
	}
	if opts.MinAge == 0 {
		opts.MinAge = DefaultCollectMinAge
	}
	if opts.Batch <= 0 {
		opts.Batch = defaultCollectBatch
	}
	c := Collection{StoredBefore: s.now().Add(-opts.MinAge)}
	if opts.DryRun {
		var oldest, newest *time.Time
		err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(x.size), 0), min(x.created_at), max(x.created_at)
			FROM configpub.artifact x
			WHERE x.created_at < $1
			  AND NOT EXISTS (SELECT 1 FROM configpub.config_snapshot s WHERE s.artifact_digest = x.artifact_digest)`,
			c.StoredBefore).Scan(&c.Artifacts, &c.Bytes, &oldest, &newest)
		if err != nil {
			return Collection{}, dbErr("collect artifacts (dry run)", err)
		}
		if oldest != nil {
			c.Oldest, c.Newest = oldest.UTC(), newest.UTC()
		}
		return c, nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return c, err
		}
		n, err := s.collectBatch(ctx, c.StoredBefore, opts.Batch, &c)
		if err != nil {
			return c, err
		}
		if n < opts.Batch {
			return c, nil
		}
	}
}

// collectBatch removes at most batch artifacts in one statement and adds
// them to c (nothing, when the statement fails: its removals are undone).
func (s *Store) collectBatch(ctx context.Context, before time.Time, batch int, c *Collection) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT size, stored_at FROM configpub.collect_artifacts($1, $2)`, before, batch)
	if err != nil {
		return 0, collectErr(err)
	}
	defer rows.Close()
	var got Collection
	for rows.Next() {
		var size int64
		var at time.Time
		if err := rows.Scan(&size, &at); err != nil {
			return 0, collectErr(err)
		}
		got.add(size, at.UTC())
	}
	if err := rows.Err(); err != nil {
		return 0, collectErr(err)
	}
	c.merge(got)
	return got.Artifacts, nil
}

// merge adds the artifacts of o.
func (c *Collection) merge(o Collection) {
	if o.Artifacts == 0 {
		return
	}
	if c.Artifacts == 0 || o.Oldest.Before(c.Oldest) {
		c.Oldest = o.Oldest
	}
	if o.Newest.After(c.Newest) {
		c.Newest = o.Newest
	}
	c.Artifacts += o.Artifacts
	c.Bytes += o.Bytes
}

// add counts one artifact of size bytes stored at at.
func (c *Collection) add(size int64, at time.Time) {
	c.Artifacts++
	c.Bytes += size
	if c.Oldest.IsZero() || at.Before(c.Oldest) {
		c.Oldest = at
	}
	if at.After(c.Newest) {
		c.Newest = at
	}
}

// collectErr names a database without the collection function, and the
// one race a collection can lose.
func collectErr(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case sqlstate.UndefinedFunction:
			return fmt.Errorf("collect artifacts: %w: the database has no configpub.collect_artifacts (run `configpub db migrate`)", ErrSchema)
		case sqlstate.ForeignKeyViolation:
			// A recording committed a snapshot of an artifact after this
			// statement chose it and before it removed it.
			return fmt.Errorf("collect artifacts: %w: a release recorded while this batch ran references one of its artifacts; nothing of the batch was removed: run it again: %w", ErrConflict, err)
		}
	}
	return dbErr("collect artifacts", err)
}
