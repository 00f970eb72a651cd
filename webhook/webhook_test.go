package webhook_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/webhook"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var secret = []byte("webhook-test-secret")

// TestReceiverDownThreeTimesDeliveredOnTheFourth: the receiver answers 503
// to the first three attempts and 200 to the fourth, whose body carries the
// Slack-compatible text and whose HMAC verifies; the back-off doubles
// between attempts and every attempt is in the delivery log.
func TestReceiverDownThreeTimesDeliveredOnTheFourth(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	pool := db.PoolURL(t, db.URLFor(t, "configpub_promoter"))
	var mu sync.Mutex
	var calls int
	var verified error = io.EOF
	var text string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls <= 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		verified = webhook.Verify(secret, r.Header.Get(webhook.HeaderTimestamp), body, r.Header.Get(webhook.HeaderSignature))
		var p webhook.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			verified = err
		}
		text = p.Text
	}))
	defer srv.Close()
	var sleeps []time.Duration
	n, err := webhook.New(webhook.Options{URLs: []string{srv.URL + "/hooks/T000/SECRETPATH"}, Secret: secret,
		Timeout: time.Second, Backoff: 100 * time.Millisecond, Log: webhook.PGLog{Pool: pool},
		Sleep: func(_ context.Context, d time.Duration) error {
			mu.Lock()
			sleeps = append(sleeps, d)
			mu.Unlock()
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	ev := promoter.Event{ID: uuid.NewString(), Kind: promoter.EventActivated, EnvTag: "prod", Release: 7, PreviousRelease: 6,
		State: promoter.StateActive, Actor: "alice", Reason: "forward fix", At: time.Now().UTC()}
	n.Notify(context.Background(), ev)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 4 {
		t.Fatalf("receiver called %d times, want 4", calls)
	}
	if verified != nil {
		t.Fatalf("fourth delivery: HMAC %v", verified)
	}
	if want := "configpub release.activated: prod release 7 ACTIVE (from release 6) by alice: forward fix"; text != want {
		t.Fatalf("text %q, want %q", text, want)
	}
	if got := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}; len(sleeps) != 3 || sleeps[0] != got[0] || sleeps[1] != got[1] || sleeps[2] != got[2] {
		t.Fatalf("back-off %v, want %v", sleeps, got)
	}
	rows, err := pool.Query(context.Background(), `SELECT attempt, delivered, coalesce(http_status, 0), receiver
		FROM configpub.webhook_delivery WHERE event_id = $1::uuid ORDER BY attempt`, ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	for rows.Next() {
		var a, status int
		var ok bool
		var recv string
		if err := rows.Scan(&a, &ok, &status, &recv); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(recv, "SECRETPATH") {
			t.Fatalf("delivery log stores the receiver URL's path: %q", recv)
		}
		log = append(log, strings.Join([]string{itoa(a), map[bool]string{true: "delivered", false: "failed"}[ok], itoa(status)}, " "))
	}
	if got, want := strings.Join(log, "; "), "1 failed 503; 2 failed 503; 3 failed 503; 4 delivered 200"; got != want {
		t.Fatalf("delivery log %q, want %q", got, want)
	}
}

// TestForgedSignatureRefused: Verify refuses a body changed after signing
// and a wrong secret.
func TestForgedSignatureRefused(t *testing.T) {
	body := []byte(`{"text":"x"}`)
	sig := webhook.Sign(secret, "1700000000", body)
	if err := webhook.Verify(secret, "1700000000", body, sig); err != nil {
		t.Fatal(err)
	}
	if webhook.Verify(secret, "1700000000", []byte(`{"text":"y"}`), sig) == nil ||
		webhook.Verify([]byte("other"), "1700000000", body, sig) == nil ||
		webhook.Verify(secret, "1700000001", body, sig) == nil {
		t.Fatal("a forged delivery verified")
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
