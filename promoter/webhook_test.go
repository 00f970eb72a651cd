package promoter_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/webhook"
)

// TestNeverAnsweringWebhookDoesNotDelayActivation: the receiver accepts
// connections and never answers. Promotions with the webhook notifier
// return within the attempt timeout (the delivery runs in the background),
// closing the notifier waits at most that timeout, and the delivery log
// records the unanswered attempt.
func TestNeverAnsweringWebhookDoesNotDelayActivation(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	const timeout = 2 * time.Second
	f := newFixture(t, nil)
	n, err := webhook.New(webhook.Options{URLs: []string{srv.URL}, Secret: []byte("s"), Timeout: timeout, MaxAttempts: 1,
		Log: webhook.PGLog{Pool: f.pool}})
	if err != nil {
		t.Fatal(err)
	}
	f.store = f.open(t, func(o *promoter.Options) { o.Notifier = n })
	for v := int64(1); v <= 2; v++ {
		start := time.Now()
		f.promote(t, release("prod", v, v-1, 3, nil, nil))
		if d := time.Since(start); d >= timeout {
			t.Fatalf("release %d: activation took %s with a dead receiver, want under the %s timeout", v, d, timeout)
		}
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 3*timeout)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > timeout+time.Second {
		t.Fatalf("draining the notifier took %s, want at most the %s timeout", d, timeout)
	}
	if got := f.count(t, `SELECT count(*) FROM configpub.webhook_delivery
		WHERE NOT delivered AND error = 'no answer within 2s' AND event_kind = 'release.activated'`); got != 2 {
		t.Fatalf("%d unanswered attempts logged, want 2", got)
	}
}
