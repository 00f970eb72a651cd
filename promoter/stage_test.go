package promoter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/promoter"
)

// longWindows gives every target of in an activation window of a year, so
// that a test can walk its clock over months.
func longWindows(in promoter.ReleaseInput) promoter.ReleaseInput {
	for i := range in.Targets {
		in.Targets[i].ExpiresAt = t0.AddDate(1, 0, 0)
	}
	return in
}

func (f *fixture) releaseState(t testing.TB, env string, v int64) (state, outcome string) {
	t.Helper()
	if err := f.pool.QueryRow(context.Background(), `SELECT lifecycle_state, execution_outcome FROM configpub.config_release
		WHERE env_tag = $1 AND release_version = $2`, env, v).Scan(&state, &outcome); err != nil {
		t.Fatal(err)
	}
	return state, outcome
}

func TestStageRecordsMovesNothingAndActivateMovesAll(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	r2 := release("prod", 2, 1, 3, func(i int) bool { return i != 1 }, func(int) int64 { return 1 })
	r2.CommandID = id("stage", 2)
	st, err := f.store.Stage(ctx, r2)
	if err != nil {
		t.Fatal(err)
	}
	if st.Moving != 2 || st.Targets != 3 || st.ActiveRelease != 1 || st.Replayed {
		t.Fatalf("stage result %+v, want 3 targets, 2 moving, active 1", st)
	}
	f.wantPointersAt(t, r1)
	if s, o := f.releaseState(t, "prod", 2); s != promoter.StateStaged || o != promoter.OutcomeNotRequested {
		t.Fatalf("release 2 is %s/%s, want STAGED/NOT_REQUESTED", s, o)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.candidate_pointer WHERE env_tag = 'prod' AND release_version = 2"); n != 3 {
		t.Fatalf("%d candidate pointers, want 3", n)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2"); n != 0 {
		t.Fatalf("staging wrote %d pointer moves", n)
	}
	again, err := f.store.Stage(ctx, r2)
	if err != nil || !again.Replayed || again.Moving != 2 || again.StateNow != promoter.StateStaged || again.ActiveNow != 1 {
		t.Fatalf("re-stage: %+v, %v; want a replay", again, err)
	}
	status, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	var shown string
	for _, r := range status.Releases {
		if r.ReleaseVersion == 2 {
			shown = r.State + "/" + r.Outcome
		}
	}
	if shown != "STAGED/NOT_REQUESTED" || status.CurrentRelease != 1 {
		t.Fatalf("status shows release 2 as %q, current %d; want STAGED/NOT_REQUESTED, 1", shown, status.CurrentRelease)
	}
	// A third release cannot be built on release 1 any more: the staged
	// release is the head.
	if _, err := f.store.Stage(ctx, release("prod", 3, 1, 3, nil, nil)); !errors.Is(err, promoter.ErrConflict) {
		t.Fatalf("staging on a base below the staged head: %v, want a conflict", err)
	}

	res, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act", 2), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}, promoter.ActivateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 2 || res.Unchanged != 1 {
		t.Fatalf("activation %+v, want 2 moved 1 unchanged", res)
	}
	f.wantPointersAt(t, r2)
	if s, o := f.releaseState(t, "prod", 2); s != promoter.StateActive || o != promoter.OutcomeApplied {
		t.Fatalf("release 2 is %s/%s, want ACTIVE/APPLIED", s, o)
	}
	if s, _ := f.releaseState(t, "prod", 1); s != promoter.StateSuperseded {
		t.Fatalf("release 1 is %s, want SUPERSEDED", s)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.candidate_pointer"); n != 0 {
		t.Fatalf("%d candidate pointers left after activation, want 0", n)
	}
	// Staging it again replays and says what happened since.
	if again, err := f.store.Stage(ctx, r2); err != nil || !again.Replayed || again.StateNow != promoter.StateActive || again.ActiveNow != 2 {
		t.Fatalf("re-stage after activation: %+v, %v; want a replay saying ACTIVE, active 2", again, err)
	}
	f.checkJournal(t)
}

