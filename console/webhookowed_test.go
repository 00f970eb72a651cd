package console

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/webhook"
)

// TestUndeliveredGaugeAgreesWithRedeliver: over nine simulated days of
// webhook events and attempts (a receiver down, one refusing for good, a
// process stopped before any attempt and one stopped between two
// receivers' attempts, a receiver configured on day 5, an event still
// being retried), configpub_webhook_undelivered_events, read at each
// checkpoint with the console's clock, agrees with what webhook redeliver
// would send at that moment with its default --since and --min-age
// (webhook.PGLog.Undelivered, the list it sends): a receiver's count plus
// receiver "none" is its list's length, and a receiver never used is owed
// exactly the "none" events.
func TestUndeliveredGaugeAgreesWithRedeliver(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	pool := db.PoolURL(t, db.URLFor(t, "configpub_promoter"))
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	clock := simclock.New(t0)
	con, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	const a, b, c, fresh = "https://hooks.a.example/…#aaaa0000", "https://hooks.b.example/…#bbbb0000",
		"https://hooks.c.example/…#cccc0000", "https://hooks.d.example/…#dddd0000"
	n := 0
	// event records an event now; each attempt follows a second later.
	event := func(attempts ...string) {
		t.Helper()
		n++
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", n)
		if _, err := pool.Exec(ctx, `INSERT INTO configpub.webhook_event (event_id, event_kind, env_tag, release_version, event, recorded_at)
			VALUES ($1::uuid, 'release.activated', 'prod', $2, jsonb_build_object('id', $1::text), $3)`, id, n, clock.Now()); err != nil {
			t.Fatal(err)
		}
		for i, at := range attempts {
			receiver, status, _ := strings.Cut(at, " ")
			var code int
			fmt.Sscan(status, &code)
			if _, err := pool.Exec(ctx, `INSERT INTO configpub.webhook_delivery (event_id, event_kind, env_tag, release_version,
					receiver, attempt, delivered, http_status, attempted_at, duration_ms)
				VALUES ($1::uuid, 'release.activated', 'prod', $2, $3, 1, $4, nullif($5, 0), $6, 1)`,
				id, n, receiver, code >= 200 && code < 300, code, clock.Now().Add(time.Duration(i+1)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(when string, want map[string]int) {
		t.Helper()
		body := localGet(con.Handler(), "/metrics").Body.String()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(body))
		if err != nil {
			t.Fatalf("%s: parse /metrics: %v", when, err)
		}
		gauge := map[string]int{}
		if f := families["configpub_webhook_undelivered_events"]; f != nil {
			for _, m := range f.GetMetric() {
				gauge[m.GetLabel()[0].GetValue()] = int(m.GetGauge().GetValue())
			}
		}
		now := clock.Now()
		for _, r := range []string{a, b, c, fresh} {
			events, err := webhook.PGLog{Pool: pool}.Undelivered(ctx, r, now.Add(-webhook.RedeliverWindow), now.Add(-webhook.RedeliverMinAge))
			if err != nil {
				t.Fatal(err)
			}
			if got := gauge[r] + gauge["none"]; got != len(events) {
				t.Errorf("%s: gauge says %s is owed %d (+%d none) = %d, redeliver would send it %d",
					when, r, gauge[r], gauge["none"], got, len(events))
			}
		}
		for k, v := range want {
			if gauge[k] != v {
				t.Errorf("%s: configpub_webhook_undelivered_events %v, want %v", when, gauge, want)
				break
			}
		}
	}
	event(a+" 503", b+" 200")     // 1: missed by a
	clock.Advance(time.Hour)      //
	event(a+" 200", b+" 410")     // 2: b refused it for good
	clock.Advance(23 * time.Hour) // day 1
	event(a+" 0", b+" 429")       // 3: missed by both
	clock.Advance(24 * time.Hour) // day 2
	event()                       // 4: the process stopped before any attempt
	clock.Advance(12 * time.Hour)
	check("day 2", map[string]int{a: 2, b: 1, "none": 1})
	clock.Advance(12 * time.Hour)       // day 3
	event(a + " 200")                   // 5: stopped between a's attempt and b's
	clock.Advance(24 * time.Hour)       // day 4
	event(a+" 503", b+" 200")           // 6
	clock.Advance(24 * time.Hour)       // day 5
	event(a+" 200", b+" 200", c+" 502") // 7: c configured
	clock.Advance(24 * time.Hour)       // day 6
	event(a+" 200", b+" 200", c+" 200") // 8
	clock.Advance(12 * time.Hour)
	check("day 6", map[string]int{a: 3, b: 2, c: 1, "none": 1})
	clock.Advance(12 * time.Hour) // day 7
	event()                       // 9: sent to none, a minute old at the check
	clock.Advance(time.Minute)
	event(a + " 503") // 10: its first attempt failed; still being retried
	clock.Advance(30 * time.Second)
	// Event 1 left the window; 9 and 10 are younger than --min-age.
	check("day 7, within --min-age of two events", map[string]int{a: 2, b: 2, c: 1, "none": 1})
	clock.Advance(time.Hour)
	check("day 7, an hour later", map[string]int{a: 3, b: 2, c: 1, "none": 2})
	clock.Set(t0.Add(8*24*time.Hour + 2*time.Hour)) // events 1 to 3 left the window
	check("day 8", map[string]int{a: 2, b: 1, c: 1, "none": 2})
	clock.Set(t0.Add(16 * 24 * time.Hour)) // every event left it
	check("day 16", map[string]int{a: 0, b: 0, c: 0, "none": 0})
}
