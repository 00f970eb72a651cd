package promoter_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
)

// TestBreakGlassActivateRetriedAfterALostCommitIsTheSameCommand: a
// break-glass activate journals "break-glass in freeze window NAME:
// REASON", but its command hash covers the reason the operator gave, so
// re-running the same activate (same command id, --break-glass, reason)
// after the reply to a COMMIT was lost (a real proxy swallows it) is the
// same command: it completes or replays, never a conflict — inside the
// window, and days after it closed, when the re-run's own freeze check no
// longer breaks any window. Cut at the intent's COMMIT, the re-run
// continues the intent and journals the window the intent broke; cut at
// the activation's COMMIT, it replays the recorded result. Either way the
// pointers moved once.
func TestBreakGlassActivateRetriedAfterALostCommitIsTheSameCommand(t *testing.T) {
	t.Parallel()
	opens := t0.Add(-time.Hour)
	window := bundle.FreezeWindow{Name: "year-end", From: opens.Format(time.RFC3339), Until: opens.Add(48 * time.Hour).Format(time.RFC3339)}
	const journaled = `break-glass in freeze window "year-end": INC-7 hotfix`
	for _, tc := range []struct {
		name    string
		commit  int // the COMMIT whose reply is lost: 1 the intent's, 2 the activation's
		retryAt time.Time
		replay  bool
	}{
		{"intent commit, retried in the window", 1, t0.Add(time.Hour), false},
		{"intent commit, retried after the window", 1, t0.Add(5 * 24 * time.Hour), false},
		{"activation commit, retried in the window", 2, t0.Add(time.Hour), true},
		{"activation commit, retried after the window", 2, t0.Add(5 * 24 * time.Hour), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clk := simclock.New(t0)
			f := newFixture(t, func(o *promoter.Options) { o.Clock = clk.Now })
			r1 := release("prod", 1, 0, 3, nil, nil)
			f.promote(t, r1)
			r2 := release("prod", 2, 1, 3, nil, nil)
			r2.CommandID = id("stage", 2)
			r2.Rollout = bundle.Rollout{FreezeWindows: []bundle.FreezeWindow{window}}
			if _, err := f.store.Stage(ctx, r2); err != nil {
				t.Fatal(err)
			}

			u, err := url.Parse(f.db.URL)
			if err != nil {
				t.Fatal(err)
			}
			proxy := newCutProxy(t, u.Host)
			u.Host = proxy.ln.Addr().String()
			pool, err := pgxpool.New(ctx, u.String())
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			commits := 0
			opts := promoter.Options{Signer: f.key, Clock: clk.Now}
			promoter.SetFaultInjector(&opts, func(_ context.Context, step string, _ pgx.Tx) error {
				if step == "commit" {
					if commits++; commits == tc.commit {
						proxy.armed.Store(true)
					}
				}
				return nil
			})
			cut, err := promoter.Open(ctx, pool, opts)
			if err != nil {
				t.Fatal(err)
			}
			in := promoter.MoveInput{CommandID: id("glass", tc.commit), EnvTag: "prod", Release: 2, Actor: "oncall", Reason: "INC-7 hotfix"}
			glass := promoter.ActivateOptions{BreakGlass: true}
			if _, err := cut.ActivateRelease(ctx, in, promoter.ActivateOptions{BreakGlass: true}); !errors.Is(err, promoter.ErrUnconfirmed) {
				t.Fatalf("break-glass activate whose COMMIT reply is lost: %v, want ErrUnconfirmed", err)
			}
			if !proxy.cut.Load() {
				t.Fatal("the proxy never cut a COMMIT")
			}

			clk.Set(tc.retryAt)
			res, err := f.store.ActivateRelease(ctx, in, glass)
			if err != nil {
				t.Fatalf("the same break-glass activate again at %s: %v, want the same command", clk.Now(), err)
			}
			if res.Replayed != tc.replay || res.Moved != 3 || res.ReleaseVersion != 2 {
				t.Fatalf("re-run: %+v, want release 2, 3 moved, replayed %v", res, tc.replay)
			}
			f.wantPointersAt(t, r2)
			if n := f.count(t, `SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2`); n != 3 {
				t.Fatalf("%d pointer moves to release 2, want 3 (moved once)", n)
			}
			if n := f.count(t, `SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2 AND reason <> $1`, journaled); n != 0 {
				t.Fatalf("%d pointer moves to release 2 journal another reason than %q", n, journaled)
			}
			if n := f.count(t, `SELECT count(*) FROM configpub.config_release_journal WHERE release_version = 2
				AND event_kind IN ('activate-intent', 'activate') AND reason = $1`, journaled); n != 2 {
				t.Fatalf("%d of the intent and activation journal rows say %q, want both", n, journaled)
			}
			f.checkJournal(t)
		})
	}
}
