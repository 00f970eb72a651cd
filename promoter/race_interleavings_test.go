package promoter_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/promoter"
)

// waitBlockedOrDone returns when done is closed or when a backend of the
// test's database waits on a lock (the racing statement has reached the
// lock it must wait for), whichever comes first.
func waitBlockedOrDone(t *testing.T, f *fixture, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return
		default:
		}
		if f.count(t, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the racing revoke neither finished nor waited on a lock within 10 s")
}

// revokeAtStep asks for a revocation from inside another command's
// transaction, once, when that command reaches fault step step: it starts
// the revoke and lets the command go on when the revoke has finished or
// waits on a lock (waitBlockedOrDone). Wait for it with <-r.done.
type revokeAtStep struct {
	once  sync.Once
	done  chan struct{}
	first bool // the revoke finished before the command went on
	rev   *promoter.Revocation
	err   error
}

// inject is a fault injector (promoter.SetFaultInjector) that revokes with
// in at step.
func (r *revokeAtStep) inject(t *testing.T, f *fixture, step string, in promoter.RevokeInput) func(context.Context, string, pgx.Tx) error {
	r.done = make(chan struct{})
	return func(_ context.Context, s string, _ pgx.Tx) error {
		if s != step {
			return nil
		}
		r.once.Do(func() {
			go func() {
				defer close(r.done)
				r.rev, r.err = f.store.Revoke(context.Background(), in)
			}()
			waitBlockedOrDone(t, f, r.done)
			select {
			case <-r.done:
				r.first = true
			default:
			}
		})
		return nil
	}
}

// TestARevokeCommittedDuringARollbackToItsSnapshotIsSeenByOneOfThem races
// a revoke of a snapshot with a rollback to the release that contains it:
// the revoke commits after the rollback checked for revocations and before
// it committed. Either the rollback is refused, or the revoke lists the
// pointer the rollback moved to the snapshot it revoked; never a current
// pointer at a revoked snapshot, freshly leased, with a revoke that said no
// current pointer was at it.
func TestARevokeCommittedDuringARollbackToItsSnapshotIsSeenByOneOfThem(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r1 := release("prod", 1, 0, 4, nil, nil)
	f.promote(t, r1)
	f.promote(t, release("prod", 2, 1, 4, nil, nil))
	bad := r1.Targets[0].SnapshotID

	// At activate:read the rollback has checked its snapshots against the
	// revocations and holds the environment's lock.
	var r revokeAtStep
	racing := f.open(t, func(o *promoter.Options) {
		promoter.SetFaultInjector(o, r.inject(t, f, "activate:read", promoter.RevokeInput{CommandID: id("race revoke"),
			SnapshotID: bad, Reason: "leaks a credential", Actor: "Carol <carol@example.com>"}))
	})
	res, err := racing.Rollback(context.Background(), promoter.RollbackInput{CommandID: id("race rollback"), EnvTag: "prod",
		ToRelease: 1, Actor: "Dave <dave@example.com>", Reason: "release 2 misbehaves"})
	<-r.done
	rev := r.rev
	if r.err != nil {
		t.Fatalf("revoke: %v", r.err)
	}
	atBad := f.pointers(t, "prod")[r1.Targets[0].Host+"/"+r1.Targets[0].ServiceID] == bad
	switch {
	case err != nil && !errors.Is(err, promoter.ErrRevoked):
		t.Fatalf("rollback: got %v, want success or ErrRevoked", err)
	case err != nil && atBad:
		t.Fatalf("the rollback was refused (%v) and the pointer is at the revoked snapshot anyway", err)
	case err == nil && res.Moved != 4:
		t.Fatalf("rollback moved %d pointers, want 4", res.Moved)
	}
	if atBad && !slices.Contains(rev.Current, r1.Targets[0].Host+"/"+r1.Targets[0].ServiceID+"/prod") {
		t.Fatalf("a pointer is current at revoked snapshot %s, and the revoke listed %v (count %d) as current there: "+
			"the operator who revoked it is not told the environment serves it", bad, rev.Current, rev.CurrentCount)
	}
	f.checkJournal(t)
}

