package gen

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	yaml "gopkg.in/yaml.v3"

	"github.com/configpub/configpub/compiler"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func benchCompile(b *testing.B, n int) {
	repo := Repo(Options{Targets: n})
	opts := compiler.Options{EnvTag: "bench", CreatedAt: epoch}
	stop := make(chan struct{})
	peak := make(chan uint64)
	go samplePeakHeap(stop, peak)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := compiler.Compile(context.Background(), repo, opts)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Targets) != n {
			b.Fatalf("got %d targets, want %d", len(res.Targets), n)
		}
	}
	b.StopTimer()
	close(stop)
	b.ReportMetric(float64(<-peak)/(1<<20), "peakHeapMiB")
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "maxRSSMiB")
	}
}

// samplePeakHeap records the largest heap in use (live and not yet
// collected) every 10ms until stop closes.
func samplePeakHeap(stop <-chan struct{}, out chan<- uint64) {
	var peak uint64
	var ms runtime.MemStats
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		runtime.ReadMemStats(&ms)
		if ms.HeapInuse > peak {
			peak = ms.HeapInuse
		}
		select {
		case <-stop:
			out <- peak
			return
		case <-t.C:
		}
	}
}

// BenchmarkCompile1k and BenchmarkCompile10k measure the full compile
// (load, resolve, project, digest, render, validate) of generated
// repositories.
func BenchmarkCompile1k(b *testing.B)  { benchCompile(b, 1000) }
func BenchmarkCompile10k(b *testing.B) { benchCompile(b, 10000) }

// BenchmarkBaselineYAMLMarshal is the in-run baseline: yaml.v3 Marshal of
// the same 10,000 rendered documents and nothing else.
func BenchmarkBaselineYAMLMarshal(b *testing.B) {
	res, err := compiler.Compile(context.Background(), Repo(Options{Targets: 10000}), compiler.Options{EnvTag: "bench", CreatedAt: epoch})
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
	b.ResetTimer()
	for b.Loop() {
		for _, d := range docs {
			if _, err := yaml.Marshal(d); err != nil {
				b.Fatal(err)
			}
		}
	}
}
