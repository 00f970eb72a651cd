package pgcluster

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
	"syscall"
)

// Options configures a cluster. The zero value is not usable: Dir is required.
type Options struct {
	// Dir holds the cluster: Dir/data (PGDATA), Dir/postgres.log and the
	// unix socket. Created if missing.
	Dir string
	// BinDir holds initdb and pg_ctl; empty means FindBinDir.
	BinDir string
	// Port to listen on at 127.0.0.1; 0 picks a free one.
	Port int
	// Durable keeps fsync, synchronous_commit and full_page_writes on. Off
	// (the default) turns all three off, which suits throwaway clusters.
	// Either way the server runs with max_connections=300,
	// shared_buffers=64MB, timezone=UTC, and wal_level=replica with
	// hot_standby on (so that Replica can stream from it).
	Durable bool
}

// Cluster is a private PostgreSQL cluster. Its superuser is "postgres",
// reachable on 127.0.0.1 with trust authentication.
type Cluster struct {
	Dir    string
	BinDir string
	Port   int

	durable bool
	cred    *syscall.Credential // non-nil when running as root
}

// New prepares a cluster in opts.Dir, running initdb when Dir/data does not
// exist yet. It does not start the server.
func New(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("pgcluster: directory is empty")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	bin := opts.BinDir
	if bin == "" {
		if bin, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	c := &Cluster{Dir: dir, BinDir: bin, Port: opts.Port, durable: opts.Durable}
	if err := c.prepareDir(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err == nil {
		return c, nil
	}
	cmd := c.Command(ctx, filepath.Join(bin, "initdb"), "-D", c.DataDir(),
		"-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgcluster: initdb: %w: %s", err, lastLines(out))
	}
	return c, nil
}

// prepareDir creates Dir and, when running as root, hands it to the
// postgres OS user that the server binaries run as.
func (c *Cluster) prepareDir() error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("pgcluster: running as root needs the postgres OS user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(c.Dir, uid, gid); err != nil {
		return fmt.Errorf("pgcluster: chown %s: %w", c.Dir, err)
	}
	c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	return nil
}

// ReplicationRole is the role a Replica streams WAL as: LOGIN REPLICATION,
// not a superuser, reaching the primary over 127.0.0.1 (the pg_hba entry
// EnableReplication adds).
const ReplicationRole = "configpub_replication"

// EnableReplication prepares a running primary for streaming replicas:
// the replication role and its pg_hba entry (trust, from 127.0.0.1 only),
// then a configuration reload. wal_level=replica, max_wal_senders and
// hot_standby are set by Start for every cluster.
func (c *Cluster) EnableReplication(ctx context.Context) error {
	if err := c.prependHBA("host replication " + ReplicationRole + " 127.0.0.1/32 trust"); err != nil {
		return err
	}
	psql := filepath.Join(c.BinDir, "psql")
	sql := `DO $$ BEGIN
		IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '` + ReplicationRole + `') THEN
			CREATE ROLE ` + ReplicationRole + ` LOGIN REPLICATION;
		END IF;
	END $$; SELECT pg_reload_conf();`
	cmd := c.Command(ctx, psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port),
		"-U", "postgres", "-d", "postgres", "-c", sql)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: create replication role: %w: %s", err, lastLines(out))
	}
	return nil
}

// RequirePassword makes members of role group log in over 127.0.0.1 with
// a password (SCRAM) instead of trust — for tests of password handling —
// and reloads the configuration of a running server. The group need not
// exist yet.
func (c *Cluster) RequirePassword(ctx context.Context, group string) error {
	if err := c.prependHBA("host all +" + group + " 127.0.0.1/32 scram-sha-256"); err != nil {
		return err
	}
	if !c.Running(ctx) {
		return nil
	}
	cmd := c.Command(ctx, filepath.Join(c.BinDir, "pg_ctl"), "-D", c.DataDir(), "reload")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: reload: %w: %s", err, lastLines(out))
	}
	return nil
}

// prependHBA puts line first in pg_hba.conf, where the first matching line
// wins, unless it is there already.
func (c *Cluster) prependHBA(line string) error {
	hba := filepath.Join(c.DataDir(), "pg_hba.conf")
	b, err := os.ReadFile(hba)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	line += "\n"
	if strings.Contains(string(b), line) {
		return nil
	}
	if err := os.WriteFile(hba, append([]byte(line), b...), 0o600); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// Replica makes a hot standby of the running primary c in opts.Dir (its
// BinDir and Durable are c's): pg_basebackup -R as ReplicationRole (call
// EnableReplication on c first) streams a base backup and writes
// standby.signal and primary_conninfo, so that Start runs it as a streaming,
// read-only replica. It does not start the replica.
func (c *Cluster) Replica(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("pgcluster: replica directory is empty")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	r := &Cluster{Dir: dir, BinDir: c.BinDir, Port: opts.Port, durable: c.durable}
	if err := r.prepareDir(); err != nil {
		return nil, err
	}
	cmd := r.Command(ctx, filepath.Join(c.BinDir, "pg_basebackup"), "-D", r.DataDir(), "-R", "-X", "stream",
		"-c", "fast", "--no-sync", "-h", "127.0.0.1", "-p", strconv.Itoa(c.Port), "-U", ReplicationRole, "-w")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgcluster: pg_basebackup: %w: %s", err, lastLines(out))
	}
	return r, nil
}

