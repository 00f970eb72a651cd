package pgstore

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgtest"
)

// TestStoreFollowsAPasswordRotatedInItsPassfile: a Config Server store
// whose login password comes from a passfile is live again after the
// password is rotated (ALTER ROLE, then the file) and its connections are
// cut: its pool and its LISTEN session, which it dials itself, log in with
// the password the file holds then.
func TestStoreFollowsAPasswordRotatedInItsPassfile(t *testing.T) {
	c, super := pgtest.PasswordCluster(t, "configpub_login")
	ctx := context.Background()
	if err := dbschema.Migrate(ctx, super); err != nil {
		t.Fatal(err)
	}
	if _, err := super.Exec(ctx, "CREATE ROLE cs LOGIN PASSWORD 'first' IN ROLE configpub_server, configpub_login"); err != nil {
		t.Fatal(err)
	}
	passfile := filepath.Join(t.TempDir(), "pgpass")
	writePass := func(pw string) { pgtest.WritePassfile(t, passfile, c, "postgres", "cs", pw) }
	writePass("first")
	t.Setenv("PGPASSFILE", passfile)
	t.Setenv("PGPASSWORD", "")
	opts := Options{StaleAfter: 500 * time.Millisecond, Heartbeat: 100 * time.Millisecond,
		ConnectTimeout: time.Second, MaxReconnectDelay: 100 * time.Millisecond}
	st := runStore(t, "postgres://cs@127.0.0.1:"+strconv.Itoa(c.Port)+"/postgres?sslmode=disable", opts)

	if _, err := super.Exec(ctx, "ALTER ROLE cs PASSWORD 'second'"); err != nil {
		t.Fatal(err)
	}
	writePass("second")
	// A restart or failover cuts every connection.
	if _, err := super.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'cs'"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for st.Ready(ctx) == nil { // it notices the cut first
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		err := st.Ready(ctx) // live: its LISTEN session is up, and the pointers confirmed
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready again after the rotation: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
