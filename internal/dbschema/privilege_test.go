package dbschema_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/sqlstate"
)

// seed inserts one row into every table as the owner.
const seed = `
INSERT INTO configpub.artifact (artifact_digest, media_type, bytes, size)
	VALUES ('sha256:' || encode(sha256('v: 1'::bytea), 'hex'), 'application/yaml', 'v: 1', 4);
INSERT INTO configpub.config_snapshot (snapshot_id, host, service_id, env_tag, audience, publication_id,
	policy_snapshot_id, policy_version, release_version, artifact_digest, content_digest, policy_digest,
	property_set_digest, schema_version, created_at)
	VALUES ('00000000-0000-8000-8000-000000000001', 'h1', 's1', 'prod', 'agent',
	'00000000-0000-8000-8000-000000000002', '00000000-0000-8000-8000-000000000003', 1, 1,
	'sha256:' || encode(sha256('v: 1'::bytea), 'hex'), 'sha256:' || repeat('a', 64), 'sha256:' || repeat('b', 64),
	'sha256:' || repeat('c', 64), 1, now());
INSERT INTO configpub.config_release (env_tag, release_version, row_revision, lifecycle_state, execution_outcome,
	definition, definition_hash, actor, target_count, command_id, last_command_id, created_at, updated_at)
	VALUES ('prod', 1, 1, 'RECORDED', 'NOT_REQUESTED', 'x', 'sha256:' || encode(sha256('x'::bytea), 'hex'), 'a', 1,
	'00000000-0000-4000-8000-000000000009', '00000000-0000-4000-8000-000000000009', now(), now());
INSERT INTO configpub.config_release_journal (env_tag, release_version, sequence, command_id, command_hash,
	event_kind, to_state, to_outcome, actor, recorded_at)
	VALUES ('prod', 1, 1, '00000000-0000-4000-8000-000000000009', 'sha256:00', 'record', 'RECORDED', 'NOT_REQUESTED', 'a', now());
INSERT INTO configpub.config_release_target (env_tag, release_version, host, service_id, snapshot_id, changed,
	refresh_after_ms, expires_after_ms)
	VALUES ('prod', 1, 'h1', 's1', '00000000-0000-8000-8000-000000000001', true, 1000, 2000);
INSERT INTO configpub.current_pointer (host, service_id, env_tag, snapshot_id, release_version, sequence, manifest,
	manifest_signature, manifest_key_id, lease_valid_from, lease_refresh_after, lease_expires_at, moved_at, updated_at)
	VALUES ('h1', 's1', 'prod', '00000000-0000-8000-8000-000000000001', 1, 1, '{}', 'sig', 'sha256:00', now(), now(), now(), now(), now());
INSERT INTO configpub.pointer_move (host, service_id, env_tag, next_snapshot_id, publication_id, release_version,
	sequence, action, actor, command_id, moved_at)
	VALUES ('h1', 's1', 'prod', '00000000-0000-8000-8000-000000000001', '00000000-0000-8000-8000-000000000002', 1, 1,
	'promote', 'a', '00000000-0000-4000-8000-000000000009', now());
INSERT INTO configpub.delivery_manifest (host, service_id, env_tag, sequence, issued_at, snapshot_id, manifest,
	signature, key_id, expires_at, kind)
	VALUES ('h1', 's1', 'prod', 1, now(), '00000000-0000-8000-8000-000000000001', '{}', 'sig', 'sha256:00', now(), 'move');
INSERT INTO configpub.revocation (snapshot_id, reason, actor, revoked_at)
	VALUES ('00000000-0000-8000-8000-000000000001', 'test', 'a', now());
INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, outcome) VALUES ('h1', 's1', 'prod', 'APPLIED');
INSERT INTO configpub.environment (env_tag, current_release_version, updated_at) VALUES ('prod', 1, now());
INSERT INTO configpub.workflow_view (view_digest, wf_def_id, version, workflow, state, definition_digest,
	compatibility_generation, limits, approvals, agents, tools, runner, retention, endpoint_targets, document, document_digest)
	VALUES ('sha256:' || repeat('d', 64), '00000000-0000-8000-8000-00000000000a', '1.0.0', 'wf', 'PUBLISHED',
	'sha256:' || repeat('e', 64), 1, '{}', '[]', '[]', '[]', '{}', '{}', '["svc"]', 'w: 1',
	'sha256:' || encode(sha256('w: 1'::bytea), 'hex'));
INSERT INTO configpub.workflow_view_stage (definition_hash, wf_def_id, version, view_digest)
	VALUES ('sha256:' || encode(sha256('x'::bytea), 'hex'), '00000000-0000-8000-8000-00000000000a', '1.0.0', 'sha256:' || repeat('d', 64));
INSERT INTO configpub.workflow_release_view (env_tag, release_version, wf_def_id, version, view_id, view_digest,
	publication_id, release_digest, definition_hash, accepted_publications, command_id, recorded_at)
	VALUES ('prod', 1, '00000000-0000-8000-8000-00000000000a', '1.0.0', '00000000-0000-8000-8000-00000000000b',
	'sha256:' || repeat('d', 64), '00000000-0000-8000-8000-000000000002', '', 'sha256:' || encode(sha256('x'::bytea), 'hex'),
	'[]', '00000000-0000-4000-8000-000000000009', now());
INSERT INTO configpub.candidate_pointer (host, service_id, env_tag, release_version, snapshot_id, staged_at)
	VALUES ('h1', 's1', 'prod', 1, '00000000-0000-8000-8000-000000000001', now());
INSERT INTO configpub.collected_artifact (artifact_digest, media_type, size, stored_at)
	VALUES ('sha256:' || repeat('f', 64), 'application/yaml', 4, now());
INSERT INTO configpub.webhook_delivery (event_id, event_kind, env_tag, release_version, receiver, attempt, delivered,
	http_status, attempted_at, duration_ms)
	VALUES (gen_random_uuid(), 'release.activated', 'prod', 1, 'https://hooks.example/x', 1, true, 200, now(), 3);
`

