package pgcluster

import (
	"context"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"

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
