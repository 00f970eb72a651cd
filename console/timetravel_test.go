package console

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/pgtest"
)

// TestEnvironmentAtFromActivationEqualsTheScan checks "what did the
// environment look like at T" read from the last activation's mapping
// (migration 014's counts) against the scan of every pointer move before
// T, every 10 minutes over a history with a rollback that retires identities, a release that
// retires half of the identities and one that restores them, a revoked
// snapshot, and moves between activations (a retirement and a move no
// activation journaled), with a page size small enough that the listed
// rows come from both the mapping and the later moves.
func TestEnvironmentAtFromActivationEqualsTheScan(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	owner := db.Pool(t)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := owner.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	g := generated{env: "dev", targets: 30, releases: 6, changed: 7, rollback: true}
	generate(t, owner, g)
	// Release 7 keeps the even services (the odd ones are retired), release
	// 8 restores release 5's complete mapping (the current one after the
	// rollback).
	for _, v := range []struct {
		rel, base int
		filter    string
	}{{7, 5, "AND substr(service_id, 5)::int % 2 = 0"}, {8, 7, ""}} {
		at := releaseAt(v.rel)
		exec(`INSERT INTO configpub.config_release (env_tag, release_version, base_release_version, row_revision,
				lifecycle_state, execution_outcome, definition, definition_hash, release_digest, actor, target_count,
				command_id, last_command_id, created_at, updated_at)
			VALUES ('dev', $1::bigint, $2, 1, 'RECORDED', 'NOT_REQUESTED', 'x'::bytea, 'sha256:' || encode(sha256('x'::bytea), 'hex'),
				'sha256:' || repeat('7', 63) || $1::bigint::text, 'alex@example.com', 15, md5('c' || $1::bigint::text)::uuid, md5('c' || $1::bigint::text)::uuid, $3, $3)`,
			v.rel, v.base, at)
		exec(`INSERT INTO configpub.config_release_journal (env_tag, release_version, sequence, command_id, command_hash,
				event_kind, to_state, to_outcome, actor, recorded_at)
			VALUES ('dev', $1::bigint, 1, md5('c' || $1::bigint::text)::uuid, 'sha256:00', 'record', 'RECORDED', 'NOT_REQUESTED', 'alex@example.com', $2)`,
			v.rel, at)
		exec(`INSERT INTO configpub.config_release_target (env_tag, release_version, host, service_id, snapshot_id,
				changed, refresh_after_ms, expires_after_ms)
			SELECT env_tag, $1, host, service_id, snapshot_id, false, refresh_after_ms, expires_after_ms
			FROM configpub.config_release_target WHERE env_tag = 'dev' AND release_version = 5 `+v.filter, v.rel)
		g.activate(t, exec, v.rel, v.rel-1, "promote", at.Add(time.Minute))
	}
	var retired int
	if err := owner.QueryRow(ctx, `SELECT count(*) FROM configpub.pointer_move WHERE env_tag = 'dev' AND retired`).Scan(&retired); err != nil || retired != 5+15 {
		t.Fatalf("%d retirement moves (%v), want 20 (the rollback retires release 6's 5 new identities, release 7 the 15 odd ones)", retired, err)
	}
	exec(`INSERT INTO configpub.revocation (snapshot_id, reason, actor, revoked_at)
		SELECT snapshot_id, 'leaked key', 'alex@example.com', $1 FROM configpub.current_pointer
		WHERE env_tag = 'dev' AND service_id = 'svc-3'`, releaseAt(8).Add(5*time.Minute))
	// Between the activations of release 8 and a later time: svc-0 is
	// retired, svc-29 moves to its release-1 snapshot and svc-28 moves twice.
	later := releaseAt(8).Add(20 * time.Minute)
	exec(`INSERT INTO configpub.pointer_move (host, service_id, env_tag, previous_snapshot_id, next_snapshot_id,
			publication_id, release_version, sequence, action, actor, command_id, moved_at, retired)
		SELECT p.host, p.service_id, p.env_tag, p.snapshot_id, s.snapshot_id, s.publication_id, 8, p.sequence + k, 'activate',
			'alex@example.com', gen_random_uuid(), $1::timestamptz + k * interval '10 minutes', p.service_id = 'svc-0'
		FROM configpub.current_pointer p, generate_series(1, 2) k,
		LATERAL (SELECT * FROM configpub.config_snapshot s WHERE s.env_tag = p.env_tag AND s.host = p.host
			AND s.service_id = p.service_id AND (p.service_id = 'svc-0' AND s.snapshot_id = p.snapshot_id
				OR p.service_id <> 'svc-0' AND s.release_version = CASE WHEN k = 1 THEN 1 ELSE 6 END)
			LIMIT 1) s
		WHERE p.env_tag = 'dev' AND (p.service_id IN ('svc-0', 'svc-29') AND k = 1 OR p.service_id = 'svc-28')`, later)

	pool := viewerPool(t, db, false)
	c, err := New(ctx, pool, Options{CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	fast := *c.rd
	if !fast.f.releaseCnt || !fast.f.retired {
		t.Fatal("the viewer does not see release_target_release_count")
	}
	scan := fast
	scan.f.releaseCnt = false
	var sawRetired, sawDelta bool
	for at := genT0.Add(-10 * time.Minute); at.Before(later.Add(time.Hour)); at = at.Add(10 * time.Minute) {
		want, err := scan.EnvironmentAt(ctx, "dev", at, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, err := fast.EnvironmentAt(ctx, "dev", at, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("dev at %s: from the activation\n%+v\nscanning every move\n%+v", at.Format(time.RFC3339), got, want)
		}
		// Paged by 7, each way lists the same targets, each once.
		for _, rd := range []reader{fast, scan} {
			rd.atPage = 7
			var paged []Move
			for from, pages := 0, 0; ; pages++ {
				p, err := rd.EnvironmentAt(ctx, "dev", at, from)
				if err != nil {
					t.Fatal(err)
				}
				if (from == 0) != (p.Prev == nil) || (p.Prev != nil && *p.Prev != max(0, from-7)) {
					t.Fatalf("dev at %s from %d: previous page at %v, want %d", at.Format(time.RFC3339), from, p.Prev, max(0, from-7))
				}
				paged = append(paged, p.Rows...)
				if p.More != p.Targets-len(paged) || pages > 10 {
					t.Fatalf("dev at %s from %d: more %d after %d of %d listed", at.Format(time.RFC3339), from, p.More, len(paged), p.Targets)
				}
				if p.Next == 0 {
					break
				}
				from = p.Next
			}
			if len(paged) != len(want.Rows) || (len(paged) > 0 && !reflect.DeepEqual(paged, want.Rows)) {
				t.Fatalf("dev at %s paged by 7 (activation counts %v): %d targets, want %d", at.Format(time.RFC3339), rd.f.releaseCnt, len(paged), len(want.Rows))
			}
		}
		if want.Release == 7 && want.Targets == 15 {
			sawRetired = true
		}
		if at.After(later) && want.Targets == 29 {
			sawDelta = true
		}
	}
	if !sawRetired || !sawDelta {
		t.Errorf("history did not reach release 7 with 15 targets (%v) or the retirement after release 8 (%v)", sawRetired, sawDelta)
	}
}
