package compiler_test

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	yaml "gopkg.in/yaml.v3"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
	"github.com/configpub/configpub/internal/heappeak"
)

// benchEpoch is the createdAt of the benchmarks' releases.
var benchEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func benchCompile(b *testing.B, n int, manifestOnly bool) {
	repo := gen.Repo(gen.Options{Targets: n})
	opts := compiler.Options{EnvTag: "bench", CreatedAt: benchEpoch, ManifestOnly: manifestOnly}
	heap := heappeak.Start()
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		res, err := compiler.Compile(context.Background(), repo, opts)
		if err != nil {
			b.Fatal(err)
		}
		// A ManifestOnly result keeps the manifest's entries, no targets.
		if got := len(res.Manifest.Targets); got != n || (len(res.Targets) != n) != manifestOnly {
			b.Fatalf("got %d manifest entries and %d compiled targets, want %d entries (ManifestOnly %v)", got, len(res.Targets), n, manifestOnly)
		}
	}
	b.StopTimer()
	reportCPU(b, cpu0)
	peak, _ := heap.Stop()
	b.ReportMetric(float64(peak)/(1<<20), "peakHeapMiB")
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "maxRSSMiB")
	}
}

// BenchmarkCompile1k and BenchmarkCompile10k measure the full compile
// (load, resolve, project, digest, render, validate) of generated
// repositories.
func BenchmarkCompile1k(b *testing.B)  { benchCompile(b, 1000, false) }
func BenchmarkCompile10k(b *testing.B) { benchCompile(b, shortTargets(b, 10000), false) }

// shortTargets is n, or 1,000 under `go test -short` (make bench-smoke runs
// every benchmark once; BenchmarkCompileManifestOnly10k keeps 10,000).
func shortTargets(b *testing.B, n int) int {
	if !testing.Short() {
		return n
	}
	b.Logf("-short: %d targets instead of %d", 1000, n)
	return 1000
}

// BenchmarkCompileManifestOnly10k is the compile of `configpub compile`
// without --out: every target rendered and validated, only the manifest
// and the digests kept.
func BenchmarkCompileManifestOnly10k(b *testing.B) { benchCompile(b, 10000, true) }

// BenchmarkBaselineYAMLMarshal is the in-run baseline: yaml.v3 Marshal of
// the same 10,000 rendered documents and nothing else (1,000 under -short).
func BenchmarkBaselineYAMLMarshal(b *testing.B) {
	res, err := compiler.Compile(context.Background(), gen.Repo(gen.Options{Targets: shortTargets(b, 10000)}), compiler.Options{EnvTag: "bench", CreatedAt: benchEpoch})
	if err != nil {
		b.Fatal(err)
	}
	docs := make([]*yaml.Node, len(res.Targets))
	for i, t := range res.Targets {
		var n yaml.Node
		if err := yaml.Unmarshal(t.Values, &n); err != nil {
			b.Fatal(err)
		}
		docs[i] = &n
	}
	res = nil
	runtime.GC()
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	for b.Loop() {
		for _, d := range docs {
			if _, err := yaml.Marshal(d); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	reportCPU(b, cpu0)
}

// cpuTime is the process's user+system CPU time. On a shared machine it is
// a steadier measure than wall time: both the compile and the baseline
// report it (cpu-s/op), including their garbage collection.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric((cpuTime()-start).Seconds()/float64(b.N), "cpu-s/op")
}
