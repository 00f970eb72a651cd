package console

import (
	"cmp"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// genT0 is the generated history's first release time.
var genT0 = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// generated describes a generated environment history.
type generated struct {
	env      string
	targets  int
	releases int
	changed  int  // targets changed per release after the first
	rollback bool // roll the last release back to the one before
	inputs   int  // more input files each release's definition lists, every one changed by every release
	// renewal, when set, says which releases are compiled from the same
	// policy sources as the release before (their recorded sources digests
	// are equal).
	renewal func(r int) bool
	// actor and reason of every release ("alex@example.com" and none
	// unless set).
	actor, reason string
}

// releaseAt is when release r was recorded; it is activated one minute later.
func releaseAt(r int) time.Time { return genT0.Add(time.Duration(r-1) * time.Hour) }

// rpm is the requestsPerMinute value a target's snapshot of release r has.
func rpm(r int) int {
	if r == 1 {
		return 120
	}
	return 60 + r - 2
}

// generate writes the history as the schema owner, the way the promoter
// would leave it: snapshots (activation window: 21 days from the release's
// time) and artifacts, complete target mappings,
// journal rows through the compare-and-swap, pointer moves, current
// pointers and one APPLIED report per current pointer.
func generate(t testing.TB, pool *pgxpool.Pool, g generated) {
	t.Helper()
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("generate %s: %v\n%s", g.env, err, sql)
		}
	}
	exec(`INSERT INTO configpub.environment (env_tag, updated_at) VALUES ($1, $2)`, g.env, genT0)
	sources := 0 // the release whose sources release r is compiled from
	for r := 1; r <= g.releases; r++ {
		at := releaseAt(r)
		if r == 1 || g.renewal == nil || !g.renewal(r) {
			sources = r
		}
		lo, hi := 0, g.targets-1
		if r > 1 {
			lo = ((r - 2) * g.changed) % g.targets
			hi = lo + g.changed - 1
		}
		// Artifacts and snapshots of the targets release r changes.
		exec(`WITH v AS (
				SELECT i, convert_to(format(E'runtimePolicy:\n  releaseVersion: %s\n  publicationId: "p-%s"\nagentPolicy:\n  name: "agent-%s"\n  prompt: "You are generated agent %s."\n  limits:\n    requestsPerMinute: %s\n  credentials:\n    apiKeyRef: "vault://secret/agents/%s#key"\n',
					$2::int, $2::int, i, i, $5::int, i), 'UTF8') AS b
				FROM generate_series($3::int, $4::int) i WHERE $1::text <> '')
			INSERT INTO configpub.artifact (artifact_digest, media_type, bytes, size)
			SELECT 'sha256:' || encode(sha256(b), 'hex'), 'application/yaml', b, octet_length(b) FROM v
			ON CONFLICT DO NOTHING`, g.env, r, lo, hi, rpm(r))
		exec(`WITH v AS (
				SELECT i, convert_to(format(E'runtimePolicy:\n  releaseVersion: %s\n  publicationId: "p-%s"\nagentPolicy:\n  name: "agent-%s"\n  prompt: "You are generated agent %s."\n  limits:\n    requestsPerMinute: %s\n  credentials:\n    apiKeyRef: "vault://secret/agents/%s#key"\n',
					$2::int, $2::int, i, i, $5::int, i), 'UTF8') AS b
				FROM generate_series($3::int, $4::int) i)
			INSERT INTO configpub.config_snapshot (snapshot_id, host, service_id, env_tag, audience, publication_id,
				policy_snapshot_id, policy_version, release_version, artifact_digest, content_digest, policy_digest,
				property_set_digest, schema_version, created_at, valid_from, expires_at)
			SELECT gen_random_uuid(), 'h' || (i / 100) || '.example', 'svc-' || i, $1,
				(ARRAY['agent', 'gateway', 'knowledge'])[1 + i % 3], md5($1::text || $2::bigint::text)::uuid, gen_random_uuid(), $2, $2,
				'sha256:' || encode(sha256(b), 'hex'), 'sha256:' || encode(sha256(b || 'c'::bytea), 'hex'),
				'sha256:' || encode(sha256(b || 'p'::bytea), 'hex'), 'sha256:' || repeat('c', 64), 1, $6::timestamptz, $6::timestamptz, $6::timestamptz + interval '21 days'
			FROM v`, g.env, r, lo, hi, rpm(r), at)
		def := fmt.Sprintf("inputs:\n  - path: agents/a.yaml\n    digest: sha256:%064d\n  - path: envs/%s.yaml\n    digest: sha256:%064d\n", r, g.env, 1)
		for i := 0; i < g.inputs; i++ {
			def += fmt.Sprintf("  - path: tools/t%05d.yaml\n    digest: sha256:%032d%032d\n", i, r, i)
		}
		exec(`INSERT INTO configpub.config_release (env_tag, release_version, base_release_version, row_revision,
				lifecycle_state, execution_outcome, definition, definition_hash, release_digest, source_commit, source_ref,
				actor, reviewers, reason, target_count, command_id, last_command_id, created_at, updated_at, sources_digest)
			VALUES ($1, $2, $3, 1, 'RECORDED', 'NOT_REQUESTED', $4::bytea, 'sha256:' || encode(sha256($4::bytea), 'hex'),
				'sha256:' || encode(sha256(($1::text || $2::bigint::text)::bytea), 'hex'), md5($1::text || $2::bigint::text) || 'deadbeef',
				'refs/heads/main', $8, '{sam@example.com}', $9, $5, md5('c' || $1::text || $2::bigint::text)::uuid,
				md5('c' || $1::text || $2::bigint::text)::uuid, $6, $6,
				'sha256:' || encode(sha256(($1::text || ' sources ' || $7::int::text)::bytea), 'hex'))`, g.env, r, r-1, []byte(def), g.targets, at, sources,
			cmp.Or(g.actor, "alex@example.com"), g.reason)
		exec(`INSERT INTO configpub.config_release_journal (env_tag, release_version, sequence, command_id, command_hash,
				event_kind, to_state, to_outcome, actor, recorded_at)
			VALUES ($1, $2, 1, md5('c' || $1::text || $2::bigint::text)::uuid, 'sha256:00', 'record', 'RECORDED', 'NOT_REQUESTED', 'alex@example.com', $3)`,
			g.env, r, at)
		// The complete mapping: each identity's newest snapshot so far.
		exec(`INSERT INTO configpub.config_release_target (env_tag, release_version, host, service_id, snapshot_id,
				changed, refresh_after_ms, expires_after_ms)
			SELECT $1, $2, host, service_id, snapshot_id, release_version = $2, 3600000, 86400000 FROM (
				SELECT DISTINCT ON (host, service_id) host, service_id, snapshot_id, release_version
				FROM configpub.config_snapshot WHERE env_tag = $1 AND release_version <= $2
				ORDER BY host, service_id, release_version DESC) s`, g.env, r)
		g.activate(t, exec, r, r-1, "promote", at.Add(time.Minute))
	}
	if g.rollback && g.releases > 1 {
		g.activate(t, exec, g.releases-1, g.releases, "rollback", releaseAt(g.releases).Add(30*time.Minute))
	}
	// One APPLIED receipt per current pointer (read back by the control
	// plane), and a later REJECTED observation by h0.example/svc-0 about
	// its current snapshot: an unverified report that changes no state.
	exec(`INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, snapshot_id, outcome, artifact_digest, reported_at,
			kind, endpoint, running_snapshot_id)
		SELECT p.host, p.service_id, p.env_tag, p.snapshot_id, 'APPLIED', s.artifact_digest, p.moved_at + interval '5 seconds',
			'receipt', 'https://' || p.host || '/status', p.snapshot_id
		FROM configpub.current_pointer p JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
		WHERE p.env_tag = $1`, g.env)
	exec(`INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, snapshot_id, outcome, reason, artifact_digest, reported_at)
		SELECT p.host, p.service_id, p.env_tag, p.snapshot_id, 'REJECTED', 'DIGEST_MISMATCH', s.artifact_digest, p.moved_at + interval '10 seconds'
		FROM configpub.current_pointer p JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
		WHERE p.env_tag = $1 AND p.host = 'h0.example' AND p.service_id = 'svc-0'`, g.env)
}

