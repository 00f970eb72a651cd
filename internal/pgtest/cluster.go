package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/internal/pgcluster"
)

// EnvURL names the environment variable that points the tests at an existing
// server instead of a private cluster.
const EnvURL = "CONFIGPUB_TEST_DATABASE_URL"

// cluster is the server every database of this test binary lives on.
type cluster struct {
	adminURL string        // superuser (or CREATEDB+CREATEROLE) URL, database "postgres"
	admin    *pgxpool.Pool // for CREATE/DROP DATABASE and ROLE

	// Set only for a private cluster.
	pg        *pgcluster.Cluster
	watchdogs []*os.Process

	// The hot standby, started on first use (see DB.ReplicaURLFor).
	replicaOnce sync.Once
	replica     *pgcluster.Cluster
	replicaErr  error
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
	bin, err := pgcluster.FindBinDir()
	if err != nil {
		if errors.Is(err, pgcluster.ErrNoBinaries) {
			return nil, fmt.Errorf("pgtest: %w (or run scripts/ensure-postgres.sh, or set %s)", err, EnvURL)
		}
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	// A fresh directory per test binary. pgcluster.New hands it to the
	// postgres OS user when we are root (it is 0700, and /tmp lets that user
	// reach it), so the server and the watchdog can use and remove it.
	dir, err := os.MkdirTemp("", "configpub-pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	pg, err := pgcluster.New(ctx, pgcluster.Options{Dir: dir, BinDir: bin})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if err := pg.Start(ctx); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	c := &cluster{pg: pg, adminURL: pg.URL("postgres")}
	c.startWatchdog(pg)
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

// startWatchdog starts a detached shell, as the postgres OS user when we are
// root, that stops the cluster pg and removes the test cluster's directory
// (which holds the replica's too) as soon as this process is gone, for test
// binaries that die before Main's cleanup runs. It exits by itself once
// that directory is removed.
func (c *cluster) startWatchdog(pg *pgcluster.Cluster) {
	dir := c.pg.Dir
	script := fmt.Sprintf(`while [ -d /proc/%d ] && [ -d %q ]; do sleep 0.5; done; [ -d %q ] || exit 0; %q -D %q -m immediate stop >/dev/null 2>&1; rm -rf %q`,
		os.Getpid(), dir, dir, filepath.Join(pg.BinDir, "pg_ctl"), pg.DataDir(), dir)
	// Not tied to a context: it must outlive everything in this process.
	cmd := pg.Command(context.Background(), "/bin/sh", "-c", script)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	if err := cmd.Start(); err == nil {
		c.watchdogs = append(c.watchdogs, cmd.Process)
	}
}

// stop shuts the private cluster down and removes its directory.
func (c *cluster) stop() {
	if c.admin != nil {
		c.admin.Close()
	}
	if c.pg == nil {
		return
	}
	if c.replica != nil {
		_ = c.replica.Stop(context.Background())
	}
	_ = c.pg.Stop(context.Background()) // fast, then immediate; removed below either way
	_ = os.RemoveAll(c.pg.Dir)
	for _, w := range c.watchdogs {
		// It sees the directory gone and exits by itself (killing it would
		// orphan its sleep child).
		_, _ = w.Wait()
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
