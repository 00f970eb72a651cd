package promoter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/configpub/configpub/internal/sqlstate"
	"github.com/configpub/configpub/promoter"
)

// servedManifests is, per identity and snapshot, the manifest the Config
// Server serves for it (the newest issued, as its snapshot query orders
// them), and the current pointers' checksum.
func (f *fixture) servedManifests(t *testing.T) map[string]string {
	t.Helper()
	var pointers string
	if err := f.pool.QueryRow(context.Background(), `SELECT md5(string_agg(p::text, ',' ORDER BY env_tag, host, service_id))
		FROM configpub.current_pointer p`).Scan(&pointers); err != nil {
		t.Fatal(err)
	}
	rows, err := f.pool.Query(context.Background(), `SELECT DISTINCT ON (host, service_id, env_tag, snapshot_id)
			host || '/' || service_id || '/' || env_tag || '/' || snapshot_id::text, md5(manifest) || ' ' || signature
		FROM configpub.delivery_manifest
		ORDER BY host, service_id, env_tag, snapshot_id, issued_at DESC, sequence DESC`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{"pointers": pointers}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCollectRenewalsOverMonths: over simulated months of twice-daily lease
// renewals, two releases and a rollback, collecting superseded renewals
// removes exactly the renewals issued before the cutoff that a later
// manifest of the same move supersedes, in statements of a bounded number
// of identities, each summarised in configpub.collected_renewals; it
// keeps every move's manifest and the newest manifest of every move, so
// every snapshot, current or historical, is served as before. A dry run
// counts without removing; nothing but the collection may delete a
// manifest.
func TestCollectRenewalsOverMonths(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	day := 24 * time.Hour
	renewUntil := func(end time.Duration) {
		t.Helper()
		for f.now.Before(t0.Add(end)) {
			f.now = f.now.Add(12 * time.Hour)
			if _, err := f.store.RenewLeases(ctx, "prod"); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Day 0: release 1; renewed every 12 hours to day 10 (20 renewals).
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	renewUntil(10 * day)
	// Day 10, one hour on: release 2 moves every pointer; renewed to day 15 (10).
	f.now = t0.Add(10*day + time.Hour)
	f.promote(t, release("prod", 2, 1, 3, nil, nil))
	f.now = t0.Add(10 * day)
	renewUntil(15 * day)
	// Day 15, one hour on: a rollback to release 1 (a new move of the same
	// snapshots); renewed to day 20 (10).
	f.now = t0.Add(15*day + time.Hour)
	if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("renewals rb"), EnvTag: "prod", ToRelease: 1,
		Actor: "ops", Reason: "back"}); err != nil {
		t.Fatal(err)
	}
	f.now = t0.Add(15 * day)
	renewUntil(20 * day)
	if n := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest WHERE kind = 'renew'"); n != 3*40 {
		t.Fatalf("got %d renewal manifests, want 3 identities × 40", n)
	}
	moves := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest WHERE kind <> 'renew'")
	served := f.servedManifests(t)

	// The collector: the promoter role, on its own clock.
	var offset time.Duration
	pool := f.db.PoolURL(t, f.db.URLFor(t, "configpub_promoter"))
	gc, err := promoter.Open(ctx, pool, promoter.Options{Clock: func() time.Time { return t0.Add(offset) }})
	if err != nil {
		t.Fatal(err)
	}
	collect := func(when string, at, minAge time.Duration, dry bool, want int64) promoter.RenewalCollection {
		t.Helper()
		offset = at
		c, err := gc.CollectRenewals(ctx, promoter.RenewalCollectOptions{MinAge: minAge, Batch: 2, DryRun: dry})
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if minAge == 0 {
			minAge = promoter.DefaultRenewalMinAge
		}
		if c.Manifests != want || !c.IssuedBefore.Equal(t0.Add(at-minAge)) {
			t.Fatalf("%s: removed %d renewals before %s, want %d before %s", when, c.Manifests, c.IssuedBefore, want, t0.Add(at-minAge))
		}
		if want > 0 && (c.Bytes <= 0 || c.Oldest.IsZero() || c.Newest.Before(c.Oldest)) {
			t.Fatalf("%s: %+v: want bytes and issue times", when, c)
		}
		return c
	}
	// Day 25, renewals older than 20 days: those issued on days 0.5–4.5 (9 of release 1's move per identity).
	c := collect("day 25", 25*day, 20*day, false, 3*9)
	if !c.Oldest.Equal(t0.Add(12*time.Hour)) || !c.Newest.Equal(t0.Add(4*day+12*time.Hour)) {
		t.Errorf("day 25: removed renewals issued %s to %s, want day 0.5 to day 4.5", c.Oldest, c.Newest)
	}
	// Day 60, the default 30 days: every other superseded renewal (10 + 9 + 9 per identity); a dry run first.
	collect("day 60, dry run", 60*day, 30*24*time.Hour, true, 3*28)
	collect("day 60", 60*day, 0, false, 3*28)
	collect("day 60, again", 60*day, 0, false, 0)
	collect("day 400", 400*day, 0, false, 0)

	if n := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest WHERE kind = 'renew'"); n != 3*3 {
		t.Errorf("%d renewal manifests left, want the newest of each of 3 moves × 3 identities", n)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.delivery_manifest WHERE kind <> 'renew'"); n != moves {
		t.Errorf("%d move manifests left, want all %d", n, moves)
	}
	after := f.servedManifests(t)
	if len(after) != len(served) || len(served) != 1+3*2 {
		t.Errorf("served manifests: %d before, %d after, want 1 + 3 identities × 2 snapshots", len(served), len(after))
	}
	for k, v := range served {
		if after[k] != v {
			t.Errorf("%s: served %q after the collection, %q before", k, after[k], v)
		}
	}
	// Two statements (2 + 1 identities) per collection that removed anything.
	var rows, total int
	if err := f.pool.QueryRow(ctx, `SELECT count(*), sum(manifests) FROM configpub.collected_renewals`).Scan(&rows, &total); err != nil {
		t.Fatal(err)
	}
	if rows != 4 || total != 3*37 {
		t.Errorf("collected_renewals: %d rows summing %d, want 4 rows summing %d", rows, total, 3*37)
	}
	// Nothing else deletes a manifest: not the promoter role, not the owner.
	for who, p := range map[string]interface {
		Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
	}{"promoter": pool, "owner": f.pool} {
		_, err := p.Exec(ctx, "DELETE FROM configpub.delivery_manifest WHERE kind = 'move'")
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || (pgErr.Code != sqlstate.InsufficientPrivilege && pgErr.Code != "CP001") {
			t.Errorf("%s: DELETE of a manifest: got %v, want refused", who, err)
		}
	}
	if _, err := gc.CollectRenewals(ctx, promoter.RenewalCollectOptions{MinAge: -time.Hour}); !errors.Is(err, promoter.ErrInvalid) {
		t.Errorf("negative minimum age: got %v, want ErrInvalid", err)
	}
}
