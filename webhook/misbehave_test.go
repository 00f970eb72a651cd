package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/webhook"
)

// TestReceiversThatMisbehave delivers one event to receivers an operator
// meets in a year, with the delivery log in PostgreSQL: one gone for good
// (410) and one whose path no longer exists (404) are tried once and never
// again; one that never answers costs one timeout per attempt; one that
// redirects to another host is not followed (the signed body and its
// signature never reach that host) and is retried as a failure; one that
// answers 200 with an endless body is delivered after reading a bounded
// part of it. Every attempt is in the log, under a name without the URL's
// path.
func TestReceiversThatMisbehave(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	pool := db.PoolURL(t, db.URLFor(t, "configpub_promoter"))
	counted := func(calls *atomic.Int32, h http.HandlerFunc) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1); h(w, r) }))
		t.Cleanup(s.Close)
		return s
	}
	var goneCalls, missingCalls, hangCalls, redirectCalls, elsewhereCalls, endlessCalls atomic.Int32
	gone := counted(&goneCalls, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
	missing := counted(&missingCalls, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNotFound) })
	release := make(chan struct{})
	hang := counted(&hangCalls, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	elsewhere := counted(&elsewhereCalls, func(http.ResponseWriter, *http.Request) {})
	redirect := counted(&redirectCalls, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/collect", http.StatusTemporaryRedirect)
	})
	endless := counted(&endlessCalls, func(w http.ResponseWriter, _ *http.Request) {
		chunk := []byte(strings.Repeat("x", 32<<10))
		for range 1 << 15 { // up to 1 GiB
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	const attempts, timeout = 3, 300 * time.Millisecond
	n, err := webhook.New(webhook.Options{
		URLs:   []string{gone.URL + "/a/SECRET", missing.URL + "/b/SECRET", hang.URL + "/c/SECRET", redirect.URL + "/d/SECRET", endless.URL + "/e/SECRET"},
		Secret: secret, Timeout: timeout, MaxAttempts: attempts, Backoff: time.Millisecond, Log: webhook.PGLog{Pool: pool}})
	if err != nil {
		t.Fatal(err)
	}
	ev := promoter.Event{ID: uuid.NewString(), Kind: promoter.EventActivated, EnvTag: "prod", Release: 2, At: time.Now().UTC()}
	began := time.Now()
	n.Notify(context.Background(), ev)
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	for _, c := range []struct {
		name string
		got  *atomic.Int32
		want int32
	}{{"410", &goneCalls, 1}, {"404", &missingCalls, 1}, {"never answering", &hangCalls, attempts},
		{"redirecting", &redirectCalls, attempts}, {"redirect target", &elsewhereCalls, 0}, {"endless body", &endlessCalls, 1}} {
		if got := c.got.Load(); got != c.want {
			t.Errorf("%s receiver: %d requests, want %d", c.name, got, c.want)
		}
	}
	if took > attempts*timeout+5*time.Second {
		t.Errorf("deliveries took %s, want about %d timeouts of %s", took, attempts, timeout)
	}
	rows, err := pool.Query(context.Background(), `SELECT receiver, attempt, delivered, coalesce(http_status, 0), error
		FROM configpub.webhook_delivery WHERE event_id = $1::uuid ORDER BY receiver, attempt`, ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var logged []string
	for rows.Next() {
		var recv, msg string
		var attempt, status int
		var delivered bool
		if err := rows.Scan(&recv, &attempt, &delivered, &status, &msg); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(recv, "SECRET") || strings.Contains(msg, "SECRET") {
			t.Errorf("the delivery log names the URL's path: %q %q", recv, msg)
		}
		logged = append(logged, recv)
		if recv[strings.Index(recv, "//")+2:strings.Index(recv, "/…")] == strings.TrimPrefix(endless.URL, "http://") && !delivered {
			t.Errorf("the endless body's receiver: attempt %d not delivered (%d %q)", attempt, status, msg)
		}
	}
	if len(logged) != 1+1+attempts+attempts+1 {
		t.Errorf("%d attempts logged, want %d", len(logged), 1+1+attempts+attempts+1)
	}
}