// A freeze window's time zone is recorded with the release and read back
// when it is activated: Friday 18:30 in Berlin is frozen by a Berlin
// window although it is only 16:30 UTC.
func TestFreezeWindowTimeZoneIsRecorded(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := longWindows(release("prod", 1, 0, 2, nil, nil))
	f.promote(t, r1)
	r2 := longWindows(release("prod", 2, 1, 2, nil, nil))
	r2.Rollout = bundle.Rollout{FreezeWindows: []bundle.FreezeWindow{
		{Name: "berlin-weekend", Schedule: "0 18 * * 5", Duration: "62h", TimeZone: "Europe/Berlin"}}}
	r2.CommandID = id("stage", 2)
	if _, err := f.store.Stage(ctx, r2); err != nil {
		t.Fatal(err)
	}
	f.now = time.Date(2026, 12, 4, 17, 30, 0, 0, time.UTC) // Friday 18:30 CET
	in := promoter.MoveInput{CommandID: id("act", "berlin"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}
	_, err := f.store.ActivateRelease(ctx, in, promoter.ActivateOptions{})
	if !errors.Is(err, promoter.ErrFrozen) || !strings.Contains(err.Error(), "Europe/Berlin") {
		t.Fatalf("activate on Friday 18:30 in Berlin: %v, want a refusal naming the Berlin window", err)
	}
	f.wantPointersAt(t, r1)
	f.now = time.Date(2026, 12, 4, 16, 59, 0, 0, time.UTC) // 17:59 CET
	if _, err := f.store.ActivateRelease(ctx, in, promoter.ActivateOptions{}); err != nil {
		t.Fatalf("activate a minute before the window opens in Berlin: %v", err)
	}
	f.wantPointersAt(t, r2)
}

// TestFreezeWindowsRefuseActivationOverSimulatedMonths walks the store's
// clock over three simulated months in 7-hour steps. Inside the weekly
// freeze (Friday 18:00 to Monday 08:00 UTC) activate is refused naming the
// window and nothing moves; outside it activates (and is rolled back,
// rollbacks are never frozen). Breaking the glass inside the window
// activates and journals the reason.
func TestFreezeWindowsRefuseActivationOverSimulatedMonths(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	freeze := bundle.Rollout{FreezeWindows: []bundle.FreezeWindow{{Name: "weekend", Schedule: "0 18 * * 5", Duration: "62h"}}}
	r1 := longWindows(release("prod", 1, 0, 2, nil, nil))
	f.promote(t, r1)
	r2 := longWindows(release("prod", 2, 1, 2, nil, nil))
	r2.Rollout = freeze
	r2.CommandID = id("stage", 2)
	if _, err := f.store.Stage(ctx, r2); err != nil {
		t.Fatal(err)
	}
	frozenOracle := func(t time.Time) bool {
		wd, h := t.Weekday(), t.Hour()
		return wd == time.Friday && h >= 18 || wd == time.Saturday || wd == time.Sunday || wd == time.Monday && h < 8
	}
	refused, activated := 0, 0
	for step := 0; f.now.Before(t0.AddDate(0, 3, 0)); step++ {
		f.now = t0.Add(time.Duration(step) * 7 * time.Hour)
		in := promoter.MoveInput{CommandID: id("act", step), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}
		_, err := f.store.ActivateRelease(ctx, in, promoter.ActivateOptions{})
		if frozenOracle(f.now) {
			var fe *promoter.FreezeError
			if !errors.As(err, &fe) || fe.Window.Name != "weekend" || !strings.Contains(err.Error(), `freeze window "weekend"`) {
				t.Fatalf("%s (%s): got %v, want a refusal naming the weekend window", f.now, f.now.Weekday(), err)
			}
			f.wantPointersAt(t, r1)
			refused++
			continue
		}
		if err != nil {
			t.Fatalf("%s (%s): activate outside the window: %v", f.now, f.now.Weekday(), err)
		}
		f.wantPointersAt(t, r2)
		activated++
		if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("rb", step), EnvTag: "prod", ToRelease: 1, Actor: "a", Reason: "back"}); err != nil {
			t.Fatalf("%s: rollback: %v", f.now, err)
		}
	}
	if refused == 0 || activated == 0 {
		t.Fatalf("degenerate walk: %d refused, %d activated", refused, activated)
	}
	// Saturday noon: frozen; break the glass.
	f.now = time.Date(2027, 3, 6, 12, 0, 0, 0, time.UTC)
	in := promoter.MoveInput{CommandID: id("glass"), EnvTag: "prod", Release: 2, Actor: "oncall", Reason: "INC-42 hotfix"}
	if _, err := f.store.ActivateRelease(ctx, in, promoter.ActivateOptions{}); !errors.Is(err, promoter.ErrFrozen) {
		t.Fatalf("Saturday without break-glass: %v, want frozen", err)
	}
	if _, err := f.store.ActivateRelease(ctx, in, promoter.ActivateOptions{BreakGlass: true}); err != nil {
		t.Fatalf("break-glass: %v", err)
	}
	f.wantPointersAt(t, r2)
	var reason string
	if err := f.pool.QueryRow(ctx, `SELECT reason FROM configpub.config_release_journal
		WHERE env_tag = 'prod' AND release_version = 2 AND event_kind = 'activate' ORDER BY sequence DESC LIMIT 1`).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if want := `break-glass in freeze window "weekend": INC-42 hotfix`; reason != want {
		t.Fatalf("journaled reason %q, want %q", reason, want)
	}
	if n := f.count(t, `SELECT count(*) FROM configpub.pointer_move WHERE command_id = $1::uuid AND reason LIKE 'break-glass%'`, id("glass")); n != 2 {
		t.Fatalf("%d pointer moves carry the break-glass reason, want 2", n)
	}
	t.Logf("%d activations refused inside the window, %d allowed outside", refused, activated)
}

