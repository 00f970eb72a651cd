package promoter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
)

// TestFreezeOpeningBeforeTheMoveRefusesIt checks the freeze windows of every
// forward move where it decides: inside the move's transaction, under the
// environment's lock, on the clock read there. The injected clock is before
// the window when the move starts (and when ActivateRelease checks early,
// before a two-phase wait) and is advanced past the window's start by a
// hook inside the transaction, before it takes the lock: the move is
// refused naming the window, nothing is recorded and no pointer moves. With
// the glass broken the same move goes through and journals the window it
// broke, on the intent, the activation and every pointer move.
func TestFreezeOpeningBeforeTheMoveRefusesIt(t *testing.T) {
	t.Parallel()
	opens := t0.Add(30 * time.Minute)
	window := bundle.FreezeWindow{Name: "change-freeze", From: opens.Format(time.RFC3339), Until: opens.Add(48 * time.Hour).Format(time.RFC3339)}
	for _, tc := range []struct {
		name     string
		twoPhase bool
		step     string // the hook's step inside the intent transaction, before the lock
		// move runs the forward move of release 2 (breaking the glass
		// with reason when not empty).
		move func(ctx context.Context, f *fixture, r2 promoter.ReleaseInput, cmd, reason string) error
	}{
		{name: "promote", step: "record:command", move: func(ctx context.Context, f *fixture, r2 promoter.ReleaseInput, cmd, reason string) error {
			r2.CommandID, r2.BreakGlassReason = cmd, reason
			_, err := f.store.RecordAndActivate(ctx, r2)
			return err
		}},
		{name: "activate", step: "move:command", move: activateRelease2},
		{name: "two-phase activate", twoPhase: true, step: "move:command", move: activateRelease2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clk := simclock.New(t0)
			var armed bool
			f := newFixture(t, func(o *promoter.Options) {
				o.Clock = clk.Now
				promoter.SetFaultInjector(o, func(_ context.Context, step string, _ pgx.Tx) error {
					if armed && step == tc.step {
						clk.Set(opens.Add(time.Minute)) // the window opens now
					}
					return nil
				})
			})
			r1 := release("prod", 1, 0, 2, nil, nil)
			f.promote(t, r1)
			r2 := release("prod", 2, 1, 2, nil, nil)
			r2.Rollout = bundle.Rollout{FreezeWindows: []bundle.FreezeWindow{window}}
			if tc.twoPhase {
				r2.Rollout.Activation = bundle.ActivationTwoPhase
			}
			if tc.name != "promote" {
				r2.CommandID = id("stage", 2)
				if _, err := f.store.Stage(ctx, r2); err != nil {
					t.Fatal(err)
				}
				if tc.twoPhase {
					for _, tg := range r2.Targets {
						f.writeReceipt(t, tg, bundle.PhaseCandidate, bundle.ResultReady, "")
					}
				}
			}
			releases := f.count(t, `SELECT count(*) FROM configpub.config_release WHERE env_tag = 'prod'`)
			journal := f.count(t, `SELECT count(*) FROM configpub.config_release_journal WHERE env_tag = 'prod'`)

			armed = true
			err := tc.move(ctx, f, r2, id("move", tc.name), "")
			var fe *promoter.FreezeError
			if !errors.As(err, &fe) || fe.Window.Name != "change-freeze" || !fe.At.Equal(opens.Add(time.Minute)) ||
				!strings.Contains(err.Error(), "nothing written") {
				t.Fatalf("%s into a window that opened inside its transaction: %v; want a refusal naming the window at the move's time, nothing written", tc.name, err)
			}
			t.Log(err)
			f.wantPointersAt(t, r1)
			if n := f.count(t, `SELECT count(*) FROM configpub.config_release WHERE env_tag = 'prod'`); n != releases {
				t.Fatalf("%d releases after the refusal, want %d", n, releases)
			}
			if n := f.count(t, `SELECT count(*) FROM configpub.config_release_journal WHERE env_tag = 'prod'`); n != journal {
				t.Fatalf("%d journal rows after the refusal, want %d", n, journal)
			}
			if n := f.count(t, `SELECT count(*) FROM configpub.command WHERE command_id = $1::uuid`, id("move", tc.name)); n != 0 {
				t.Fatalf("the refused command is recorded (%d rows)", n)
			}

			// Broken inside the transaction: it moves and journals the window.
			clk.Set(t0)
			cmd := id("glass", tc.name)
			if err := tc.move(ctx, f, r2, cmd, "INC-7"); err != nil {
				t.Fatalf("%s with the glass broken: %v", tc.name, err)
			}
			f.wantPointersAt(t, r2)
			want := `break-glass in freeze window "change-freeze": INC-7`
			rows, err := f.pool.Query(ctx, `SELECT event_kind, reason FROM configpub.config_release_journal
				WHERE env_tag = 'prod' AND release_version = 2 AND command_id = $1::uuid ORDER BY sequence`, cmd)
			if err != nil {
				t.Fatal(err)
			}
			kinds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
				var kind, reason string
				if err := r.Scan(&kind, &reason); err != nil {
					return "", err
				}
				if reason != want {
					t.Errorf("journal row %s: reason %q, want %q", kind, reason, want)
				}
				return kind, nil
			})
			if err != nil || len(kinds) < 2 {
				t.Fatalf("journal rows of the break-glass command: %v, %v; want its intent and its activation", kinds, err)
			}
			if n := f.count(t, `SELECT count(*) FROM configpub.pointer_move WHERE command_id = $1::uuid AND reason = $2`, cmd, want); n != 2 {
				t.Fatalf("%d pointer moves carry the break-glass reason, want 2", n)
			}
		})
	}
}

