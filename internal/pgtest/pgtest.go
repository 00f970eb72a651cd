package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgsession"
	"github.com/configpub/configpub/internal/sqlstate"
)

// DB is one fresh, migrated database.
type DB struct {
	// URL connects as the database owner (a superuser on the private
	// cluster).
	URL string
	// Name is the database name.
	Name string

	c     *cluster
	mu    sync.Mutex
	users []string
}

// Main runs the tests and then stops and removes the private cluster, if one
// was started. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		shared.c.stop()
	}
	os.Exit(code)
}

// New creates a fresh database on the shared cluster, migrates it with
// dbschema.Migrate, and drops it (and the login roles URLFor created) in
// t.Cleanup.
func New(t testing.TB) *DB {
	t.Helper()
	return NewAt(t, math.MaxInt)
}

// NewAt is New with the migrations up to and including version only, for
// a test of what a later migration does to data recorded before it; the
// test migrates the rest with dbschema.Migrate.
func NewAt(t testing.TB, version int) *DB {
	t.Helper()
	c, err := getCluster()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	name := "configpub_test_" + randomHex(8)
	if err := createDatabase(ctx, c, name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	db := &DB{Name: name, c: c}
	t.Cleanup(func() { db.drop(t) })
	if db.URL, err = c.urlFor(name, "", ""); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatalf("pgtest: connect %s: %v", name, err)
	}
	defer conn.Close(ctx)
	if _, err := dbschema.MigrateTo(ctx, conn, version); err != nil {
		t.Fatalf("pgtest: migrate %s: %v", name, err)
	}
	return db
}

// createDatabase retries while template1 is briefly busy (55006).
func createDatabase(ctx context.Context, c *cluster, name string) error {
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		_, err = c.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != sqlstate.ObjectInUse {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
	return err
}

// Pool returns a connection pool to the database as its owner, closed in
// t.Cleanup.
func (db *DB) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return db.PoolURL(t, db.URL)
}

// Checkpoint runs CHECKPOINT on the test cluster as its superuser: the
// next change of every page is then written to the WAL whole (a full-page
// write), as after each checkpoint of a production server.
func (db *DB) Checkpoint(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.c.admin.Exec(ctx, "CHECKPOINT"); err != nil {
		t.Fatalf("pgtest: checkpoint: %v", err)
	}
}

// PoolURL returns a pool for url (for example one from URLFor), closed in
// t.Cleanup.
func (db *DB) PoolURL(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgsession.NewPool(context.Background(), url)
	if err != nil {
		t.Fatalf("pgtest: pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// URLFor creates a LOGIN role that is a member of the group role (for
// example "configpub_server") and returns a URL that connects to this
// database as it. The role is dropped with the database.
func (db *DB) URLFor(t testing.TB, role string) string {
	t.Helper()
	usr := "configpub_test_u_" + randomHex(6)
	password := randomHex(16)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := db.c.admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{usr}.Sanitize()+
		" LOGIN NOSUPERUSER INHERIT PASSWORD '"+password+"' IN ROLE "+pgx.Identifier{role}.Sanitize())
	if err != nil {
		t.Fatalf("pgtest: create login role in %s: %v", role, err)
	}
	db.mu.Lock()
	db.users = append(db.users, usr)
	db.mu.Unlock()
	u, err := db.c.urlFor(db.Name, usr, password)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func (db *DB) drop(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := db.c.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db.Name}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Errorf("pgtest: drop database %s: %v", db.Name, err)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	for _, u := range db.users {
		if _, err := db.c.admin.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{u}.Sanitize()); err != nil {
			t.Errorf("pgtest: drop role %s: %v", u, err)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
