package promoter_test

import (
	"context"
	"flag"
	"fmt"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/heappeak"
	"github.com/configpub/configpub/internal/pointernote"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promoter"
)

// scaleTargets enables BenchmarkActivationScale (`-args
// -activation.targets=100000`): setting up two releases of that size takes
// minutes, too long for `make bench`. make scale runs it.
var scaleTargets = flag.Int("activation.targets", 0, "targets of BenchmarkActivationScale (0: skip it)")

// snapshotBatch, when set, is how many snapshots one statement of the
// recording holds (`-args -activation.snapshot-batch=100000`: the whole
// release in one statement, as before it was batched).
var snapshotBatch = flag.Int("activation.snapshot-batch", 0, "snapshots per statement of the recording (0: the store's default)")

// BenchmarkActivation10k measures activation at 10,000 targets (1,000
// under -short: make bench-smoke runs every benchmark once); see
// benchActivation.
func BenchmarkActivation10k(b *testing.B) { benchActivation(b, targets10k(b)) }

// BenchmarkActivationScale is BenchmarkActivation10k at
// -activation.targets targets (`go test -run '^$' -bench
// ActivationScale -benchtime 1x ./promoter -args -activation.targets=100000`).
func BenchmarkActivationScale(b *testing.B) { benchActivation(b, targetsScale(b)) }

// targets10k is 10,000, or 1,000 under -short.
func targets10k(b *testing.B) int {
	if testing.Short() {
		b.Logf("-short: 1,000 targets instead of 10,000")
		return 1000
	}
	return 10000
}

// targetsScale is -activation.targets; it skips b when that is not set.
func targetsScale(b *testing.B) int {
	if *scaleTargets <= 0 {
		b.Skip("set -activation.targets (e.g. 100000) to run")
	}
	return *scaleTargets
}

// benchActivation measures, on one database, interleaved in every
// iteration so that machine load affects all of them alike:
//
//   - baseline: a hand-written two-statement transaction that moves the
//     same n pointers (UPDATE … FROM unnest) and inserts their audit
//     rows (INSERT … SELECT FROM unnest), plus signing n manifests
//     serially with the same in-memory key;
//   - same-work baseline: hand-written statements that write what an
//     activation writes (every pointer column, full pointer_move rows,
//     the signed delivery_manifest rows, one NOTIFY per 2,000) after
//     signing n manifests serially — still no journal, no lock, no CAS;
//   - promote: RecordAndActivate of a new n-target release, every
//     target changed (artifacts, snapshots, release, targets, journal,
//     pointer moves, signed and stored delivery manifests, NOTIFY);
//   - activate: a Rollback or forward Activate between two recorded
//     n-target releases (pointer moves only);
//   - replay: RecordAndActivate of the release just applied;
//   - two-phase: ActivateRelease of a release staged with two-phase
//     activation whose n candidates are all READY (one readiness check,
//     then the activation, which re-reads the candidates' receipts as its
//     last statement before committing), then that re-check alone
//     (recheck-ms/op: the one query, over n moved identities with n
//     receipts); the environment is then rolled back to the release
//     before it, untimed, so the next promotion is not two-phase.
//
// It reports each as ms/op, the ratios the issue bars (promote/baseline
// and activate/baseline <= 3, replay/promote <= 0.1), and the peak Go heap
// growth during the baseline, the promotion (record and activate) and the
// activation (sampled every 5 ms): the last two work in batches, so their
// peaks do not grow with n beyond the release's own input.
func benchActivation(b *testing.B, n int) {
	f := newFixture(b, func(o *promoter.Options) { promoter.SetSnapshotBatch(o, *snapshotBatch) })
	ctx := context.Background()
	f.promote(b, release("bench", 1, 0, n, nil, nil))
	f.promote(b, release("bench", 2, 1, n, nil, nil))
	next := int64(3)
	// The baselines toggle pointers between the snapshots of releases 1 and 2.
	bodies := baselineBodies(n)
	var baseT, sameT, promoteT, activateT, replayT, twoPhaseT, recheckT time.Duration
	var baseHeap, promoteHeap, activateHeap uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The baselines move the pointers behind the store's back (to the
		// snapshots of release 1 or 2, sequence+1); every target changes
		// in every release, so the store moves all n regardless.
		baseHeap = max(baseHeap, heappeak.Rise(func() { timed(&baseT, func() { baseline(b, f, n, 1+int64(i%2), bodies) }) }))
		timed(&sameT, func() { sameWorkBaseline(b, f, n, 2-int64(i%2), bodies) })
		in := release("bench", next, next-1, n, nil, nil)
		next++
		promoteHeap = max(promoteHeap, heappeak.Rise(func() {
			timed(&promoteT, func() {
				if _, err := f.store.RecordAndActivate(ctx, in); err != nil {
					b.Fatal(err)
				}
			})
		}))
		activateHeap = max(activateHeap, heappeak.Rise(func() {
			timed(&activateT, func() {
				res, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("bench rb", i), EnvTag: "bench",
					ToRelease: next - 2, Actor: "bench", Reason: "bench"})
				if err != nil || res.Moved != n {
					b.Fatalf("rollback: %+v %v, want %d moved", res, err, n)
				}
			})
		}))
		if _, err := f.store.Activate(ctx, promoter.MoveInput{CommandID: id("bench fwd", i), EnvTag: "bench",
			Release: next - 1, Actor: "bench", Reason: "bench"}); err != nil {
			b.Fatal(err)
		}
		timed(&replayT, func() {
			res, err := f.store.RecordAndActivate(ctx, in)
			if err != nil || !res.Replayed {
				b.Fatalf("got %+v %v, want a replay", res, err)
			}
		})
		twoPhase(b, f, n, i, next, &twoPhaseT, &recheckT)
		next++
	}
	k := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / k }
	b.ReportMetric(ms(baseT), "baseline-ms/op")
	b.ReportMetric(ms(sameT), "same-work-baseline-ms/op")
	b.ReportMetric(ms(promoteT), "promote-ms/op")
	b.ReportMetric(ms(activateT), "activate-ms/op")
	b.ReportMetric(ms(replayT), "replay-ms/op")
	b.ReportMetric(ms(twoPhaseT), "two-phase-activate-ms/op")
	b.ReportMetric(float64(recheckT.Microseconds())/1000/k, "recheck-ms/op")
	b.ReportMetric(float64(promoteT)/float64(baseT), "promote/baseline")
	b.ReportMetric(float64(activateT)/float64(baseT), "activate/baseline")
	b.ReportMetric(float64(activateT)/float64(sameT), "activate/same-work")
	b.ReportMetric(float64(replayT)/float64(promoteT), "replay/promote")
	b.ReportMetric(float64(baseHeap)/(1<<20), "baseline-peak-heap-MiB")
	b.ReportMetric(float64(promoteHeap)/(1<<20), "promote-peak-heap-MiB")
	b.ReportMetric(float64(activateHeap)/(1<<20), "activate-peak-heap-MiB")
}

