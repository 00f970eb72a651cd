package pgtest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/atomicfile"
	"github.com/configpub/configpub/internal/pgcluster"
)

// PasswordCluster starts a cluster of the test's own (not the shared one)
// in which members of role group log in over 127.0.0.1 with a password
// (SCRAM) while the superuser keeps trust, for tests of password handling.
// It creates group and returns the cluster and a superuser connection;
// both end with the test.
func PasswordCluster(t testing.TB, group string) (*pgcluster.Cluster, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	bin, err := pgcluster.FindBinDir()
	if err != nil {
		t.Fatalf("pgtest: %v (run scripts/ensure-postgres.sh)", err)
	}
	dir, err := os.MkdirTemp("", "configpub-password-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c, err := pgcluster.New(ctx, pgcluster.Options{Dir: dir, BinDir: bin})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RequirePassword(ctx, group); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, "CREATE ROLE "+group); err != nil {
		t.Fatal(err)
	}
	return c, conn
}

// WritePassfile replaces path, atomically, with a 0600 passfile holding
// user's password for database db of c.
func WritePassfile(t testing.TB, path string, c *pgcluster.Cluster, db, user, password string) {
	t.Helper()
	line := fmt.Sprintf("127.0.0.1:%d:%s:%s:%s\n", c.Port, db, user, password)
	if err := atomicfile.Write(path, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
}
