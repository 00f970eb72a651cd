package dbschema_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestMigrateTwiceIsANoOp(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t) // already migrated once
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	n, err := dbschema.MigrateCount(ctx, conn)
	if err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if n != 0 {
		t.Fatalf("second Migrate applied %d migrations, want 0", n)
	}
	ms, err := dbschema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM configpub.schema_migration").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != len(ms) {
		t.Fatalf("got %d ledger rows, want %d", rows, len(ms))
	}
}

func TestMigrateConcurrentlyOnOneDatabase(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	// Re-create the schema from scratch on a second database would need a
	// clean database; concurrency on an already-migrated one must still be
	// safe and a no-op.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, db.URL)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			errs <- dbschema.Migrate(ctx, conn)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("concurrent Migrate: %v", err)
		}
	}
}

func TestMigrateRefusesAnEditedMigration(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "UPDATE configpub.schema_migration SET checksum = 'sha256:00' WHERE version = 1"); err != nil {
		t.Fatal(err)
	}
	err = dbschema.Migrate(ctx, conn)
	if !errors.Is(err, dbschema.ErrChecksumMismatch) {
		t.Fatalf("got %v, want ErrChecksumMismatch", err)
	}
}

func TestNoConfigpubRoleIsSuperuserOrLogin(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	pool := db.Pool(t)
	rows, err := pool.Query(context.Background(),
		"SELECT rolname, rolsuper, rolcanlogin, rolcreaterole, rolcreatedb, rolbypassrls FROM pg_roles WHERE rolname LIKE 'configpub\\_%' AND rolname NOT LIKE 'configpub\\_test\\_%'")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var name string
		var super, login, createrole, createdb, bypass bool
		if err := rows.Scan(&name, &super, &login, &createrole, &createdb, &bypass); err != nil {
			t.Fatal(err)
		}
		seen[name] = true
		if super || login || createrole || createdb || bypass {
			t.Errorf("role %s: got super=%v login=%v createrole=%v createdb=%v bypassrls=%v, want all false",
				name, super, login, createrole, createdb, bypass)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"configpub_promoter", "configpub_server", "configpub_workflow_reader"} {
		if !seen[r] {
			t.Errorf("role %s missing", r)
		}
	}
}

func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
