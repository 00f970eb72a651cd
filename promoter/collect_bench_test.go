package promoter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/configpub/configpub/promoter"
)

// BenchmarkCollectArtifacts10k measures `db gc` of 10,000 unreferenced
// artifacts (1,000 under -short) beside a recorded release of as many
// targets, whose artifacts it must keep, against a hand-written baseline
// measured in the same iterations: one transaction that deletes the same
// rows with one DELETE (the append-only trigger's exception set by hand).
// The baseline does less than the collection (no record of each deletion,
// one statement instead of batches of 1,000 each committed on its own), so
// the ratio is the price of those two, not of the search or the foreign
// key checks, which both pay.
func BenchmarkCollectArtifacts10k(b *testing.B) {
	n := 10000
	if testing.Short() {
		n = 1000
		b.Logf("-short: %d artifacts instead of 10,000", n)
	}
	ctx := context.Background()
	f := newFixture(b, nil)
	f.promote(b, release("bench", 1, 0, n, nil, nil))
	collector, err := promoter.Open(ctx, f.pool, promoter.Options{Clock: func() time.Time { return time.Now().Add(time.Hour) }})
	if err != nil {
		b.Fatal(err)
	}
	orphans := make([]promoter.Artifact, n)
	size := 0
	for i := range orphans {
		v := []byte(fmt.Sprintf("runtimePolicy:\n  host: orphan-%05d\nagentPolicy:\n  limit: %d\n  note: stored ahead, never recorded\n", i, i))
		orphans[i] = promoter.Artifact{Digest: digest(v), Bytes: v}
		size += len(v)
	}
	store := func() {
		if err := f.store.StoreArtifacts(ctx, orphans); err != nil {
			b.Fatal(err)
		}
	}
	var collectT, baseT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		store()
		b.StartTimer()
		start := time.Now()
		c, err := collector.CollectArtifacts(ctx, promoter.CollectOptions{MinAge: time.Millisecond})
		collectT += time.Since(start)
		if err != nil || c.Artifacts != n || c.Bytes != int64(size) {
			b.Fatalf("collected %+v, %v; want %d artifacts of %d bytes", c, err, n, size)
		}

		b.StopTimer()
		store()
		b.StartTimer()
		start = time.Now()
		tx, err := f.pool.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "SET LOCAL configpub.collecting_artifacts = 'on'"); err != nil {
			b.Fatal(err)
		}
		tag, err := tx.Exec(ctx, `DELETE FROM configpub.artifact x WHERE x.created_at < now()
			AND NOT EXISTS (SELECT 1 FROM configpub.config_snapshot s WHERE s.artifact_digest = x.artifact_digest)`)
		if err != nil || tag.RowsAffected() != int64(n) {
			b.Fatalf("baseline deleted %v, %v; want %d", tag, err, n)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		baseT += time.Since(start)
	}
	b.StopTimer()
	if got := f.count(b, "SELECT count(*) FROM configpub.artifact"); got != n {
		b.Fatalf("%d artifacts left, want the release's %d", got, n)
	}
	k := float64(b.N)
	b.ReportMetric(float64(collectT.Milliseconds())/k, "collect-ms/op")
	b.ReportMetric(float64(baseT.Milliseconds())/k, "baseline-ms/op")
	b.ReportMetric(float64(collectT)/float64(baseT), "collect/baseline")
	b.ReportMetric(float64(n)*k/collectT.Seconds(), "artifacts/s")
}
