package promoter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/readback"
)

// recorder is a Notifier that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []promoter.Event
}

func (r *recorder) Notify(_ context.Context, ev promoter.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) kinds() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.Kind)
	}
	return out
}

// writeReceipt records a receipt through the readback collector's store
// (readback.Store.Record), as the collector does after reading a runtime's
// status endpoint. The tests here use it to drive the promoter's rollout
// logic (timeouts, journal, kill -9, integrity) precisely; the same
// outcomes through real runtimes that prefetch and verify the signed
// candidate from the real Config Server, with the collector recording
// their answers, are configserver's TestTwoPhaseReal* tests.
func (f *fixture) writeReceipt(t testing.TB, tg promoter.Target, phase, result, reason string) {
	t.Helper()
	added, err := readback.NewStore(f.pool).Record(context.Background(), bundle.Receipt{
		Host: tg.Host, ServiceID: tg.ServiceID, EnvTag: tg.EnvTag, Audience: tg.Audience,
		Phase: phase, Result: result, Reason: reason, SnapshotID: tg.SnapshotID, PublicationID: tg.PublicationID,
		ReleaseVersion: tg.ReleaseVersion, ArtifactDigest: tg.ArtifactDigest,
		LoadedAt: time.Now().UTC().Format(time.RFC3339Nano),
	}, time.Now())
	if err != nil || !added {
		t.Fatalf("record receipt: added %v, %v", added, err)
	}
}

// stageTwoPhase promotes release 1 of env (n targets) and stages release 2
// (every target changed) with two-phase activation.
func (f *fixture) stageTwoPhase(t testing.TB, env string, n int) (r1, r2 promoter.ReleaseInput) {
	t.Helper()
	r1 = release(env, 1, 0, n, nil, nil)
	f.promote(t, r1)
	r2 = release(env, 2, 1, n, nil, nil)
	r2.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase}
	r2.CommandID = id("stage", env, 2)
	if _, err := f.store.Stage(context.Background(), r2); err != nil {
		t.Fatal(err)
	}
	return r1, r2
}

