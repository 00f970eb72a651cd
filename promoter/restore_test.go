package promoter_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/configserver/auth"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/configserver/pgstore"
	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgcluster"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promoter"
)

// runtimeFleet is a real Config Server over the harness's database and one
// real runtime client per current target.
type runtimeFleet struct {
	url     string
	clients map[string]*client.Client // host/serviceId -> client
}

func newRuntimeFleet(t *testing.T, h *promotertest.Harness) *runtimeFleet {
	t.Helper()
	// The pool is closed in a cleanup registered before the store's, so
	// after Run has returned.
	st, err := pgstore.New(h.DB.PoolURL(t, h.DB.URLFor(t, "configpub_server")), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = st.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	tokenKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	kid, err := auth.Thumbprint(tokenKey.Public())
	if err != nil {
		t.Fatal(err)
	}
	const iss, aud = "https://issuer.configpub.test", "configpub-server"
	v, err := auth.NewVerifier(auth.NewStaticKeys([]auth.Key{{ID: kid, Algorithm: auth.ES256, Public: tokenKey.Public()}}),
		auth.Options{Issuer: iss, Audience: aud})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(configserver.NewHandler(st, configserver.Options{Verifier: v}))
	t.Cleanup(srv.Close)
	trusted, err := signing.NewTrustedKey(h.Signer.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	f := &runtimeFleet{url: srv.URL, clients: map[string]*client.Client{}}
	rows, err := h.Pool.Query(ctx, `SELECT p.host, p.service_id, s.audience FROM configpub.current_pointer p
		JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id WHERE p.env_tag = $1`, promotertest.Env)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id bundle.Identity
		var audience string
		if err := rows.Scan(&id.Host, &id.ServiceID, &audience); err != nil {
			t.Fatal(err)
		}
		id.EnvTag = promotertest.Env
		tok, err := auth.Mint(tokenKey, auth.MintOptions{Issuer: iss, Audience: aud, Host: id.Host, ServiceID: id.ServiceID,
			EnvTag: id.EnvTag, ConfigAudience: audience, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(client.Options{ServerURL: srv.URL, Identity: id, Audience: audience,
			TokenSource: func(context.Context) (string, error) { return tok, nil },
			TrustedKeys: []signing.TrustedKey{trusted}, CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		f.clients[id.Host+"/"+id.ServiceID] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(f.clients) < 2 {
		t.Fatalf("got %d runtimes, want every target of the fixture", len(f.clients))
	}
	return f
}

// applyAll loads every runtime until each runs the snapshot want names for
// it (the server follows NOTIFY within a second; a load of the previous
// state is retried), failing with the last evidence otherwise.
func (f *runtimeFleet) applyAll(t *testing.T, want map[string]string) {
	t.Helper()
	for k, c := range f.clients {
		deadline := time.Now().Add(5 * time.Second)
		for {
			ev, err := c.Load(context.Background())
			if err == nil && ev.CurrentSnapshotID == want[k] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("runtime %s does not run %s: %+v %v", k, want[k], ev, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// pgTool returns a runner of the PostgreSQL client program name in bin
// (pg_dump, pg_restore) that fails t with its output.
func pgTool(t *testing.T, bin string) func(name string, args ...string) {
	return func(name string, args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(context.Background(), filepath.Join(bin, name), args...).CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
}

// migrateRestored runs db migrate on the harness's restored database, as
// the owner, as the restore procedure says.
func migrateRestored(t *testing.T, h *promotertest.Harness) {
	t.Helper()
	ctx := context.Background()
	conn, err := h.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if err := dbschema.Migrate(ctx, conn.Conn()); err != nil {
		t.Fatalf("migrate after restore: %v", err)
	}
}

// TestSequencesStayMonotonicAcrossABackupRestore follows the documented
// procedure (docs/operations.md, "Backup and restore"): pg_dump, two
// promotions that every runtime applies, restore the dump into the emptied
// database and migrate, then one promotion: every runtime applies it,
// because a new sequence is never below the move time in microseconds.
func TestSequencesStayMonotonicAcrossABackupRestore(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	bin, err := pgcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	// Release 3 changes the agent targets again, so the agents move in
	// both promotions after the backup.
	r3 := promotertest.AddRelease3(t, h.Repo, "level: INFO", "level: WARN")
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatal(err)
	}
	fleet := newRuntimeFleet(t, h)
	fleet.applyAll(t, h.Repo.Snapshots[h.Repo.R1])

	dump := filepath.Join(t.TempDir(), "configpub.dump")
	run := pgTool(t, bin)
	run("pg_dump", "--format=custom", "--schema=configpub", "--file="+dump, h.DB.URL)

	for _, c := range []plumbing.Hash{h.Repo.R2, r3} {
		if _, err := h.Promote(t, h.Options(c)); err != nil {
			t.Fatal(err)
		}
		fleet.applyAll(t, h.Repo.Snapshots[c])
	}

	// Restore into the emptied database, as the owner, then migrate.
	if _, err := h.Pool.Exec(ctx, "DROP SCHEMA configpub CASCADE"); err != nil {
		t.Fatal(err)
	}
	run("pg_restore", "--dbname="+h.DB.URL, "--single-transaction", dump)
	migrateRestored(t, h)
	var current int64
	if err := h.Pool.QueryRow(ctx, "SELECT current_release_version FROM configpub.environment WHERE env_tag = $1", promotertest.Env).Scan(&current); err != nil || current != 1 {
		t.Fatalf("restored database at release %d (%v), want release 1 (the backup)", current, err)
	}

	// The promoter restarts on the restored database; the next promotion
	// records release 2 again and every runtime applies it.
	store, err := promoter.Open(ctx, h.DB.Pool(t), promoter.Options{Signer: h.Signer})
	if err != nil {
		t.Fatal(err)
	}
	h.Store = store
	res, err := h.Promote(t, h.Options(h.Repo.R2))
	if err != nil {
		t.Fatalf("promote after restore: %v", err)
	}
	if res.Activation == nil || res.Activation.Replayed || res.Activation.Moved == 0 {
		t.Fatalf("got %+v, want release 2 recorded and activated again", res.Activation)
	}
	fleet.applyAll(t, h.Repo.Snapshots[h.Repo.R2])
}

// TestRuntimesApplyARaisedEpoch: after `revoke --epoch`, every runtime
// applies the re-signed manifest (same snapshot, the new epoch, a higher
// sequence) from the real Config Server.
func TestRuntimesApplyARaisedEpoch(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatal(err)
	}
	fleet := newRuntimeFleet(t, h)
	fleet.applyAll(t, h.Repo.Snapshots[h.Repo.R1])
	res, err := h.Store.RaiseEpoch(ctx, promoter.EpochInput{CommandID: id("epoch", "fleet"), EnvTag: promotertest.Env, Epoch: 7,
		Actor: "sec", Reason: "signing key exposure"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resigned != len(fleet.clients) {
		t.Fatalf("re-signed %d pointers, want %d", res.Resigned, len(fleet.clients))
	}
	for k, c := range fleet.clients {
		var want int64
		var epoch string
		if err := h.Pool.QueryRow(ctx, `SELECT sequence, convert_from(manifest, 'UTF8')::jsonb->>'revocationEpoch'
			FROM configpub.current_pointer WHERE host || '/' || service_id = $1`, k).Scan(&want, &epoch); err != nil {
			t.Fatal(err)
		}
		if epoch != "7" {
			t.Fatalf("%s: current manifest epoch %s, want 7", k, epoch)
		}
		deadline := time.Now().Add(5 * time.Second)
		for {
			ev, err := c.Load(ctx)
			if err == nil && ev.Sequence == want && ev.CurrentSnapshotID == h.Repo.Snapshots[h.Repo.R1][k] {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("runtime %s did not apply the re-signed manifest (sequence %d): %+v %v", k, want, ev, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestResignBringsRuntimesBackAfterARestore: the store is restored from a
// backup taken while release 2 was active, after runtimes applied a
// rollback to release 1 that the backup does not hold. Both schemas are
// dumped and restored, as docs/operations.md says (status reads the
// Workflow views' schema). The restored pointers' sequences are below what
// the runtimes the rollback moved have seen: after a lease renewal (same
// sequence) they are answered 503 (they send the sequence they hold, and
// the server is behind it) and keep release 1's snapshot, and activating
// release 2, the active one, moves nothing;
// `lease resign` (Store.Resign) re-signs every current pointer with a new
// sequence, and every runtime applies release 2 again.
func TestResignBringsRuntimesBackAfterARestore(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	bin, err := pgcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []plumbing.Hash{h.Repo.R1, h.Repo.R2} {
		if _, err := h.Promote(t, h.Options(c)); err != nil {
			t.Fatal(err)
		}
	}
	fleet := newRuntimeFleet(t, h)
	fleet.applyAll(t, h.Repo.Snapshots[h.Repo.R2])

	dump := filepath.Join(t.TempDir(), "configpub.dump")
	run := pgTool(t, bin)
	run("pg_dump", "--format=custom", "--schema=configpub", "--schema=configpub_workflow", "--file="+dump, h.DB.URL)
	if _, err := h.Store.Rollback(ctx, promoter.RollbackInput{CommandID: id("restore", "rollback"), EnvTag: promotertest.Env,
		ToRelease: 1, Actor: "oncall", Reason: "after the backup"}); err != nil {
		t.Fatal(err)
	}
	fleet.applyAll(t, h.Repo.Snapshots[h.Repo.R1])

	if _, err := h.Pool.Exec(ctx, "DROP SCHEMA configpub CASCADE; DROP SCHEMA configpub_workflow CASCADE"); err != nil {
		t.Fatal(err)
	}
	run("pg_restore", "--dbname="+h.DB.URL, "--single-transaction", dump)
	migrateRestored(t, h)
	store, err := promoter.Open(ctx, h.DB.Pool(t), promoter.Options{Signer: h.Signer})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Status(ctx, promotertest.Env)
	if err != nil || st.CurrentRelease != 2 {
		t.Fatalf("status after restoring both schemas: %+v %v; want release 2 active", st, err)
	}

	if _, err := store.RenewLeases(ctx, promotertest.Env); err != nil {
		t.Fatal(err)
	}
	// Each runtime the rollback moved holds a sequence above the restored
	// pointer's: it says so (X-Config-Held-Sequence) and is answered 503
	// rather than the older manifest, keeping the snapshot it runs.
	regressed := 0
	for k, c := range fleet.clients {
		if h.Repo.Snapshots[h.Repo.R1][k] == h.Repo.Snapshots[h.Repo.R2][k] {
			continue // not moved by the rollback: its restored lease is the one it has
		}
		regressed++
		deadline := time.Now().Add(5 * time.Second)
		for {
			ev, err := c.Load(ctx)
			if err != nil && ev.Outcome == client.OutcomeUnavailable && ev.Reason == client.ReasonServerError &&
				ev.CurrentSnapshotID == h.Repo.Snapshots[h.Repo.R1][k] && !ev.FailedClosed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("runtime %s after the restore and a renewal: %+v %v; want UNAVAILABLE SERVER_ERROR (503, behind the runtime), still running release 1's snapshot", k, ev, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if regressed == 0 {
		t.Fatal("the rollback moved no runtime: the fixture's releases 1 and 2 differ in no target")
	}
	if _, err := store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("restore", "activate"), EnvTag: promotertest.Env,
		Release: 2, Actor: "oncall", Reason: "restore"}, promoter.ActivateOptions{}); !errors.Is(err, promoter.ErrConflict) {
		t.Fatalf("activate the active release: %v, want a conflict (nothing to move)", err)
	}

	res, err := store.Resign(ctx, promoter.ResignInput{CommandID: id("restore", "resign"), EnvTag: promotertest.Env,
		Actor: "oncall", Reason: "restored from the backup"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Resigned != len(fleet.clients) || res.Release != 2 || res.From != res.To {
		t.Fatalf("resign %+v, want every pointer of release 2 re-signed, the epoch kept", res)
	}
	fleet.applyAll(t, h.Repo.Snapshots[h.Repo.R2])
	again, err := store.Resign(ctx, promoter.ResignInput{CommandID: id("restore", "resign"), EnvTag: promotertest.Env,
		Actor: "oncall", Reason: "restored from the backup"})
	if err != nil || !again.Replayed || again.Resigned != res.Resigned {
		t.Fatalf("the same resign again: %+v %v, want a replay", again, err)
	}
}

// TestOpenRefusesAStoreWithoutTheWorkflowSchema: a database restored from
// a dump of schema configpub alone (the Workflow views' schema missing) is
// refused at open, naming what is missing and how to restore it, instead
// of failing later in status and history with a missing relation.
func TestOpenRefusesAStoreWithoutTheWorkflowSchema(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	if _, err := h.Pool.Exec(ctx, "DROP SCHEMA configpub_workflow CASCADE"); err != nil {
		t.Fatal(err)
	}
	_, err := promoter.Open(ctx, h.Pool, promoter.Options{})
	if !errors.Is(err, promoter.ErrSchema) || !strings.Contains(err.Error(), "configpub_workflow is missing") ||
		!strings.Contains(err.Error(), "--schema=configpub_workflow") {
		t.Fatalf("open without configpub_workflow: %v, want ErrSchema naming it and the dump that restores it", err)
	}
}

// TestOpenRefusesADatabaseBehindThisBinary: a binary upgraded before its
// migration ran (the upgrade's `db migrate` skipped or late) is refused at
// open, naming both migrations and what to run, and writes nothing — a
// promotion failed part-way on a grant the binary expected, having recorded
// its release, and status on a missing column. Once migrated it opens.
func TestOpenRefusesADatabaseBehindThisBinary(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	latest, err := dbschema.Latest()
	if err != nil {
		t.Fatal(err)
	}
	db := pgtest.NewAt(t, latest-1)
	pool := db.Pool(t)
	_, err = promoter.Open(ctx, pool, promoter.Options{})
	want := fmt.Sprintf("the database is at migration %d and this configpub needs %d", latest-1, latest)
	if !errors.Is(err, promoter.ErrSchema) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "configpub db migrate") {
		t.Fatalf("open of a database one migration behind: %v, want ErrSchema saying %q and to run db migrate", err, want)
	}
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if n, err := dbschema.MigrateCount(ctx, conn); err != nil || n != 1 {
		t.Fatalf("migrate: %d %v, want the one missing migration applied", n, err)
	}
	if _, err := promoter.Open(ctx, pool, promoter.Options{}); err != nil {
		t.Fatalf("open once migrated: %v", err)
	}
}
