package promoter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promoter"
)

const benchTargets = 10000

// BenchmarkActivation10k measures, on one database, interleaved in every
// iteration so that machine load affects all of them alike:
//
//   - baseline: a hand-written two-statement transaction that moves the
//     same 10,000 pointers (UPDATE … FROM unnest) and inserts their audit
//     rows (INSERT … SELECT FROM unnest), plus signing 10,000 manifests
//     serially with the same in-memory key;
//   - promote: RecordAndActivate of a new 10,000-target release, every
//     target changed (artifacts, snapshots, release, targets, journal,
//     pointer moves, signed and stored delivery manifests, NOTIFY);
//   - activate: a Rollback or forward Activate between two recorded
//     10,000-target releases (pointer moves only);
//   - replay: RecordAndActivate of the release just applied.
//
// It reports each as ms/op and the ratios the issue bars:
// promote/baseline <= 3, replay/promote <= 0.1.
func BenchmarkActivation10k(b *testing.B) {
	f := newFixture(b, nil)
	ctx := context.Background()
	f.promote(b, release("bench", 1, 0, benchTargets, nil, nil))
	f.promote(b, release("bench", 2, 1, benchTargets, nil, nil))
	next := int64(3)
	// The baseline toggles pointers between the snapshots of releases 1 and 2.
	bodies := make([][]byte, benchTargets)
	for i := range bodies {
		m := bundle.DeliveryManifest{Type: bundle.DeliveryManifestType, Host: fmt.Sprintf("host-%05d", i), ServiceID: "svc",
			EnvTag: "bench", Audience: "agent", SnapshotID: id("snap", "bench", i, 1), Sequence: 7,
			IssuedAt: "2026-11-29T12:00:00.000Z"}
		bodies[i], _ = m.Marshal()
	}
	var baseT, promoteT, activateT, replayT time.Duration
	timed := func(d *time.Duration, fn func()) {
		start := time.Now()
		fn()
		*d += time.Since(start)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// The baseline moves the pointers behind the store's back (to the
		// snapshots of release 1 or 2, sequence+1); every target changes
		// in every release, so the store moves all 10,000 regardless.
		timed(&baseT, func() { baseline(b, f, 1+int64(i%2), bodies) })
		in := release("bench", next, next-1, benchTargets, nil, nil)
		next++
		timed(&promoteT, func() {
			if _, err := f.store.RecordAndActivate(ctx, in); err != nil {
				b.Fatal(err)
			}
		})
		timed(&activateT, func() {
			if _, err := f.store.Rollback(ctx, promoter.RollbackInput{CommandID: id("bench rb", i), EnvTag: "bench",
				ToRelease: next - 2, Actor: "bench", Reason: "bench"}); err != nil {
				b.Fatal(err)
			}
		})
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
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / n }
	b.ReportMetric(ms(baseT), "baseline-ms/op")
	b.ReportMetric(ms(promoteT), "promote-ms/op")
	b.ReportMetric(ms(activateT), "activate-ms/op")
	b.ReportMetric(ms(replayT), "replay-ms/op")
	b.ReportMetric(float64(promoteT)/float64(baseT), "promote/baseline")
	b.ReportMetric(float64(activateT)/float64(baseT), "activate/baseline")
	b.ReportMetric(float64(replayT)/float64(promoteT), "replay/promote")
}

// baseline is the hand-written reference: two statements in one
// transaction plus serial signing.
func baseline(b *testing.B, f *fixture, to int64, bodies [][]byte) {
	ctx := context.Background()
	b.StopTimer()
	hosts, svcs, ids := make([]string, benchTargets), make([]string, benchTargets), make([]string, benchTargets)
	for i := 0; i < benchTargets; i++ {
		hosts[i], svcs[i], ids[i] = fmt.Sprintf("host-%05d", i), "svc", id("snap", "bench", i, to)
	}
	b.StartTimer()
	sigs := make([]string, benchTargets)
	for i, body := range bodies {
		s, err := signing.SignBlob(f.key, body)
		if err != nil {
			b.Fatal(err)
		}
		sigs[i] = s
	}
	tx, err := f.pool.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE configpub.current_pointer p
		SET snapshot_id = x.sid::uuid, sequence = p.sequence + 1, manifest = x.m, manifest_signature = x.sig, updated_at = now()
		FROM unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::text[]) AS x(h, sv, sid, m, sig)
		WHERE p.host = x.h AND p.service_id = x.sv AND p.env_tag = 'bench'`, hosts, svcs, ids, bodies, sigs); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO configpub.pointer_move (host, service_id, env_tag, next_snapshot_id,
			publication_id, release_version, sequence, action, actor, reason, command_id, moved_at)
		SELECT h, sv, 'bench', sid::uuid, sid::uuid, $4, 1, 'activate', 'baseline', 'baseline', gen_random_uuid(), now()
		FROM unnest($1::text[], $2::text[], $3::text[]) AS x(h, sv, sid)`, hosts, svcs, ids, to); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		b.Fatal(err)
	}
}
