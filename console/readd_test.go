package console

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/simclock"
)

// TestReAddedTargetIsUnconfirmedUntilAReceiptSinceTheMove: h0/svc-3 was
// read back APPLIED, then retired for two simulated days and brought back
// at the very snapshot it had, with no readback in between. The overview,
// the target page and /metrics must not count it APPLIED (nor
// acknowledged) from the receipt read before its retirement — as status
// does not — until a receipt read after the re-add says so.
func TestReAddedTargetIsUnconfirmedUntilAReceiptSinceTheMove(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	pool := db.Pool(t)
	generate(t, pool, generated{env: "readd", targets: 4, releases: 2, changed: 1})
	ctx := context.Background()
	clock := simclock.New(releaseAt(2).Add(time.Hour))
	c, err := New(ctx, viewerPool(t, db, false), Options{CacheTTL: -1, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	// Retired a day later, brought back at the same snapshot the day
	// after, as the promoter journals and moves it.
	retired, back := clock.Now().Add(24*time.Hour), clock.Now().Add(48*time.Hour)
	for _, m := range []struct {
		at      time.Time
		retired bool
	}{{retired, true}, {back, false}} {
		exec(`INSERT INTO configpub.pointer_move (host, service_id, env_tag, previous_snapshot_id, next_snapshot_id,
				publication_id, release_version, previous_release_version, sequence, action, actor, reason, command_id, moved_at, retired)
			SELECT p.host, p.service_id, p.env_tag, p.snapshot_id, p.snapshot_id, s.publication_id, 2, 2,
				p.sequence + CASE WHEN $2 THEN 0 ELSE 1 END, 'rollback', 'alex@example.com', '', gen_random_uuid(), $1, $2
			FROM configpub.current_pointer p JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
			WHERE p.env_tag = 'readd' AND p.host = 'h0.example' AND p.service_id = 'svc-3'`, m.at, m.retired)
	}
	exec(`UPDATE configpub.current_pointer SET sequence = sequence + 1, moved_at = $1, updated_at = $1,
			retired_at = NULL, retired_release_version = NULL
		WHERE env_tag = 'readd' AND host = 'h0.example' AND service_id = 'svc-3'`, back)
	clock.Set(back.Add(time.Hour))

	check := func(when, state string, applied, published, unacked int) {
		t.Helper()
		e, err := c.rd.Environment(ctx, "readd")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int{}
		for _, s := range e.ByState {
			got[s.State] = s.Count
		}
		if got[StateApplied] != applied || got[StatePublished] != published || e.Divergent != 0 {
			t.Errorf("%s: overview by state %v, %d divergent; want %d APPLIED, %d PUBLISHED, none divergent", when, got, e.Divergent, applied, published)
		}
		td, err := c.rd.TargetDetail(ctx, "readd", "h0.example", "svc-3")
		if err != nil {
			t.Fatal(err)
		}
		if td.Current == nil || td.Current.State != state {
			t.Errorf("%s: target page %+v, want %s", when, td.Current, state)
		}
		body := localGet(c.Handler(), "/metrics").Body.String()
		for _, want := range []string{
			`configpub_targets{env="readd",state="APPLIED"} ` + strconv.Itoa(applied),
			`configpub_targets{env="readd",state="PUBLISHED"} ` + strconv.Itoa(published),
			`configpub_unacknowledged_targets{env="readd"} ` + strconv.Itoa(unacked),
		} {
			if !strings.Contains(body, want+"\n") {
				t.Errorf("%s: /metrics lacks %s:\n%s", when, want, grepLines(body, `env="readd"`))
			}
		}
	}
	check("brought back, no receipt since", StatePublished, 3, 1, 1)

	// A readback after the re-add: the same state as before, read again.
	exec(`INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, snapshot_id, outcome, artifact_digest, reported_at,
			kind, endpoint, running_snapshot_id)
		SELECT p.host, p.service_id, p.env_tag, p.snapshot_id, 'APPLIED', s.artifact_digest, $1,
			'receipt', 'https://' || p.host || '/status', p.snapshot_id
		FROM configpub.current_pointer p JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
		WHERE p.env_tag = 'readd' AND p.host = 'h0.example' AND p.service_id = 'svc-3'`, clock.Now())
	clock.Advance(time.Minute)
	check("read back after the re-add", StateApplied, 4, 0, 0)
}
