package promoter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
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

// unconfirmedPromotion promotes release 1 of prod with f.store, then release 2
// through a store (notifying through n) whose activation transaction's
// backend is terminated (pg_terminate_backend from another connection)
// just before COMMIT is sent: a real lost connection, the outcome
// UNCONFIRMED. It returns release 2's command id.
func (f *fixture) unconfirmedPromotion(t *testing.T, n promoter.Notifier) string {
	t.Helper()
	ctx := context.Background()
	f.promote(t, release("prod", 1, 0, 3, nil, nil))
	commits := 0
	s := f.open(t, func(o *promoter.Options) {
		o.Notifier = n
		promoter.SetFaultInjector(o, func(ctx context.Context, step string, tx pgx.Tx) error {
			if step != "commit" {
				return nil
			}
			if commits++; commits != 2 { // the intent's commit, then the activation's
				return nil
			}
			pid := tx.Conn().PgConn().PID()
			var ok bool
			if err := f.pool.QueryRow(ctx, "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&ok); err != nil || !ok {
				return fmt.Errorf("terminate backend %d: %v %v", pid, ok, err)
			}
			return nil
		})
	})
	r2 := release("prod", 2, 1, 3, nil, nil)
	r2.Actor, r2.Reason = "ci", "release 2"
	if _, err := s.RecordAndActivate(ctx, r2); !errors.Is(err, promoter.ErrUnconfirmed) {
		t.Fatalf("got %v, want ErrUnconfirmed", err)
	}
	return r2.CommandID
}

// TestReconcileNotifiesItsSettlementOnce: a promotion's outcome is
// UNCONFIRMED (its connection killed at COMMIT) and a real webhook
// notifier sends outcome.unconfirmed to an httptest receiver; two
// reconciles racing settle it NOT_APPLIED once, and the receiver is sent
// one outcome.settled event saying what was settled and how, under the id
// recorded in configpub.webhook_event; a third reconcile sends nothing.
func TestReconcileNotifiesItsSettlementOnce(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		got []webhook.Payload
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p webhook.Payload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, p)
	}))
	defer srv.Close()
	f := newFixture(t, nil)
	ctx := context.Background()
	n, err := webhook.New(webhook.Options{URLs: []string{srv.URL}, Secret: []byte("s"), Log: webhook.PGLog{Pool: f.pool}})
	if err != nil {
		t.Fatal(err)
	}
	f.store = f.open(t, func(o *promoter.Options) { o.Notifier = n })
	cmdID := f.unconfirmedPromotion(t, n)

	results := make(chan *promoter.ReconcileResult, 2)
	for range 2 {
		go func() {
			res, err := f.store.Reconcile(ctx, "prod")
			if err != nil {
				t.Error(err)
			}
			results <- res
		}()
	}
	settled := 0
	for range 2 {
		if res := <-results; res != nil {
			settled += len(res.Settled)
		}
	}
	if settled != 1 {
		t.Fatalf("two racing reconciles settled %d outcomes, want 1", settled)
	}
	if again, err := f.store.Reconcile(ctx, "prod"); err != nil || len(again.Settled) != 0 {
		t.Fatalf("third reconcile: %+v %v, want nothing settled", again, err)
	}
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	var kinds []string
	var settledEv []webhook.Payload
	for _, p := range got {
		kinds = append(kinds, p.Event.Kind)
		if p.Event.Kind == promoter.EventSettled {
			settledEv = append(settledEv, p)
		}
	}
	if len(settledEv) != 1 || !slices.Contains(kinds, promoter.EventUnconfirmed) {
		t.Fatalf("receiver got %v, want outcome.unconfirmed and one outcome.settled", kinds)
	}
	ev := settledEv[0].Event
	if ev.EnvTag != "prod" || ev.Release != 2 || ev.Outcome != promoter.OutcomeNotApplied || ev.Actor != "configpub reconcile" {
		t.Fatalf("settlement event %+v, want prod release 2 NOT_APPLIED by configpub reconcile", ev)
	}
	want := "configpub outcome.settled: prod release 2 RECORDED by configpub reconcile — promote outcome settled NOT_APPLIED (command " +
		cmdID + "): its transaction never committed, nothing moved, current release 1; re-run the same command to retry"
	if settledEv[0].Text != want {
		t.Errorf("text:\n got %s\nwant %s", settledEv[0].Text, want)
	}
	var recorded string
	if err := f.pool.QueryRow(ctx, `SELECT string_agg(event_id::text, ', ') FROM configpub.webhook_event
		WHERE event_kind = $1`, promoter.EventSettled).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if recorded != ev.ID {
		t.Fatalf("webhook_event holds settlement events %q, want the one sent (%s)", recorded, ev.ID)
	}
}

// TestReconcileSettlementIsRedelivered: the reconcile's notifier records
// and sends nothing — a process that stopped right after the settlement
// committed, which a test cannot cause between the commit and the notifier
// for real — yet its outcome.settled event was recorded by the settling
// transaction: webhook redeliver sends it to the httptest receiver, once.
func TestReconcileSettlementIsRedelivered(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		got []promoter.Event
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p webhook.Payload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		got = append(got, p.Event)
	}))
	defer srv.Close()
	rec := &recorder{}
	f := newFixture(t, func(o *promoter.Options) { o.Notifier = rec })
	ctx := context.Background()
	start := time.Now().Add(-time.Minute)
	f.unconfirmedPromotion(t, rec)
	res, err := f.store.Reconcile(ctx, "prod")
	if err != nil || len(res.Settled) != 1 {
		t.Fatalf("reconcile: %+v %v, want release 2 settled", res, err)
	}
	var stopped []promoter.Event
	rec.mu.Lock()
	for _, ev := range rec.events {
		if ev.Kind == promoter.EventSettled {
			stopped = append(stopped, ev)
		}
	}
	rec.mu.Unlock()
	if len(stopped) != 1 {
		t.Fatalf("reconcile notified %d settlement events, want 1", len(stopped))
	}
	n, err := webhook.New(webhook.Options{URLs: []string{srv.URL}, Secret: []byte("s"), Log: webhook.PGLog{Pool: f.pool}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := n.Redeliver(ctx, webhook.PGLog{Pool: f.pool}, start, time.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var sent []promoter.Event
	for _, ev := range got {
		if ev.Kind == promoter.EventSettled {
			sent = append(sent, ev)
		}
	}
	if len(sent) != 1 || sent[0].ID != stopped[0].ID || sent[0].Outcome != promoter.OutcomeNotApplied || sent[0].Release != 2 {
		t.Fatalf("redeliver sent settlement events %+v, want the one reconcile recorded (%s, release 2 NOT_APPLIED)", sent, stopped[0].ID)
	}
}