var appendOnly = []struct {
	table string
	set   string
}{
	{"artifact", "media_type = 'x'"},
	{"config_snapshot", "host = 'x'"},
	{"config_release_target", "changed = false"},
	{"config_release_journal", "reason = 'x'"},
	{"pointer_move", "reason = 'x'"},
	{"delivery_manifest", "signature = 'x'"},
	{"revocation", "reason = 'x'"},
	{"workflow_view", "limits = '{}'"},
	{"workflow_view_stage", "version = 'x'"},
	{"workflow_release_view", "publication_id = gen_random_uuid()"},
	{"webhook_delivery", "delivered = false"},
	{"collected_artifact", "size = 0"},
}

func seeded(t *testing.T) *pgtest.DB {
	t.Helper()
	db := pgtest.New(t)
	if _, err := db.Pool(t).Exec(context.Background(), seed); err != nil {
		t.Fatalf("seed: %v", err)
	}
	return db
}

func TestAppendOnlyTablesRefuseUpdateDeleteTruncateForEveryRole(t *testing.T) {
	t.Parallel()
	db := seeded(t)
	pools := map[string]*pgxpool.Pool{
		"owner":              db.Pool(t),
		"configpub_promoter": db.PoolURL(t, db.URLFor(t, "configpub_promoter")),
		"configpub_server":   db.PoolURL(t, db.URLFor(t, "configpub_server")),
	}
	ctx := context.Background()
	for role, pool := range pools {
		for _, tc := range appendOnly {
			for _, stmt := range []string{
				"UPDATE configpub." + tc.table + " SET " + tc.set,
				"DELETE FROM configpub." + tc.table,
				"TRUNCATE configpub." + tc.table + " CASCADE",
			} {
				_, err := pool.Exec(ctx, stmt)
				if err == nil {
					t.Errorf("%s: %q succeeded, want refused", role, stmt)
					continue
				}
				// The owner reaches the trigger; other roles may be
				// stopped earlier by missing privileges (42501).
				state := sqlState(err)
				if role == "owner" && state != dbschema.AppendOnlySQLState {
					t.Errorf("%s: %q: got SQLSTATE %s (%v), want %s", role, stmt, state, err, dbschema.AppendOnlySQLState)
				}
				if state != dbschema.AppendOnlySQLState && state != sqlstate.InsufficientPrivilege {
					t.Errorf("%s: %q: got SQLSTATE %s (%v), want %s or 42501", role, stmt, state, err, dbschema.AppendOnlySQLState)
				}
			}
		}
	}
	// The promoter holds UPDATE on nothing append-only, but the trigger is
	// what stops even the owner: prove the promoter's refusal on a table it
	// can write is the privilege system, and on config_release it is the
	// CAS guard.
	_, err := pools["configpub_promoter"].Exec(ctx, "UPDATE configpub.config_release SET reason = 'x', row_revision = row_revision + 1")
	if got := sqlState(err); got != dbschema.RevisionSQLState {
		t.Errorf("promoter editing a release definition: got %v, want SQLSTATE %s", err, dbschema.RevisionSQLState)
	}
	_, err = pools["owner"].Exec(ctx, "UPDATE configpub.config_release SET lifecycle_state = 'ACTIVE'")
	if got := sqlState(err); got != dbschema.RevisionSQLState {
		t.Errorf("release update without a revision bump: got %v, want SQLSTATE %s", err, dbschema.RevisionSQLState)
	}
	_, err = pools["owner"].Exec(ctx, "DELETE FROM configpub.config_release")
	if got := sqlState(err); got != dbschema.AppendOnlySQLState && got != sqlstate.ForeignKeyViolation {
		t.Errorf("release delete: got %v, want refused", err)
	}
}