// TestARevokeCommittedDuringARenewalIsNotLeasedAgain races a revoke of a
// current snapshot with a lease renewal of its environment: the revoke is
// asked for after the renewal read which snapshots are revoked and signed
// the new leases, before it committed. Either the revoke waits for the
// renewal (the lease was issued before the revocation), or the renewal
// skipped the snapshot; never a lease signed and committed after the
// snapshot was revoked.
func TestARevokeCommittedDuringARenewalIsNotLeasedAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	bad := r1.Targets[1].SnapshotID
	var r revokeAtStep
	racing := f.open(t, func(o *promoter.Options) {
		promoter.SetFaultInjector(o, r.inject(t, f, "renew:signed", promoter.RevokeInput{CommandID: id("race revoke renewal"),
			SnapshotID: bad, Reason: "leaks a credential", Actor: "Carol <carol@example.com>"}))
	})
	res, err := racing.RenewLeases(context.Background(), "prod")
	<-r.done
	revokedFirst := r.first
	if err != nil || r.err != nil {
		t.Fatalf("renew: %v; revoke: %v", err, r.err)
	}
	if revokedFirst && res.SkippedCount != 1 {
		t.Fatalf("the revoke of %s committed before the renewal, which renewed %d and skipped %v: a revoked snapshot was leased again",
			bad, res.Renewed, res.Skipped)
	}
	if !revokedFirst && res.Renewed != 3 {
		t.Fatalf("the renewal committed first and renewed %d, want 3", res.Renewed)
	}
}

// TestARetriedRollbackRefusedForARevocationGetsTheRefusal runs a rollback
// command twice at once (a job retried while its first run is in flight)
// while a revoke of a snapshot of the release it returns to commits between
// its intent and its activation: the first run is refused (ErrRevoked) and
// settles the command NOT_APPLIED; the second, waiting on the environment's
// lock meanwhile, gets the same answer, not "settled before it could be
// activated, re-run to retry" (re-running would be refused again).
func TestARetriedRollbackRefusedForARevocationGetsTheRefusal(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	f.promote(t, release("prod", 2, 1, 3, nil, nil))
	in := promoter.RollbackInput{CommandID: id("retried rollback"), EnvTag: "prod", ToRelease: 1,
		Actor: "Dave <dave@example.com>", Reason: "release 2 misbehaves"}
	var (
		once, retry sync.Once
		done        = make(chan struct{})
		second      error
		revoked     error
	)
	first := f.open(t, func(o *promoter.Options) {
		promoter.SetFaultInjector(o, func(_ context.Context, step string, _ pgx.Tx) error {
			if step == "activate:begin" {
				// The intent committed; the activation has not taken the
				// environment's lock yet (a revoke waits for whoever holds it).
				once.Do(func() {
					_, revoked = f.store.Revoke(context.Background(), promoter.RevokeInput{CommandID: id("revoke under retry"),
						SnapshotID: r1.Targets[2].SnapshotID, Reason: "leaks a credential", Actor: "Carol <carol@example.com>"})
				})
			}
			if step != "activate:locked" {
				return nil
			}
			retry.Do(func() {
				go func() {
					defer close(done)
					_, second = f.open(t, nil).Rollback(context.Background(), in)
				}()
				waitBlockedOrDone(t, f, done)
			})
			return nil
		})
	})
	_, err := first.Rollback(context.Background(), in)
	<-done
	if revoked != nil {
		t.Fatalf("revoke: %v", revoked)
	}
	if !errors.Is(err, promoter.ErrRevoked) {
		t.Fatalf("first run: got %v, want ErrRevoked", err)
	}
	if !errors.Is(second, promoter.ErrRevoked) || !strings.Contains(second.Error(), r1.Targets[2].SnapshotID) {
		t.Fatalf("second run of the same command: got %v, want the first run's answer (ErrRevoked naming snapshot %s)", second, r1.Targets[2].SnapshotID)
	}
	// Run again later, it is refused the same way.
	if _, err := f.open(t, nil).Rollback(context.Background(), in); !errors.Is(err, promoter.ErrRevoked) {
		t.Fatalf("third run: got %v, want ErrRevoked", err)
	}
	f.checkJournal(t)
}

