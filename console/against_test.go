package console

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/pgtest"
)

// TestReleaseDiffAgainstTheCurrentRelease: a release page compares the
// release with its base by default and, with ?against=current, with the
// environment's current release — what activating it, or rolling back to
// it, would change — saying which on the page and in the JSON.
func TestReleaseDiffAgainstTheCurrentRelease(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	// Releases 1..4, four targets changed by each after the first, 4
	// rolled back: release 3 is current.
	generate(t, db.Pool(t), generated{env: "dev", targets: 30, releases: 4, changed: 4, rollback: true})
	now := releaseAt(4).Add(time.Hour)
	c, _ := newTestConsole(t, viewerPool(t, db, true), Options{ShowValues: true, Now: func() time.Time { return now }})
	h := c.Handler()
	api := func(path string) ReleaseDetail {
		t.Helper()
		return localJSON[ReleaseDetail](t, h, path)
	}

	// Against its base (the default): release 1 has none, every target is new.
	if d := api("/api/environments/dev/releases/1"); d.Against != "base" || d.AgainstRelease != 0 || d.ChangedTotal != 30 || d.CurrentRelease != 3 {
		t.Errorf("release 1 against its base: against %q %d, %d changed, current %d; want base 0, 30, 3",
			d.Against, d.AgainstRelease, d.ChangedTotal, d.CurrentRelease)
	}
	// Rolling back to release 1 from 3 moves the 8 targets releases 2 and
	// 3 changed, back from 60 and 61 requests a minute to 120.
	d := api("/api/environments/dev/releases/1?against=current")
	if d.Against != "current" || d.AgainstRelease != 3 || d.ChangedTotal != 8 || len(d.Changed) != 8 {
		t.Fatalf("release 1 against current: against %q %d, %d changed (%d listed); want current 3, 8",
			d.Against, d.AgainstRelease, d.ChangedTotal, len(d.Changed))
	}
	olds := map[string]int{}
	for _, td := range d.Changed {
		if len(td.Changes) != 1 || td.Changes[0].Path != "agentPolicy.limits.requestsPerMinute" || td.Changes[0].New != "120" || td.OldDigest == "" {
			t.Errorf("release 1 against current, %s/%s: %+v, want one change to 120 from the current snapshot", td.Host, td.ServiceID, td.Changes)
			continue
		}
		olds[td.Changes[0].Old]++
	}
	if olds["60"] != 4 || olds["61"] != 4 {
		t.Errorf("release 1 against current: old values %v, want 4 × 60 and 4 × 61", olds)
	}
	// Release 4 (rolled back) against current 3 is its base diff.
	if d := api("/api/environments/dev/releases/4?against=current"); d.AgainstRelease != 3 || d.ChangedTotal != 4 {
		t.Errorf("release 4 against current: against %d, %d changed; want 3, 4", d.AgainstRelease, d.ChangedTotal)
	}
	// The current release against itself changes nothing.
	if d := api("/api/environments/dev/releases/3?against=current"); d.ChangedTotal != 0 || len(d.Retired) != 0 || len(d.Inputs) != 0 {
		t.Errorf("release 3 against current: %d changed, %d retired, %d inputs; want none", d.ChangedTotal, len(d.Retired), len(d.Inputs))
	}

	// Release 5, recorded on 3 and never activated, keeps only the even
	// services: activating it would retire the 15 odd ones, 5 of them
	// Agents (i % 3 == 0).
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Pool(t).Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%v\n%s", err, sql)
		}
	}
	at := releaseAt(5)
	exec(`INSERT INTO configpub.config_release (env_tag, release_version, base_release_version, row_revision,
			lifecycle_state, execution_outcome, definition, definition_hash, release_digest, actor, target_count,
			command_id, last_command_id, created_at, updated_at)
		VALUES ('dev', 5, 3, 1, 'RECORDED', 'NOT_REQUESTED', 'x'::bytea, 'sha256:' || encode(sha256('x'::bytea), 'hex'),
			'sha256:' || repeat('5', 64), 'alex@example.com', 15, md5('c5')::uuid, md5('c5')::uuid, $1, $1)`, at)
	exec(`INSERT INTO configpub.config_release_journal (env_tag, release_version, sequence, command_id, command_hash,
			event_kind, to_state, to_outcome, actor, recorded_at)
		VALUES ('dev', 5, 1, md5('c5')::uuid, 'sha256:00', 'record', 'RECORDED', 'NOT_REQUESTED', 'alex@example.com', $1)`, at)
	exec(`INSERT INTO configpub.config_release_target (env_tag, release_version, host, service_id, snapshot_id,
			changed, refresh_after_ms, expires_after_ms)
		SELECT env_tag, 5, host, service_id, snapshot_id, false, refresh_after_ms, expires_after_ms
		FROM configpub.config_release_target WHERE env_tag = 'dev' AND release_version = 3 AND substr(service_id, 5)::int % 2 = 0`)
	for query, want := range map[string]int{"?against=current": 15, "?against=current&audience=agent": 5,
		"?against=current&audience=agent&host=h0.example": 5, "?against=current&host=h1.example": 0,
		"?against=current&audience=agent&host=h0": 5, "?against=current&host=h": 15, "?against=current&host=h0.examplex": 0} {
		d := api("/api/environments/dev/releases/5" + query)
		if len(d.Retired) != want || d.ChangedTotal != 0 {
			t.Errorf("release 5%s: %d retired, %d changed; want %d, none", query, len(d.Retired), d.ChangedTotal, want)
		}
	}

	page := localGet(h, "/env/dev/releases/1?against=current").Body.String()
	mustContain(t, "release 1 page against current", page, "What changes if this release becomes current: against current release 3",
		`id="against-current" aria-current="page"`, "<del>60</del> → <ins>120</ins>", "8 target(s) changed")
	page = localGet(h, "/env/dev/releases/1").Body.String()
	mustContain(t, "release 1 page", page, "Changes against nothing (first release)", `id="against-base" aria-current="page"`,
		`href="/env/dev/releases/1?against=current"`)
	if page := localGet(h, "/env/dev/releases/3?against=current").Body.String(); !strings.Contains(page, "This release is current") {
		t.Errorf("release 3 against current does not say it is current")
	}
	if rec := localGet(h, "/api/environments/dev/releases/1?against=head"); rec.Code != 400 || !strings.Contains(rec.Body.String(), "against") {
		t.Errorf("against=head: %d %s, want 400 naming against", rec.Code, rec.Body)
	}
}
