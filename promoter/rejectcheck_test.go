package promoter_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/promoter"
)

// TestTwoPhaseActivationRefusesARejectionBeforeItCommits: a receipt writer
// takes no lock, so a runtime's REJECTED candidate receipt could commit
// after the readiness wait's last check (every candidate READY) and before
// the activation's transaction committed its moves; the pointers moved to
// a snapshot a runtime had just rejected. Here the rejection is written,
// through its own connection, while the activation's transaction holds
// the environment's lock and has already written every move (the
// activate:environment step), two simulated days after the staging. The
// activation now re-reads the candidates' receipts as its last statement:
// the moves are rolled back, release 2 is FAILED (NOT_APPLIED, journaled
// naming the identity and the snapshot), its candidate pointers are gone,
// no pointer moved, candidate.rejected and release.failed are sent, and
// the environment is free: a later release activates.
func TestTwoPhaseActivationRefusesARejectionBeforeItCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := &recorder{}
	var f *fixture
	var reject *promoter.Target
	f = newFixture(t, func(o *promoter.Options) {
		o.Notifier = rec
		promoter.SetFaultInjector(o, func(_ context.Context, step string, _ pgx.Tx) error {
			if step == "activate:environment" && reject != nil {
				f.writeReceiptAtClock(t, *reject, bundle.PhaseCandidate, "REJECTED", "policy schema unknown to this runtime")
				reject = nil
			}
			return nil
		})
	})
	r1, r2 := f.stageTwoPhase(t, "prod", 3)
	f.now = f.now.Add(2 * 24 * time.Hour)
	for _, tg := range r2.Targets {
		f.writeReceiptAtClock(t, tg, bundle.PhaseCandidate, bundle.ResultReady, "")
	}
	f.now = f.now.Add(time.Hour)
	reject = &r2.Targets[1]
	in := promoter.MoveInput{CommandID: id("act", 2), EnvTag: "prod", Release: 2, Actor: "oncall", Reason: "ship 2"}
	wait := promoter.ActivateOptions{Timeout: 2 * time.Second, Poll: 50 * time.Millisecond}
	_, err := f.store.ActivateRelease(ctx, in, wait)
	var rej *promoter.RejectedError
	if !errors.As(err, &rej) || !errors.Is(err, promoter.ErrCandidateRejected) || rej.Identity != "host-00001/svc" ||
		rej.SnapshotID != r2.Targets[1].SnapshotID || !strings.Contains(err.Error(), "nothing moved") {
		t.Fatalf("activation with a rejection committed before its moves: %v, want a *RejectedError naming host-00001/svc", err)
	}
	if reject != nil {
		t.Fatal("the activation never reached the activate:environment step")
	}
	f.wantPointersAt(t, r1)
	// Re-running the command moves nothing: release 2 is FAILED.
	if _, err := f.store.ActivateRelease(ctx, in, wait); !errors.Is(err, promoter.ErrReleaseFailed) {
		t.Fatalf("re-run of the refused activation: %v, want ErrReleaseFailed", err)
	}
	f.wantPointersAt(t, r1)
	if s, o := f.releaseState(t, "prod", 2); s != promoter.StateFailed || o != promoter.OutcomeNotApplied {
		t.Fatalf("release 2 is %s/%s, want FAILED/NOT_APPLIED", s, o)
	}
	for what, sql := range map[string]string{
		"pointer moves to release 2":       `SELECT count(*) FROM configpub.pointer_move WHERE env_tag = 'prod' AND release_version = 2`,
		"candidate pointers of release 2":  `SELECT count(*) FROM configpub.candidate_pointer WHERE env_tag = 'prod' AND release_version = 2`,
		"pending activations":              `SELECT count(*) FROM configpub.environment WHERE pending_release_version IS NOT NULL`,
		"commands not settled NOT_APPLIED": `SELECT count(*) FROM configpub.command WHERE command_id = '` + in.CommandID + `' AND outcome <> 'NOT_APPLIED'`,
	} {
		if n := f.count(t, sql); n != 0 {
			t.Fatalf("after the refusal: %d %s", n, what)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM configpub.config_release_journal WHERE env_tag = 'prod' AND release_version = 2
		AND event_kind = 'candidate-rejected' AND evidence ->> 'identity' = 'host-00001/svc' AND evidence ->> 'snapshotId' = $1`,
		r2.Targets[1].SnapshotID); n != 1 {
		t.Fatalf("%d candidate-rejected journal rows naming host-00001/svc, want 1", n)
	}
	var kinds []string
	rec.mu.Lock()
	for _, ev := range rec.events {
		if ev.Release == 2 {
			kinds = append(kinds, ev.Kind)
		}
	}
	rec.mu.Unlock()
	if !slices.Contains(kinds, promoter.EventRejected) || !slices.Contains(kinds, promoter.EventFailed) ||
		slices.Contains(kinds, promoter.EventActivated) {
		t.Fatalf("events of release 2 %v, want candidate.rejected and release.failed, no release.activated", kinds)
	}

	// The environment is free: release 3, staged on release 2 with every
	// candidate READY, activates a day later.
	f.now = f.now.Add(24 * time.Hour)
	r3 := release("prod", 3, 2, 3, nil, nil)
	r3.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase}
	r3.CommandID = id("stage", 3)
	if _, err := f.store.Stage(ctx, r3); err != nil {
		t.Fatal(err)
	}
	for _, tg := range r3.Targets {
		f.writeReceiptAtClock(t, tg, bundle.PhaseCandidate, bundle.ResultReady, "")
	}
	res, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act", 3), EnvTag: "prod", Release: 3,
		Actor: "oncall", Reason: "ship 3"}, wait)
	if err != nil || res.Moved != 3 || res.PreviousRelease != 1 {
		t.Fatalf("activate release 3: %+v, %v; want 3 moved from release 1", res, err)
	}
	f.wantPointersAt(t, r3)
	f.checkJournal(t)
}