// TestAPromotionRunAgainWhileGCCollectsItsOldArtifactsIsToldWhy: a
// promotion that stopped after storing its artifacts is run again days
// later (CI retried on Monday what failed on Friday). Storing them again
// keeps the rows as they are, stamped Friday, so the nightly db gc running
// meanwhile deletes them between that store and the recording. The
// recording is refused with ErrConflict naming db gc and telling to run it
// again, not as the caller's invalid input ("store it with
// StoreArtifacts"), and the run again records.
func TestAPromotionRunAgainWhileGCCollectsItsOldArtifactsIsToldWhy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, nil)
	in := f.storedAhead(t, 3) // Friday's attempt
	gc, _ := f.collector(t, func() time.Duration { return 3 * 24 * time.Hour })
	// Monday: the run again stores them again, and db gc runs before it
	// records.
	if err := f.store.StoreArtifacts(ctx, storedArtifacts(in)); err != nil {
		t.Fatal(err)
	}
	if c, err := gc.CollectArtifacts(ctx, promoter.CollectOptions{}); err != nil || c.Artifacts != 3 {
		t.Fatalf("db gc: collected %d, %v; want the 3 artifacts no release references yet", c.Artifacts, err)
	}
	_, err := f.store.RecordAndActivate(ctx, headless(in))
	if !errors.Is(err, promoter.ErrConflict) || !strings.Contains(err.Error(), "deleted by configpub db gc") ||
		!strings.Contains(err.Error(), "run the promotion again") {
		t.Fatalf("recording: got %v, want ErrConflict saying db gc deleted the artifact and to run the promotion again", err)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.config_release"); n != 0 {
		t.Fatalf("%d releases recorded, want none", n)
	}
	if err := f.store.StoreArtifacts(ctx, storedArtifacts(in)); err != nil {
		t.Fatal(err)
	}
	f.promote(t, headless(in))
	f.wantPointersAt(t, in)
}

// TestTwoHealthGatesJudgingOneActivationAtOnce: two gates (the `gate
// --watch` deployment and an operator's `gate --once`) judge the same
// activation at once, and a runtime's rejection arrives between their
// reads of the evidence, so their reasons differ. Both decide to roll back
// under the one command id the activation gives them: the first rolls
// back; the second reports the environment rolled back by that command,
// with its recorded result, not the command-hash conflict of a different
// reason under the same id.
func TestTwoHealthGatesJudgingOneActivationAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return f.now }
	f.store = f.open(t, func(o *promoter.Options) { o.Clock = clock })
	r1 := longWindows(release("prod", 1, 0, 4, nil, nil))
	f.promote(t, r1)
	mu.Lock()
	f.now = t0.Add(time.Hour)
	mu.Unlock()
	r2 := gated("prod", 2, 1, 4)
	f.promote(t, r2)
	f.writeReceipt(t, r2.Targets[0], bundle.PhaseCurrent, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
	f.writeReceipt(t, r2.Targets[1], bundle.PhaseCurrent, bundle.ResultRejected, "SIGNATURE_INVALID")
	mu.Lock()
	f.now = t0.Add(time.Hour + 3*time.Minute) // inside the soak
	mu.Unlock()
	var (
		once   sync.Once
		done   = make(chan struct{})
		second *promoter.GateVerdict
		err2   error
	)
	first := f.open(t, func(o *promoter.Options) {
		o.Clock = clock
		promoter.SetFaultInjector(o, func(_ context.Context, step string, _ pgx.Tx) error {
			if step != "move:command" {
				return nil
			}
			once.Do(func() {
				// The first gate has read two rejections and claimed the
				// rollback; a third arrives, and the second gate reads it.
				f.writeReceipt(t, r2.Targets[2], bundle.PhaseCurrent, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
				go func() {
					defer close(done)
					second, err2 = f.open(t, func(o *promoter.Options) { o.Clock = clock }).CheckHealth(context.Background(), "prod")
				}()
				waitBlockedOrDone(t, f, done)
			})
			return nil
		})
	})
	v1, err := first.CheckHealth(context.Background(), "prod")
	<-done
	if err != nil || v1.Verdict != promoter.GateRolledBack {
		t.Fatalf("first gate: %+v, %v; want ROLLED_BACK", v1, err)
	}
	if err2 != nil {
		t.Fatalf("second gate: %v; want the verdict that the activation was rolled back", err2)
	}
	if second.Verdict != promoter.GateRolledBack || second.Rollback == nil || second.Rollback.ReleaseVersion != 1 ||
		second.Rollback.CommandID != v1.Rollback.CommandID || second.Reason != v1.Reason {
		t.Fatalf("second gate: %+v (rollback %+v); want ROLLED_BACK to release 1 by command %s with the reason journaled, %q",
			second, second.Rollback, v1.Rollback.CommandID, v1.Reason)
	}
	f.wantPointersAt(t, r1)
	if n := f.count(t, `SELECT count(*) FROM configpub.config_release_journal WHERE event_kind = 'rollback'`); n != 1 {
		t.Fatalf("%d rollbacks journaled, want 1", n)
	}
	f.checkJournal(t)
}

// TestTwoPhaseActivationRacingARollbackWaitsForWhatItNowMoves: a two-phase
// activation of release 3 waits for READY candidates of the targets it
// moves from release 2 (only the one whose snapshot changed); once they
// are READY, and before it moves, an operator rolls back to release 1, so
// the activation now moves every target, two of them to snapshots their
// runtimes never reported READY for as candidates. It must not move them
// without that: it waits again for the targets it now moves, and moves
// once they are READY, in one transaction.
func TestTwoPhaseActivationRacingARollbackWaitsForWhatItNowMoves(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	f.promote(t, release("prod", 1, 0, 3, nil, nil))
	f.promote(t, release("prod", 2, 1, 3, nil, nil))
	r3 := release("prod", 3, 2, 3, func(i int) bool { return i == 0 }, func(int) int64 { return 2 })
	r3.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase}
	r3.CommandID = id("stage", 3)
	if _, err := f.store.Stage(ctx, r3); err != nil {
		t.Fatal(err)
	}
	f.writeReceipt(t, r3.Targets[0], bundle.PhaseCandidate, bundle.ResultReady, "")
	var once sync.Once
	var rolled error
	var required []int
	opts := promoter.ActivateOptions{Timeout: 5 * time.Second, Poll: 20 * time.Millisecond,
		Progress: func(p promoter.ReadinessProgress) {
			required = append(required, p.Required)
			if p.Ready == p.Required {
				once.Do(func() {
					_, rolled = f.open(t, nil).Rollback(ctx, promoter.RollbackInput{CommandID: id("rollback under two-phase"),
						EnvTag: "prod", ToRelease: 1, Actor: "Dave <dave@example.com>", Reason: "release 2 misbehaves"})
				})
			}
			if len(required) == 5 {
				// The targets it now moves report READY.
				f.writeReceipt(t, r3.Targets[1], bundle.PhaseCandidate, bundle.ResultReady, "")
				f.writeReceipt(t, r3.Targets[2], bundle.PhaseCandidate, bundle.ResultReady, "")
			}
		}}
	res, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("activate 3"), EnvTag: "prod", Release: 3,
		Actor: "Erin <erin@example.com>", Reason: "go"}, opts)
	if rolled != nil {
		t.Fatalf("rollback: %v", rolled)
	}
	if err != nil {
		t.Fatalf("activate: %v", err)
	}
	if len(required) < 5 || required[len(required)-1] != 3 {
		t.Fatalf("readiness checks required %v targets; want it to wait again for the 3 it moves after the rollback", required)
	}
	if res.PreviousRelease != 1 || res.Moved != 3 {
		t.Fatalf("activation: %+v, want 3 moved from release 1", res)
	}
	f.wantPointersAt(t, r3)
	f.checkJournal(t)
}

