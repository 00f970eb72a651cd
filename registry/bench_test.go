package registry_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

const (
	benchTargets = 1000
	// benchRounds interleaves the measurements: each round runs a first
	// publish of all targets, their unchanged re-publish, and `oras push`
	// for the round's share of the targets, so a change in the load of a
	// shared machine hits every series alike. Over the rounds the oras
	// loop pushes each target exactly once.
	benchRounds = 4
	// Under -short (make bench-smoke runs every benchmark once): 20
	// targets in 2 rounds (the filesystem registry's writes and clean-up
	// are disk-bound, slow on a busy disk).
	shortTargets, shortRounds = 20, 2
)

// BenchmarkPublish1000 publishes 1,000 generated targets to a loopback
// in-process CNCF Distribution v3 registry (the embedded default) and, in
// the same run and interleaved with it, measures the two baselines of
// issue 3: an unchanged re-publish, and a loop of `oras push` invocations
// pushing the same values.yml files with the same artifact type and
// annotations (oras from $PATH; `make bench-publish` installs the pinned
// one). Two storages: filesystem on the local disk (what `configpub
// registry serve` uses) and in memory. Every first publish and every oras
// round gets a fresh registry of the same kind.
//
// Reported per storage: artifacts/s of each series, wall and CPU time for
// 1,000 targets (CPU = user+system of this process and its waited-for
// children: the registry runs in-process, oras runs as children, so both
// sides are charged for the registry's work), the oras/configpub ratios,
// the re-publish as a percentage of the first publish, and the registry
// requests per artifact. The oras figures are scaled from the 1,000
// single-target invocations (each invocation is independent). Without
// oras on $PATH the oras baseline is skipped (logged), the rest runs.
func BenchmarkPublish1000(b *testing.B) {
	targets, rounds := benchTargets, benchRounds
	if testing.Short() {
		targets, rounds = shortTargets, shortRounds
		b.Logf("-short: %d targets in %d rounds instead of %d in %d", targets, rounds, benchTargets, benchRounds)
	}
	arts := registrytest.Artifacts(targets, "prod", 1)
	key := newKey(b)
	oras, orasErr := exec.LookPath("oras")
	var files string
	if orasErr == nil {
		files = writeValues(b, arts)
	}
	home := b.TempDir() // oras must not read or write the developer's Docker config
	for _, storage := range []string{"filesystem", "memory"} {
		newReg := func(b *testing.B) *registrytest.Registry {
			if storage == "memory" {
				return registrytest.New(b, registrytest.Options{InMemory: true})
			}
			return registrytest.New(b, registrytest.Options{Dir: b.TempDir()})
		}
		b.Run(storage, func(b *testing.B) {
			var first, again, loop series
			var requests, conns, loopTargets int
			for b.Loop() {
				for round := range rounds {
					reg := newReg(b)
					c := newClient(b, registry.Options{})
					req := registry.PublishRequest{Prefix: reg.Host + "/bench", Artifacts: arts, Signer: key}
					first.measure(b, func() {
						sum, err := c.Publish(context.Background(), req)
						if err != nil {
							b.Fatal(err)
						}
						if sum.Pushed != targets {
							b.Fatalf("first publish: got %d pushed, want %d", sum.Pushed, targets)
						}
					})
					requests += reg.Total()
					conns += reg.Conns()
					reg.Reset()
					again.measure(b, func() {
						sum, err := c.Publish(context.Background(), req)
						if err != nil {
							b.Fatal(err)
						}
						if sum.AlreadyPresent != targets {
							b.Fatalf("re-publish: got %d already present, want %d", sum.AlreadyPresent, targets)
						}
					})
					if w := reg.Writes(); w != 0 {
						b.Fatalf("re-publish: got %d writes at the registry, want 0", w)
					}
					if orasErr != nil {
						continue
					}
					share := arts[round*targets/rounds : (round+1)*targets/rounds]
					oreg := newReg(b)
					loop.measure(b, func() {
						for _, a := range share {
							orasPush(b, oras, files, home, oreg.Host+"/bench", a)
						}
					})
					loopTargets += len(share)
				}
			}
			n := rounds * b.N
			first.report(b, "first", n*targets)
			again.report(b, "republish", n*targets)
			b.ReportMetric(float64(requests)/float64(n*targets), "requests/artifact")
			b.ReportMetric(float64(conns)/float64(n), "conns/publish")
			b.ReportMetric(100*again.wall.Seconds()/first.wall.Seconds(), "republish-%-wall")
			b.ReportMetric(100*again.cpu.Seconds()/first.cpu.Seconds(), "republish-%-cpu")
			b.Logf("%s: configpub first publish of %d targets: %v wall, %v cpu (%.0f artifacts/s, %.1f requests/artifact on %d connections); unchanged re-publish: %v wall (%.1f%%), %v cpu (%.1f%%)",
				storage, targets, first.per(n), first.cpuPer(n), float64(n*targets)/first.wall.Seconds(), float64(requests)/float64(n*targets), conns/n,
				again.per(n), 100*again.wall.Seconds()/first.wall.Seconds(), again.cpuPer(n), 100*again.cpu.Seconds()/first.cpu.Seconds())
			if orasErr != nil {
				b.Logf("%s: oras push loop skipped: the baseline needs the oras CLI on $PATH (make bench-publish installs the pinned one)", storage)
				return
			}
			// Scale the oras loop to the publishes' targets per op.
			scale := float64(n*targets) / float64(loopTargets)
			loop.wall = time.Duration(float64(loop.wall) * scale)
			loop.cpu = time.Duration(float64(loop.cpu) * scale)
			loop.report(b, "oras", n*targets)
			b.ReportMetric(loop.wall.Seconds()/first.wall.Seconds(), "speedup-wall-x")
			b.ReportMetric(loop.cpu.Seconds()/first.cpu.Seconds(), "speedup-cpu-x")
			b.Logf("%s: oras push loop (%d invocations, scaled to %d): %v wall, %v cpu (%.0f artifacts/s); configpub is %.1fx faster by wall time, %.1fx less cpu",
				storage, loopTargets, targets, loop.per(n), loop.cpuPer(n), float64(n*targets)/loop.wall.Seconds(),
				loop.wall.Seconds()/first.wall.Seconds(), loop.cpu.Seconds()/first.cpu.Seconds())
		})
	}
}