func TestTwoPhaseActivationWaitsForEveryCandidate(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	f := newFixture(t, func(o *promoter.Options) { o.Notifier = rec })
	ctx := context.Background()
	r1, r2 := f.stageTwoPhase(t, "prod", 3)
	in := promoter.MoveInput{CommandID: id("act"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}
	var progress []promoter.ReadinessProgress
	opts := promoter.ActivateOptions{Timeout: 600 * time.Millisecond, Poll: 100 * time.Millisecond,
		Progress: func(p promoter.ReadinessProgress) { progress = append(progress, p) }}

	// Nobody answered: a timeout naming every moving identity.
	start := time.Now()
	_, err := f.store.ActivateRelease(ctx, in, opts)
	var nr *promoter.NotReadyError
	if !errors.As(err, &nr) || strings.Join(nr.Missing, ",") != "host-00000/svc,host-00001/svc,host-00002/svc" {
		t.Fatalf("no receipts: got %v, want a timeout naming all three identities", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("a 600ms timeout took %s", d)
	}
	if len(progress) < 2 || progress[0].Required != 3 || progress[0].Ready != 0 {
		t.Fatalf("progress %+v, want repeated 0/3 lines", progress)
	}
	f.wantPointersAt(t, r1)

	// Two READY; the third READY only for its old snapshot, which does not
	// count.
	f.writeReceipt(t, r2.Targets[0], bundle.PhaseCandidate, bundle.ResultReady, "")
	f.writeReceipt(t, r2.Targets[1], bundle.PhaseCandidate, bundle.ResultReady, "")
	f.writeReceipt(t, r1.Targets[2], bundle.PhaseCandidate, bundle.ResultReady, "")
	_, err = f.store.ActivateRelease(ctx, in, opts)
	if !errors.As(err, &nr) || strings.Join(nr.Missing, ",") != "host-00002/svc" || nr.Ready != 2 ||
		!strings.Contains(err.Error(), "host-00002/svc") || !strings.Contains(err.Error(), "nothing moved") {
		t.Fatalf("two READY: got %v, want a timeout naming host-00002/svc only", err)
	}
	f.wantPointersAt(t, r1)
	if s, _ := f.releaseState(t, "prod", 2); s != promoter.StateStaged {
		t.Fatalf("after timeouts release 2 is %s, want STAGED", s)
	}

	// All READY: one activation moves every pointer.
	f.writeReceipt(t, r2.Targets[2], bundle.PhaseCandidate, bundle.ResultReady, "")
	res, err := f.store.ActivateRelease(ctx, in, opts)
	if err != nil {
		t.Fatal(err)
	}
	f.wantPointersAt(t, r2)
	if res.Moved != 3 {
		t.Fatalf("moved %d, want 3", res.Moved)
	}
	// One transaction: every move has the same command and move time.
	if n := f.count(t, `SELECT count(DISTINCT (command_id, moved_at)) FROM configpub.pointer_move WHERE release_version = 2`); n != 1 {
		t.Fatalf("release 2's moves span %d (command, time) pairs, want 1", n)
	}
	if got := strings.Join(rec.kinds(), ","); got != "release.activated,release.staged,release.activated" {
		t.Fatalf("events %s", got)
	}
	f.checkJournal(t)
}

func TestTwoPhaseRejectedCandidateFailsTheRelease(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	f := newFixture(t, func(o *promoter.Options) { o.Notifier = rec })
	ctx := context.Background()
	r1, r2 := f.stageTwoPhase(t, "prod", 3)
	f.writeReceipt(t, r2.Targets[0], bundle.PhaseCandidate, bundle.ResultReady, "")
	f.writeReceipt(t, r2.Targets[1], bundle.PhaseCandidate, bundle.ResultRejected, "SIGNATURE_INVALID")
	in := promoter.MoveInput{CommandID: id("act"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}
	_, err := f.store.ActivateRelease(ctx, in, promoter.ActivateOptions{Timeout: 5 * time.Second, Poll: 50 * time.Millisecond})
	var rej *promoter.RejectedError
	if !errors.As(err, &rej) || rej.Identity != "host-00001/svc" || rej.Reason != "SIGNATURE_INVALID" {
		t.Fatalf("got %v, want host-00001/svc rejected (SIGNATURE_INVALID)", err)
	}
	f.wantPointersAt(t, r1)
	if n := f.count(t, "SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2"); n != 0 {
		t.Fatalf("%d pointer moves for the failed release", n)
	}
	if s, o := f.releaseState(t, "prod", 2); s != promoter.StateFailed || o != promoter.OutcomeNotApplied {
		t.Fatalf("release 2 is %s/%s, want FAILED/NOT_APPLIED", s, o)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.candidate_pointer"); n != 0 {
		t.Fatalf("%d candidate pointers left for the failed release", n)
	}
	if n := f.count(t, `SELECT count(*) FROM configpub.config_release_journal WHERE release_version = 2
		AND event_kind = 'candidate-rejected' AND evidence->>'identity' = 'host-00001/svc'
		AND evidence->>'receiptReason' = 'SIGNATURE_INVALID'`); n != 1 {
		t.Fatalf("journal rows naming the rejection: %d, want 1", n)
	}
	kinds := strings.Join(rec.kinds(), ",")
	if !strings.Contains(kinds, "candidate.rejected,release.failed") {
		t.Fatalf("events %s: want the rejection and the failure notified", kinds)
	}
	// A FAILED release is never activated.
	if _, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("again"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "again"},
		promoter.ActivateOptions{}); !errors.Is(err, promoter.ErrReleaseFailed) {
		t.Fatalf("activating a FAILED release: %v, want refused", err)
	}
	f.wantPointersAt(t, r1)
	f.checkJournal(t)
}

// cosignFixture is a fixture whose signer is a cosign key on disk, so that
// the configpub binary can sign with it.
func cosignFixture(t *testing.T) (f *fixture, keyPath, password string) {
	t.Helper()
	password = "two-phase"
	kp, err := cosignkey.GenerateKeyPair([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	if keyPath, _, err = cosignkey.WriteKeyPair(t.TempDir(), kp); err != nil {
		t.Fatal(err)
	}
	signer, err := cosignkey.LoadPrivateKey(kp.PrivatePEM, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	f = newFixture(t, nil)
	f.store = f.open(t, func(o *promoter.Options) { o.Signer = signer; o.Clock = time.Now })
	return f, keyPath, password
}

func activateCmd(ctx context.Context, bin, dbURL, keyPath, password, commandID string, extra ...string) *exec.Cmd {
	args := append([]string{"activate", "--env", "prod", "--release", "2", "--actor", "ops", "--reason", "two-phase",
		"--database", dbURL, "--key", keyPath, "--command-id", commandID}, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), cosignkey.PasswordEnv+"="+password)
	return cmd
}

// TestTwoPhaseActivateCLITimesOutNamingMissingTargets: `configpub activate`
// on a staged two-phase release whose third runtime never answers exits 1
// after its --timeout, printing progress and naming the identity; nothing
// moved.
func TestTwoPhaseActivateCLITimesOutNamingMissingTargets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the configpub binary; skipped under -short")
	}
	t.Parallel()
	bin := promotertest.BuildConfigpub(t)
	f, keyPath, password := cosignFixture(t)
	r1, r2 := f.stageTwoPhase(t, "prod", 3)
	f.writeReceipt(t, r2.Targets[0], bundle.PhaseCandidate, bundle.ResultReady, "")
	f.writeReceipt(t, r2.Targets[1], bundle.PhaseCandidate, bundle.ResultReady, "")
	start := time.Now()
	out, err := activateCmd(context.Background(), bin, f.db.URLFor(t, "configpub_promoter"), keyPath, password, id("cli"), "--timeout", "2s").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("got %v, want exit 1\n%s", err, out)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("a 2s timeout took %s", d)
	}
	for _, want := range []string{"two-phase: 2/3 candidates READY", "host-00002/svc", "1 of 3 required targets not READY after 2s", "nothing moved"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "host-00000/svc rejected") {
		t.Errorf("output names a READY target:\n%s", out)
	}
	f.wantPointersAt(t, r1)
}

// TestTwoPhaseActivateKillNine kills `configpub activate` of a staged
// two-phase release (every candidate READY) with SIGKILL at a random
// moment (CONFIGPUB_CRASH_RUNS runs, default 20; seed
// CONFIGPUB_CRASH_SEED). After every kill the pointers are all at release 1
// or all at release 2, never a mix; re-running the same command converges
// on release 2 with each pointer moved exactly once.
func TestTwoPhaseActivateKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop: builds configpub and kills `configpub activate` at least 20 times; skipped under -short")
	}
	loop := promotertest.NewCrashLoop(t, 20)
	runs, seed := loop.Runs, loop.Seed
	bin := promotertest.BuildConfigpub(t)
	const n = 40
	allReady := fmt.Sprintf("two-phase: %d/%d candidates READY", n, n)
	setup := func(t *testing.T) (*fixture, string, string, promoter.ReleaseInput, promoter.ReleaseInput) {
		f, keyPath, password := cosignFixture(t)
		r1, r2 := f.stageTwoPhase(t, "prod", n)
		for _, tg := range r2.Targets {
			f.writeReceipt(t, tg, bundle.PhaseCandidate, bundle.ResultReady, "")
		}
		return f, keyPath, password, r1, r2
	}
	// Calibrate: the process's whole life, and its activation phase, from
	// the progress line saying every candidate is READY to exit.
	var life, dbPhase time.Duration
	t.Run("calibrate", func(t *testing.T) {
		f, keyPath, password, _, r2 := setup(t)
		pr := promotertest.Start(t, activateCmd(context.Background(), bin, f.db.URLFor(t, "configpub_promoter"), keyPath, password, id("cal")), allReady)
		var err error
		if life, dbPhase, err = pr.Wait(); err != nil {
			t.Fatalf("uninterrupted activate (marker: every candidate READY): %v\n%s", err, pr.Output())
		}
		f.wantPointersAt(t, r2)
		t.Logf("an uninterrupted two-phase activate of %d targets took %v, its activation phase %v", n, life, dbPhase)
	})
	if life == 0 {
		t.Fatal("calibration failed")
	}
	var atOld, atNew int
	for i := range runs {
		// A third of the runs are killed anywhere in the process's life, the
		// others after the all-READY progress line, within the activation
		// phase's calibrated length.
		anywhere, delay := loop.Kill(i, life, dbPhase)
		ok := t.Run(fmt.Sprintf("run%02d", i), func(t *testing.T) {
			f, keyPath, password, r1, r2 := setup(t)
			url := f.db.URLFor(t, "configpub_promoter")
			cmdID := id("kill", i)
			pr := promotertest.Start(t, activateCmd(context.Background(), bin, url, keyPath, password, cmdID), allReady)
			_, _ = pr.KillAt(anywhere, delay) // an activate that ends first is judged by its pointers below
			got := f.pointers(t, "prod")
			current := f.count(t, "SELECT coalesce(current_release_version, 0) FROM configpub.environment WHERE env_tag = 'prod'")
			switch {
			case promotertest.PointersAt(got, snapshotsOfInput(r1)) && current == 1:
				atOld++
			case promotertest.PointersAt(got, snapshotsOfInput(r2)) && current == 2:
				atNew++
			default:
				t.Fatalf("after a kill at %v: pointers %v (current %d) are a mixed set", delay, got, current)
			}
			f.checkJournal(t)
			if out, err := activateCmd(context.Background(), bin, url, keyPath, password, cmdID).CombinedOutput(); err != nil {
				t.Fatalf("re-run after a kill at %v: %v\n%s", delay, err, out)
			}
			f.wantPointersAt(t, r2)
			if m := f.count(t, "SELECT count(*) FROM configpub.pointer_move WHERE release_version = 2"); m != n {
				t.Fatalf("after the re-run: %d moves for release 2, want %d (exactly once)", m, n)
			}
		})
		if !ok {
			t.Fatalf("seed %d run %d failed (kill after %v)", seed, i, delay)
		}
	}
	t.Logf("seed %d: %d runs; after the kill %d at release 1, %d at release 2", seed, runs, atOld, atNew)
}

