package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvURL names the environment variable that points the tests at an existing
// server instead of a private cluster.
const EnvURL = "CONFIGPUB_TEST_DATABASE_URL"

// cluster is the server every database of this test binary lives on.
type cluster struct {
	adminURL string        // superuser (or CREATEDB+CREATEROLE) URL, database "postgres"
	admin    *pgxpool.Pool // for CREATE/DROP DATABASE and ROLE

	// Set only for a private cluster.
	dir      string
	binDir   string
	cred     *syscall.Credential // non-nil when running as root
	watchdog *os.Process
}

var shared struct {
	once sync.Once
	c    *cluster
	err  error
}

// getCluster starts the private cluster (or connects to EnvURL) once.
func getCluster() (*cluster, error) {
	shared.once.Do(func() {
		shared.c, shared.err = startCluster(context.Background())
	})
	return shared.c, shared.err
}

func startCluster(ctx context.Context) (*cluster, error) {
	if u := os.Getenv(EnvURL); u != "" {
		pool, err := pgxpool.New(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("pgtest: connect %s: %w", EnvURL, err)
		}
		return &cluster{adminURL: u, admin: pool}, nil
	}
	bin, err := findBinDir()
	if err != nil {
		return nil, err
	}
	c := &cluster{binDir: bin}
	if err := c.initdb(); err != nil {
		c.remove()
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			c.remove()
			return nil, err
		}
		if lastErr = c.start(port); lastErr == nil {
			c.adminURL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
			break
		}
	}
	if lastErr != nil {
		c.remove()
		return nil, lastErr
	}
	c.startWatchdog()
	cfg, err := pgxpool.ParseConfig(c.adminURL)
	if err != nil {
		c.stop()
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	cfg.MaxConns = 4
	if c.admin, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		c.stop()
		return nil, fmt.Errorf("pgtest: connect to private cluster: %w", err)
	}
	return c, nil
}

// findBinDir locates initdb and pg_ctl.
func findBinDir() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		if _, err := exec.LookPath("pg_ctl"); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Dir(real), nil
			}
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", errors.New("pgtest: initdb/pg_ctl not found on PATH or in /usr/lib/postgresql/*/bin " +
		"(install postgresql, run scripts/ensure-postgres.sh, or set " + EnvURL + ")")
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// command builds a command that runs as the postgres OS user when we are root.
func (c *cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
		cmd.Env = append(cmd.Env, "HOME="+c.dir, "USER=postgres", "LOGNAME=postgres")
	}
	return cmd
}

func (c *cluster) initdb() error {
	dir, err := os.MkdirTemp("", "configpub-pgtest-")
	if err != nil {
		return fmt.Errorf("pgtest: temp dir: %w", err)
	}
	c.dir = dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return fmt.Errorf("pgtest: running as root needs the postgres OS user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return fmt.Errorf("pgtest: chown %s: %w", dir, err)
		}
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	}
	cmd := c.command(filepath.Join(c.binDir, "initdb"), "-D", filepath.Join(dir, "data"),
		"-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w: %s", err, lastLines(out))
	}
	return nil
}

func (c *cluster) start(port int) error {
	opts := strings.Join([]string{
		"-c listen_addresses=127.0.0.1",
		"-p " + strconv.Itoa(port),
		"-k " + c.dir,
		"-c fsync=off",
		"-c synchronous_commit=off",
		"-c full_page_writes=off",
		"-c max_connections=300",
		"-c shared_buffers=64MB",
		"-c timezone=UTC",
	}, " ")
	cmd := c.command(filepath.Join(c.binDir, "pg_ctl"), "-D", filepath.Join(c.dir, "data"),
		"-l", filepath.Join(c.dir, "postgres.log"), "-w", "-t", "60", "-o", opts, "start")
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
		return fmt.Errorf("pgtest: pg_ctl start on port %d: %w: %s %s", port, err, lastLines(out), lastLines(log))
	}
	return nil
}

// startWatchdog starts a detached shell that stops and removes the cluster as
// soon as this process is gone, for test binaries that die before Main's
// cleanup runs. It exits by itself once the cluster directory is removed.
func (c *cluster) startWatchdog() {
	script := fmt.Sprintf(`while [ -d /proc/%d ] && [ -d %q ]; do sleep 0.5; done; [ -d %q ] || exit 0; %q -D %q -m immediate stop >/dev/null 2>&1; rm -rf %q`,
		os.Getpid(), c.dir, c.dir, filepath.Join(c.binDir, "pg_ctl"), filepath.Join(c.dir, "data"), c.dir)
	cmd := c.command("/bin/sh", "-c", script)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	if err := cmd.Start(); err == nil {
		c.watchdog = cmd.Process
	}
}

// stop shuts the private cluster down and removes its directory.
func (c *cluster) stop() {
	if c.admin != nil {
		c.admin.Close()
	}
	if c.dir == "" {
		return
	}
	cmd := c.command(filepath.Join(c.binDir, "pg_ctl"), "-D", filepath.Join(c.dir, "data"), "-m", "fast", "-w", "-t", "30", "stop")
	if err := cmd.Run(); err != nil {
		cmd = c.command(filepath.Join(c.binDir, "pg_ctl"), "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "stop")
		_ = cmd.Run()
	}
	c.remove()
	if c.watchdog != nil {
		// It sees the directory gone and exits by itself (killing it would
		// orphan its sleep child).
		_, _ = c.watchdog.Wait()
	}
}

func (c *cluster) remove() {
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// urlFor returns a URL of database name on the cluster, as user/password
// (the admin user when user is empty).
func (c *cluster) urlFor(name, usr, password string) (string, error) {
	u, err := url.Parse(c.adminURL)
	if err != nil {
		return "", fmt.Errorf("pgtest: parse admin url: %w", err)
	}
	u.Path = "/" + name
	if usr != "" {
		u.User = url.UserPassword(usr, password)
	}
	return u.String(), nil
}

func lastLines(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}