// activate moves every pointer whose snapshot differs to release r's
// mapping and journals it, like the promoter's activation transaction.
func (g generated) activate(t testing.TB, exec func(string, ...any), r, prev int, action string, at time.Time) {
	t.Helper()
	cmd := fmt.Sprintf("%08x-0000-4000-8000-%012x", r*7+len(action), prev+1000)
	exec(`INSERT INTO configpub.pointer_move (host, service_id, env_tag, previous_snapshot_id, next_snapshot_id,
			publication_id, release_version, previous_release_version, sequence, action, actor, reason, command_id, moved_at)
		SELECT t.host, t.service_id, t.env_tag, p.snapshot_id, t.snapshot_id, s.publication_id, $2, nullif($3, 0),
			coalesce(p.sequence, 0) + 1, $4, 'alex@example.com', '', $5::uuid, $6
		FROM configpub.config_release_target t JOIN configpub.config_snapshot s ON s.snapshot_id = t.snapshot_id
		LEFT JOIN configpub.current_pointer p ON p.env_tag = t.env_tag AND p.host = t.host AND p.service_id = t.service_id
		WHERE t.env_tag = $1 AND t.release_version = $2 AND (p.snapshot_id IS DISTINCT FROM t.snapshot_id OR p.retired_at IS NOT NULL)`,
		g.env, r, prev, action, cmd, at)
	exec(`INSERT INTO configpub.current_pointer (host, service_id, env_tag, snapshot_id, release_version, sequence, manifest,
			manifest_signature, manifest_key_id, lease_valid_from, lease_refresh_after, lease_expires_at, moved_at, updated_at)
		SELECT t.host, t.service_id, t.env_tag, t.snapshot_id, $2, 1, '{}', 'sig', 'sha256:00', $3::timestamptz, $3::timestamptz + interval '30 days',
			$3::timestamptz + interval '3650 days', $3::timestamptz, $3::timestamptz
		FROM configpub.config_release_target t WHERE t.env_tag = $1 AND t.release_version = $2
		ON CONFLICT (host, service_id, env_tag) DO UPDATE SET snapshot_id = EXCLUDED.snapshot_id,
			release_version = EXCLUDED.release_version, sequence = current_pointer.sequence + 1,
			moved_at = EXCLUDED.moved_at, updated_at = EXCLUDED.updated_at, retired_at = NULL, retired_release_version = NULL
		WHERE current_pointer.snapshot_id IS DISTINCT FROM EXCLUDED.snapshot_id OR current_pointer.retired_at IS NOT NULL`, g.env, r, at)
	// Retire the identities the mapping does not contain.
	exec(`WITH x AS (
			UPDATE configpub.current_pointer p SET retired_at = $3, retired_release_version = $2, updated_at = $3
			WHERE p.env_tag = $1 AND p.retired_at IS NULL AND NOT EXISTS (SELECT 1 FROM configpub.config_release_target t
				WHERE t.env_tag = p.env_tag AND t.release_version = $2 AND t.host = p.host AND t.service_id = p.service_id)
			RETURNING p.host, p.service_id, p.snapshot_id, p.sequence)
		INSERT INTO configpub.pointer_move (host, service_id, env_tag, previous_snapshot_id, next_snapshot_id,
			publication_id, release_version, previous_release_version, sequence, action, actor, reason, command_id, moved_at, retired)
		SELECT x.host, x.service_id, $1, x.snapshot_id, x.snapshot_id, s.publication_id, $2, nullif($4, 0), x.sequence, $5,
			'alex@example.com', '', $6::uuid, $3, true
		FROM x JOIN configpub.config_snapshot s ON s.snapshot_id = x.snapshot_id`, g.env, r, at, prev, action, cmd)
	if prev > 0 {
		to := "SUPERSEDED"
		if action == "rollback" {
			to = "ROLLED_BACK"
		}
		exec(`UPDATE configpub.config_release SET row_revision = row_revision + 1, lifecycle_state = $3,
				last_command_id = $4::uuid, updated_at = $5 WHERE env_tag = $1 AND release_version = $2`, g.env, prev, to, cmd, at)
		exec(`INSERT INTO configpub.config_release_journal (env_tag, release_version, sequence, command_id, command_hash,
				event_kind, from_state, to_state, to_outcome, actor, reason, recorded_at)
			SELECT $1, $2, row_revision, $4::uuid, 'sha256:01', 'deactivate', 'ACTIVE', $3, execution_outcome, 'alex@example.com', '', $5
			FROM configpub.config_release WHERE env_tag = $1 AND release_version = $2`, g.env, prev, to, cmd, at)
	}
	exec(`UPDATE configpub.config_release SET row_revision = row_revision + 1, lifecycle_state = 'ACTIVE',
			execution_outcome = 'APPLIED', last_command_id = $3::uuid, updated_at = $4 WHERE env_tag = $1 AND release_version = $2`,
		g.env, r, cmd, at)
	exec(`INSERT INTO configpub.config_release_journal (env_tag, release_version, sequence, command_id, command_hash,
			event_kind, from_state, to_state, to_outcome, actor, reason, recorded_at)
		SELECT $1, $2, row_revision, $3::uuid, 'sha256:02', $4, 'RECORDED', 'ACTIVE', 'APPLIED', 'alex@example.com',
			CASE WHEN $4 = 'rollback' THEN 'roll back the limits change' ELSE '' END, $5
		FROM configpub.config_release WHERE env_tag = $1 AND release_version = $2`, g.env, r, cmd, action, at)
	exec(`UPDATE configpub.environment SET current_release_version = $2, row_revision = row_revision + 1, updated_at = $3
		WHERE env_tag = $1`, g.env, r, at)
}