// DataDir is the cluster's PGDATA.
func (c *Cluster) DataDir() string { return filepath.Join(c.Dir, "data") }

// LogFile is the server log.
func (c *Cluster) LogFile() string { return filepath.Join(c.Dir, "postgres.log") }

// Start starts the server and waits until it accepts connections. With Port
// 0 it picks a free port, retrying a few times if another process takes it.
func (c *Cluster) Start(ctx context.Context) error {
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port := c.Port
		if port == 0 {
			p, err := freePort()
			if err != nil {
				return err
			}
			port = p
		}
		if lastErr = c.start(ctx, port); lastErr == nil {
			c.Port = port
			return nil
		}
		if c.Port != 0 {
			break
		}
	}
	return lastErr
}

func (c *Cluster) start(ctx context.Context, port int) error {
	opts := []string{
		"-c listen_addresses=127.0.0.1",
		"-p " + strconv.Itoa(port),
		"-k " + c.Dir,
		"-c max_connections=300",
		"-c shared_buffers=64MB",
		"-c timezone=UTC",
		// Streaming replicas (see Replica): WAL for them, standbys that
		// answer reads, and that report what they replayed.
		"-c wal_level=replica",
		"-c max_wal_senders=10",
		"-c hot_standby=on",
		"-c hot_standby_feedback=on",
		"-c wal_receiver_status_interval=1s",
	}
	if !c.durable {
		// With asynchronous commit, WAL reaches a replica when the WAL
		// writer flushes it: keep that short.
		opts = append(opts, "-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off", "-c wal_writer_delay=10ms")
	}
	cmd := c.Command(ctx, filepath.Join(c.BinDir, "pg_ctl"), "-D", c.DataDir(),
		"-l", c.LogFile(), "-w", "-t", "60", "-o", strings.Join(opts, " "), "start")
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(c.LogFile())
		return fmt.Errorf("pgcluster: pg_ctl start on port %d: %w: %s %s", port, err, lastLines(out), lastLines(log))
	}
	return nil
}

// Stop shuts the server down (fast mode, then immediate if that fails).
func (c *Cluster) Stop(ctx context.Context) error {
	cmd := c.Command(ctx, filepath.Join(c.BinDir, "pg_ctl"), "-D", c.DataDir(), "-m", "fast", "-w", "-t", "30", "stop")
	if out, err := cmd.CombinedOutput(); err != nil {
		cmd = c.Command(context.WithoutCancel(ctx), filepath.Join(c.BinDir, "pg_ctl"), "-D", c.DataDir(), "-m", "immediate", "stop")
		if out2, err2 := cmd.CombinedOutput(); err2 != nil {
			return fmt.Errorf("pgcluster: pg_ctl stop: %w: %s %s", err, lastLines(out), lastLines(out2))
		}
	}
	return nil
}

// Running reports whether a server is running on the cluster's data dir.
func (c *Cluster) Running(ctx context.Context) bool {
	return c.Command(ctx, filepath.Join(c.BinDir, "pg_ctl"), "-D", c.DataDir(), "status").Run() == nil
}

// URL returns the superuser URL of database name.
func (c *Cluster) URL(name string) string {
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)),
		Path: "/" + name, RawQuery: "sslmode=disable"}
	return u.String()
}

// Command builds a command in Dir that runs as the postgres OS user when the
// current process is root (the server binaries refuse to run as root), with
// a C locale and UTC. Use it for anything that touches the data directory,
// for example a pg_ctl of one's own or a watchdog script.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
		cmd.Env = append(cmd.Env, "HOME="+c.Dir, "USER=postgres", "LOGNAME=postgres")
	}
	return cmd
}

// FindBinDir locates the directory holding initdb and pg_ctl: PATH first,
// then the newest /usr/lib/postgresql/*/bin.
func FindBinDir() (string, error) {
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
	return "", ErrNoBinaries
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
		return 0, fmt.Errorf("pgcluster: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "..." + s[len(s)-2000:]
	}
	return s
}