func TestServerRoleOnlyReadsAndInsertsEvidence(t *testing.T) {
	t.Parallel()
	db := seeded(t)
	pool := db.PoolURL(t, db.URLFor(t, "configpub_server"))
	ctx := context.Background()
	for _, table := range []string{"artifact", "config_snapshot", "current_pointer", "delivery_manifest", "revocation", "candidate_pointer"} {
		if _, err := pool.Exec(ctx, "SELECT * FROM configpub."+table); err != nil {
			t.Errorf("server SELECT %s: %v", table, err)
		}
	}
	if _, err := pool.Exec(ctx, "INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, outcome) VALUES ('h1', 's1', 'prod', 'REJECTED')"); err != nil {
		t.Errorf("server INSERT runtime_evidence: %v", err)
	}
	var kind, phase string
	if err := pool.QueryRow(ctx, "INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, outcome) VALUES ('h1', 's1', 'prod', 'REJECTED') RETURNING kind, phase").Scan(&kind, &phase); err == nil {
		t.Errorf("server INSERT ... RETURNING read back %s/%s: want SQLSTATE 42501 (no SELECT on runtime_evidence)", kind, phase)
	}
	writes := []string{
		"INSERT INTO configpub.artifact (artifact_digest, media_type, bytes, size) VALUES ('sha256:' || encode(sha256('y'::bytea), 'hex'), 'x', 'y', 1)",
		"UPDATE configpub.current_pointer SET sequence = sequence + 1",
		"DELETE FROM configpub.current_pointer",
		"UPDATE configpub.runtime_evidence SET reason = 'x'",
		"DELETE FROM configpub.runtime_evidence",
		// A workload's report can never be a receipt: the server cannot
		// write the kind, the phase or the receipt columns.
		"INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, snapshot_id, outcome, kind) VALUES ('h1', 's1', 'prod', '00000000-0000-8000-8000-000000000001', 'APPLIED', 'receipt')",
		"INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, outcome, phase) VALUES ('h1', 's1', 'prod', 'REJECTED', 'current')",
		"INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, outcome, loaded_at) VALUES ('h1', 's1', 'prod', 'REJECTED', now())",
		"INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, outcome, endpoint) VALUES ('h1', 's1', 'prod', 'REJECTED', 'x')",
		"INSERT INTO configpub.revocation (publication_id, reason, actor, revoked_at) VALUES (gen_random_uuid(), 'x', 'x', now())",
		"UPDATE configpub.config_release SET row_revision = row_revision + 1",
		"INSERT INTO configpub.pointer_move (host, service_id, env_tag, next_snapshot_id, publication_id, release_version, sequence, action, actor, command_id, moved_at) VALUES ('h1', 's1', 'prod', '00000000-0000-8000-8000-000000000001', gen_random_uuid(), 1, 2, 'promote', 'x', gen_random_uuid(), now())",
		"UPDATE configpub.environment SET row_revision = row_revision + 1",
		"SELECT * FROM configpub.config_release",
		"SELECT * FROM configpub.command",
		"SELECT * FROM configpub.webhook_delivery",
		"DELETE FROM configpub.candidate_pointer",
		"INSERT INTO configpub.candidate_pointer (host, service_id, env_tag, release_version, snapshot_id, staged_at) VALUES ('h1', 's1', 'prod', 1, '00000000-0000-8000-8000-000000000001', now())",
		"CREATE TABLE configpub.x (a int)",
	}
	for _, stmt := range writes {
		_, err := pool.Exec(ctx, stmt)
		if got := sqlState(err); got != sqlstate.InsufficientPrivilege {
			t.Errorf("server %q: got %v, want SQLSTATE 42501", firstWords(stmt), err)
		}
	}
}

