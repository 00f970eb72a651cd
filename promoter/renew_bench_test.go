package promoter_test

import (
	"context"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/heappeak"
)

// BenchmarkLeaseRenewal10k measures `lease renew` of an environment of
// 10,000 current pointers (1,000 under -short); see benchRenewal.
func BenchmarkLeaseRenewal10k(b *testing.B) { benchRenewal(b, targets10k(b)) }

// BenchmarkLeaseRenewalScale is BenchmarkLeaseRenewal10k at
// -activation.targets targets.
func BenchmarkLeaseRenewalScale(b *testing.B) { benchRenewal(b, targetsScale(b)) }

// benchRenewal measures, interleaved in every iteration on one database:
//
//   - renew: RenewLeases of the n current pointers (read, sign over
//     SignWorkers, write pointers and delivery manifests, one NOTIFY per
//     2,000, in batches inside one transaction);
//   - same-work baseline: hand-written statements writing what an
//     activation of n pointers writes after signing n manifests serially
//     (every pointer column, delivery_manifest rows, one NOTIFY per 2,000,
//     and pointer_move rows, which a renewal does not write) — no lock, no
//     compare-and-swap, no batches;
//
// and the peak Go heap growth of each (sampled every 5 ms): a renewal's
// must not grow with n; and what each renewal writes to the database: its
// WAL after a checkpoint (what replicas stream and archives keep) and the growth of
// delivery_manifest (what db gc collects after --renewal-min-age), both
// per pointer.
func benchRenewal(b *testing.B, n int) {
	f := newFixture(b, nil)
	ctx := context.Background()
	f.promote(b, release("bench", 1, 0, n, nil, nil))
	f.promote(b, release("bench", 2, 1, n, nil, nil))
	bodies := baselineBodies(n)
	var renewT, sameT time.Duration
	var renewHeap, sameHeap uint64
	var wal, grown int64
	walAt := func() (lsn, size int64) {
		b.Helper()
		if err := f.pool.QueryRow(ctx, `SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::int8,
			pg_total_relation_size('configpub.delivery_manifest')`).Scan(&lsn, &size); err != nil {
			b.Fatal(err)
		}
		return lsn, size
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sameHeap = max(sameHeap, heappeak.Rise(func() { timed(&sameT, func() { sameWorkBaseline(b, f, n, 2-int64(i%2), bodies) }) }))
		f.now = f.now.Add(time.Minute)
		// A renewal every few minutes follows a checkpoint (checkpoint_timeout
		// is 5 min, and at scale max_wal_size triggers one sooner): its
		// first change of each page writes the whole page.
		f.db.Checkpoint(b)
		lsn0, size0 := walAt()
		renewHeap = max(renewHeap, heappeak.Rise(func() {
			timed(&renewT, func() {
				res, err := f.store.RenewLeases(ctx, "bench")
				if err != nil || res.Renewed != n {
					b.Fatalf("renew: %+v %v, want %d renewed", res, err, n)
				}
			})
		}))
		lsn1, size1 := walAt()
		wal, grown = wal+lsn1-lsn0, grown+size1-size0
	}
	k := float64(b.N)
	b.ReportMetric(float64(renewT.Milliseconds())/k, "renew-ms/op")
	b.ReportMetric(float64(sameT.Milliseconds())/k, "same-work-baseline-ms/op")
	b.ReportMetric(float64(renewT)/float64(sameT), "renew/same-work")
	b.ReportMetric(float64(renewHeap)/(1<<20), "renew-peak-heap-MiB")
	b.ReportMetric(float64(sameHeap)/(1<<20), "baseline-peak-heap-MiB")
	b.ReportMetric(float64(wal)/k/float64(n), "renew-WAL-B/pointer")
	b.ReportMetric(float64(grown)/k/float64(n), "renew-manifest-B/pointer")
}
