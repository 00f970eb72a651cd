package dbschema_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/sqlstate"
)

// viewerReads are the tables the console reads in full.
var viewerReads = []string{
	"environment", "config_release", "config_release_journal", "config_release_target", "config_snapshot",
	"current_pointer", "pointer_move", "revocation", "runtime_evidence", "schema_migration", "release_target_release_count",
}

// configpubTables lists every table of schema configpub from the catalog, so
// a table added by a later migration is covered without editing this test.
func configpubTables(ctx context.Context, t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) []string {
	t.Helper()
	rows, err := q.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = 'configpub' ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) < 12 {
		t.Fatalf("catalog lists %d configpub tables, want at least 12: %v", len(tables), tables)
	}
	return tables
}

func TestViewerRoleReadsMetadataAndWritesNothing(t *testing.T) {
	t.Parallel()
	db := seeded(t)
	ctx := context.Background()
	owner := db.Pool(t)
	viewer := db.PoolURL(t, db.URLFor(t, "configpub_viewer"))
	if _, err := owner.Exec(ctx, "INSERT INTO configpub.environment (env_tag, current_release_version, updated_at) VALUES ('prod', 1, now()) ON CONFLICT DO NOTHING"); err != nil {
		t.Fatal(err)
	}
	for _, table := range viewerReads {
		var n int
		if err := viewer.QueryRow(ctx, "SELECT count(*) FROM configpub."+table).Scan(&n); err != nil {
			t.Errorf("viewer SELECT %s: %v", table, err)
		} else if n == 0 {
			t.Errorf("viewer SELECT %s: no rows, want the seeded row", table)
		}
	}
	var size int64
	if err := viewer.QueryRow(ctx, "SELECT size FROM configpub.artifact").Scan(&size); err != nil || size != 4 {
		t.Errorf("viewer SELECT artifact metadata: size %d, err %v; want 4, nil", size, err)
	}
	for _, stmt := range []string{
		"SELECT bytes FROM configpub.artifact",
		"SELECT * FROM configpub.artifact",
		"SELECT * FROM configpub.command",
	} {
		_, err := viewer.Exec(ctx, stmt)
		if got := sqlState(err); got != sqlstate.InsufficientPrivilege {
			t.Errorf("viewer %q: got %v, want SQLSTATE 42501", stmt, err)
		}
	}
	for _, table := range configpubTables(ctx, t, owner) {
		for _, stmt := range []string{
			"INSERT INTO configpub." + table + " DEFAULT VALUES",
			"UPDATE configpub." + table + " SET " + firstColumn(ctx, t, owner, table) + " = " + firstColumn(ctx, t, owner, table),
			"DELETE FROM configpub." + table,
			"TRUNCATE configpub." + table + " CASCADE",
		} {
			_, err := viewer.Exec(ctx, stmt)
			if got := sqlState(err); got != sqlstate.InsufficientPrivilege {
				t.Errorf("viewer %q: got %v, want SQLSTATE 42501", stmt, err)
			}
		}
	}
	for _, stmt := range []string{
		"CREATE TABLE configpub.x (a int)",
		"SELECT nextval('configpub.runtime_evidence_evidence_id_seq')",
	} {
		_, err := viewer.Exec(ctx, stmt)
		if got := sqlState(err); got != sqlstate.InsufficientPrivilege {
			t.Errorf("viewer %q: got %v, want SQLSTATE 42501", stmt, err)
		}
	}
}

func TestViewerBytesRoleReadsArtifactBytes(t *testing.T) {
	t.Parallel()
	db := seeded(t)
	ctx := context.Background()
	pool := db.PoolURL(t, db.URLFor(t, "configpub_viewer_bytes"))
	var b []byte
	if err := pool.QueryRow(ctx, "SELECT bytes FROM configpub.artifact").Scan(&b); err != nil || string(b) != "v: 1" {
		t.Errorf("bytes role SELECT bytes: got %q, %v; want \"v: 1\"", b, err)
	}
	// The bytes role adds bytes only: the rest of the console's reads come
	// from configpub_viewer.
	if _, err := pool.Exec(ctx, "SELECT * FROM configpub.config_release"); sqlState(err) != sqlstate.InsufficientPrivilege {
		t.Errorf("bytes role SELECT config_release: got %v, want SQLSTATE 42501", err)
	}
	if _, err := pool.Exec(ctx, "UPDATE configpub.artifact SET media_type = media_type"); sqlState(err) != sqlstate.InsufficientPrivilege {
		t.Errorf("bytes role UPDATE artifact: got %v, want SQLSTATE 42501", err)
	}
}

func firstColumn(ctx context.Context, t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, table string) string {
	t.Helper()
	var col string
	err := q.QueryRow(ctx, `SELECT attname FROM pg_attribute WHERE attrelid = ('configpub.' || $1)::regclass
		AND attnum > 0 AND NOT attisdropped ORDER BY attnum LIMIT 1`, table).Scan(&col)
	if err != nil {
		t.Fatalf("first column of %s: %v", table, err)
	}
	return pgx.Identifier{col}.Sanitize()
}

// TestViewerReadsWorkflowViewMetadataOnly: the console lists a release's
// Workflow views through workflow_view_summary; the viewer reads neither the
// view documents (workflow_view_history, workflow_view_current) nor the
// tables behind them, and writes nothing in configpub_workflow.
func TestViewerReadsWorkflowViewMetadataOnly(t *testing.T) {
	t.Parallel()
	db := seeded(t)
	ctx := context.Background()
	viewer := db.PoolURL(t, db.URLFor(t, "configpub_viewer"))
	var n int
	if err := viewer.QueryRow(ctx, "SELECT count(*) FROM configpub_workflow.workflow_view_summary").Scan(&n); err != nil {
		t.Errorf("viewer SELECT workflow_view_summary: %v", err)
	}
	if err := viewer.QueryRow(ctx, "SELECT count(*) FROM configpub.release_target_summary").Scan(&n); err != nil {
		t.Errorf("viewer SELECT release_target_summary: %v", err)
	}
	for _, stmt := range []string{
		"SELECT document FROM configpub_workflow.workflow_view_history",
		"SELECT * FROM configpub_workflow.workflow_view_current",
		"SELECT * FROM configpub.workflow_view",
		"SELECT * FROM configpub.workflow_release_view",
		"CREATE VIEW configpub_workflow.x AS SELECT 1",
	} {
		if _, err := viewer.Exec(ctx, stmt); sqlState(err) != sqlstate.InsufficientPrivilege {
			t.Errorf("viewer %q: got %v, want SQLSTATE 42501", stmt, err)
		}
	}
	// A view over a join cannot be written by anyone; the refusal names
	// that rather than the privilege.
	if _, err := viewer.Exec(ctx, "DELETE FROM configpub_workflow.workflow_view_summary"); err == nil {
		t.Error("viewer DELETE FROM workflow_view_summary succeeded")
	}
}
