package pgsession_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/pgsession"
	"github.com/configpub/configpub/internal/pgtest"
)

// TestPasswordRotatedInThePassfile: a pool whose password comes from a
// passfile logs its next connection in with the password the file holds
// then, so rotating a database password (ALTER ROLE, then the file, as a
// Secret is updated) needs no restart of a long-running process. A
// password given in the URL is used as given.
func TestPasswordRotatedInThePassfile(t *testing.T) {
	c, super := pgtest.PasswordCluster(t, "rotating")
	ctx := context.Background()
	if _, err := super.Exec(ctx, "CREATE ROLE app LOGIN PASSWORD 'first' IN ROLE rotating"); err != nil {
		t.Fatal(err)
	}
	passfile := filepath.Join(t.TempDir(), "pgpass")
	writePass := func(pw string) { pgtest.WritePassfile(t, passfile, c, "postgres", "app", pw) }
	writePass("first")
	t.Setenv("PGPASSFILE", passfile)
	t.Setenv("PGPASSWORD", "")
	url := "postgres://app@127.0.0.1:" + strconv.Itoa(c.Port) + "/postgres?sslmode=disable"
	pool, err := pgsession.NewPool(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	login := func() error {
		pool.Reset() // every later query needs a new connection
		var one int
		return pool.QueryRow(ctx, "SELECT 1").Scan(&one)
	}
	if err := login(); err != nil {
		t.Fatalf("with the first password: %v", err)
	}
	withURLPassword, err := pgsession.NewPool(ctx, "postgres://app:first@127.0.0.1:"+strconv.Itoa(c.Port)+"/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer withURLPassword.Close()

	if _, err := super.Exec(ctx, "ALTER ROLE app PASSWORD 'second'"); err != nil {
		t.Fatal(err)
	}
	if err := login(); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("the role's password changed, the file not yet: got %v, want a failed login", err)
	}
	writePass("second")
	if err := login(); err != nil {
		t.Fatalf("after the passfile was rotated: %v", err)
	}
	var one int
	if err := withURLPassword.QueryRow(ctx, "SELECT 1").Scan(&one); err == nil || !strings.Contains(err.Error(), "password authentication failed") {
		t.Fatalf("a password given in the URL: got %v, want it used as given (and refused)", err)
	}
	// A file that disappears keeps the password read last.
	if err := os.Remove(passfile); err != nil {
		t.Fatal(err)
	}
	if err := login(); err != nil {
		t.Fatalf("after the passfile was removed: %v", err)
	}
}