// activateRelease2 is `configpub activate --release 2` (with --break-glass
// when reason is not empty).
func activateRelease2(ctx context.Context, f *fixture, _ promoter.ReleaseInput, cmd, reason string) error {
	in := promoter.MoveInput{CommandID: cmd, EnvTag: "prod", Release: 2, Actor: "oncall", Reason: "go"}
	if reason != "" {
		in.Reason = reason
	}
	_, err := f.store.ActivateRelease(ctx, in, promoter.ActivateOptions{BreakGlass: reason != "", Timeout: 5 * time.Second, Poll: 10 * time.Millisecond})
	return err
}

// TestFreezeWindowClosedByTheMoveJournalsTheReasonGiven: a window open
// when a break-glass activation starts has closed when the move takes the
// environment's lock. The move breaks no window, so it journals the
// operator's reason as given, not a break-glass reason naming a window
// that was not open when the pointers moved.
func TestFreezeWindowClosedByTheMoveJournalsTheReasonGiven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	closes := t0.Add(30 * time.Minute)
	clk := simclock.New(t0)
	f := newFixture(t, func(o *promoter.Options) {
		o.Clock = clk.Now
		promoter.SetFaultInjector(o, func(_ context.Context, step string, _ pgx.Tx) error {
			if step == "move:command" {
				clk.Set(closes.Add(time.Minute))
			}
			return nil
		})
	})
	r1 := release("prod", 1, 0, 2, nil, nil)
	f.promote(t, r1)
	r2 := release("prod", 2, 1, 2, nil, nil)
	r2.Rollout = bundle.Rollout{FreezeWindows: []bundle.FreezeWindow{{Name: "lunch",
		From: t0.Add(-time.Hour).Format(time.RFC3339), Until: closes.Format(time.RFC3339)}}}
	r2.CommandID = id("stage", 2)
	if _, err := f.store.Stage(ctx, r2); err != nil {
		t.Fatal(err)
	}
	in := promoter.MoveInput{CommandID: id("act"), EnvTag: "prod", Release: 2, Actor: "oncall", Reason: "INC-8"}
	if _, err := f.store.ActivateRelease(ctx, in, promoter.ActivateOptions{BreakGlass: true}); err != nil {
		t.Fatal(err)
	}
	f.wantPointersAt(t, r2)
	if n := f.count(t, `SELECT count(*) FROM configpub.config_release_journal WHERE command_id = $1::uuid AND reason = 'INC-8'`, id("act")); n < 2 {
		t.Fatalf("%d journal rows of the activation carry the reason given, want its intent and its activation", n)
	}
}

// TestActivateChecksFreezeWindowsInItsTransactionOverSimulatedMonths walks
// the store's clock over three simulated months in 5-hour steps and moves
// with Store.Activate, which makes no check of its own before its
// transaction: the check inside it refuses every step inside the weekly
// window (Friday 18:00 to Monday 08:00 in Europe/Berlin, across the
// October clock change) naming it with nothing moved, and activates every
// other step (each is rolled back again: rollbacks are never frozen, and
// one inside the window moves).
func TestActivateChecksFreezeWindowsInItsTransactionOverSimulatedMonths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Date(2027, 9, 1, 0, 0, 0, 0, time.UTC)
	clk := simclock.New(start)
	f := newFixture(t, func(o *promoter.Options) { o.Clock = clk.Now })
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	r1 := release("prod", 1, 0, 2, nil, nil)
	r2 := release("prod", 2, 1, 2, nil, nil)
	for _, r := range []*promoter.ReleaseInput{&r1, &r2} {
		for i := range r.Targets {
			r.Targets[i].ValidFrom, r.Targets[i].ExpiresAt = start.Add(-time.Hour), start.AddDate(1, 0, 0)
		}
	}
	f.promote(t, r1)
	r2.Rollout = bundle.Rollout{FreezeWindows: []bundle.FreezeWindow{{Name: "weekend", Schedule: "0 18 * * 5", Duration: "62h", TimeZone: "Europe/Berlin"}}}
	r2.CommandID = id("stage", 2)
	if _, err := f.store.Stage(ctx, r2); err != nil {
		t.Fatal(err)
	}
	frozen := func(t time.Time) bool { // an oracle on Berlin's wall clock
		t = t.In(berlin)
		fri := time.Date(t.Year(), t.Month(), t.Day()-int((t.Weekday()+2)%7), 18, 0, 0, 0, berlin) // the last Friday 18:00
		if fri.After(t) {
			fri = fri.AddDate(0, 0, -7)
		}
		return t.Sub(fri) < 62*time.Hour
	}
	refused, moved := 0, 0
	for now := start; now.Before(start.AddDate(0, 3, 0)); now = now.Add(5 * time.Hour) {
		clk.Set(now)
		_, err := f.store.Activate(ctx, promoter.MoveInput{CommandID: id("act", now), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"})
		if frozen(now) {
			var fe *promoter.FreezeError
			if !errors.As(err, &fe) || fe.Window.Name != "weekend" {
				t.Fatalf("%s (%s in Berlin): got %v, want a refusal naming the weekend window", now, now.In(berlin).Format("Mon 15:04"), err)
			}
			f.wantPointersAt(t, r1)
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("%s (%s in Berlin): %v", now, now.In(berlin).Format("Mon 15:04"), err)
		}
		f.wantPointersAt(t, r2)
		moved++
		if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("rb", now), EnvTag: "prod", ToRelease: 1, Actor: "a", Reason: "back"}); err != nil {
			t.Fatalf("%s: rollback: %v", now, err)
		}
	}
	if refused == 0 || moved == 0 {
		t.Fatalf("degenerate walk: %d refused, %d moved", refused, moved)
	}
	t.Logf("%d activations refused inside the window, %d moved outside", refused, moved)
}
