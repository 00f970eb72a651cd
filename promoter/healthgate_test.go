package promoter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promoter"
)

var gate = bundle.Rollout{HealthGate: &bundle.HealthGate{Soak: "10m", Rejections: 2, MissingAcks: 2}}

// gated is release v of env on base with the health gate and windows long
// enough for a walk over months.
func gated(env string, v, base int64, n int) promoter.ReleaseInput {
	in := longWindows(release(env, v, base, n, nil, nil))
	in.Rollout = gate
	return in
}

// TestHealthGateRollsBackWithinTheSoak: release 2 is activated, two of its
// three runtimes reject it; the running gate (real poll loop, injected
// clock inside the soak) puts the whole environment back on release 1
// within one second, as actor health-gate with the evidence in the reason.
func TestHealthGateRollsBackWithinTheSoak(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	f := newFixture(t, func(o *promoter.Options) { o.Notifier = rec })
	var mu sync.Mutex
	f.store = f.open(t, func(o *promoter.Options) {
		o.Notifier = rec
		o.Clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return f.now }
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r1 := longWindows(release("prod", 1, 0, 3, nil, nil))
	f.promote(t, r1)
	mu.Lock()
	f.now = t0.Add(time.Hour)
	mu.Unlock()
	r2 := gated("prod", 2, 1, 3)
	f.promote(t, r2)
	f.writeReceipt(t, r2.Targets[0], bundle.PhaseCurrent, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
	f.writeReceipt(t, r2.Targets[1], bundle.PhaseCurrent, bundle.ResultRejected, "SIGNATURE_INVALID")
	f.writeReceipt(t, r2.Targets[2], bundle.PhaseCurrent, bundle.ResultApplied, "")
	mu.Lock()
	f.now = t0.Add(time.Hour + 3*time.Minute) // inside the 10m soak
	mu.Unlock()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f.store.WatchHealth(ctx, []string{"prod"}, 50*time.Millisecond, nil, nil) }()
	for !promotertest.PointersAt(f.pointers(t, "prod"), snapshotsOfInput(r1)) {
		if time.Since(start) > time.Second {
			t.Fatalf("environment not back on release 1 within 1s: %v", f.pointers(t, "prod"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The pointers are read back as soon as the rollback commits, possibly
	// before the gate has the COMMIT's reply: cancelled then, it would
	// rightly call the outcome unconfirmed. Wait for its notification.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(strings.Join(rec.kinds(), ","), promoter.EventRolledBack) &&
		time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	var actor, reason string
	if err := f.pool.QueryRow(context.Background(), `SELECT DISTINCT actor, reason FROM configpub.pointer_move
		WHERE action = 'rollback' AND release_version = 1`).Scan(&actor, &reason); err != nil {
		t.Fatal(err)
	}
	if actor != promoter.HealthGateActor {
		t.Fatalf("rollback actor %q, want health-gate", actor)
	}
	for _, want := range []string{"2 of 3 moved targets rejected release 2", "host-00000/svc (SCHEMA_UNSUPPORTED)", "host-00001/svc (SIGNATURE_INVALID)"} {
		if !strings.Contains(reason, want) {
			t.Errorf("rollback reason %q lacks %q", reason, want)
		}
	}
	if n := f.count(t, `SELECT count(DISTINCT command_id) FROM configpub.pointer_move WHERE action = 'rollback'`); n != 1 {
		t.Fatalf("rollback spread over %d commands, want one transaction", n)
	}
	if s, _ := f.releaseState(t, "prod", 2); s != promoter.StateRolledBack {
		t.Fatalf("release 2 is %s, want ROLLED_BACK", s)
	}
	if !strings.Contains(strings.Join(rec.kinds(), ","), promoter.EventRolledBack) {
		t.Fatalf("events %v: want the rollback notified", rec.kinds())
	}
	// The gate does not act again on the rolled-back environment.
	if v, err := f.store.CheckHealth(context.Background(), "prod"); err != nil || v.Verdict != promoter.GateNone {
		t.Fatalf("after the rollback: %+v, %v; want nothing to watch", v, err)
	}
	f.checkJournal(t)
}

// TestHealthGateOverSimulatedMonths promotes one gated release a month for
// six months. In odd months two runtimes reject the new release (the gate
// rolls back to the active release within the soak); in even months one
// runtime flaps (REJECTED, APPLIED, REJECTED) below the threshold and the
// others apply it, so the soak passes and the release stays, and a later
// rejection after the soak changes nothing. One month every runtime but one
// stays silent: missing acknowledgements roll back at the end of the soak.
// The walk runs months ahead of the database's clock, so its receipts are
// stamped at the simulated time (writeReceiptAtClock).
func TestHealthGateOverSimulatedMonths(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	check := func(at time.Time) *promoter.GateVerdict {
		t.Helper()
		f.now = at
		v, err := f.store.CheckHealth(ctx, "prod")
		if err != nil {
			t.Fatalf("%s: %v", at, err)
		}
		return v
	}
	first := longWindows(release("prod", 1, 0, 3, nil, nil))
	f.promote(t, first)
	active := first
	for m := 1; m <= 6; m++ {
		start := t0.AddDate(0, m, 0)
		f.now = start
		in := gated("prod", int64(m+1), int64(m), 3)
		for i := range in.Targets {
			in.Targets[i].ExpiresAt = t0.AddDate(2, 0, 0)
		}
		f.promote(t, in)
		switch {
		case m == 5: // silent runtimes
			f.writeReceiptAtClock(t, in.Targets[0], bundle.PhaseCurrent, bundle.ResultApplied, "")
			if v := check(start.Add(9 * time.Minute)); v.Verdict != promoter.GateWatching {
				t.Fatalf("month %d, 9m: %s, want WATCHING", m, v.Verdict)
			}
			v := check(start.Add(10 * time.Minute))
			if v.Verdict != promoter.GateRolledBack || !strings.Contains(v.Reason, "2 of 3 moved targets did not acknowledge") ||
				!strings.Contains(v.Reason, "host-00001/svc, host-00002/svc") {
				t.Fatalf("month %d at the soak's end: %+v, want a rollback naming the two silent targets", m, v)
			}
			f.wantPointersAt(t, active)
		case m%2 == 1:
			f.writeReceiptAtClock(t, in.Targets[0], bundle.PhaseCurrent, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
			if v := check(start.Add(time.Minute)); v.Verdict != promoter.GateWatching {
				t.Fatalf("month %d, one rejection: %s, want WATCHING", m, v.Verdict)
			}
			f.writeReceiptAtClock(t, in.Targets[2], bundle.PhaseCurrent, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
			v := check(start.Add(2 * time.Minute))
			if v.Verdict != promoter.GateRolledBack || v.Previous != active.ReleaseVersion {
				t.Fatalf("month %d: %+v, want a rollback to release %d", m, v, active.ReleaseVersion)
			}
			f.wantPointersAt(t, active)
		default:
			f.writeReceiptAtClock(t, in.Targets[0], bundle.PhaseCurrent, bundle.ResultRejected, "FLAP")
			f.writeReceiptAtClock(t, in.Targets[0], bundle.PhaseCurrent, bundle.ResultApplied, "")
			f.writeReceiptAtClock(t, in.Targets[0], bundle.PhaseCurrent, bundle.ResultRejected, "FLAP")
			f.writeReceiptAtClock(t, in.Targets[1], bundle.PhaseCurrent, bundle.ResultApplied, "")
			f.writeReceiptAtClock(t, in.Targets[2], bundle.PhaseCurrent, bundle.ResultApplied, "")
			for min := 0; min < 10; min++ {
				if v := check(start.Add(time.Duration(min) * time.Minute)); v.Verdict != promoter.GateWatching {
					t.Fatalf("month %d minute %d: %s, want WATCHING", m, min, v.Verdict)
				}
			}
			if v := check(start.Add(10 * time.Minute)); v.Verdict != promoter.GatePassed {
				t.Fatalf("month %d at the soak's end: %s, want PASSED", m, v.Verdict)
			}
			f.writeReceiptAtClock(t, in.Targets[1], bundle.PhaseCurrent, bundle.ResultRejected, "LATE")
			if v := check(start.Add(11 * time.Minute)); v.Verdict != promoter.GateDone {
				t.Fatalf("month %d after the soak: %s, want DONE", m, v.Verdict)
			}
			f.wantPointersAt(t, in)
			active = in
		}
	}
	f.checkJournal(t)
}

func snapshotsOfInput(in promoter.ReleaseInput) map[string]string {
	m := map[string]string{}
	for _, tg := range in.Targets {
		m[tg.Host+"/"+tg.ServiceID] = tg.SnapshotID
	}
	return m
}

// TestHealthGateVerdictListsTheFirstAndCountsAll: a gated release of 150
// targets, none acknowledged and two rejected (one below the threshold at
// first): the verdict counts every missing and rejected target and lists
// the first GateListed of each in identity order, and the rollback's
// reason counts them all too.
func TestHealthGateVerdictListsTheFirstAndCountsAll(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	const n = 150
	f.promote(t, longWindows(release("prod", 1, 0, n, nil, nil)))
	start := f.now
	in := gated("prod", 2, 1, n)
	f.promote(t, in)
	f.writeReceipt(t, in.Targets[120], bundle.PhaseCurrent, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
	f.now = start.Add(time.Minute)
	v, err := f.store.CheckHealth(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict != promoter.GateWatching || v.Moved != n || v.MissingCount != n || v.RejectedCount != 1 {
		t.Fatalf("verdict %s: moved %d, missing %d, rejected %d; want WATCHING, %d, %d, 1",
			v.Verdict, v.Moved, v.MissingCount, v.RejectedCount, n, n)
	}
	if len(v.Missing) != promoter.GateListed {
		t.Fatalf("%d missing listed, want the first %d", len(v.Missing), promoter.GateListed)
	}
	for i, id := range v.Missing {
		if want := fmt.Sprintf("host-%05d/svc", i); id != want {
			t.Fatalf("missing[%d] = %s, want %s", i, id, want)
		}
	}
	if len(v.Rejected) != 1 || v.Rejected[0] != "host-00120/svc (SCHEMA_UNSUPPORTED)" {
		t.Fatalf("rejected %v, want host-00120/svc (SCHEMA_UNSUPPORTED)", v.Rejected)
	}

	f.writeReceipt(t, in.Targets[3], bundle.PhaseCurrent, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
	f.now = start.Add(2 * time.Minute)
	if v, err = f.store.CheckHealth(ctx, "prod"); err != nil {
		t.Fatal(err)
	}
	if v.Verdict != promoter.GateRolledBack || v.RejectedCount != 2 ||
		!strings.Contains(v.Reason, "2 of 150 moved targets rejected release 2") ||
		!strings.Contains(v.Reason, "host-00003/svc (SCHEMA_UNSUPPORTED), host-00120/svc (SCHEMA_UNSUPPORTED)") {
		t.Fatalf("verdict %s (%d rejected): %q; want a rollback naming both rejections", v.Verdict, v.RejectedCount, v.Reason)
	}
}

// TestHealthGateDoesNotRollBackAReleaseActivatedAfterItsVerdict: the gate
// finds two runtimes rejecting release 2 and decides to roll back to
// release 1; between its reading and its rollback's transaction an
// operator activates release 3 (a fix). The gate's evidence is about
// release 2 only: it must not roll release 3 back, and release 3 stays
// active with its own soak to watch.
func TestHealthGateDoesNotRollBackAReleaseActivatedAfterItsVerdict(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	operator := f.open(t, nil)
	r3 := gated("prod", 3, 2, 3)
	var once sync.Once
	f.store = f.open(t, func(o *promoter.Options) {
		promoter.SetFaultInjector(o, func(ctx context.Context, step string, _ pgx.Tx) error {
			if step == "move:command" {
				once.Do(func() {
					if _, err := operator.RecordAndActivate(ctx, r3); err != nil {
						t.Errorf("operator promotes release 3 during the gate's check: %v", err)
					}
				})
			}
			return nil
		})
	})
	f.promote(t, longWindows(release("prod", 1, 0, 3, nil, nil)))
	f.now = t0.Add(time.Hour)
	r2 := gated("prod", 2, 1, 3)
	f.promote(t, r2)
	f.writeReceipt(t, r2.Targets[0], bundle.PhaseCurrent, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
	f.writeReceipt(t, r2.Targets[1], bundle.PhaseCurrent, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
	f.now = t0.Add(time.Hour + 3*time.Minute)

	v, err := f.store.CheckHealth(ctx, "prod")
	t.Logf("verdict %+v, err %v", v, err)
	if !promotertest.PointersAt(f.pointers(t, "prod"), snapshotsOfInput(r3)) {
		t.Fatalf("the gate's verdict about release 2 moved release 3's pointers: %v", f.pointers(t, "prod"))
	}
	if s, _ := f.releaseState(t, "prod", 3); s != promoter.StateActive {
		t.Fatalf("release 3 is %s, want ACTIVE", s)
	}
	if err == nil || !strings.Contains(err.Error(), "release 3") {
		t.Fatalf("gate check: %+v, %v; want an error saying release 3 became active meanwhile", v, err)
	}
	// The next check watches release 3's own soak.
	if v, err := f.store.CheckHealth(ctx, "prod"); err != nil || v.Release != 3 || v.Verdict != promoter.GateWatching {
		t.Fatalf("next check: %+v, %v; want release 3 watched", v, err)
	}
	f.checkJournal(t)
}

// TestHealthGateCountsOnlyReceiptsSinceTheActivation: two runtimes reject
// release 2 and the gate rolls it back; the runtimes are fixed and release
// 2 is activated again. Their receipts from before are about the same
// snapshots but not about this activation: the gate must watch the new
// soak (not roll back at its first check on the old rejections) and pass
// it on the receipts read back since, as status counts acknowledgements
// and rejections since the pointer moved. The clock follows the database's
// (receipts are stamped by it) so that "since" is real.
func TestHealthGateCountsOnlyReceiptsSinceTheActivation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	check := func(at time.Time) *promoter.GateVerdict {
		t.Helper()
		f.now = at
		v, err := f.store.CheckHealth(ctx, "prod")
		if err != nil {
			t.Fatalf("%s: %v", at, err)
		}
		return v
	}
	base := time.Now().UTC().Add(-time.Hour)
	f.now = base
	r1 := longWindows(release("prod", 1, 0, 3, nil, nil))
	f.promote(t, r1)
	f.now = base.Add(time.Minute)
	r2 := gated("prod", 2, 1, 3)
	f.promote(t, r2)
	f.writeReceipt(t, r2.Targets[0], bundle.PhaseCurrent, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
	f.writeReceipt(t, r2.Targets[1], bundle.PhaseCurrent, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
	if v := check(base.Add(3 * time.Minute)); v.Verdict != promoter.GateRolledBack {
		t.Fatalf("two rejections: %+v, want a rollback", v)
	}
	f.wantPointersAt(t, r1)

	// The runtimes are upgraded; release 2 is activated again.
	time.Sleep(20 * time.Millisecond)
	again := time.Now().UTC()
	f.now = again
	if _, err := f.store.Activate(ctx, promoter.MoveInput{CommandID: id("again"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "runtimes upgraded"}); err != nil {
		t.Fatal(err)
	}
	if v := check(again.Add(time.Second)); v.Verdict != promoter.GateWatching || v.RejectedCount != 0 || v.MissingCount != 3 {
		t.Fatalf("first check after the re-activation: %+v; want WATCHING with no rejection since the move", v)
	}
	f.wantPointersAt(t, r2)
	time.Sleep(20 * time.Millisecond)
	for _, tg := range r2.Targets {
		f.writeReceipt(t, tg, bundle.PhaseCurrent, bundle.ResultApplied, "")
	}
	if v := check(again.Add(10 * time.Minute)); v.Verdict != promoter.GatePassed {
		t.Fatalf("at the soak's end with every runtime applied: %+v, want PASSED", v)
	}
	f.wantPointersAt(t, r2)
}

// writeReceiptAtClock records a receipt as the readback collector's store
// does (readback.Store.Record), but reported at the fixture's simulated
// time rather than by the database's clock, for walks months ahead of it:
// the gate counts the receipts reported since each pointer move.
func (f *fixture) writeReceiptAtClock(t testing.TB, tg promoter.Target, phase, result, reason string) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), `INSERT INTO configpub.runtime_evidence (host, service_id, env_tag,
			snapshot_id, outcome, reason, artifact_digest, content_digest, policy_digest, publication_id, release_version,
			loaded_at, kind, phase, reported_at)
		VALUES ($1, $2, $3, $4::uuid, $5, $6, $7, $8, $9, $10::uuid, $11, $12, 'receipt', $13, $12)`,
		tg.Host, tg.ServiceID, tg.EnvTag, tg.SnapshotID, result, reason, tg.ArtifactDigest, tg.ContentDigest,
		tg.PolicyDigest, tg.PublicationID, tg.ReleaseVersion, f.now, phase); err != nil {
		t.Fatalf("record receipt at %s: %v", f.now, err)
	}
}

// TestHealthGateRefusesAnEnvironmentThatDoesNotExist: CheckHealth (gate
// --once in a CI job) of an environment that does not exist — a typo — is
// ErrNotFound naming it, not a verdict of nothing to watch; an environment
// that exists keeps its verdict.
func TestHealthGateRefusesAnEnvironmentThatDoesNotExist(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	f.promote(t, longWindows(release("prod", 1, 0, 2, nil, nil)))
	v, err := f.store.CheckHealth(ctx, "prdo")
	if !errors.Is(err, promoter.ErrNotFound) || !strings.Contains(fmt.Sprint(err), "prdo") {
		t.Fatalf("CheckHealth(prdo) = %+v, %v; want ErrNotFound naming prdo", v, err)
	}
	if v, err := f.store.CheckHealth(ctx, "prod"); err != nil || v.Verdict != promoter.GateNone || v.Release != 1 {
		t.Fatalf("CheckHealth(prod) = %+v, %v; want release 1, nothing to watch", v, err)
	}
}
