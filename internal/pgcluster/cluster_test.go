package pgcluster

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestClusterLifecycle(t *testing.T) {
	if _, err := FindBinDir(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	// The server runs as the postgres OS user when we are root: it must be
	// able to reach the directory, so not t.TempDir (its parent is 0700).
	base, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "pg")
	c, err := New(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.Running(ctx) {
		t.Fatal("Running before Start")
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	var super bool
	if err := conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super); err != nil || !super {
		t.Fatalf("want superuser postgres, got super=%v err=%v", super, err)
	}
	conn.Close(ctx)
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Running(ctx) {
		t.Fatal("Running after Stop")
	}
	// A second New on the same directory reuses the data and starts again.
	c2, err := New(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c2.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestCommandRunsAsThePostgresUserWhenRoot(t *testing.T) {
	if _, err := FindBinDir(); err != nil {
		t.Skip(err)
	}
	base, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := New(context.Background(), Options{Dir: filepath.Join(base, "pg")})
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(os.Geteuid())
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatal(err)
		}
		want = u.Uid
	}
	out, err := c.Command(context.Background(), "/bin/sh", "-c", `id -u; pwd; echo "$LC_ALL $PGTZ"`).Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, wantOut := string(out), want+"\n"+c.Dir+"\nC UTC\n"; got != wantOut {
		t.Fatalf("got %q, want %q", got, wantOut)
	}
}

func TestReplicaStreamsFromThePrimary(t *testing.T) {
	if _, err := FindBinDir(); err != nil {
		t.Skip(err)
	}
	ctx := context.Background()
	base := reachableTempDir(t)
	p, err := New(ctx, Options{Dir: filepath.Join(base, "primary")})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	if err := p.EnableReplication(ctx); err != nil {
		t.Fatal(err)
	}
	pc, err := pgx.Connect(ctx, p.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	if _, err := pc.Exec(ctx, "CREATE TABLE t (v int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	r, err := p.Replica(ctx, Options{Dir: filepath.Join(base, "replica")})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	rc, err := pgx.Connect(ctx, r.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close(ctx)
	var recovering bool
	if err := rc.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil || !recovering {
		t.Fatalf("replica: pg_is_in_recovery = %v (%v), want true", recovering, err)
	}
	if _, err := rc.Exec(ctx, "INSERT INTO t VALUES (3)"); err == nil {
		t.Fatal("the replica accepted a write")
	}
	// A row committed on the primary after the base backup streams over.
	if _, err := pc.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatal(err)
	}
	// The standby accepts connections before its WAL receiver has
	// connected: wait for the primary's walsender (on a loaded host it
	// takes a moment).
	deadline := time.Now().Add(10 * time.Second)
	for {
		var sender string
		err := pc.QueryRow(ctx, "SELECT usename FROM pg_stat_replication").Scan(&sender)
		if err == nil && sender == ReplicationRole {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pg_stat_replication 10s after the replica started: %q (%v), want a walsender for %s", sender, err, ReplicationRole)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		var n int
		if err := rc.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica has %d rows 10s after the primary's commit, want 2", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reachableTempDir is a temporary directory the postgres OS user can reach
// (not t.TempDir: its parent is 0700), removed at the end of the test.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}
