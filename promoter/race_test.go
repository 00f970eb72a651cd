package promoter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
)

// raceRounds is how many rounds of each kind TestRace… runs (-short: 3).
const raceRounds = 12

// raceFixture is a store on a fresh database whose writers race as separate
// processes would: each opens its own Store on its own pool, as a member of
// configpub_promoter, on a shared simulated clock; db gc's Store runs two
// days ahead, so that every artifact no snapshot references and every
// superseded renewal is old enough to collect at once (the widest window a
// collection can have).
type raceFixture struct {
	*fixture
	clock *simclock.Clock
	url   string
	gc    *promoter.Store
	mu    sync.Mutex
	seen  map[string]int // outcomes, for the log
}

func (rf *raceFixture) saw(what string) {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	rf.seen[what]++
}

func newRaceFixture(t *testing.T) *raceFixture {
	t.Helper()
	f := newFixture(t, nil)
	rf := &raceFixture{fixture: f, clock: simclock.New(t0), url: f.db.URLFor(t, "configpub_promoter"),
		seen: map[string]int{}}
	ahead := func() time.Time { return time.Now().Add(48 * time.Hour) }
	rf.gc = rf.process(t, func(o *promoter.Options) { o.Clock = ahead })
	return rf
}

// process opens a Store on its own pool as the promoter's role.
func (rf *raceFixture) process(t *testing.T, mod func(*promoter.Options)) *promoter.Store {
	t.Helper()
	opts := promoter.Options{Signer: rf.key, Clock: rf.clock.Now}
	if mod != nil {
		mod(&opts)
	}
	s, err := promoter.Open(context.Background(), rf.db.PoolURL(t, rf.url), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// run starts every fn at once (after one barrier) and waits for them all.
func run(fns ...func()) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	for _, fn := range fns {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			fn()
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// noise is what runs beside every contest: the renewal CronJob and an
// operator's manual renewal, and db gc (artifacts and renewals).
func (rf *raceFixture) noise(t *testing.T, renewers [2]*promoter.Store) []func() {
	renew := func(s *promoter.Store) func() {
		return func() {
			if _, err := s.RenewLeases(context.Background(), "prod"); err != nil {
				t.Errorf("renew leases: %v", err)
			}
		}
	}
	gc := func() {
		if _, err := rf.gc.CollectArtifacts(context.Background(), promoter.CollectOptions{MinAge: time.Hour, Batch: 2}); err != nil &&
			!errors.Is(err, promoter.ErrConflict) {
			t.Errorf("collect artifacts: %v", err)
		}
		if _, err := rf.gc.CollectRenewals(context.Background(), promoter.RenewalCollectOptions{MinAge: time.Hour, Batch: 2}); err != nil {
			t.Errorf("collect renewals: %v", err)
		}
	}
	return []func(){renew(renewers[0]), renew(renewers[1]), gc}
}

// raceRelease is release v of prod: 5 or 6 targets (alternately, so that
// moves retire and restore an identity), every snapshot new.
func raceRelease(v, base int64) promoter.ReleaseInput {
	in := release("prod", v, base, 5+int(v%2), nil, nil)
	for i := range in.Targets {
		in.Targets[i].ExpiresAt = t0.Add(365 * 24 * time.Hour)
	}
	return in
}

// stored is in's artifacts, and in recorded with ArtifactsStored, as
// promote hands them over: StoreArtifacts first, then the recording.
func stored(in promoter.ReleaseInput) ([]promoter.Artifact, promoter.ReleaseInput) {
	arts := make([]promoter.Artifact, len(in.Targets))
	out := in
	out.Targets = append([]promoter.Target(nil), in.Targets...)
	for i := range out.Targets {
		arts[i] = promoter.Artifact{Digest: out.Targets[i].ArtifactDigest, Bytes: out.Targets[i].Values}
		out.Targets[i].Values = nil
	}
	out.ArtifactsStored = true
	return arts, out
}

func (rf *raceFixture) env(t *testing.T) (current, head int64) {
	t.Helper()
	current = int64(rf.count(t, `SELECT coalesce(current_release_version, 0) FROM configpub.environment WHERE env_tag = 'prod'`))
	head = int64(rf.count(t, `SELECT coalesce(max(release_version), 0) FROM configpub.config_release WHERE env_tag = 'prod'`))
	return current, head
}

// contenders runs a command twice at once under one command id (a CI job
// retried while its first run is in flight) and once under another id (a
// second operator) beside the noise, and checks that exactly one command
// won, that both runs of the retried command gave the same answer, and that
// the loser was told why.
func (rf *raceFixture) contest(t *testing.T, round int, what string, renewers [2]*promoter.Store, extra []func(),
	do func(s *promoter.Store, cmd string) (*promoter.ActivationResult, error)) (winner string) {
	t.Helper()
	a, b := id("race", round, what, "a"), id("race", round, what, "b")
	sa1, sa2, sb := rf.process(t, nil), rf.process(t, nil), rf.process(t, nil)
	var ra1, ra2, rb *promoter.ActivationResult
	var ea1, ea2, eb error
	fns := append(rf.noise(t, renewers),
		func() { ra1, ea1 = do(sa1, a) },
		func() { ra2, ea2 = do(sa2, a) },
		func() { rb, eb = do(sb, b) })
	run(append(fns, extra...)...)
	aWon := ea1 == nil || ea2 == nil
	switch {
	case aWon && eb == nil:
		t.Fatalf("round %d %s: both commands applied: %+v and %+v", round, what, ra1, rb)
	case aWon && (ea1 != nil || ea2 != nil):
		t.Fatalf("round %d %s: one run of command %s applied and the other failed: %v / %v (want its first answer)", round, what, a, ea1, ea2)
	case aWon:
		if ra1.CommandID != ra2.CommandID || ra1.ReleaseVersion != ra2.ReleaseVersion || ra1.Moved != ra2.Moved ||
			!ra1.ActivatedAt.Equal(ra2.ActivatedAt) || ra1.Retired != ra2.Retired {
			t.Fatalf("round %d %s: the two runs of command %s answered differently:\n%+v\n%+v", round, what, a, ra1, ra2)
		}
		rf.wantClearLoss(t, round, what, eb)
		rf.saw(what + " won by the retried command")
		return a
	case eb == nil:
		rf.wantClearLoss(t, round, what, ea1)
		rf.wantClearLoss(t, round, what, ea2)
		rf.saw(what + " won by the other command")
		return b
	}
	// Nobody won: only when a snapshot of the release was revoked, which
	// one run was told; the others lost to it or to that run.
	if !errors.Is(ea1, promoter.ErrRevoked) && !errors.Is(ea2, promoter.ErrRevoked) && !errors.Is(eb, promoter.ErrRevoked) {
		t.Fatalf("round %d %s: nobody won and no snapshot was revoked: %v / %v / %v", round, what, ea1, ea2, eb)
	}
	// (A run of a refused command that starts after the refusal retries
	// it, as a re-run does, and may then meet the other command in flight.)
	for _, err := range []error{ea1, ea2, eb} {
		rf.wantClearLoss(t, round, what, err)
	}
	rf.saw(what + " refused for a revocation")
	return ""
}

// wantClearLoss fails unless err is a refusal that says another command got
// there first (a compare-and-swap lost, nothing moved), or a revocation.
func (rf *raceFixture) wantClearLoss(t *testing.T, round int, what string, err error) {
	t.Helper()
	msg := fmt.Sprint(err)
	switch {
	case err == nil:
		t.Fatalf("round %d %s: the losing command succeeded", round, what)
	case errors.Is(err, promoter.ErrRevoked):
	case errors.Is(err, promoter.ErrConflict) && (strings.Contains(msg, "in flight") || strings.Contains(msg, "already the active release")):
	case errors.Is(err, promoter.ErrInvalid) && (strings.Contains(msg, "use activate") || strings.Contains(msg, "use rollback")):
	default:
		t.Fatalf("round %d %s: the losing command got %v, want a refusal that names the other's move", round, what, err)
	}
}

// TestRaceMovesRenewalsRevokesAndCollection races, round after round on one
// environment, what a team runs at once: a promotion from CI (artifacts
// stored ahead, as promote does) against db gc and a health gate's
// rollback; two operators' rollbacks to the same release, one of them
// retried while in flight, against a revoke of that release; two
// operators' forward activations; and beside every round the renewal
// CronJob, a manual renewal and db gc. After each round it checks the
// store's invariants (checkRaceInvariants).
func TestRaceMovesRenewalsRevokesAndCollection(t *testing.T) {
	t.Parallel()
	rf := newRaceFixture(t)
	rounds := raceRounds
	if testing.Short() {
		rounds = 3
	}
	renewers := [2]*promoter.Store{rf.process(t, nil), rf.process(t, nil)}
	in := raceRelease(1, 0)
	if _, err := rf.process(t, nil).RecordAndActivate(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	revocations := 0
	for round := 1; round <= rounds; round++ {
		rf.clock.Advance(time.Minute)
		// A promotion from CI of the next release. Its artifacts were
		// stored by an earlier attempt that stopped (old enough for gc);
		// the retry stores them again and records, while db gc runs.
		current, head := rf.env(t)
		next := raceRelease(head+1, head)
		arts, rec := stored(next)
		if err := rf.process(t, nil).StoreArtifacts(ctx, arts); err != nil {
			t.Fatal(err)
		}
		var promoteErr, gateErr error
		var gated *promoter.ActivationResult
		gate := func() {}
		if current > 1 {
			gate = func() {
				gated, gateErr = rf.process(t, nil).Rollback(ctx, promoter.RollbackInput{CommandID: id("race gate", round), EnvTag: "prod",
					ToRelease: current - 1, From: current, Actor: "health-gate", Reason: "rejections over the threshold"})
			}
		}
		run(append(rf.noise(t, renewers), gate, func() {
			s := rf.process(t, nil)
			if promoteErr = s.StoreArtifacts(ctx, arts); promoteErr == nil {
				_, promoteErr = s.RecordAndActivate(ctx, rec)
			}
		})...)
		if gateErr != nil && !errors.Is(gateErr, promoter.ErrConflict) && !errors.Is(gateErr, promoter.ErrRevoked) {
			t.Fatalf("round %d: gate rollback: %v, want success, ErrConflict or ErrRevoked", round, gateErr)
		}
		switch {
		case gated != nil:
			rf.saw("gate rolled back")
		case gateErr != nil:
			rf.saw("gate refused")
		}
		if gateErr == nil && gated != nil && gated.ReleaseVersion != current-1 {
			t.Fatalf("round %d: gate rolled back to %d, want %d", round, gated.ReleaseVersion, current-1)
		}
		if promoteErr != nil {
			// The only failures a collection may cause: it collected the
			// artifacts before the recording (not stored) or while it
			// recorded (deleted while it recorded); a run again succeeds.
			msg := promoteErr.Error()
			if !strings.Contains(msg, "deleted by configpub db gc") && !strings.Contains(msg, "deleted while it recorded") &&
				!strings.Contains(msg, "in flight") {
				t.Fatalf("round %d: promote: %v", round, promoteErr)
			}
			t.Logf("round %d: promote lost to a racing command, run again: %v", round, promoteErr)
			rf.saw("promote run again")
			s := rf.process(t, nil)
			if err := s.StoreArtifacts(ctx, arts); err != nil {
				t.Fatal(err)
			}
			if _, err := s.RecordAndActivate(ctx, rec); err != nil {
				t.Fatalf("round %d: promote run again: %v", round, err)
			}
		}
		rf.checkRaceInvariants(t, round, "promote")

		if round%3 == 0 {
			rf.stageAgainstPromote(t, round, renewers)
			rf.checkRaceInvariants(t, round, "stage against promote")
		}

		// Two operators roll back to the same release; every other round
		// a third revokes one of its snapshots meanwhile.
		current, _ = rf.env(t)
		to := current - 1
		var extra []func()
		var rev *promoter.Revocation
		var revTarget promoter.Target
		if round%2 == 0 {
			// Release to's snapshot of an identity (stage rounds record
			// other content under the same numbers: read it).
			revTarget = raceRelease(to, to-1).Targets[round%5]
			if err := rf.pool.QueryRow(ctx, `SELECT snapshot_id::text FROM configpub.config_release_target
				WHERE env_tag = 'prod' AND release_version = $1 AND host = $2`, to, revTarget.Host).Scan(&revTarget.SnapshotID); err != nil {
				t.Fatal(err)
			}
			extra = append(extra, func() {
				// Land at different points of the rollbacks.
				time.Sleep(time.Duration(round%6) * 15 * time.Millisecond)
				var err error
				rev, err = rf.process(t, nil).Revoke(ctx, promoter.RevokeInput{CommandID: id("race revoke", round),
					SnapshotID: revTarget.SnapshotID, Reason: "leaks a credential", Actor: "Carol <carol@example.com>"})
				if err != nil {
					t.Errorf("round %d: revoke: %v", round, err)
				}
			})
		}
		rf.contest(t, round, "rollback", renewers, extra, func(s *promoter.Store, cmd string) (*promoter.ActivationResult, error) {
			return s.Rollback(ctx, promoter.RollbackInput{CommandID: cmd, EnvTag: "prod", ToRelease: to,
				Actor: "Dave <dave@example.com>", Reason: "release misbehaves"})
		})
		if rev != nil {
			revocations++
			if rev.CurrentCount > 0 {
				rf.saw("revoke listed current pointers")
			}
			wantListed := rf.pointers(t, "prod")[revTarget.Host+"/"+revTarget.ServiceID] == revTarget.SnapshotID
			listed := strings.Contains(strings.Join(rev.Current, ","), revTarget.Host+"/"+revTarget.ServiceID+"/prod")
			if wantListed != listed {
				t.Fatalf("round %d: snapshot %s current: %v; the revoke listed it: %v (%v)", round, revTarget.SnapshotID, wantListed, listed, rev.Current)
			}
		}
		rf.checkRaceInvariants(t, round, "rollback")

		// Two operators activate the newest release again.
		current, head = rf.env(t)
		if current != head {
			rf.contest(t, round, "activate", renewers, nil, func(s *promoter.Store, cmd string) (*promoter.ActivationResult, error) {
				return s.Activate(ctx, promoter.MoveInput{CommandID: cmd, EnvTag: "prod", Release: head,
					Actor: "Erin <erin@example.com>", Reason: "fixed"})
			})
		}
		rf.checkRaceInvariants(t, round, "activate")
	}
	// No lock-order cycle: PostgreSQL detected no deadlock (runTx would
	// retry one silently). Counted as the backends report it.
	time.Sleep(1100 * time.Millisecond)
	if n := rf.count(t, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`); n != 0 {
		t.Errorf("PostgreSQL detected %d deadlocks among the racing commands, want none", n)
	}
	t.Logf("%d rounds, %d revocations raced; outcomes: %v", rounds, revocations, rf.seen)
}

// raceInvariants are queries that return one row per violation of what
// must hold after any interleaving of the racing commands.
var raceInvariants = []struct{ name, sql string }{
	{"an environment's claim is left pending", `SELECT env_tag FROM configpub.environment WHERE pending_release_version IS NOT NULL`},
	{"a command is left UNCONFIRMED", `SELECT command_id::text FROM configpub.command WHERE outcome = 'UNCONFIRMED'`},
	{"a current pointer is not at the active release's snapshot", `SELECT p.host || ' ' || p.snapshot_id
		FROM configpub.current_pointer p JOIN configpub.environment e ON e.env_tag = p.env_tag
		LEFT JOIN configpub.config_release_target rt ON rt.env_tag = p.env_tag AND rt.release_version = e.current_release_version
			AND rt.host = p.host AND rt.service_id = p.service_id
		WHERE p.retired_at IS NULL AND rt.snapshot_id IS DISTINCT FROM p.snapshot_id`},
	{"an identity of the active release has no current pointer at it", `SELECT rt.host
		FROM configpub.config_release_target rt JOIN configpub.environment e
			ON e.env_tag = rt.env_tag AND rt.release_version = e.current_release_version
		LEFT JOIN configpub.current_pointer p ON p.env_tag = rt.env_tag AND p.host = rt.host AND p.service_id = rt.service_id
			AND p.retired_at IS NULL
		WHERE p.snapshot_id IS DISTINCT FROM rt.snapshot_id`},
	{"a current pointer's manifest is not of its snapshot, sequence and lease", `SELECT p.host || ' ' || (convert_from(p.manifest, 'UTF8')::jsonb ->> 'snapshotId')
		FROM configpub.current_pointer p
		WHERE p.retired_at IS NULL AND (
			convert_from(p.manifest, 'UTF8')::jsonb ->> 'snapshotId' IS DISTINCT FROM p.snapshot_id::text
			OR (convert_from(p.manifest, 'UTF8')::jsonb ->> 'sequence')::bigint IS DISTINCT FROM p.sequence
			OR (convert_from(p.manifest, 'UTF8')::jsonb ->> 'expiresAt')::timestamptz IS DISTINCT FROM p.lease_expires_at)`},
	{"a current pointer's manifest is not kept in delivery_manifest (collected?)", `SELECT p.host || ' ' || p.sequence
		FROM configpub.current_pointer p
		WHERE p.retired_at IS NULL AND NOT EXISTS (SELECT 1 FROM configpub.delivery_manifest d
			WHERE d.host = p.host AND d.service_id = p.service_id AND d.env_tag = p.env_tag AND d.sequence = p.sequence
			  AND d.snapshot_id = p.snapshot_id AND d.manifest = p.manifest)`},
	{"a move's own manifest was collected", `SELECT m.host || ' ' || m.sequence FROM configpub.pointer_move m
		WHERE NOT m.retired AND NOT EXISTS (SELECT 1 FROM configpub.delivery_manifest d WHERE d.host = m.host AND d.service_id = m.service_id
			AND d.env_tag = m.env_tag AND d.sequence = m.sequence AND d.kind = 'move')`},
	{"an applied move command is not journaled exactly once", `SELECT c.command_id || ' ' || c.action || ' x' || count(j.*)
		FROM configpub.command c LEFT JOIN configpub.config_release_journal j ON j.command_id = c.command_id AND j.event_kind = c.action
		WHERE c.outcome = 'APPLIED' AND c.action IN ('promote', 'activate', 'rollback')
		GROUP BY c.command_id, c.action HAVING count(j.*) <> 1`},
	{"an applied move's pointer_move rows are not the pointers it moved and retired", `SELECT c.command_id || ' moved ' ||
			(c.result ->> 'moved') || ' retired ' || (c.result ->> 'retired') || ' rows ' ||
			(SELECT count(*) FROM configpub.pointer_move m WHERE m.command_id = c.command_id)
		FROM configpub.command c
		WHERE c.outcome = 'APPLIED' AND c.action IN ('promote', 'activate', 'rollback')
		  AND (c.result ->> 'moved')::bigint + (c.result ->> 'retired')::bigint
			<> (SELECT count(*) FROM configpub.pointer_move m WHERE m.command_id = c.command_id)`},
	{"a command that did not apply moved a pointer", `SELECT c.command_id::text FROM configpub.command c
		WHERE c.outcome <> 'APPLIED' AND EXISTS (SELECT 1 FROM configpub.pointer_move m WHERE m.command_id = c.command_id)`},
	{"an identity's moves do not raise its sequence (a retirement keeps it)", `SELECT host || ' ' || sequence FROM (
		SELECT host, sequence, retired, lag(sequence) OVER (PARTITION BY env_tag, host, service_id ORDER BY move_id) AS prev
		FROM configpub.pointer_move) x WHERE prev IS NOT NULL AND (sequence < prev OR sequence = prev AND NOT retired)`},
	{"a move chains from a snapshot other than the identity's previous one", `SELECT host || ' ' || sequence FROM (
		SELECT host, sequence, previous_snapshot_id,
			lag(next_snapshot_id) OVER (PARTITION BY env_tag, host, service_id ORDER BY move_id) AS prev
		FROM configpub.pointer_move) x WHERE prev IS NOT NULL AND previous_snapshot_id IS DISTINCT FROM prev`},
	{"a revoked snapshot is current and no revoke listed it", `SELECT p.host || ' ' || p.snapshot_id
		FROM configpub.current_pointer p JOIN configpub.revocation r ON r.snapshot_id = p.snapshot_id
		JOIN configpub.command c ON c.command_id = r.command_id
		WHERE p.retired_at IS NULL
		  AND NOT (c.result -> 'current') ? (p.host || '/' || p.service_id || '/' || p.env_tag)`},
	// A renewal in the round of the revocation may have committed first
	// (same simulated minute); one in a later round must skip it.
	{"a revoked snapshot was leased in a round after its revocation", `SELECT d.host || ' ' || d.issued_at
		FROM configpub.delivery_manifest d JOIN configpub.revocation r ON r.snapshot_id = d.snapshot_id
		WHERE d.kind = 'renew' AND d.issued_at > r.revoked_at + interval '30 seconds'`},
}

// checkRaceInvariants fails on any violation of raceInvariants, and
// unless every release's journal is 1..row_revision.
func (rf *raceFixture) checkRaceInvariants(t *testing.T, round int, phase string) {
	t.Helper()
	rf.checkJournal(t)
	for _, inv := range raceInvariants {
		rows, err := rf.pool.Query(context.Background(), inv.sql)
		if err != nil {
			t.Fatalf("%s: %v", inv.name, err)
		}
		var bad []string
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			bad = append(bad, s)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%s: %v", inv.name, err)
		}
		if len(bad) > 0 {
			t.Fatalf("round %d after %s: %s: %v", round, phase, inv.name, bad)
		}
	}
}

// stageAgainstPromote races, on the same base, a staging of the next
// release by one pipeline and a promotion of another next release (other
// content) by another, while two operators run reconcile and the noise
// runs: exactly one release is recorded; the other is refused by the
// compare-and-swap and wrote nothing. A reconcile that meets the promotion
// between its intent and its activation settles it NOT_APPLIED (nothing
// moved) and the promotion says so; run again, it activates.
func (rf *raceFixture) stageAgainstPromote(t *testing.T, round int, renewers [2]*promoter.Store) {
	t.Helper()
	ctx := context.Background()
	_, head := rf.env(t)
	staged := raceRelease(head+1, head)
	staged.CommandID = id("race stage", round)
	promoted := raceRelease(head+1, head)
	promoted.CommandID = id("race promote b", round)
	promoted.SourceCommit = fmt.Sprintf("%040x", 0xb000+round)
	for i := range promoted.Targets {
		tg := &promoted.Targets[i]
		tg.Values = append([]byte("# commit b\n"), tg.Values...)
		tg.ArtifactDigest = digest(tg.Values)
		tg.SnapshotID, tg.PublicationID = id("b snap", round, i), id("b pub", round)
	}
	var stageErr, promoteErr error
	reconcile := func() {
		if _, err := rf.process(t, nil).Reconcile(ctx, "prod"); err != nil {
			t.Errorf("round %d: reconcile: %v", round, err)
		}
	}
	run(append(rf.noise(t, renewers), reconcile, reconcile,
		func() { _, stageErr = rf.process(t, nil).Stage(ctx, staged) },
		func() { _, promoteErr = rf.process(t, nil).RecordAndActivate(ctx, promoted) })...)
	if (stageErr == nil) == (promoteErr == nil) && !settledUnder(promoteErr) {
		t.Fatalf("round %d: stage: %v; promote: %v; want exactly one recorded", round, stageErr, promoteErr)
	}
	recorded := rf.count(t, `SELECT count(*) FROM configpub.config_release WHERE env_tag = 'prod' AND release_version = $1`, head+1)
	if recorded != 1 {
		t.Fatalf("round %d: %d releases %d recorded, want 1", round, recorded, head+1)
	}
	for _, loss := range []error{stageErr, promoteErr} {
		if loss != nil && !errors.Is(loss, promoter.ErrConflict) {
			t.Fatalf("round %d: the losing recording got %v, want ErrConflict", round, loss)
		}
	}
	switch {
	case settledUnder(promoteErr):
		rf.saw("promote settled NOT_APPLIED by a racing reconcile, run again")
		if _, err := rf.process(t, nil).RecordAndActivate(ctx, promoted); err != nil {
			t.Fatalf("round %d: promote run again after a reconcile settled it: %v", round, err)
		}
	case stageErr == nil:
		rf.saw("stage won against promote")
	default:
		rf.saw("promote won against stage")
	}
}

// settledUnder reports the error of a move whose command a racing
// reconcile settled NOT_APPLIED between its intent and its activation.
func settledUnder(err error) bool {
	return errors.Is(err, promoter.ErrConflict) && strings.Contains(err.Error(), "before it could be activated")
}
