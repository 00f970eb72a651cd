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

// TestActivateRecordedReleaseStagesAndWaitsInTwoPhase: release 2 of a
// two-phase environment was recorded by promote's catch-up (RECORDED, never
// staged: no candidate pointer, no candidate manifest). `activate --release
// 2` moved every pointer at once, without any runtime having prefetched and
// verified its snapshot: the environment's two-phase promise was skipped.
// Now the activation stages it first (candidate pointers and manifests,
// RECORDED → STAGED, a "stage" journal row) and waits for every candidate
// READY like a STAGED release: three simulated days after the recording it
// times out naming every identity (a READY receipt reported before the
// staging does not count), two days later it still names the one not
// READY, and once every candidate is READY one activation moves every
// pointer. A rollback to release 1, which was active, still moves at once.
// In an environment without two-phase activation a RECORDED release is
// activated at once and nothing is staged.
func TestActivateRecordedReleaseStagesAndWaitsInTwoPhase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, nil)
	r1 := longWindows(release("prod", 1, 0, 3, nil, nil))
	f.promote(t, r1)
	r2 := longWindows(release("prod", 2, 1, 3, nil, nil))
	r2.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase}
	r2.CommandID = id("catch-up", 2)
	if _, err := f.store.Record(ctx, r2); err != nil {
		t.Fatal(err)
	}
	// A READY receipt about release 2's snapshot reported before it was
	// staged is not an answer to its staging.
	f.writeReceiptAtClock(t, r2.Targets[0], bundle.PhaseCandidate, bundle.ResultReady, "")

	f.now = f.now.Add(3 * 24 * time.Hour)
	wait := promoter.ActivateOptions{Timeout: 300 * time.Millisecond, Poll: 100 * time.Millisecond}
	in := promoter.MoveInput{CommandID: id("act", 2), EnvTag: "prod", Release: 2, Actor: "oncall", Reason: "ship 2"}
	_, err := f.store.ActivateRelease(ctx, in, wait)
	var nr *promoter.NotReadyError
	if !errors.As(err, &nr) || strings.Join(nr.Missing, ",") != "host-00000/svc,host-00001/svc,host-00002/svc" {
		t.Fatalf("activate the recorded release 2 with no candidate READY: %v, want a timeout naming all three", err)
	}
	f.wantPointersAt(t, r1)
	if s, o := f.releaseState(t, "prod", 2); s != promoter.StateStaged || o != promoter.OutcomeNotRequested {
		t.Fatalf("release 2 is %s/%s after the wait, want STAGED/NOT_REQUESTED", s, o)
	}
	for what, sql := range map[string]string{
		"candidate pointers": `SELECT count(*) FROM configpub.candidate_pointer WHERE env_tag = 'prod' AND release_version = 2`,
		"candidate manifests": `SELECT count(*) FROM configpub.candidate_pointer WHERE env_tag = 'prod' AND release_version = 2
			AND manifest IS NOT NULL`,
	} {
		if n := f.count(t, sql); n != 3 {
			t.Fatalf("release 2 has %d %s, want 3", n, what)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM configpub.config_release_journal WHERE env_tag = 'prod' AND release_version = 2
		AND event_kind = 'stage' AND from_state = 'RECORDED' AND to_state = 'STAGED' AND recorded_at = $1`, f.now); n != 1 {
		t.Fatalf("release 2 has %d RECORDED → STAGED journal rows at %s, want 1", n, f.now)
	}

	f.now = f.now.Add(2 * 24 * time.Hour)
	f.writeReceiptAtClock(t, r2.Targets[0], bundle.PhaseCandidate, bundle.ResultReady, "")
	f.writeReceiptAtClock(t, r2.Targets[1], bundle.PhaseCandidate, bundle.ResultReady, "")
	in.CommandID = id("act", 2, "again")
	if _, err := f.store.ActivateRelease(ctx, in, wait); !errors.As(err, &nr) || strings.Join(nr.Missing, ",") != "host-00002/svc" {
		t.Fatalf("activate release 2 with two candidates READY: %v, want a timeout naming host-00002/svc", err)
	}
	f.wantPointersAt(t, r1)

	f.now = f.now.Add(time.Hour)
	f.writeReceiptAtClock(t, r2.Targets[2], bundle.PhaseCandidate, bundle.ResultReady, "")
	res, err := f.store.ActivateRelease(ctx, in, wait)
	if err != nil {
		t.Fatalf("activate release 2 with every candidate READY: %v", err)
	}
	if res.PreviousRelease != 1 || res.Moved != 3 {
		t.Fatalf("activation %+v, want 3 pointers moved from release 1", res)
	}
	f.wantPointersAt(t, r2)
	if n := f.count(t, `SELECT count(*) FROM configpub.candidate_pointer WHERE env_tag = 'prod'`); n != 0 {
		t.Fatalf("%d candidate pointers left after the activation", n)
	}

	// Back to release 1, which was active: a rollback, at once.
	f.now = f.now.Add(24 * time.Hour)
	if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("rb", 1), EnvTag: "prod", ToRelease: 1,
		Actor: "oncall", Reason: "back"}); err != nil {
		t.Fatalf("rollback to release 1: %v", err)
	}
	f.wantPointersAt(t, r1)

	// Without two-phase activation a recorded release moves at once.
	d1 := longWindows(release("dev", 1, 0, 2, nil, nil))
	f.promote(t, d1)
	d2 := longWindows(release("dev", 2, 1, 2, nil, nil))
	d2.CommandID = id("catch-up", "dev", 2)
	if _, err := f.store.Record(ctx, d2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act", "dev", 2), EnvTag: "dev", Release: 2,
		Actor: "a", Reason: "ship"}, wait); err != nil {
		t.Fatalf("activate the recorded release 2 of dev: %v", err)
	}
	f.wantPointersAt(t, d2)
	if n := f.count(t, `SELECT count(*) FROM configpub.config_release_journal WHERE env_tag = 'dev' AND event_kind = 'stage'`); n != 0 {
		t.Fatalf("dev's release 2 was staged (%d rows) without two-phase activation", n)
	}
	f.checkJournal(t)
}
