package configserver_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/configserver/pgstore"
	"github.com/configpub/configpub/internal/dbschema"
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
