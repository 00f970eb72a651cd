package promoter_test

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/configserver/pgstore"
	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgcluster"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/syncbuf"
	"github.com/configpub/configpub/promoter"
)

// TestRestoreIntoANewCluster follows the restore procedure of
// docs/operations.md onto a new PostgreSQL cluster, the disaster case: the
// source database is owned by a non-superuser owner that migrated it and a
// release is promoted through a configpub_promoter login; its dump (both
// schemas, as the owner) is restored as an owner of the same name into a
// fresh cluster, after the group roles were created there by migrating a
// scratch database. pg_restore then reports no error (without the roles it
// failed, 80 errors ignored, every grant to a group role left out, and db
// migrate, a no-op on the restored schema, did not add them), a
// configpub_server login reads the restored pointers and the store opens
// with release 1 active. db migrate after the restore is a no-op. The source
// has run more transactions than the new cluster and holds a revocation: a
// Config Server on the restored database loads every pointer once, not at
// every catch-up (it reloaded them every ReconcileInterval, logging
// "revocation recorded; reconciling every pointer", while the restored rows'
// transaction ids were ahead of the new cluster's).
func TestRestoreIntoANewCluster(t *testing.T) {
	h := promotertest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin, err := pgcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	owner := h.DB.Name + "_owner"
	withUser := func(raw, db, user string) string {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		u.User, u.Path = url.UserPassword(user, "pw"), "/"+db
		return u.String()
	}
	sql := func(conn *pgx.Conn, qs ...string) {
		t.Helper()
		for _, q := range qs {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
	}
	migrate := func(raw string) int {
		t.Helper()
		conn, err := pgx.Connect(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		n, err := dbschema.MigrateCount(ctx, conn)
		if err != nil {
			t.Fatalf("migrate as the owner: %v", err)
		}
		return n
	}
	ident := func(s string) string { return pgx.Identifier{s}.Sanitize() }

	// The source: an owner-owned database on the shared cluster.
	src, promoterLogin := h.DB.Name+"_src", h.DB.Name+"_ci"
	admin, err := pgx.Connect(ctx, h.DB.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	sql(admin, "CREATE ROLE "+ident(owner)+" LOGIN PASSWORD 'pw' NOSUPERUSER CREATEROLE NOCREATEDB",
		"CREATE DATABASE "+ident(src)+" OWNER "+ident(owner))
	t.Cleanup(func() {
		c := context.Background()
		_, _ = admin.Exec(c, "DROP DATABASE IF EXISTS "+ident(src)+" WITH (FORCE)")
		_, _ = admin.Exec(c, "DROP ROLE IF EXISTS "+ident(promoterLogin))
		_, _ = admin.Exec(c, "DROP ROLE IF EXISTS "+ident(owner))
	})
	migrate(withUser(h.DB.URL, src, owner))
	sql(admin, "CREATE ROLE "+ident(promoterLogin)+" LOGIN PASSWORD 'pw' IN ROLE configpub_promoter")
	srcPool, err := pgxpool.New(ctx, withUser(h.DB.URL, src, promoterLogin))
	if err != nil {
		t.Fatal(err)
	}
	defer srcPool.Close()
	srcStore, err := promoter.Open(ctx, srcPool, promoter.Options{Signer: h.Signer})
	if err != nil {
		t.Fatal(err)
	}
	// The source cluster has run more transactions than the new one will
	// have when restored (as any cluster in service has): the restored
	// rows' transaction ids are ahead of the new cluster's.
	for i := 0; i < 4000; i++ {
		if _, err := srcPool.Exec(ctx, "SELECT pg_current_xact_id()"); err != nil {
			t.Fatal(err)
		}
	}
	o := h.Options(h.Repo.R1)
	o.Store = srcStore
	if _, err := h.Promote(t, o); err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
	var revoked string
	for _, sn := range h.Repo.Snapshots[h.Repo.R1] {
		revoked = sn
		break
	}
	if _, err := srcStore.Revoke(ctx, promoter.RevokeInput{CommandID: id("restore-cluster", "revoke"), SnapshotID: revoked,
		Reason: "before the backup", Actor: "oncall"}); err != nil {
		t.Fatal(err)
	}
	var pointers int
	if err := srcPool.QueryRow(ctx, "SELECT count(*) FROM configpub.current_pointer").Scan(&pointers); err != nil || pointers == 0 {
		t.Fatalf("source pointers: %d %v", pointers, err)
	}
	dump := filepath.Join(t.TempDir(), "configpub.dump")
	run := pgTool(t, bin)
	run("pg_dump", "--format=custom", "--schema=configpub", "--schema=configpub_workflow", "--file="+dump, withUser(h.DB.URL, src, owner))

	// The target: a new cluster, as the procedure says.
	dir, err := os.MkdirTemp("", "configpub-restore-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c, err := pgcluster.New(ctx, pgcluster.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	newAdmin, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer newAdmin.Close(context.Background())
	sql(newAdmin, "CREATE ROLE "+ident(owner)+" LOGIN PASSWORD 'pw' NOSUPERUSER CREATEROLE NOCREATEDB",
		"CREATE DATABASE configpub OWNER "+ident(owner),
		"CREATE DATABASE configpub_roles OWNER "+ident(owner))
	if n := migrate(withUser(c.URL("postgres"), "configpub_roles", owner)); n == 0 {
		t.Fatal("migrating the scratch database applied nothing")
	}
	sql(newAdmin, "DROP DATABASE configpub_roles")
	run("pg_restore", "--dbname="+withUser(c.URL("postgres"), "configpub", owner), dump)
	if n := migrate(withUser(c.URL("postgres"), "configpub", owner)); n != 0 {
		t.Fatalf("db migrate after the restore applied %d migrations, want none", n)
	}

	sql(newAdmin, "CREATE ROLE cs LOGIN PASSWORD 'pw' IN ROLE configpub_server",
		"CREATE ROLE ci LOGIN PASSWORD 'pw' IN ROLE configpub_promoter")
	cs, err := pgx.Connect(ctx, withUser(c.URL("postgres"), "configpub", "cs"))
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close(context.Background())
	var got int
	if err := cs.QueryRow(ctx, "SELECT count(*) FROM configpub.current_pointer").Scan(&got); err != nil || got != pointers {
		t.Fatalf("a configpub_server login on the restored database reads %d pointers (%v), want %d", got, err, pointers)
	}
	// A Config Server on the restored database loads every pointer once;
	// its periodic catch-up reads only what changed since, and nothing has.
	logs := &syncbuf.Buffer{}
	st, err := pgstore.New(h.DB.PoolURL(t, withUser(c.URL("postgres"), "configpub", "cs")), pgstore.Options{
		ReconcileInterval: 50 * time.Millisecond, Heartbeat: 10 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = st.Run(sctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for st.Ready(ctx) != nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // about 20 catch-ups
	stop()
	<-done
	if n := st.Stats().Reconciles; n != 1 || strings.Contains(logs.String(), "revocation recorded") {
		t.Fatalf("a Config Server on the restored database reloaded every pointer %d times in a second, want once; logs:\n%s", n, logs)
	}
	if p := st.Stats().Pointers; p != pointers-1 {
		t.Fatalf("the Config Server holds %d pointers, want %d (one revoked)", p, pointers-1)
	}

	pool, err := pgxpool.New(ctx, withUser(c.URL("postgres"), "configpub", "ci"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	store, err := promoter.Open(ctx, pool, promoter.Options{Signer: h.Signer})
	if err != nil {
		t.Fatalf("open the restored store as a configpub_promoter login: %v", err)
	}
	if st, err := store.Status(ctx, promotertest.Env); err != nil || st.CurrentRelease != 1 {
		t.Fatalf("status on the restored store: %+v %v, want release 1 active", st, err)
	}
}
