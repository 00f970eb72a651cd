package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/pgcluster"
)

// startReplica makes and starts the private cluster's hot standby once:
// a replication role and pg_hba entry on the primary, pg_basebackup -R
// into a directory inside the cluster's (so the watchdog's removal covers
// it), and a watchdog of its own.
func (c *cluster) startReplica() (*pgcluster.Cluster, error) {
	c.replicaOnce.Do(func() {
		if c.pg == nil {
			c.replicaErr = fmt.Errorf("pgtest: no replica of an existing server (%s is set)", EnvURL)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := c.pg.EnableReplication(ctx); err != nil {
			c.replicaErr = fmt.Errorf("pgtest: %w", err)
			return
		}
		r, err := c.pg.Replica(ctx, pgcluster.Options{Dir: filepath.Join(c.pg.Dir, "replica")})
		if err != nil {
			c.replicaErr = fmt.Errorf("pgtest: %w", err)
			return
		}
		if err := r.Start(ctx); err != nil {
			c.replicaErr = fmt.Errorf("pgtest: start replica: %w", err)
			return
		}
		c.replica = r
		c.startWatchdog(r)
	})
	return c.replica, c.replicaErr
}

// ReplicaURLFor is URLFor on a hot standby of the test cluster: a new
// LOGIN member of role, connecting to this database on a streaming replica
// (made with pg_basebackup -R and started on first use, once per test
// binary). It returns once the replica has replayed the role. A test run
// against CONFIGPUB_TEST_DATABASE_URL is skipped: no replica can be made
// of a server it does not own.
func (db *DB) ReplicaURLFor(t testing.TB, role string) string {
	t.Helper()
	r, err := db.c.startReplica()
	if err != nil {
		if db.c.pg == nil {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	primaryURL := db.URLFor(t, role)
	u, err := url.Parse(primaryURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = "127.0.0.1:" + strconv.Itoa(r.Port)
	db.WaitReplayed(t)
	return u.String()
}

// ReplicaURL is the database owner's URL on the hot standby (read-only
// there). Call ReplicaURLFor or WaitReplayed first.
func (db *DB) ReplicaURL(t testing.TB) string {
	t.Helper()
	r, err := db.c.startReplica()
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = "127.0.0.1:" + strconv.Itoa(r.Port)
	return u.String()
}

// WaitReplayed waits until the hot standby has replayed everything the
// primary has written so far, and returns how long that took.
func (db *DB) WaitReplayed(t testing.TB) time.Duration {
	t.Helper()
	r, err := db.c.startReplica()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started := time.Now()
	var lsn string
	if err := db.c.admin.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		t.Fatalf("pgtest: primary WAL position: %v", err)
	}
	conn, err := pgx.Connect(ctx, r.URL("postgres"))
	if err != nil {
		t.Fatalf("pgtest: connect to replica: %v", err)
	}
	defer conn.Close(context.Background())
	for {
		var done bool
		err := conn.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done)
		if err != nil {
			t.Fatalf("pgtest: replica replay position: %v", err)
		}
		if done {
			return time.Since(started)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pgtest: replica did not replay %s within 30s", lsn)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// PauseReplay pauses WAL replay on the hot standby (pg_wal_replay_pause:
// it keeps receiving WAL from the primary and stops applying it, as an
// operator's pause or a replay stuck behind a conflicting query does)
// until resume is called; the test's cleanup resumes it too. Tests that
// pause must not run in parallel with others of the same binary that read
// the standby.
func (db *DB) PauseReplay(t testing.TB) (resume func()) {
	t.Helper()
	return db.replicaFault(t, "SELECT pg_wal_replay_pause()", "SELECT pg_wal_replay_resume()")
}

// CutReplication points the hot standby's primary_conninfo at a port
// nothing listens on and reloads it: its WAL receiver stops and cannot
// connect again, as when the primary is unreachable or refuses
// replication. restore puts the original connection back; the test's
// cleanup does too. Tests that cut must not run in parallel with others of
// the same binary that read the standby.
func (db *DB) CutReplication(t testing.TB) (restore func()) {
	t.Helper()
	var original string
	if err := db.onReplica(func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, "SHOW primary_conninfo").Scan(&original)
	}); err != nil {
		t.Fatalf("pgtest: replica primary_conninfo: %v", err)
	}
	set := func(conninfo string) string {
		return "ALTER SYSTEM SET primary_conninfo = '" + strings.ReplaceAll(conninfo, "'", "''") + "'"
	}
	return db.replicaFault(t, set("host=127.0.0.1 port=1 user=configpub_unreachable"), set(original))
}

// onReplica runs fn on a connection to the hot standby as its superuser.
func (db *DB) onReplica(fn func(context.Context, *pgx.Conn) error) error {
	r, err := db.c.startReplica()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, r.URL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to replica: %w", err)
	}
	defer conn.Close(context.Background())
	return fn(ctx, conn)
}

// replicaFault runs fault on the hot standby as its superuser (reloading
// its configuration after an ALTER SYSTEM) and returns the function that
// runs undo, once; the test's cleanup runs it if the test did not.
func (db *DB) replicaFault(t testing.TB, fault, undo string) func() {
	t.Helper()
	run := func(sql string) error {
		return db.onReplica(func(ctx context.Context, conn *pgx.Conn) error {
			if _, err := conn.Exec(ctx, sql); err != nil {
				return fmt.Errorf("%s: %w", strings.SplitN(sql, "'", 2)[0], err)
			}
			if strings.HasPrefix(sql, "ALTER SYSTEM") {
				if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
					return fmt.Errorf("reload replica configuration: %w", err)
				}
			}
			return nil
		})
	}
	if err := run(fault); err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	var once sync.Once
	restore := func() {
		once.Do(func() {
			if err := run(undo); err != nil {
				t.Errorf("pgtest: undo a replica fault: %v", err)
			}
		})
	}
	t.Cleanup(restore)
	return restore
}
