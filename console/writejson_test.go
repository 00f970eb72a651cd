package console

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/syncbuf"
)

// TestAnAnswerThatCannotBeEncodedIs500NotATruncated200: a lease end the
// database holds beyond the year 9999 (PostgreSQL keeps years up to
// 294276; encoding/json refuses a time.Time past 9999) made the target's
// JSON answer an empty 200 — the status had
// been sent before encoding failed (json.Encoder writes nothing of a value
// it cannot encode: the body was empty), and the error was dropped. The answer
// is now encoded whole first: 500 with a JSON error, and the failure
// logged with its path; the HTML page of the same target still shows it.
func TestAnAnswerThatCannotBeEncodedIs500NotATruncated200(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	pool := db.Pool(t)
	generate(t, pool, generated{env: "far", targets: 2, releases: 1})
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `UPDATE configpub.current_pointer SET lease_expires_at = '10000-01-01T00:00:00Z'
		WHERE env_tag = 'far' AND service_id = 'svc-1'`); err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	c, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	const path = "/api/environments/far/targets/h0.example/svc-1"
	rec := localGet(h, path)
	var answer struct{ Error string }
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); rec.Code != http.StatusInternalServerError || err != nil ||
		answer.Error != "the console could not encode its answer" || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("GET %s: %d %s (%v), want 500 with a JSON error", path, rec.Code, rec.Body, err)
	}
	if l := logs.String(); !strings.Contains(l, "could not encode a JSON answer") || !strings.Contains(l, path) ||
		!strings.Contains(l, "year outside of range") {
		t.Errorf("log %q: want the encoding failure logged with its path and cause", l)
	}
	if rec := localGet(h, "/api/environments/far/targets/h0.example/svc-0"); rec.Code != http.StatusOK || !json.Valid(rec.Body.Bytes()) {
		t.Errorf("another target's answer: %d %s, want 200 with valid JSON", rec.Code, rec.Body)
	}
	if rec := localGet(h, "/env/far/targets/h0.example/svc-1"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "10000") {
		t.Errorf("the target's page: %d, want 200 showing the lease's end in 10000", rec.Code)
	}
}