// workflowReaderGrants is the complete inventory of what
// configpub_workflow_reader may do: read the two Workflow views and the
// revoked snapshots (identity, ids, policy digest, how and when: what a
// caller check needs). Every other
// privilege on every relation, sequence and schema of the database is
// refused (TestWorkflowReaderGrantInventory checks it in the catalog,
// TestWorkflowReaderStatements by running each statement kind).
var workflowReaderGrants = []string{
	"schema configpub_workflow USAGE",
	"configpub_workflow.revoked_snapshot SELECT",
	"configpub_workflow.workflow_view_current SELECT",
	"configpub_workflow.workflow_view_history SELECT",
}

func TestWorkflowReaderGrantInventory(t *testing.T) {
	t.Parallel()
	db := seeded(t)
	ctx := context.Background()
	const role = "configpub_workflow_reader"
	got, err := pgtest.Grants(ctx, db.Pool(t), role)
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string(nil), workflowReaderGrants...)
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("configpub_workflow_reader grants:\n  %s\nwant exactly:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestWorkflowReaderStatements(t *testing.T) {
	t.Parallel()
	db := seeded(t)
	ctx := context.Background()
	pool := db.PoolURL(t, db.URLFor(t, "configpub_workflow_reader"))
	for _, v := range []string{"workflow_view_history", "workflow_view_current"} {
		var n int
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM configpub_workflow."+v+
			" WHERE view_id = '00000000-0000-8000-8000-00000000000b' AND view_digest = 'sha256:' || repeat('d', 64)").Scan(&n); err != nil || n != 1 {
			t.Errorf("reader reads %s by id and digest: %d rows, %v", v, n, err)
		}
		for _, stmt := range []string{
			"INSERT INTO configpub_workflow." + v + " (view_id) VALUES (gen_random_uuid())",
			"UPDATE configpub_workflow." + v + " SET version = 'x'",
			"DELETE FROM configpub_workflow." + v,
			"TRUNCATE configpub_workflow." + v,
		} {
			// A view that is not updatable (55000) or not a table (42809)
			// refuses before the privilege check (42501) can.
			if _, err := pool.Exec(ctx, stmt); !slices.Contains([]string{sqlstate.InsufficientPrivilege, sqlstate.ObjectNotInPrerequisiteState, sqlstate.WrongObjectType}, sqlState(err)) {
				t.Errorf("reader %q: got %v, want refused", stmt, err)
			}
		}
	}
	rows, err := db.Pool(t).Query(ctx, `SELECT c.relname, (SELECT a.attname FROM pg_attribute a
			WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum LIMIT 1)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'configpub' AND c.relkind IN ('r', 'p', 'v', 'm') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type table struct{ Name, Col string }
	tables, err := pgx.CollectRows(rows, pgx.RowToStructByPos[table])
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) < 16 {
		t.Fatalf("found %d configpub tables", len(tables))
	}
	for _, tb := range tables {
		q := "configpub." + tb.Name
		for _, stmt := range []string{
			"SELECT * FROM " + q,
			"SELECT " + tb.Col + " FROM " + q,
			"INSERT INTO " + q + " DEFAULT VALUES",
			"UPDATE " + q + " SET " + tb.Col + " = " + tb.Col,
			"DELETE FROM " + q,
			"TRUNCATE " + q,
			"LOCK TABLE " + q + " IN ACCESS SHARE MODE",
		} {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, stmt); return err })
			if got := sqlState(err); got != sqlstate.InsufficientPrivilege {
				t.Errorf("reader %q: got %v, want SQLSTATE 42501", stmt, err)
			}
		}
	}
	for _, stmt := range []string{
		"CREATE TABLE configpub.x (a int)",
		"CREATE TABLE configpub_workflow.x (a int)",
		"CREATE VIEW configpub_workflow.x AS SELECT 1",
		"SELECT nextval('configpub.pointer_move_move_id_seq')",
		"SELECT configpub.refuse_mutation()",
	} {
		if _, err := pool.Exec(ctx, stmt); sqlState(err) != sqlstate.InsufficientPrivilege {
			t.Errorf("reader %q: got %v, want SQLSTATE 42501", stmt, err)
		}
	}
}

func TestArtifactDigestMustMatchBytes(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	_, err := db.Pool(t).Exec(context.Background(),
		"INSERT INTO configpub.artifact (artifact_digest, media_type, bytes, size) VALUES ('sha256:'||repeat('0',64), 'x', 'y', 1)")
	if got := sqlState(err); got != sqlstate.CheckViolation {
		t.Fatalf("got %v, want check violation 23514", err)
	}
}

func firstWords(s string) string {
	if len(s) > 60 {
		return strings.TrimSpace(s[:60]) + "..."
	}
	return s
}
