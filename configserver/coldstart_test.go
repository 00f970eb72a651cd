package configserver_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/configserver/pgstore"
	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/syncbuf"
)

// TestColdStartWithTheDatabaseDown: a Config Server started while
// PostgreSQL is down comes up (/healthz 200), answers /readyz and /configs
// 503 with Retry-After, logs why, and once PostgreSQL starts serves
// without a restart.
func TestColdStartWithTheDatabaseDown(t *testing.T) {
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
	c.stop(t)

	storeLogs := &syncbuf.Buffer{}
	e := newEnv(t, envOptions{storeURL: c.url("cs_login", "pw"), owner: owner, noWait: true,
		store: pgstore.Options{Logger: newJSONLogger(storeLogs), StaleAfter: 500 * time.Millisecond, Heartbeat: 100 * time.Millisecond,
			ConnectTimeout: 500 * time.Millisecond, QueryTimeout: 500 * time.Millisecond}})
	tok := e.token(t, idA, "agent")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(storeLogs.String(), "pointer listener lost the database; retrying") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if logs := storeLogs.String(); !strings.Contains(logs, "pointer listener lost the database; retrying") || !strings.Contains(logs, "connection refused") {
		t.Fatalf("store logs with the database down: %q, want the listener retrying, naming the refused connection", logs)
	}
	if resp, body := e.do(t, "GET", "/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz with the database down: %d %s, want 200 (the process is up)", resp.StatusCode, body)
	}
	resp, body := e.do(t, "GET", "/readyz", "")
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(body), `"reason":"pointers not confirmed: store unavailable: no live database connection"`) {
		t.Fatalf("/readyz with the database down: %d %v %s, want 503 with Retry-After and the reason", resp.StatusCode, resp.Header, body)
	}
	if resp, body := e.do(t, "GET", configsPath(idA), tok); resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("/configs with the database down: %d %s, want 503 with Retry-After", resp.StatusCode, body)
	}

	c.start(t)
	owner.Reset() // the seeding pool's connections died with the server
	started := time.Now()
	sn := e.seed.publish(t, idA, "agent", 1, yamlBody("cold-body"))
	e.seed.move(t, sn)
	waitServed(t, e, idA, "agent", sn.ID)
	if resp, body := e.do(t, "GET", "/readyz", ""); resp.StatusCode != http.StatusOK || string(body) != "{\"status\":\"ready\"}\n" {
		t.Fatalf("/readyz once PostgreSQL is up: %d %q, want 200 ready", resp.StatusCode, body)
	}
	t.Logf("served %s after PostgreSQL started, without a restart", time.Since(started).Round(time.Millisecond))
}

// TestReadyzSaysTheDatabaseHasNoSchema: a Config Server whose --database
// names a real, empty database (the wrong one, or one never migrated)
// connects, then fails to read the pointers. /readyz said "no live
// database connection", as if PostgreSQL were down, while the log named
// the missing relation; it now says the database has no configpub
// schema (naming neither the login nor the host), and once the database
// is migrated the server becomes ready without a restart.
func TestReadyzSaysTheDatabaseHasNoSchema(t *testing.T) {
	t.Parallel()
	db := pgtest.NewAt(t, 0) // no migration at all
	storeLogs := &syncbuf.Buffer{}
	e := newEnv(t, envOptions{storeURL: db.URL, owner: db.Pool(t), noWait: true,
		store: pgstore.Options{Logger: newJSONLogger(storeLogs), StaleAfter: 500 * time.Millisecond,
			ConnectTimeout: time.Second, QueryTimeout: time.Second}})
	const want = `"reason":"pointers not confirmed: store unavailable: connected, but the database has no configpub schema`
	var body []byte
	var resp *http.Response
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, body = e.do(t, "GET", "/readyz", ""); strings.Contains(string(body), want) {
			break
		}
	}
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), want) {
		t.Fatalf("/readyz on an empty database: %d %s, want 503 saying it has no configpub schema", resp.StatusCode, body)
	}
	if u, err := url.Parse(db.URL); err != nil || strings.Contains(string(body), u.User.Username()) || strings.Contains(string(body), u.Hostname()) {
		t.Fatalf("/readyz names the login or the host: %s", body)
	}
	if logs := storeLogs.String(); !strings.Contains(logs, "does not exist") {
		t.Fatalf("store logs %q do not name what is missing", logs)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := dbschema.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, body = e.do(t, "GET", "/readyz", ""); resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz once the database is migrated: %d %s, want 200", resp.StatusCode, body)
		}
	}
}
