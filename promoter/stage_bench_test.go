package promoter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/heappeak"
)

// BenchmarkStage10k measures staging a two-phase release of 10,000
// targets (1,000 under -short); see benchStage.
func BenchmarkStage10k(b *testing.B) { benchStage(b, targets10k(b)) }

// BenchmarkStageScale is BenchmarkStage10k at -activation.targets targets.
func BenchmarkStageScale(b *testing.B) { benchStage(b, targetsScale(b)) }

// benchStage measures, interleaved in every iteration on one database, in
// fresh environments:
//
//   - stage: Stage of an n-target two-phase release (record the release,
//     write n candidate pointers, sign and store their candidate manifests in
//     batches);
//   - promote: RecordAndActivate of an n-target release (record, sign n
//     manifests, write n pointers, delivery manifests and moves) — the
//     same recording and signing, with more rows written;
//
// and the peak Go heap growth of each: staging's must not grow with n
// beyond the release's own input, as the promotion's does not.
func benchStage(b *testing.B, n int) {
	f := newFixture(b, nil)
	ctx := context.Background()
	var stageT, promoteT time.Duration
	var stageHeap, promoteHeap uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		staged := longWindows(release(fmt.Sprintf("stage-%d", i), 1, 0, n, nil, nil))
		staged.Rollout = bundle.Rollout{Activation: bundle.ActivationTwoPhase}
		promoted := longWindows(release(fmt.Sprintf("promote-%d", i), 1, 0, n, nil, nil))
		stageHeap = max(stageHeap, heappeak.Rise(func() {
			timed(&stageT, func() {
				if _, err := f.store.Stage(ctx, staged); err != nil {
					b.Fatal(err)
				}
			})
		}))
		promoteHeap = max(promoteHeap, heappeak.Rise(func() {
			timed(&promoteT, func() {
				if _, err := f.store.RecordAndActivate(ctx, promoted); err != nil {
					b.Fatal(err)
				}
			})
		}))
		if got := f.count(b, `SELECT count(*) FROM configpub.candidate_pointer WHERE env_tag = $1 AND manifest IS NOT NULL`, staged.EnvTag); got != n {
			b.Fatalf("%d signed candidates, want %d", got, n)
		}
	}
	k := float64(b.N)
	b.ReportMetric(float64(stageT.Milliseconds())/k, "stage-ms/op")
	b.ReportMetric(float64(promoteT.Milliseconds())/k, "promote-ms/op")
	b.ReportMetric(float64(stageT)/float64(promoteT), "stage/promote")
	b.ReportMetric(float64(stageHeap)/(1<<20), "stage-peak-heap-MiB")
	b.ReportMetric(float64(promoteHeap)/(1<<20), "promote-peak-heap-MiB")
}
