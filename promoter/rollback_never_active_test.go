package promoter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
)

// TestRollbackRefusesAReleaseThatNeverRan: release 2 of a two-phase
// environment was staged and its activation timed out (one runtime never
// said READY), so it stayed STAGED; release 3 was promoted on it and
// activated. `rollback --to 2` moved every pointer to release 2's
// snapshots: a rollback is never frozen and waits for no candidate, so the
// snapshot no runtime had verified was served, inside release 2's own
// freeze window too. A rollback returns to what ran before; release 2 never
// ran. Over ten simulated days, before, inside and after release 2's freeze
// window, the rollback is now refused naming the release, its state and the
// activate command to run, and nothing is written (no command, journal row
// or pointer move). activate moves to it with an activation's checks: the
// freeze window refuses it, then the readiness wait times out naming the
// runtime that is not READY, and once it is READY one activation moves
// every pointer.
func TestRollbackRefusesAReleaseThatNeverRan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := simclock.New(t0)
	f := newFixture(t, func(o *promoter.Options) { o.Clock = clk.Now })
	freezeFrom, freezeUntil := t0.Add(5*24*time.Hour), t0.Add(7*24*time.Hour)
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	r2 := release("prod", 2, 1, 3, nil, nil)
	r2.CommandID = id("stage", 2)
	r2.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase, FreezeWindows: []bundle.FreezeWindow{{
		Name: "quarter-end", From: freezeFrom.Format(time.RFC3339), Until: freezeUntil.Format(time.RFC3339)}}}
	if _, err := f.store.Stage(ctx, r2); err != nil {
		t.Fatal(err)
	}
	f.writeReceipt(t, r2.Targets[0], bundle.PhaseCandidate, bundle.ResultReady, "")
	f.writeReceipt(t, r2.Targets[1], bundle.PhaseCandidate, bundle.ResultReady, "")
	wait := promoter.ActivateOptions{Timeout: 300 * time.Millisecond, Poll: 100 * time.Millisecond}
	act2 := promoter.MoveInput{CommandID: id("act", 2), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}
	var nr *promoter.NotReadyError
	if _, err := f.store.ActivateRelease(ctx, act2, wait); !errors.As(err, &nr) {
		t.Fatalf("activate release 2 with host-00002 not READY: %v, want a timeout", err)
	}
	clk.Advance(24 * time.Hour)
	r3 := release("prod", 3, 2, 3, nil, nil)
	f.promote(t, r3)
	if s, _ := f.releaseState(t, "prod", 2); s != promoter.StateStaged {
		t.Fatalf("release 2 is %s, want STAGED (it never ran)", s)
	}

	journal := `SELECT count(*) FROM configpub.config_release_journal WHERE env_tag = 'prod'`
	before := f.count(t, journal)
	for step := 0; clk.Now().Before(t0.Add(10 * 24 * time.Hour)); step++ {
		cmd := id("rb", step)
		_, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: cmd, EnvTag: "prod", ToRelease: 2, Actor: "oncall", Reason: "back"})
		if !errors.Is(err, promoter.ErrNeverActive) {
			t.Fatalf("%s: rollback to the never-activated release 2: %v, want ErrNeverActive", clk.Now(), err)
		}
		for _, want := range []string{"release 2 of prod is STAGED", "never the active release", "nothing moved",
			"configpub activate --env prod --release 2"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: refusal %q does not say %q", clk.Now(), err, want)
			}
		}
		f.wantPointersAt(t, r3)
		if n := f.count(t, `SELECT count(*) FROM configpub.command WHERE command_id = $1::text::uuid`, cmd); n != 0 {
			t.Fatalf("%s: the refused rollback left %d command rows", clk.Now(), n)
		}
		if n := f.count(t, journal); n != before {
			t.Fatalf("%s: the refused rollback wrote %d journal rows", clk.Now(), n-before)
		}
		clk.Advance(11 * time.Hour)
	}
	if n := f.count(t, `SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2`); n != 0 {
		t.Fatalf("%d pointer moves to release 2, want none", n)
	}

	// activate: the freeze window of release 2's policy refuses it...
	clk.Set(freezeFrom.Add(time.Hour))
	act2.CommandID = id("act", 2, "frozen")
	if _, err := f.store.ActivateRelease(ctx, act2, wait); !errors.Is(err, promoter.ErrFrozen) {
		t.Fatalf("activate release 2 inside its freeze window: %v, want ErrFrozen", err)
	}
	// ...then the readiness wait names the runtime not READY...
	clk.Set(freezeUntil.Add(time.Hour))
	act2.CommandID = id("act", 2, "after")
	_, err := f.store.ActivateRelease(ctx, act2, wait)
	if !errors.As(err, &nr) || strings.Join(nr.Missing, ",") != "host-00002/svc" {
		t.Fatalf("activate release 2 after the window: %v, want a timeout naming host-00002/svc", err)
	}
	f.wantPointersAt(t, r3)
	// ...and once it is READY one activation moves every pointer.
	f.writeReceipt(t, r2.Targets[2], bundle.PhaseCandidate, bundle.ResultReady, "")
	res, err := f.store.ActivateRelease(ctx, act2, wait)
	if err != nil {
		t.Fatalf("activate release 2 with every candidate READY: %v", err)
	}
	if res.PreviousRelease != 3 || res.Moved != 3 {
		t.Fatalf("activation %+v, want 3 pointers moved from release 3", res)
	}
	f.wantPointersAt(t, r2)
	if s, _ := f.releaseState(t, "prod", 3); s != promoter.StateSuperseded {
		t.Fatalf("release 3 is %s, want SUPERSEDED", s)
	}
	f.checkJournal(t)
}