// twoPhase is benchActivation's two-phase leg (iteration i): it stages
// release v of bench on v-1 with two-phase activation, records a READY
// candidate receipt for each of its n targets, times ActivateRelease into
// *activateT and the activation's re-check query alone into *recheckT,
// then rolls back to release v-1 (untimed).
func twoPhase(b *testing.B, f *fixture, n, i int, v int64, activateT, recheckT *time.Duration) {
	ctx := context.Background()
	st := release("bench", v, v-1, n, nil, nil)
	st.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase}
	st.CommandID = id("bench stage", i)
	if _, err := f.store.Stage(ctx, st); err != nil {
		b.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO configpub.runtime_evidence (host, service_id, env_tag, snapshot_id, outcome,
			reason, artifact_digest, content_digest, policy_digest, publication_id, release_version, loaded_at, kind, phase,
			reported_at)
		SELECT rt.host, rt.service_id, rt.env_tag, rt.snapshot_id, 'READY', '', s.artifact_digest, s.content_digest,
			s.policy_digest, s.publication_id, s.release_version, $3, 'receipt', 'candidate', $3
		FROM configpub.config_release_target rt JOIN configpub.config_snapshot s ON s.snapshot_id = rt.snapshot_id
		WHERE rt.env_tag = $1 AND rt.release_version = $2`, "bench", v, f.now); err != nil {
		b.Fatal(err)
	}
	act := promoter.MoveInput{CommandID: id("bench two-phase", i), EnvTag: "bench", Release: v, Actor: "bench", Reason: "bench"}
	timed(activateT, func() {
		res, err := f.store.ActivateRelease(ctx, act, promoter.ActivateOptions{Timeout: time.Minute, Poll: 10 * time.Millisecond})
		if err != nil || res.Moved != n {
			b.Fatalf("two-phase activation: %+v %v, want %d moved", res, err, n)
		}
	})
	timed(recheckT, func() {
		if got, err := promoter.RecheckRejected(ctx, f.pool, "bench", v, act.CommandID); err != nil || got != "" {
			b.Fatalf("re-check: %q %v, want no rejection", got, err)
		}
	})
	if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("bench two-phase rb", i), EnvTag: "bench",
		ToRelease: v - 1, Actor: "bench", Reason: "bench"}); err != nil {
		b.Fatal(err)
	}
}

// timed runs fn and adds its wall time to *d.
func timed(d *time.Duration, fn func()) {
	start := time.Now()
	fn()
	*d += time.Since(start)
}

// baselineBodies are the delivery manifests the hand-written baselines
// sign and write for n targets of environment bench.
func baselineBodies(n int) [][]byte {
	bodies := make([][]byte, n)
	for i := range bodies {
		m := bundle.DeliveryManifest{Type: bundle.DeliveryManifestType, Host: fmt.Sprintf("host-%05d", i), ServiceID: "svc",
			EnvTag: "bench", Audience: "agent", SnapshotID: id("snap", "bench", i, 1), Sequence: 7,
			IssuedAt: "2026-11-29T12:00:00.000Z"}
		bodies[i], _ = m.Marshal()
	}
	return bodies
}

// idsTo returns the host, service and snapshot arrays of n pointers at the
// snapshots of release to.
func idsTo(n int, to int64) (hosts, svcs, ids []string) {
	hosts, svcs, ids = make([]string, n), make([]string, n), make([]string, n)
	for i := 0; i < n; i++ {
		hosts[i], svcs[i], ids[i] = fmt.Sprintf("host-%05d", i), "svc", id("snap", "bench", i, to)
	}
	return hosts, svcs, ids
}

// signSerially signs bodies one after the other with the fixture's key.
func signSerially(b *testing.B, f *fixture, bodies [][]byte) []string {
	sigs := make([]string, len(bodies))
	for i, body := range bodies {
		s, err := signing.SignBlob(f.key, body)
		if err != nil {
			b.Fatal(err)
		}
		sigs[i] = s
	}
	return sigs
}

// stmt is one statement of a hand-written baseline, given the pointers'
// hosts, services, snapshot ids and signatures.
type stmt func(hosts, svcs, ids, sigs []string) (sql string, args []any)

// handWritten signs bodies serially with the fixture's key and runs stmts
// in one transaction, moving n pointers to release to's snapshots.
func handWritten(b *testing.B, f *fixture, n int, to int64, bodies [][]byte, stmts ...stmt) {
	ctx := context.Background()
	b.StopTimer()
	hosts, svcs, ids := idsTo(n, to)
	b.StartTimer()
	sigs := signSerially(b, f, bodies)
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	for _, st := range stmts {
		sql, args := st(hosts, svcs, ids, sigs)
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
}

// baseline is the hand-written reference: two statements in one
// transaction plus serial signing.
func baseline(b *testing.B, f *fixture, n int, to int64, bodies [][]byte) {
	handWritten(b, f, n, to, bodies, func(hosts, svcs, ids, sigs []string) (string, []any) {
		return `UPDATE configpub.current_pointer p
		SET snapshot_id = x.sid::uuid, sequence = p.sequence + 1, manifest = x.m, manifest_signature = x.sig, updated_at = now()
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[]) AS x(h, sv, sid, m, sig)
		WHERE p.host = x.h AND p.service_id = x.sv AND p.env_tag = 'bench'`, []any{hosts, svcs, ids, bodies, sigs}
	}, func(hosts, svcs, ids, _ []string) (string, []any) {
		return `INSERT INTO configpub.pointer_move (host, service_id, env_tag, next_snapshot_id,
			publication_id, release_version, sequence, action, actor, reason, command_id, moved_at)
		SELECT h, sv, 'bench', sid::uuid, sid::uuid, $4, 1, 'activate', 'baseline', 'baseline', gen_random_uuid(), now()
		FROM unnest($1::text[], $2::text[], $3::text[]) AS x(h, sv, sid)`, []any{hosts, svcs, ids, to}
	})
}

// sameWorkBaseline is a hand-written transaction writing the rows an
// activation writes: every pointer column, full pointer_move rows, the
// signed delivery_manifest rows and one NOTIFY per 2,000 identities, after
// serial signing; it has no lock, compare-and-swap, journal or command
// ledger.
func sameWorkBaseline(b *testing.B, f *fixture, n int, to int64, bodies [][]byte) {
	handWritten(b, f, n, to, bodies, func(hosts, svcs, ids, sigs []string) (string, []any) {
		return `UPDATE configpub.current_pointer p
		SET snapshot_id = x.sid::uuid, release_version = $6, sequence = p.sequence + 1, manifest = x.m,
			manifest_signature = x.sig, manifest_key_id = 'baseline', lease_valid_from = now(),
			lease_refresh_after = now() + interval '5 minutes', lease_expires_at = now() + interval '15 minutes',
			lease_refresh_after_ms = 300000, lease_expires_after_ms = 900000, moved_at = now(), updated_at = now(),
			retired_at = NULL, retired_release_version = NULL
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[]) AS x(h, sv, sid, m, sig)
		WHERE p.host = x.h AND p.service_id = x.sv AND p.env_tag = 'bench'`, []any{hosts, svcs, ids, bodies, sigs, to}
	}, func(hosts, svcs, ids, _ []string) (string, []any) {
		return `INSERT INTO configpub.pointer_move (host, service_id, env_tag, previous_snapshot_id,
			next_snapshot_id, publication_id, release_version, previous_release_version, sequence, action, actor,
			reviewers, reason, command_id, moved_at)
		SELECT h, sv, 'bench', sid::uuid, sid::uuid, sid::uuid, $4, $4, 1, 'activate', 'baseline', '{}', 'baseline',
			gen_random_uuid(), now()
		FROM unnest($1::text[], $2::text[], $3::text[]) AS x(h, sv, sid)`, []any{hosts, svcs, ids, to}
	}, func(hosts, svcs, ids, sigs []string) (string, []any) {
		return `INSERT INTO configpub.delivery_manifest (host, service_id, env_tag, sequence, issued_at,
			snapshot_id, manifest, signature, key_id, expires_at, kind)
		SELECT h, sv, 'bench', 1, now(), sid::uuid, m, sig, 'baseline', now() + interval '15 minutes', 'move'
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[]) AS x(h, sv, sid, m, sig)`,
			[]any{hosts, svcs, ids, bodies, sigs}
	}, func(hosts, svcs, _, _ []string) (string, []any) {
		return pointernote.BatchesSQL("'bench'::text", "h", "sv", "unnest($1::text[], $2::text[]) AS x(h, sv)"), []any{hosts, svcs}
	})
}

// BenchmarkViewRecording10k measures what recording a release's Workflow
// views adds to its promotion at 10,000 targets (1,000 under -short); see
// benchViews.
func BenchmarkViewRecording10k(b *testing.B) { benchViews(b, targets10k(b)) }

// BenchmarkViewRecordingScale is BenchmarkViewRecording10k at
// -activation.targets targets.
func BenchmarkViewRecordingScale(b *testing.B) { benchViews(b, targetsScale(b)) }

// benchViews measures, interleaved in every iteration on one database:
//
//   - views: RecordAndActivate of a new n-target release whose definition
//     has n/50 staged Workflow views (the generated repository's one
//     Workflow per host of 50 targets), each allowing three of the
//     release's Agents — the activation records every view with its
//     accepted publications;
//   - plain: the same promotion in another environment with no views (the
//     baseline: the same work less the recording);
//   - rollback: a Rollback of the first environment to its previous
//     release, whose views are recorded already (nothing new is recorded).
//
// It reports each as ms/op, views/plain, and the recording's share
// (views - plain) in ms.
func benchViews(b *testing.B, n int) {
	f := newFixture(b, nil)
	ctx := context.Background()
	views := max(1, n/50)
	allows := make([][]string, views)
	for i := range allows {
		for k := 0; k < 3; k++ {
			allows[i] = append(allows[i], fmt.Sprintf("agent-%05d", (i*50+k)%n))
		}
	}
	named := func(env string, v int64) promoter.ReleaseInput {
		in := release(env, v, v-1, n, nil, nil)
		for i := range in.Targets {
			in.Targets[i].SubjectKind, in.Targets[i].SubjectName = "Agent", fmt.Sprintf("agent-%05d", i)
		}
		return in
	}
	recorded := func(v int64) int {
		return f.count(b, "SELECT count(*) FROM configpub.workflow_release_view WHERE env_tag = 'views' AND release_version = $1", v)
	}
	first := named("views", 1)
	f.stageHandMade(b, digest(first.ManifestBytes), allows)
	f.promote(b, first)
	f.promote(b, named("plain", 1))
	var viewsT, plainT, rollbackT time.Duration
	next := int64(2)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		in, plain := named("views", next), named("plain", next)
		f.stageHandMade(b, digest(in.ManifestBytes), allows)
		b.StartTimer()
		timed(&viewsT, func() { f.promote(b, in) })
		timed(&plainT, func() { f.promote(b, plain) })
		timed(&rollbackT, func() {
			if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("views rb", i), EnvTag: "views",
				ToRelease: next - 1, Actor: "bench", Reason: "bench"}); err != nil {
				b.Fatal(err)
			}
		})
		b.StopTimer()
		if got := recorded(next); got != views {
			b.Fatalf("release %d: %d views recorded, want %d", next, got, views)
		}
		if _, err := f.store.Activate(ctx, promoter.MoveInput{CommandID: id("views fwd", i), EnvTag: "views",
			Release: next, Actor: "bench", Reason: "bench"}); err != nil {
			b.Fatal(err)
		}
		next++
		b.StartTimer()
	}
	k := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / k }
	b.ReportMetric(ms(viewsT), "views-ms/op")
	b.ReportMetric(ms(plainT), "plain-ms/op")
	b.ReportMetric(ms(viewsT-plainT), "recording-ms/op")
	b.ReportMetric(ms(rollbackT), "rollback-ms/op")
	b.ReportMetric(float64(viewsT)/float64(plainT), "views/plain")
	b.ReportMetric(float64(views), "views")
}