// TestTwoPhaseReceiptContradictingTheJournalIsAnIntegrityError: every
// candidate is READY, but one runtime's receipt says it already runs its
// candidate snapshot, which no pointer move ever gave it. The activation
// keeps the evidence, sets the execution outcome INTEGRITY_ERROR (shown by
// status), moves nothing, and refuses again until a human decides.
func TestTwoPhaseReceiptContradictingTheJournalIsAnIntegrityError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1, r2 := f.stageTwoPhase(t, "prod", 3)
	for _, tg := range r2.Targets {
		f.writeReceipt(t, tg, bundle.PhaseCandidate, bundle.ResultReady, "")
	}
	f.writeReceipt(t, r2.Targets[1], bundle.PhaseCurrent, bundle.ResultApplied, "")
	in := promoter.MoveInput{CommandID: id("act"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}
	_, err := f.store.ActivateRelease(ctx, in, promoter.ActivateOptions{Timeout: 5 * time.Second, Poll: 50 * time.Millisecond})
	if !errors.Is(err, promoter.ErrIntegrity) || !strings.Contains(err.Error(), "host-00001/svc") || !strings.Contains(err.Error(), "nothing moved") {
		t.Fatalf("got %v, want an integrity error naming host-00001/svc", err)
	}
	f.wantPointersAt(t, r1)
	if s, o := f.releaseState(t, "prod", 2); s != promoter.StateStaged || o != promoter.OutcomeIntegrityError {
		t.Fatalf("release 2 is %s/%s, want STAGED/INTEGRITY_ERROR", s, o)
	}
	st, err := f.store.Status(ctx, "prod")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Releases {
		if r.ReleaseVersion == 2 && r.Outcome != promoter.OutcomeIntegrityError {
			t.Fatalf("status shows release 2 outcome %s", r.Outcome)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM configpub.config_release_journal WHERE release_version = 2
		AND event_kind = 'integrity-error' AND evidence->>'identity' = 'host-00001/svc'`); n != 1 {
		t.Fatalf("%d integrity-error journal rows, want 1", n)
	}
	evs, err := f.store.ReleaseEvents(ctx, "prod", 1)
	if err != nil || len(evs) != 1 || evs[0].Kind != "integrity-error" || evs[0].ToOutcome != promoter.OutcomeIntegrityError {
		t.Fatalf("newest release event %+v, %v; want the integrity error", evs, err)
	}
	if _, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("again"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "again"},
		promoter.ActivateOptions{}); !errors.Is(err, promoter.ErrIntegrity) {
		t.Fatalf("activating again: %v, want refused", err)
	}
	f.wantPointersAt(t, r1)
	f.checkJournal(t)
}

// TestTwoPhaseFreezeOpeningDuringTheWaitRefusesTheActivation starts a
// two-phase activation outside every freeze window; the window opens while
// it waits for READY receipts (a long --timeout), and every runtime is ready
// only then. The pointers must not move inside the window: the activation
// is refused naming it, the release stays STAGED, and with --break-glass
// the same wait activates and journals the broken window.
func TestTwoPhaseFreezeOpeningDuringTheWaitRefusesTheActivation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1 := release("prod", 1, 0, 2, nil, nil)
	f.promote(t, r1)
	r2 := release("prod", 2, 1, 2, nil, nil)
	r2.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase, FreezeWindows: []bundle.FreezeWindow{{
		Name: "change-freeze", From: t0.Add(30 * time.Minute).Format(time.RFC3339), Until: t0.Add(48 * time.Hour).Format(time.RFC3339)}}}
	r2.CommandID = id("stage", 2)
	if _, err := f.store.Stage(ctx, r2); err != nil {
		t.Fatal(err)
	}
	// The runtimes answer READY an hour into the wait, inside the window.
	readyLate := func(p promoter.ReadinessProgress) {
		if p.Ready == 0 {
			f.now = t0.Add(time.Hour)
			for _, tg := range r2.Targets {
				f.writeReceipt(t, tg, bundle.PhaseCandidate, bundle.ResultReady, "")
			}
		}
	}
	opts := promoter.ActivateOptions{Timeout: 5 * time.Second, Poll: 10 * time.Millisecond, Progress: readyLate}
	in := promoter.MoveInput{CommandID: id("act"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}
	_, err := f.store.ActivateRelease(ctx, in, opts)
	var fe *promoter.FreezeError
	if !errors.As(err, &fe) || fe.Window.Name != "change-freeze" || !strings.Contains(err.Error(), `freeze window "change-freeze"`) {
		t.Fatalf("READY inside a window that opened during the wait: got %v, want a refusal naming the window", err)
	}
	t.Log(err)
	f.wantPointersAt(t, r1)
	if s, _ := f.releaseState(t, "prod", 2); s != promoter.StateStaged {
		t.Fatalf("after the refusal release 2 is %s, want STAGED", s)
	}

	// The same wait with --break-glass activates and says which window it broke.
	f.now = t0
	in = promoter.MoveInput{CommandID: id("glass"), EnvTag: "prod", Release: 2, Actor: "oncall", Reason: "INC-7"}
	opts.BreakGlass = true
	opts.Progress = func(promoter.ReadinessProgress) { f.now = t0.Add(time.Hour) }
	if _, err := f.store.ActivateRelease(ctx, in, opts); err != nil {
		t.Fatalf("break-glass: %v", err)
	}
	f.wantPointersAt(t, r2)
	var reason string
	if err := f.pool.QueryRow(ctx, `SELECT reason FROM configpub.config_release_journal
		WHERE env_tag = 'prod' AND release_version = 2 AND event_kind = 'activate' ORDER BY sequence DESC LIMIT 1`).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if want := `break-glass in freeze window "change-freeze": INC-7`; reason != want {
		t.Fatalf("journaled reason %q, want %q", reason, want)
	}
}

// aroundNow gives every target of in an activation window from an hour
// before base to a month after it, for tests whose clock follows the
// database's (receipts are stamped by it).
func aroundNow(in promoter.ReleaseInput, base time.Time) promoter.ReleaseInput {
	for i := range in.Targets {
		in.Targets[i].ValidFrom, in.Targets[i].ExpiresAt = base.Add(-time.Hour), base.AddDate(0, 1, 0)
	}
	return in
}

// TestTwoPhaseCountsOnlyReceiptsSinceTheStaging: a runtime rejects its
// candidate of release 2, which fails. The runtime is fixed and release 3,
// which keeps release 2's snapshots, is staged. The old rejection is about
// the same snapshot but not about this staging: activating release 3 must
// wait for the runtimes' answers to it (not fail at its first check, which
// would mark release 3 FAILED for good), and activate once they are READY.
func TestTwoPhaseCountsOnlyReceiptsSinceTheStaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	base := time.Now().UTC().Add(-time.Hour)
	f.now = base
	r1 := aroundNow(release("prod", 1, 0, 2, nil, nil), base)
	f.promote(t, r1)
	r2 := aroundNow(release("prod", 2, 1, 2, nil, nil), base)
	r2.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase}
	r2.CommandID = id("stage", 2)
	if _, err := f.store.Stage(ctx, r2); err != nil {
		t.Fatal(err)
	}
	f.writeReceipt(t, r2.Targets[0], bundle.PhaseCandidate, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
	f.writeReceipt(t, r2.Targets[1], bundle.PhaseCandidate, bundle.ResultReady, "")
	opts := promoter.ActivateOptions{Timeout: 5 * time.Second, Poll: 20 * time.Millisecond}
	_, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act", 2), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}, opts)
	if !errors.Is(err, promoter.ErrCandidateRejected) {
		t.Fatalf("release 2: %v, want its candidate rejected", err)
	}

	// The runtime is upgraded; release 3 keeps release 2's snapshots.
	time.Sleep(20 * time.Millisecond)
	f.now = time.Now().UTC()
	r3 := aroundNow(release("prod", 3, 2, 2, func(int) bool { return false }, func(int) int64 { return 2 }), base)
	r3.Rollout = r2.Rollout
	r3.CommandID = id("stage", 3)
	if _, err := f.store.Stage(ctx, r3); err != nil {
		t.Fatal(err)
	}
	var first *promoter.ReadinessProgress
	opts.Progress = func(p promoter.ReadinessProgress) {
		if first == nil {
			first = &p
			time.Sleep(20 * time.Millisecond)
			for _, tg := range r3.Targets {
				f.writeReceipt(t, tg, bundle.PhaseCandidate, bundle.ResultReady, "")
			}
		}
	}
	res, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act", 3), EnvTag: "prod", Release: 3, Actor: "a", Reason: "go"}, opts)
	if err != nil {
		t.Fatalf("release 3 after its runtimes answered READY: %v", err)
	}
	if first == nil || first.Ready != 0 || len(first.Waiting) != 2 {
		t.Fatalf("first readiness check %+v: want both identities waiting (the answers to release 2 are not about release 3)", first)
	}
	if res.Moved != 2 {
		t.Fatalf("moved %d, want 2", res.Moved)
	}
	f.wantPointersAt(t, r3)
}

// TestTwoPhaseFailedReleaseKeepsTheOlderStagedCandidates: release 2 is
// staged, release 3 is staged behind it and a runtime rejects release 3's
// candidate, which fails. Release 2 is still STAGED: its candidates must
// stay (the Config Server serves them again once release 3's are gone), so
// that its runtimes can answer and release 2 can be activated.
func TestTwoPhaseFailedReleaseKeepsTheOlderStagedCandidates(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	_, r2 := f.stageTwoPhase(t, "prod", 2)
	r3 := release("prod", 3, 2, 2, nil, nil)
	r3.Rollout = r2.Rollout
	r3.CommandID = id("stage", "prod", 3)
	if _, err := f.store.Stage(ctx, r3); err != nil {
		t.Fatal(err)
	}
	f.writeReceipt(t, r3.Targets[1], bundle.PhaseCandidate, bundle.ResultRejected, "SCHEMA_UNSUPPORTED")
	opts := promoter.ActivateOptions{Timeout: 5 * time.Second, Poll: 20 * time.Millisecond}
	if _, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act", 3), EnvTag: "prod", Release: 3, Actor: "a", Reason: "go"}, opts); !errors.Is(err, promoter.ErrCandidateRejected) {
		t.Fatalf("release 3: %v, want its candidate rejected", err)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.candidate_pointer WHERE env_tag = 'prod' AND release_version = 2"); n != 2 {
		t.Fatalf("release 3's failure left %d candidate pointers of the still STAGED release 2, want 2", n)
	}
	if n := f.count(t, "SELECT count(*) FROM configpub.candidate_pointer WHERE env_tag = 'prod' AND release_version = 3"); n != 0 {
		t.Fatalf("%d candidate pointers left of the failed release 3", n)
	}
	for _, tg := range r2.Targets {
		f.writeReceipt(t, tg, bundle.PhaseCandidate, bundle.ResultReady, "")
	}
	if _, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act", 2), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}, opts); err != nil {
		t.Fatalf("release 2 after its runtimes answered READY: %v", err)
	}
	f.wantPointersAt(t, r2)
	f.checkJournal(t)
}

// TestTwoPhaseStagedPastItsWindowsIsRefusedBeforeTheWait: a release staged
// and left a month, past its snapshots' activation windows, cannot be
// activated whatever its runtimes answer. activate says so at once — not
// "not READY" after its --timeout, nor the window only after every runtime
// has been made to fetch and verify its candidate.
func TestTwoPhaseStagedPastItsWindowsIsRefusedBeforeTheWait(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	r1, _ := f.stageTwoPhase(t, "prod", 2)
	f.now = t0.AddDate(0, 1, 0)
	checks := 0
	opts := promoter.ActivateOptions{Timeout: 2 * time.Second, Poll: 20 * time.Millisecond,
		Progress: func(promoter.ReadinessProgress) { checks++ }}
	_, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act"), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}, opts)
	var w *promoter.WindowError
	if !errors.As(err, &w) || !strings.Contains(err.Error(), "its activation window ended at") {
		t.Fatalf("a month after staging: %v; want the activation window named", err)
	}
	if checks != 0 {
		t.Fatalf("%d readiness checks before the refusal, want none", checks)
	}
	f.wantPointersAt(t, r1)
	if s, _ := f.releaseState(t, "prod", 2); s != promoter.StateStaged {
		t.Fatalf("release 2 is %s, want still STAGED", s)
	}
}

// TestTwoPhaseOlderStagedReleaseTimeoutNamesTheNewer: releases 2 and 3 are
// staged; the Config Server serves the newest's candidates, so a prefetch
// makes runtimes answer about release 3's snapshots. Activating release 2
// times out, and the refusal must say why a prefetch does not help (release
// 3 is staged after it) rather than only advise one.
func TestTwoPhaseOlderStagedReleaseTimeoutNamesTheNewer(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	_, r2 := f.stageTwoPhase(t, "prod", 2)
	r3 := release("prod", 3, 2, 2, nil, nil)
	r3.Rollout = r2.Rollout
	r3.CommandID = id("stage", "prod", 3)
	if _, err := f.store.Stage(ctx, r3); err != nil {
		t.Fatal(err)
	}
	for _, tg := range r3.Targets {
		f.writeReceipt(t, tg, bundle.PhaseCandidate, bundle.ResultReady, "")
	}
	opts := promoter.ActivateOptions{Timeout: 200 * time.Millisecond, Poll: 20 * time.Millisecond}
	_, err := f.store.ActivateRelease(ctx, promoter.MoveInput{CommandID: id("act", 2), EnvTag: "prod", Release: 2, Actor: "a", Reason: "go"}, opts)
	var nr *promoter.NotReadyError
	if !errors.As(err, &nr) || nr.NewerStaged != 3 || !strings.Contains(err.Error(), "release 3 is staged after release 2") {
		t.Fatalf("activating the older staged release: %v; want a timeout saying release 3 is staged after it", err)
	}
}
