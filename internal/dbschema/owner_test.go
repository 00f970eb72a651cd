package dbschema_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgtest"
)

// TestNonSuperuserOwnerMigrates follows docs/operations.md: a database owner
// that is not a superuser (CREATEROLE, for the group roles) migrates a fresh
// database, and a second run is a no-op.
func TestNonSuperuserOwnerMigrates(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := pgtest.New(t) // the group roles now exist on the cluster
	admin, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())

	owner, dbName := db.Name+"_owner", db.Name+"_owned"
	if _, err := admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{owner}.Sanitize()+" LOGIN PASSWORD 'owner-pw' NOSUPERUSER CREATEROLE NOCREATEDB"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{dbName}.Sanitize()+" WITH (FORCE)")
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{owner}.Sanitize())
	})
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{dbName}.Sanitize()+" OWNER "+pgx.Identifier{owner}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(owner, "owner-pw")
	u.Path = "/" + dbName
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("connect as the owner: %v", err)
	}
	defer conn.Close(context.Background())
	var super bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil || super {
		t.Fatalf("owner is superuser=%v (%v), want not", super, err)
	}
	n, err := dbschema.MigrateCount(ctx, conn)
	if err != nil {
		t.Fatalf("migrate as a non-superuser owner: %v", err)
	}
	if n == 0 {
		t.Fatal("first migration applied nothing")
	}
	if n, err := dbschema.MigrateCount(ctx, conn); err != nil || n != 0 {
		t.Fatalf("second migration: applied %d, err %v; want a no-op", n, err)
	}
}
