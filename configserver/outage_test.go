package configserver_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/configserver/pgstore"
	"github.com/configpub/configpub/internal/dbschema"
)

// privateCluster is a PostgreSQL cluster this test alone may stop and start
// (the pgtest cluster is shared by every test of the binary).
type privateCluster struct {
	dir, bin string
	port     int
	cred     *syscall.Credential
}

func newPrivateCluster(t *testing.T) *privateCluster {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	if len(dirs) == 0 {
		if p, err := exec.LookPath("pg_ctl"); err == nil {
			real, _ := filepath.EvalSymlinks(p)
			dirs = append(dirs, filepath.Dir(real))
		}
	}
	if len(dirs) == 0 {
		t.Fatal("pg_ctl not found (run scripts/ensure-postgres.sh)")
	}
	dir, err := os.MkdirTemp("", "configpub-outage-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := &privateCluster{bin: dirs[len(dirs)-1], dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs the postgres OS user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(c.dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	c.run(t, "initdb", "-D", c.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	c.start(t)
	t.Cleanup(func() { _ = c.cmd("pg_ctl", "-D", c.data(), "-m", "immediate", "stop").Run() })
	return c
}

func (c *privateCluster) data() string { return filepath.Join(c.dir, "data") }

func (c *privateCluster) cmd(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC", "HOME="+c.dir)
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	return cmd
}

func (c *privateCluster) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := c.cmd(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", name, err, out)
	}
}

func (c *privateCluster) start(t *testing.T) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "log"), "-w", "-t", "60", "-o",
		fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off", c.port, c.dir), "start")
}

func (c *privateCluster) stop(t *testing.T) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop")
}

func (c *privateCluster) url(user, password string) string {
	if password != "" {
		user += ":" + password
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", user, c.port)
}

// TestDatabaseOutage: stopping PostgreSQL turns /configs into 503 (with
// Retry-After) and /readyz not ready within 1 s; starting it again recovers
// without a restart of the server.
func TestDatabaseOutage(t *testing.T) {
	t.Parallel()
	c := newPrivateCluster(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.url("postgres", ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := dbschema.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `CREATE ROLE cs_login LOGIN PASSWORD 'pw' IN ROLE configpub_server`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	owner, err := pgxpool.New(ctx, c.url("postgres", ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(owner.Close)

	e := newEnv(t, envOptions{storeURL: c.url("cs_login", "pw"), owner: owner,
		store: pgstore.Options{StaleAfter: 500 * time.Millisecond, Heartbeat: 100 * time.Millisecond,
			ConnectTimeout: 500 * time.Millisecond, QueryTimeout: 500 * time.Millisecond}})
	sn := e.seed.publish(t, idA, "agent", 1, yamlBody("outage-body"))
	e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)
	tok := e.token(t, idA, "agent")

	c.stop(t)
	stopped := time.Now()
	var got int
	for time.Since(stopped) < 3*time.Second {
		resp, _ := e.do(t, "GET", configsPath(idA), tok)
		if got = resp.StatusCode; got == http.StatusServiceUnavailable {
			if resp.Header.Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(stopped); got != http.StatusServiceUnavailable || d > time.Second {
		t.Fatalf("after stopping PostgreSQL: got %d after %s, want 503 within 1s", got, d)
	}
	reqStart := time.Now()
	if resp, _ := e.do(t, "GET", configsPath(idA), tok); resp.StatusCode != 503 || time.Since(reqStart) > 200*time.Millisecond {
		t.Fatalf("while down: got %d in %s, want a quick 503", resp.StatusCode, time.Since(reqStart))
	}
	if resp, _ := e.do(t, "GET", "/readyz", ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while down: got %d, want 503", resp.StatusCode)
	}
	if resp, _ := e.do(t, "GET", "/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz while down: got %d, want 200 (the process is alive)", resp.StatusCode)
	}

	c.start(t)
	started := time.Now()
	for time.Since(started) < 10*time.Second {
		resp, _ := e.do(t, "GET", configsPath(idA), tok)
		if resp.StatusCode == http.StatusOK {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp, _ := e.do(t, "GET", configsPath(idA), tok); resp.StatusCode != http.StatusOK {
		t.Fatalf("after restarting PostgreSQL: got %d, want 200 without restarting the server", resp.StatusCode)
	}
	if resp, _ := e.do(t, "GET", "/readyz", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz after restart: got %d, want 200", resp.StatusCode)
	}
	t.Logf("recovered %s after PostgreSQL started", time.Since(started).Round(time.Millisecond))
	// Moves made after the outage are followed again.
	owner.Reset() // the seeding pool's connections died with the server
	next := e.seed.publish(t, idA, "agent", 2, yamlBody("outage-after"))
	e.seed.move(t, next)
	if d := waitServed(t, e, idA, "agent", next.ID); d > time.Second {
		t.Fatalf("move after recovery visible after %s, want within 1s", d)
	}
}