// TestLookUpsByKeyStayInTheirIdentityAndEnvironment stages, activates and
// then promotes releases in an environment whose identities another
// environment shares (sorting before it, promoted a minute earlier), on a
// host that runs two services. Staging, activation and retirement find each
// identity's pointer and candidate by the whole key (host, service,
// environment), one probe each: an identity sharing the host, or the same
// identity in the other environment, must never stand in for it.
func TestLookUpsByKeyStayInTheirIdentityAndEnvironment(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	// svc and svcB are host-00000's services svc and svc-b in env as
	// created by release `created`.
	svc := func(env string, created int64) promoter.Target { return target(env, 0, created, true) }
	svcB := func(env string, created int64) promoter.Target {
		b := target(env, 0, created, true)
		b.ServiceID = "svc-b"
		b.SnapshotID, b.PolicySnapshotID = id("snap-b", env, created), id("pol-b", env, created)
		return b
	}
	unchanged := func(tg promoter.Target) promoter.Target { tg.Changed = false; return tg }
	f.promote(t, releaseOf("dev", 1, 0, svc("dev", 1), svcB("dev", 1)))
	devBefore := f.pointerRows(t, "dev")
	f.now = f.now.Add(minute)
	f.promote(t, releaseOf("prod", 1, 0, svc("prod", 1), svcB("prod", 1)))
	prod1 := f.pointerRows(t, "prod")

	// Release 2 keeps svc at release 1's snapshot and changes svc-b.
	r2 := releaseOf("prod", 2, 1, unchanged(svc("prod", 1)), svcB("prod", 2))
	r2.CommandID = id("stage", "prod", 2)
	st, err := f.store.Stage(ctx, r2)
	if err != nil {
		t.Fatal(err)
	}
	if st.Moving != 1 || st.Targets != 2 {
		t.Fatalf("stage result %+v, want 2 targets, 1 moving (svc-b)", st)
	}
	cands := f.candidateManifests(t, "prod", 2)
	for _, tg := range r2.Targets {
		k := tg.Host + "/" + tg.ServiceID
		c, ok := cands[k]
		if !ok || c.m.SnapshotID != tg.SnapshotID {
			t.Fatalf("candidate %s: %+v (present %v), want snapshot %s", k, c.m, ok, tg.SnapshotID)
		}
		if c.m.Sequence <= prod1[k].Sequence {
			t.Errorf("candidate %s: sequence %d, not above its prod pointer's %d", k, c.m.Sequence, prod1[k].Sequence)
		}
	}
	res, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act", "prod", 2), EnvTag: "prod", Release: 2,
		Actor: "a", Reason: "go"}, promoter.ActivateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Moved != 1 || res.Unchanged != 1 || res.Retired != 0 {
		t.Fatalf("activation %+v, want 1 moved, 1 unchanged, none retired", res)
	}
	f.wantMapping(t, r2)

	// Release 3 drops svc-b: only it is retired.
	f.now = f.now.Add(minute)
	r3 := releaseOf("prod", 3, 2, unchanged(svc("prod", 1)))
	if res := f.promote(t, r3); res.Retired != 1 {
		t.Fatalf("release 3 retired %d identities, want 1 (svc-b)", res.Retired)
	}
	f.wantMapping(t, r3, "host-00000/svc-b")

	devAfter := f.pointerRows(t, "dev")
	if len(devAfter) != len(devBefore) {
		t.Fatalf("dev has %d pointers, had %d", len(devAfter), len(devBefore))
	}
	for k, r := range devBefore {
		if a := devAfter[k]; a.Snapshot != r.Snapshot || a.Sequence != r.Sequence || a.Retired {
			t.Errorf("dev pointer %s changed: %+v, was %+v", k, a, r)
		}
	}
}