// series accumulates the wall and CPU time of one measured series.
type series struct{ wall, cpu time.Duration }

// measure runs f once and adds its wall and CPU time. Garbage left by
// the previous series is collected first, so it is not charged to f.
func (s *series) measure(b *testing.B, f func()) {
	b.Helper()
	runtime.GC()
	t, c := time.Now(), cpuTime()
	f()
	s.wall += time.Since(t)
	s.cpu += cpuTime() - c
}

func (s series) per(n int) time.Duration { return (s.wall / time.Duration(n)).Round(time.Millisecond) }
func (s series) cpuPer(n int) time.Duration {
	return (s.cpu / time.Duration(n)).Round(time.Millisecond)
}

// report records the series' throughput and CPU time per 1,000 targets.
func (s series) report(b *testing.B, name string, artifacts int) {
	b.ReportMetric(float64(artifacts)/s.wall.Seconds(), name+"-artifacts/s")
	b.ReportMetric(float64(s.cpu.Milliseconds())*benchTargets/float64(artifacts), name+"-cpu-ms/1000")
}

// cpuTime is user+system CPU of this process and its waited-for children.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}

// writeValues writes each target's values.yml to <dir>/<host>/<serviceId>/
// for the oras baseline.
func writeValues(b *testing.B, arts []registry.Artifact) string {
	b.Helper()
	dir := b.TempDir()
	for _, a := range arts {
		d := filepath.Join(dir, a.Host, a.ServiceID)
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "values.yml"), a.Values, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// orasPush pushes one target with the oras CLI, as a shell loop would.
func orasPush(b *testing.B, oras, files, home, prefix string, a registry.Artifact) {
	b.Helper()
	args := []string{"push", "--plain-http", "--no-tty", "--artifact-type", registry.ValuesArtifactType}
	for k, v := range a.Annotations() {
		args = append(args, "--annotation", k+"="+v)
	}
	args = append(args, registry.Repository(prefix, a)+":"+registry.Tag(a.ReleaseVersion), "values.yml:"+registry.ValuesLayerType)
	cmd := exec.Command(oras, args...)
	cmd.Dir = filepath.Join(files, a.Host, a.ServiceID)
	cmd.Env = append(os.Environ(), "HOME="+home, "DOCKER_CONFIG="+home)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("oras push %s: %v\n%s", a.Host+"/"+a.ServiceID, err, out)
	}
}
