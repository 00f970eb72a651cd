package promoter_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
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

// TestStateChangesRecordTheirEventInTheirTransaction: with a Notifier, an
// activation, a rollback and a staging each record their notification in
// configpub.webhook_event in their own transaction, under the id the
// notifier is then given: the notifier here records and sends nothing — as
// a process that stopped right after the commit, a fault a test cannot
// cause between the commit and the notifier for real — and every event is
// in the table all the same, for webhook redeliver. Without a Notifier
// nothing is recorded.
func TestStateChangesRecordTheirEventInTheirTransaction(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	f := newFixture(t, func(o *promoter.Options) { o.Notifier = rec })
	ctx := context.Background()
	f.promote(t, release("prod", 1, 0, 2, nil, nil))
	f.promote(t, release("prod", 2, 1, 2, nil, nil))
	if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("events", "rollback"), EnvTag: "prod", ToRelease: 1,
		Actor: "gate", Reason: "rejections"}); err != nil {
		t.Fatal(err)
	}
	r3 := release("prod", 3, 2, 2, nil, nil)
	r3.CommandID = id("events", "stage")
	if _, err := f.store.Stage(ctx, r3); err != nil {
		t.Fatal(err)
	}
	rows, err := f.pool.Query(ctx, `SELECT event_id::text, event_kind, release_version FROM configpub.webhook_event ORDER BY recorded_at, event_id`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID, Kind string
		Release  int64
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	want := []row{{"", promoter.EventActivated, 1}, {"", promoter.EventActivated, 2}, {"", promoter.EventRolledBack, 1}, {"", promoter.EventStaged, 3}}
	rec.mu.Lock()
	notified := append([]promoter.Event(nil), rec.events...)
	rec.mu.Unlock()
	if len(got) != len(want) || len(notified) != len(want) {
		t.Fatalf("recorded %+v, notified %d; want %d events", got, len(notified), len(want))
	}
	for i := range want {
		if got[i].Kind != want[i].Kind || got[i].Release != want[i].Release || got[i].ID != notified[i].ID {
			t.Errorf("event %d: recorded %+v, notified %s %s; want %s of release %d under the notified id", i, got[i],
				notified[i].Kind, notified[i].ID, want[i].Kind, want[i].Release)
		}
	}

	plain := newFixture(t, nil)
	plain.promote(t, release("prod", 1, 0, 2, nil, nil))
	if n := plain.count(t, "SELECT count(*) FROM configpub.webhook_event"); n != 0 {
		t.Fatalf("%d events recorded without a Notifier", n)
	}
}

// TestEventTextIsSafeInChat: an event's text carries the actor and the
// reason — a commit subject, often a pull request's title — into the
// operators' chat. Slack markup in them (a channel ping, a link under a
// false label) is escaped, and so are control characters.
func TestEventTextIsSafeInChat(t *testing.T) {
	ev := promoter.Event{Kind: "release.activated", EnvTag: "prod", Release: 2, PreviousRelease: 1, State: "ACTIVE",
		Actor: "<!channel> Mallory", Reason: "<!here> <https://evil.example/phish|Approved by SecOps> & see\nFAKE", Detail: "3 pointers moved"}
	want := `configpub release.activated: prod release 2 ACTIVE (from release 1) by &lt;!channel&gt; Mallory: ` +
		`&lt;!here&gt; &lt;https://evil.example/phish|Approved by SecOps&gt; &amp; see\nFAKE — 3 pointers moved`
	if got := ev.Text(); got != want {
		t.Errorf("text:\n got %s\nwant %s", got, want)
	}
}

// TestIntegrityErrorRecordsItsEventOnce: two two-phase activations of the
// same release wait for its candidates when a receipt contradicting the
// journal arrives; both find it. The release is marked INTEGRITY_ERROR once,
// and its release.failed event is recorded in configpub.webhook_event in
// that transaction (the notifier here records nothing — a process that
// stopped after the commit — so webhook redeliver can still send it) and
// notified once, under the recorded id: the activation that found the
// release marked already sends nothing.
func TestIntegrityErrorRecordsItsEventOnce(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	f := newFixture(t, func(o *promoter.Options) { o.Notifier = rec })
	ctx := context.Background()
	_, r2 := f.stageTwoPhase(t, "prod", 3)
	errs := make(chan error, 2)
	for _, cmd := range []string{"first", "second"} {
		go func() {
			_, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("integrity", cmd), EnvTag: "prod", Release: 2,
				Actor: "a", Reason: cmd}, promoter.ActivateOptions{Timeout: 20 * time.Second, Poll: 20 * time.Millisecond})
			errs <- err
		}()
	}
	time.Sleep(300 * time.Millisecond) // both wait for READY candidates
	f.writeReceipt(t, r2.Targets[1], bundle.PhaseCurrent, bundle.ResultApplied, "")
	for range 2 {
		if err := <-errs; !errors.Is(err, promoter.ErrIntegrity) {
			t.Fatalf("activation: %v, want an integrity error", err)
		}
	}
	var failed []promoter.Event
	rec.mu.Lock()
	for _, ev := range rec.events {
		if ev.Kind == promoter.EventFailed {
			failed = append(failed, ev)
		}
	}
	rec.mu.Unlock()
	if len(failed) != 1 || failed[0].Outcome != promoter.OutcomeIntegrityError {
		t.Fatalf("notified %+v, want one release.failed INTEGRITY_ERROR event", failed)
	}
	var recorded string
	if err := f.pool.QueryRow(ctx, `SELECT string_agg(event_id::text || ' ' || (event->>'outcome'), ', ') FROM configpub.webhook_event
		WHERE event_kind = $1 AND release_version = 2`, promoter.EventFailed).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if want := failed[0].ID + " " + promoter.OutcomeIntegrityError; recorded != want {
		t.Fatalf("webhook_event holds %q for release 2's failure, want %q", recorded, want)
	}
}
