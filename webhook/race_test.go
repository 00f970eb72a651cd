package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/webhook"
)

// TestTwoRedeliveriesAtOnceDeliverEveryEventAtLeastOnce races two
// `webhook redeliver` runs (a nightly job and an operator) over the events
// a receiver missed while it was down, round after round: every event is
// delivered, each at most once per run and always with its own event id
// (what a receiver drops duplicates by), and a run after them has nothing
// to send. Two runs at once may both send an event: redelivery is at least
// once, not exactly once.
func TestTwoRedeliveriesAtOnceDeliverEveryEventAtLeastOnce(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	pool := db.PoolURL(t, db.URLFor(t, "configpub_promoter"))
	var up atomic.Bool
	var mu sync.Mutex
	got := map[string]int{}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		mu.Lock()
		got[r.Header.Get(webhook.HeaderDelivery)]++
		mu.Unlock()
	}))
	defer receiver.Close()
	newNotifier := func() *webhook.Notifier {
		n, err := webhook.New(webhook.Options{URLs: []string{receiver.URL}, Secret: secret, Timeout: time.Second,
			MaxAttempts: 2, Log: webhook.PGLog{Pool: pool}, Sleep: func(context.Context, time.Duration) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	ctx := context.Background()
	const rounds, events = 10, 4
	twice := 0
	for round := range rounds {
		up.Store(false)
		start := time.Now().Add(-time.Minute)
		var ids []string
		for i := range events {
			ev := promoter.Event{ID: uuid.NewString(), Kind: promoter.EventActivated, EnvTag: "prod", Release: int64(round*events + i + 2), At: time.Now().UTC()}
			ids = append(ids, ev.ID)
			n := newNotifier()
			n.Notify(ctx, ev)
			if err := n.Close(ctx); err != nil {
				t.Fatal(err)
			}
		}
		up.Store(true)
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := newNotifier().Redeliver(ctx, webhook.PGLog{Pool: pool}, start, time.Now().Add(time.Minute)); err != nil {
					t.Errorf("round %d: redeliver: %v", round, err)
				}
			}()
		}
		wg.Wait()
		mu.Lock()
		for _, id := range ids {
			switch n := got[id]; {
			case n == 0 || n > 2:
				t.Fatalf("round %d: event %s delivered %d times by two redeliveries, want 1 or 2", round, id, n)
			case n == 2:
				twice++
			}
		}
		mu.Unlock()
		res, err := newNotifier().Redeliver(ctx, webhook.PGLog{Pool: pool}, start, time.Now().Add(time.Minute))
		if err != nil || res.Delivered != 0 || res.Undelivered != 0 {
			t.Fatalf("round %d: a third redelivery: %+v, %v; want nothing to send", round, res, err)
		}
	}
	t.Logf("%d rounds of %d events: %d delivered twice by the two runs", rounds, events, twice)
}
