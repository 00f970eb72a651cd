package promoter_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/promoter"
)

// TestLargeReleaseReadsEachTargetRowOnce records and activates a release of
// n targets on a base of n, both right after they were written (autovacuum
// off for the tables involved, so their statistics are as stale as right
// after a large promotion), and counts the config_release_target rows the
// promotion read (pg_stat_user_tables). Every read is bounded by a small
// multiple of n: the release-summary trigger probes each target's base row by
// its whole key and retirement is a set difference. Before those, the
// planner probed by (env, release) only or scanned every release target per
// pointer: about n² rows.
func TestLargeReleaseReadsEachTargetRowOnce(t *testing.T) {
	t.Parallel()
	const n = 1500
	ctx := context.Background()
	f := newFixture(t, nil)
	for _, tbl := range []string{"config_release_target", "config_snapshot", "current_pointer", "config_release", "pointer_move"} {
		if _, err := f.pool.Exec(ctx, "ALTER TABLE configpub."+tbl+" SET (autovacuum_enabled = off)"); err != nil {
			t.Fatal(err)
		}
	}
	// One connection, so the stats the promotion leaves in its backend can
	// be flushed on demand before they are read.
	cfg, err := pgxpool.ParseConfig(f.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store, err := promoter.Open(ctx, pool, promoter.Options{Signer: f.key, Clock: func() time.Time { return f.now }})
	if err != nil {
		t.Fatal(err)
	}
	read := func() int64 {
		t.Helper()
		if _, err := pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
			t.Fatal(err)
		}
		var r int64
		if err := pool.QueryRow(ctx, `SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)
			FROM pg_stat_user_tables WHERE schemaname = 'configpub' AND relname = 'config_release_target'`).Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if _, err := store.RecordAndActivate(ctx, release("prod", 1, 0, n, nil, nil)); err != nil {
		t.Fatal(err)
	}
	before := read()
	f.now = f.now.Add(minute)
	// Release 2 changes every other target and drops the last one.
	in := release("prod", 2, 1, n-1, func(i int) bool { return i%2 == 0 }, func(int) int64 { return 1 })
	res, err := store.RecordAndActivate(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if res.Retired != 1 {
		t.Fatalf("release 2 retired %d, want 1", res.Retired)
	}
	got, limit := read()-before, int64(20*n)
	t.Logf("recording and activating %d targets read %d config_release_target rows", n, got)
	if got > limit {
		t.Errorf("recording and activating %d targets read %d config_release_target rows, want at most %d (a plan reading about n² rows is back)", n, got, limit)
	}
}
