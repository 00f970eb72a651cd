package promoter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/promoter"
)

// errFault is the injected fault (a fake: it stands for a crash or a lost
// connection between two statements, which a test cannot time precisely).
var errFault = errors.New("injected fault")

// recordSteps returns the named steps a promotion passes, in order.
func recordSteps(t *testing.T) []string {
	f := newFixture(t, nil)
	var mu sync.Mutex
	var steps []string
	s := f.open(t, func(o *promoter.Options) {
		promoter.SetFaultInjector(o, func(_ context.Context, step string, _ pgx.Tx) error {
			mu.Lock()
			steps = append(steps, step)
			mu.Unlock()
			return nil
		})
	})
	f.promote(t, release("prod", 1, 0, 3, nil, nil))
	if _, err := s.RecordAndActivate(context.Background(), release("prod", 2, 1, 3, nil, nil)); err != nil {
		t.Fatal(err)
	}
	return steps
}

func TestAFaultBetweenAnyTwoStatementsLeavesEveryPointerOldOrNew(t *testing.T) {
	t.Parallel()
	steps := recordSteps(t)
	if len(steps) < 15 {
		t.Fatalf("got %d steps %v, want every statement boundary named", len(steps), steps)
	}
	for k, step := range steps {
		t.Run(fmt.Sprintf("%02d_%s", k, step), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			r1 := release("prod", 1, 0, 3, nil, nil)
			f.promote(t, r1)
			calls := 0
			faulty := f.open(t, func(o *promoter.Options) {
				promoter.SetFaultInjector(o, func(_ context.Context, _ string, _ pgx.Tx) error {
					calls++
					if calls == k+1 {
						return errFault
					}
					return nil
				})
			})
			r2 := release("prod", 2, 1, 3, nil, nil)
			_, err := faulty.RecordAndActivate(context.Background(), r2)
			if !errors.Is(err, errFault) {
				t.Fatalf("got %v, want the injected fault", err)
			}
			if errors.Is(err, promoter.ErrUnconfirmed) {
				t.Fatalf("got %v: a fault before COMMIT is not unconfirmed", err)
			}
			f.wantPointersAt(t, r1) // all old: the activation transaction never committed
			f.checkJournal(t)
			if n := f.count(t, "SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2"); n != 0 {
				t.Fatalf("got %d pointer moves of release 2, want 0", n)
			}
			// A re-run of the same command converges.
			res := f.promote(t, r2)
			if res.ReleaseVersion != 2 || res.Moved != 3 {
				t.Fatalf("re-run got %+v, want release 2 with 3 moved", res)
			}
			f.wantPointersAt(t, r2)
			f.checkJournal(t)
		})
	}
}

// TestConnectionKilledAtCommitIsUnconfirmedAndReconciledOnce terminates the
// activation transaction's backend (pg_terminate_backend from another
// connection) just before COMMIT is sent: a real lost connection.
func TestConnectionKilledAtCommitIsUnconfirmedAndReconciledOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	s, _ := f.atActivationCommit(t, func(ctx context.Context, tx pgx.Tx) error {
		pid := tx.Conn().PgConn().PID()
		var ok bool
		if err := f.pool.QueryRow(ctx, "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&ok); err != nil || !ok {
			return fmt.Errorf("terminate backend %d: %v %v", pid, ok, err)
		}
		return nil
	})
	r2 := release("prod", 2, 1, 3, nil, nil)
	_, err := s.RecordAndActivate(ctx, r2)
	if !errors.Is(err, promoter.ErrUnconfirmed) {
		t.Fatalf("got %v, want ErrUnconfirmed", err)
	}
	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Releases[1].Outcome; got != promoter.OutcomeUnconfirmed || st.PendingRelease != 2 {
		t.Fatalf("got release 2 outcome %s pending %d, want UNCONFIRMED pending 2", got, st.PendingRelease)
	}
	f.wantPointersAt(t, r1)
	// Another release cannot start while the outcome is unknown.
	r2b := release("prod", 2, 1, 3, nil, nil)
	r2b.CommandID = id("someone else")
	if _, err := f.store.RecordAndActivate(ctx, r2b); !errors.Is(err, promoter.ErrConflict) {
		t.Fatalf("a second release during an unconfirmed one: got %v, want ErrConflict", err)
	}

	rec, err := f.store.Reconcile(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Settled) != 1 || rec.Settled[0].ReleaseVersion != 2 || rec.Settled[0].Outcome != promoter.OutcomeNotApplied {
		t.Fatalf("got %+v, want release 2 settled NOT_APPLIED", rec)
	}
	again, err := f.store.Reconcile(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Settled) != 0 {
		t.Fatalf("second reconcile settled %+v, want nothing", again.Settled)
	}
	f.wantPointersAt(t, r1)
	f.checkJournal(t)

	// Definitely not applied: re-running the same command applies it once.
	res := f.promote(t, r2)
	if res.Replayed || res.Moved != 3 {
		t.Fatalf("re-run got %+v, want a fresh activation of 3 pointers", res)
	}
	f.wantPointersAt(t, r2)
	if n := f.count(t, "SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2"); n != 3 {
		t.Fatalf("got %d pointer moves of release 2, want 3", n)
	}
	f.checkJournal(t)
}