// TestActivePolicyHoldsAReleaseThatLiftsIt: the rollout policy recorded
// with the active release holds for the release that would replace it. A
// release whose own policy drops the active release's freeze window is
// refused inside that window, naming the active release, and activates
// with the glass broken; a release that switches two-phase activation off
// is staged as two-phase and waits for READY receipts like any other.
// Once active, a release's own policy holds: the next release is free of
// the dropped window.
func TestActivePolicyHoldsAReleaseThatLiftsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	always := bundle.Rollout{FreezeWindows: []bundle.FreezeWindow{{Name: "launch", Schedule: "* * * * *", Duration: "2m"}}}
	r1 := longWindows(release("prod", 1, 0, 2, nil, nil))
	r1.Rollout = always
	r1.BreakGlassReason = "launch" // the window is its own: open when it is recorded
	f.promote(t, r1)
	inForce, active, err := f.store.RolloutInForce(ctx, "prod")
	if err != nil || active != 1 || inForce == nil || len(inForce.FreezeWindows) != 1 {
		t.Fatalf("RolloutInForce = %+v, %d, %v; want release 1's window", inForce, active, err)
	}

	r2 := longWindows(release("prod", 2, 1, 2, nil, nil)) // no window of its own
	r2.CommandID = id("stage", 2)
	if _, err := f.store.Stage(ctx, r2); err != nil {
		t.Fatal(err)
	}
	in := promoter.MoveInput{CommandID: id("act", 2), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}
	_, err = f.store.ActivateRelease(ctx, in, promoter.ActivateOptions{})
	var fe *promoter.FreezeError
	if !errors.As(err, &fe) || fe.ActiveRelease != 1 || fe.Window.Name != "launch" || !strings.Contains(err.Error(), "active release 1") {
		t.Fatalf("activate a release without the active release's window, inside it: %v; want a refusal naming the active release 1", err)
	}
	f.wantPointersAt(t, r1)
	if _, err := promoter.CheckFreezeInForce("prod", &r2.Rollout, nil, 0, f.now, false, "go"); err != nil {
		t.Fatalf("without the active release's policy the release is not frozen: %v", err)
	}
	res, err := f.store.ActivateRelease(ctx, in, promoter.ActivateOptions{BreakGlass: true})
	if err != nil || res.Moved != 2 {
		t.Fatalf("activate with the glass broken: %+v, %v", res, err)
	}
	var reason string
	if err := f.pool.QueryRow(ctx, `SELECT reason FROM configpub.config_release_journal
		WHERE env_tag = 'prod' AND release_version = 2 AND event_kind = 'activate'`).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, `break-glass in freeze window "launch"`) {
		t.Fatalf("journaled reason %q, want the broken window", reason)
	}

	// Release 2 is active: its policy (none) holds. Release 3 turns
	// two-phase on, release 4 turns it off again while 3 is active.
	r3 := longWindows(release("prod", 3, 2, 2, nil, nil))
	r3.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase}
	f.promote(t, r3)
	r4 := longWindows(release("prod", 4, 3, 2, nil, nil))
	r4.CommandID = id("stage", 4)
	st, err := f.store.Stage(ctx, r4)
	if err != nil || !st.TwoPhase {
		t.Fatalf("stage release 4 (direct) under release 3 (two-phase): %+v, %v; want two-phase", st, err)
	}
	in4 := promoter.MoveInput{CommandID: id("act", 4), EnvTag: "prod", Release: 4, Actor: "a", Reason: "go"}
	_, err = f.store.ActivateRelease(ctx, in4, promoter.ActivateOptions{Timeout: 300 * time.Millisecond, Poll: 50 * time.Millisecond})
	var nr *promoter.NotReadyError
	if !errors.As(err, &nr) || nr.Ready != 0 || len(nr.Missing) != 2 {
		t.Fatalf("activate release 4 without READY receipts under a two-phase release: %v; want not ready", err)
	}
	f.wantPointersAt(t, r3)
}