// TestAMoveRefusedForAnotherInFlightNamesItsCommand: an operator's rollback
// meets another command's activation between its intent and its commit
// (here stopped there). The refusal names that command and says to wait
// for the process running it before reaching for reconcile, which would
// settle a move still running NOT_APPLIED.
func TestAMoveRefusedForAnotherInFlightNamesItsCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	f.promote(t, release("prod", 1, 0, 2, nil, nil))
	f.promote(t, release("prod", 2, 1, 2, nil, nil))
	stopped := f.open(t, func(o *promoter.Options) {
		promoter.SetFaultInjector(o, func(_ context.Context, step string, _ pgx.Tx) error {
			if step == "activate:locked" {
				return errors.New("the process stopped")
			}
			return nil
		})
	})
	first := id("first rollback")
	if _, err := stopped.Rollback(context.Background(), promoter.RollbackInput{CommandID: first, EnvTag: "prod", ToRelease: 1,
		Actor: "Dave <dave@example.com>", Reason: "release 2 misbehaves"}); err == nil {
		t.Fatal("the stopped rollback succeeded")
	}
	_, err := f.store.Rollback(context.Background(), promoter.RollbackInput{CommandID: id("second rollback"), EnvTag: "prod",
		ToRelease: 1, Actor: "Erin <erin@example.com>", Reason: "release 2 misbehaves"})
	if !errors.Is(err, promoter.ErrConflict) || !strings.Contains(err.Error(), "command "+first) ||
		!strings.Contains(err.Error(), "wait for the process running it") {
		t.Fatalf("second rollback: got %v, want ErrConflict naming command %s in flight and saying to wait for it", err, first)
	}
}
