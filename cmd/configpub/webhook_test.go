package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/webhook"
)

// A receiver that is down while a verb notifies it misses the event (the
// verb waits only CONFIGPUB_WEBHOOK_TIMEOUT before it exits); the event is
// recorded, and `webhook redeliver` sends it once the receiver is back,
// with the same id and a valid signature, then has nothing left to send.
// An event the receiver refuses for good is counted once and not sent
// again.
func TestWebhookRedeliverSendsWhatAReceiverMissed(t *testing.T) {
	db := pgtest.New(t)
	keyPath, signer := testKey(t)
	seedReleases(t, db, signer)
	const secret = "s3cret"
	var status atomic.Int32 // what the receiver answers
	status.Store(http.StatusServiceUnavailable)
	var mu sync.Mutex
	var accepted []string // event ids accepted, in order
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify([]byte(secret), r.Header.Get(webhook.HeaderTimestamp), body, r.Header.Get(webhook.HeaderSignature)); err != nil {
			t.Errorf("delivery with a bad signature: %v", err)
		}
		code := int(status.Load())
		if code == http.StatusOK {
			var p webhook.Payload
			if err := json.Unmarshal(body, &p); err != nil || p.Event.ID != r.Header.Get(webhook.HeaderDelivery) {
				t.Errorf("delivery %q: event %+v (%v)", r.Header.Get(webhook.HeaderDelivery), p.Event, err)
			}
			mu.Lock()
			accepted = append(accepted, p.Event.ID)
			mu.Unlock()
		}
		w.WriteHeader(code)
	}))
	defer recv.Close()
	t.Setenv(webhookURLsEnv, recv.URL)
	t.Setenv(webhookSecretEnv, secret)
	t.Setenv(webhookTimeoutEnv, "300ms")
	d := "--database=" + db.URL

	if out, err := runCLI("rollback", "--env", "prod", "--release", "1", "--reason", "bad", "--actor", "oncall", "--key", keyPath, d); err != nil {
		t.Fatalf("rollback: %v\n%s", err, out)
	}
	ctx := context.Background()
	var eventID string
	if err := db.Pool(t).QueryRow(ctx, `SELECT event_id::text FROM configpub.webhook_event WHERE event_kind = 'release.rolled_back'`).Scan(&eventID); err != nil {
		t.Fatalf("the rollback's event is not recorded: %v", err)
	}
	if len(accepted) != 0 {
		t.Fatalf("accepted %v while down", accepted)
	}

	status.Store(http.StatusOK)
	out, err := runCLI("webhook", "redeliver", "--min-age", "0", "-o", "json", d)
	if err != nil {
		t.Fatalf("redeliver: %v\n%s", err, out)
	}
	var res webhook.RedeliverResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("redeliver -o json: %v\n%s", err, out)
	}
	if res.Delivered != 1 || res.Undelivered != 0 || len(res.Receivers) != 1 || res.Receivers[0].Pending != 1 {
		t.Fatalf("redeliver: %+v, want the one missed event delivered", res)
	}
	mu.Lock()
	got := strings.Join(accepted, ",")
	mu.Unlock()
	if got != eventID {
		t.Fatalf("receiver accepted %q, want the recorded event %s", got, eventID)
	}
	if out, err := runCLI("webhook", "redeliver", "--min-age", "0", d); err != nil || !strings.Contains(out, "0 undelivered event(s)") {
		t.Fatalf("second redeliver: %v\n%s", err, out)
	}

	// Missed while down, then refused for good (410) at the redelivery:
	// counted once, never sent again.
	status.Store(http.StatusServiceUnavailable)
	if out, err := runCLI("activate", "--env", "prod", "--release", "2", "--reason", "fixed", "--actor", "oncall", "--key", keyPath, d); err != nil {
		t.Fatalf("activate: %v\n%s", err, out)
	}
	status.Store(http.StatusGone)
	out, err = runCLI("webhook", "redeliver", "--min-age", "0", d)
	if err == nil || !strings.Contains(err.Error(), "1 event(s) still undelivered") {
		t.Fatalf("redeliver to a receiver that refuses: %v\n%s", err, out)
	}
	if out, err := runCLI("webhook", "redeliver", "--min-age", "0", d); err != nil || !strings.Contains(out, "0 undelivered event(s)") {
		t.Fatalf("redeliver after a refusal: %v\n%s", err, out)
	}
}

// TestWebhookRedeliverAfterAThreeDayOutage: a receiver down from a Friday
// evening to a Monday morning (80 hours) missed a rollback; once it is back,
// `webhook redeliver` with its defaults sends it. With a 72-hour default
// --since the event had left the window hours before: never sent, and
// counted nowhere.
func TestWebhookRedeliverAfterAThreeDayOutage(t *testing.T) {
	db := pgtest.New(t)
	const secret = "s3cret"
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	var mu sync.Mutex
	var accepted []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if code := int(status.Load()); code != http.StatusOK {
			w.WriteHeader(code)
			return
		}
		mu.Lock()
		accepted = append(accepted, r.Header.Get(webhook.HeaderDelivery))
		mu.Unlock()
	}))
	defer recv.Close()
	t.Setenv(webhookURLsEnv, recv.URL)
	t.Setenv(webhookSecretEnv, secret)
	t.Setenv(webhookTimeoutEnv, "300ms")
	ctx := context.Background()
	pool := db.Pool(t)
	// The rollback 80 hours ago: its event recorded with it, and sent to the
	// receiver, which was down (both tables are append-only: written as
	// they were then).
	at := time.Now().Add(-80 * time.Hour).UTC()
	ev := promoter.Event{ID: uuid.NewString(), Kind: promoter.EventRolledBack, EnvTag: "prod", Release: 1, PreviousRelease: 2,
		State: promoter.StateActive, Actor: "oncall", Reason: "bad", At: at}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO configpub.webhook_event (event_id, event_kind, env_tag, release_version, event, recorded_at)
		VALUES ($1::uuid, $2, 'prod', 1, $3, $4)`, ev.ID, ev.Kind, raw, at); err != nil {
		t.Fatal(err)
	}
	n, err := webhook.New(webhook.Options{URLs: []string{recv.URL}, Secret: []byte(secret), MaxAttempts: 1,
		Log: webhook.PGLog{Pool: pool}, Clock: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	n.Notify(ctx, ev)
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}

	status.Store(http.StatusOK)
	out, err := runCLI("webhook", "redeliver", "-o", "json", "--database="+db.URL)
	if err != nil {
		t.Fatalf("redeliver: %v\n%s", err, out)
	}
	var res webhook.RedeliverResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("redeliver -o json: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if res.Delivered != 1 || len(accepted) != 1 || accepted[0] != ev.ID {
		t.Fatalf("redeliver after 80 hours down: %+v, receiver accepted %v; want the rollback's event %s", res, accepted, ev.ID)
	}
}
