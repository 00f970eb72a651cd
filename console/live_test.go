package console

import (
	"context"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/readback"
)

// TestLivePagesFollowLeasesAndReceipts: a live page changed only on pointer
// moves and journal inserts, so during an incident it kept showing APPLIED
// after a lease had ended, and a readback's receipts appeared on the next
// reload only. The console now tells its live clients when a lease passes
// its refresh point and its end, on a simulated clock over a month, and
// when readback records receipts; and nothing while nothing happens.
func TestLivePagesFollowLeasesAndReceipts(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	pool := db.Pool(t)
	generate(t, pool, generated{env: "live", targets: 3, releases: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := simclock.New(releaseAt(1).Add(time.Hour))
	t0 := clock.Now()
	lease := func(svc string, from, refresh, expires time.Duration) {
		t.Helper()
		if _, err := pool.Exec(ctx, `UPDATE configpub.current_pointer SET lease_valid_from = $2, lease_refresh_after = $3,
				lease_expires_at = $4 WHERE env_tag = 'live' AND service_id = $1`,
			svc, t0.Add(from), t0.Add(refresh), t0.Add(expires)); err != nil {
			t.Fatal(err)
		}
	}
	lease("svc-0", -time.Hour, 20*24*time.Hour, 30*24*time.Hour) // renewal due in 20 days, ends in 30
	lease("svc-1", -time.Hour, 300*24*time.Hour, 365*24*time.Hour)
	lease("svc-2", -time.Hour, 300*24*time.Hour, 365*24*time.Hour)

	c, f := newTestConsole(t, viewerPool(t, db, false), Options{CacheTTL: -1, Now: clock.Now, LeaseHorizon: time.Hour})
	c.leaseCheck, c.leaseSettle = 20*time.Millisecond, 10*time.Millisecond
	go func() { _ = c.Run(ctx) }()
	events := follow(t, ctx, c, db, f.base+"/events?env=live")
	quiet := func(what string) {
		t.Helper()
		select {
		case got := <-events:
			t.Fatalf("%s: got %s, want no change event", what, got)
		case <-time.After(300 * time.Millisecond):
		}
	}
	changed := func(what string) {
		t.Helper()
		select {
		case got := <-events:
			if got != `data: {"envTag":"live"}` {
				t.Fatalf("%s: got %s, want a change of live", what, got)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("%s: no change event within 3 s", what)
		}
		for len(events) > 0 { // one moment may be told in a few events
			<-events
		}
	}
	state := func(want string) {
		t.Helper()
		e, err := c.rd.Environment(ctx, "live")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range e.ByState {
			if s.State == want && s.Count == 1 {
				return
			}
		}
		t.Fatalf("overview %+v, want one target %s", e.ByState, want)
	}

	quiet("nothing happening")
	clock.Advance(19 * 24 * time.Hour)
	quiet("19 days on, before any lease moment")
	clock.Advance(24*time.Hour + time.Minute) // svc-0's renewal is due
	changed("past svc-0's refresh point")
	quiet("just after the refresh point")
	clock.Advance(10 * 24 * time.Hour) // svc-0's lease ended
	changed("past the end of svc-0's lease")
	state(StateLeaseExpired)

	// Receipts readback records: the first is told at once, a burst at most
	// once a second, and the rest when the readback ends (Flush).
	var r bundle.Receipt
	if err := pool.QueryRow(ctx, `SELECT s.host, s.service_id, s.env_tag, s.audience, s.snapshot_id::text, s.publication_id::text
		FROM configpub.current_pointer p JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
		WHERE p.env_tag = 'live' AND p.service_id = 'svc-1'`).Scan(&r.Host, &r.ServiceID, &r.EnvTag, &r.Audience, &r.SnapshotID, &r.PublicationID); err != nil {
		t.Fatal(err)
	}
	r.Phase, r.Result, r.Reason = bundle.PhaseCurrent, bundle.ResultApplied, "NEW_SNAPSHOT"
	r.RunningSnapshotID = r.SnapshotID
	store := readback.NewStore(pool)
	if added, err := store.Record(ctx, r, clock.Now()); err != nil || !added {
		t.Fatalf("record: %v, %v", added, err)
	}
	changed("a receipt recorded")
	if added, err := store.Record(ctx, r, clock.Now()); err != nil || added {
		t.Fatalf("the same receipt again: %v, %v; want nothing added", added, err)
	}
	if err := store.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	quiet("the same receipt read again (nothing new)")
}
