package console

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/pgtest"
)

// TestReleaseSummaryMatchesTheMapping checks the counts migration 011's
// trigger keeps per release against the mapping they summarize: a release
// page read with the summary equals the page read by counting, for every
// release of a generated history with a rollback and for a release that
// retires identities and whose mapping is inserted in two statements.
func TestReleaseSummaryMatchesTheMapping(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	owner := db.Pool(t)
	ctx := context.Background()
	const releases = 6
	generate(t, owner, generated{env: "dev", targets: 30, releases: releases, changed: 7, rollback: true})
	// Release 7 keeps only the identities whose service number is even,
	// inserted in two statements.
	if _, err := owner.Exec(ctx, `INSERT INTO configpub.config_release (env_tag, release_version, base_release_version,
			row_revision, lifecycle_state, execution_outcome, definition, definition_hash, actor, target_count, command_id,
			last_command_id, created_at, updated_at)
		VALUES ('dev', 7, 6, 1, 'RECORDED', 'NOT_REQUESTED', 'x'::bytea, 'sha256:' || encode(sha256('x'::bytea), 'hex'),
			'alex@example.com', 15, gen_random_uuid(), gen_random_uuid(), now(), now())`); err != nil {
		t.Fatal(err)
	}
	for _, half := range []string{"< 15", ">= 15"} {
		if _, err := owner.Exec(ctx, `INSERT INTO configpub.config_release_target (env_tag, release_version, host,
				service_id, snapshot_id, changed, refresh_after_ms, expires_after_ms)
			SELECT env_tag, 7, host, service_id, snapshot_id, false, refresh_after_ms, expires_after_ms
			FROM configpub.config_release_target WHERE env_tag = 'dev' AND release_version = 6
				AND substr(service_id, 5)::int % 2 = 0 AND substr(service_id, 5)::int `+half); err != nil {
			t.Fatal(err)
		}
	}
	var odd int
	if err := owner.QueryRow(ctx, `SELECT count(*) FROM configpub.config_release_target WHERE env_tag = 'dev'
		AND release_version = 6 AND substr(service_id, 5)::int % 2 = 1`).Scan(&odd); err != nil || odd < 15 {
		t.Fatalf("release 6 has %d odd services (%v), want at least 15", odd, err)
	}
	var changed, kept, total int
	if err := owner.QueryRow(ctx, `SELECT x.changed, x.kept, (SELECT count(*) FROM configpub.config_release_target
			WHERE env_tag = 'dev' AND release_version = 6)
		FROM configpub.release_target_summary x WHERE x.env_tag = 'dev' AND x.release_version = 7`).Scan(&changed, &kept, &total); err != nil {
		t.Fatal(err)
	}
	if changed != 0 || kept != total-odd {
		t.Errorf("release 7 summary: %d changed, %d kept; want 0 and %d (two statements added up)", changed, kept, total-odd)
	}
	now := time.Now()
	pool := viewerPool(t, db, false)
	summarized, err := New(ctx, pool, Options{CacheTTL: -1, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if !summarized.rd.f.summary {
		t.Fatal("the viewer does not see release_target_summary")
	}
	counting := *summarized.rd
	counting.f.summary = false
	for v := int64(1); v <= releases+1; v++ {
		got, err := summarized.rd.ReleaseDetail(ctx, "dev", v, 0, AgainstBase)
		if err != nil {
			t.Fatal(err)
		}
		want, err := counting.ReleaseDetail(ctx, "dev", v, 0, AgainstBase)
		if err != nil {
			t.Fatal(err)
		}
		if got.ChangedTotal != want.ChangedTotal || !reflect.DeepEqual(got.Changed, want.Changed) || !reflect.DeepEqual(got.Retired, want.Retired) {
			t.Errorf("release %d: summary gives %d changed, retired %v; counting gives %d changed, retired %v",
				v, got.ChangedTotal, got.Retired, want.ChangedTotal, want.Retired)
		}
		switch v {
		case 1:
			if got.ChangedTotal != 30 {
				t.Errorf("release 1: %d changed, want all 30", got.ChangedTotal)
			}
		case 7:
			if got.ChangedTotal != 0 || len(got.Retired) != odd {
				t.Errorf("release 7: %d changed and %d retired, want 0 and %d", got.ChangedTotal, len(got.Retired), odd)
			}
		default:
			if got.ChangedTotal != 7 || len(got.Retired) != 0 {
				t.Errorf("release %d: %d changed and %d retired, want 7 and 0", v, got.ChangedTotal, len(got.Retired))
			}
		}
	}
}