// TestUnconfirmedButCommittedIsNotSettledTwice: the intent commits, the
// client dies before activating (as a killed process would); a re-run of
// the same command completes the activation, and Reconcile then has
// nothing to settle.
func TestInterruptedPromotionCompletesOnReRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	s := f.open(t, func(o *promoter.Options) {
		promoter.SetFaultInjector(o, func(_ context.Context, step string, _ pgx.Tx) error {
			if step == "activate:locked" {
				return errFault
			}
			return nil
		})
	})
	r2 := release("prod", 2, 1, 3, nil, nil)
	if _, err := s.RecordAndActivate(ctx, r2); !errors.Is(err, errFault) {
		t.Fatalf("got %v, want the injected fault", err)
	}
	res := f.promote(t, r2)
	if res.Replayed || res.Moved != 3 {
		t.Fatalf("got %+v, want the activation completed", res)
	}
	rec, err := f.store.Reconcile(ctx, "prod")
	if err != nil || len(rec.Settled) != 0 {
		t.Fatalf("got %+v %v, want nothing to settle", rec, err)
	}
	f.checkJournal(t)
}

// TestCommitNeverSentIsRetriedNotUnconfirmed closes the activation
// transaction's connection on the client side just before COMMIT: pgconn
// guarantees the COMMIT never reached the server (SafeToRetry), so the
// transaction definitely did not happen and the store runs it again instead
// of reporting an unknown outcome.
func TestCommitNeverSentIsRetriedNotUnconfirmed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	closed := 0
	s, commits := f.atActivationCommit(t, func(ctx context.Context, tx pgx.Tx) error {
		closed++
		return tx.Conn().Close(ctx)
	})
	r2 := release("prod", 2, 1, 3, nil, nil)
	res, err := s.RecordAndActivate(ctx, r2)
	if err != nil {
		t.Fatalf("got %v, want the activation retried and applied", err)
	}
	if closed != 1 || *commits < 3 || res.Moved != 3 {
		t.Fatalf("closed %d, commits %d, moved %d: want one closed connection, a retried commit and 3 moves", closed, *commits, res.Moved)
	}
	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Releases[1].Outcome; got != promoter.OutcomeApplied || st.PendingRelease != 0 {
		t.Fatalf("got release 2 outcome %s pending %d, want APPLIED, nothing pending", got, st.PendingRelease)
	}
	f.wantPointersAt(t, r2)
	if n := f.count(t, "SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2"); n != 3 {
		t.Fatalf("got %d pointer moves of release 2, want 3", n)
	}
	f.checkJournal(t)
}

// atActivationCommit opens a store that calls do just before the COMMIT of
// its second transaction (the first is a promotion's intent, the second its
// activation); it returns the store and the count of COMMITs reached.
func (f *fixture) atActivationCommit(t *testing.T, do func(context.Context, pgx.Tx) error) (*promoter.Store, *int) {
	t.Helper()
	commits := new(int)
	s := f.open(t, func(o *promoter.Options) {
		promoter.SetFaultInjector(o, func(ctx context.Context, step string, tx pgx.Tx) error {
			if step != "commit" {
				return nil
			}
			*commits++
			if *commits != 2 {
				return nil
			}
			return do(ctx, tx)
		})
	})
	return s, commits
}

// TestConnectionLostMidActivationIsPending: the rollback's intent commits,
// then its activation transaction loses its connection before COMMIT (the
// database stopped, as a failover drill did). Nothing moved, but the
// environment is pending on the command: the error is ErrPending — the
// CLI's exit 3 with "re-run or reconcile" — not a refusal (exit 1, which
// said nothing of the pending state that refuses every other move). The
// same command re-run completes it.
func TestConnectionLostMidActivationIsPending(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 3, nil, nil)
	f.promote(t, r1)
	r2 := release("prod", 2, 1, 3, nil, nil)
	f.promote(t, r2)
	killed := false
	s := f.open(t, func(o *promoter.Options) {
		promoter.SetFaultInjector(o, func(ctx context.Context, step string, tx pgx.Tx) error {
			if step != "activate:locked" || killed {
				return nil
			}
			killed = true
			pid := tx.Conn().PgConn().PID()
			var ok bool
			if err := f.pool.QueryRow(ctx, "SELECT pg_terminate_backend($1, 5000)", pid).Scan(&ok); err != nil || !ok {
				return fmt.Errorf("terminate backend %d: %v %v", pid, ok, err)
			}
			return nil
		})
	})
	in := promoter.RollbackInput{CommandID: id("rollback", "lost"), EnvTag: "prod", ToRelease: 1, Actor: "oncall", Reason: "drill"}
	_, err := s.Rollback(ctx, in)
	if !errors.Is(err, promoter.ErrPending) || errors.Is(err, promoter.ErrUnconfirmed) {
		t.Fatalf("rollback whose activation lost its connection: %v, want ErrPending", err)
	}
	f.wantPointersAt(t, r2)
	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if st.PendingRelease != 1 {
		t.Fatalf("pending release %d, want 1 (the rollback's)", st.PendingRelease)
	}
	if _, err := f.store.Rollback(ctx, in); err != nil {
		t.Fatalf("the same rollback again: %v, want it to complete", err)
	}
	f.wantPointersAt(t, r1)
	f.checkJournal(t)
}
