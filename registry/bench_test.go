package registry_test

import (
	"context"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	ggcr "github.com/google/go-containerregistry/pkg/registry"

	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

const benchTargets = 1000

// BenchmarkPublish1000 publishes 1,000 generated targets to a loopback
// in-process Distribution registry and, in the same run, measures the
// baselines: an unchanged re-publish and a loop of `oras push` invocations
// pushing the same files with the same artifact type and annotations (oras
// from $PATH; `make bench-publish` installs the pinned one). It runs with
// three loopback registries: Distribution with in-memory storage,
// Distribution with filesystem storage (on tmpfs when available), and
// go-containerregistry's lighter in-memory registry, which leaves most of
// the measured cost to the publishers themselves. Each first publish and each oras loop gets
// a fresh registry. Besides wall time it reports cpu-ms/op: user+system
// CPU of this process and its children (the registry runs in-process, the
// oras invocations are children), which a busy shared machine distorts
// less than wall time.
func BenchmarkPublish1000(b *testing.B) {
	arts := registrytest.Artifacts(benchTargets, "prod", 1)
	key := newKey(b)
	ctx := context.Background()
	for _, storage := range []string{"memory", "filesystem", "ggcr"} {
		newReg := func(b *testing.B) *registrytest.Registry {
			switch storage {
			case "memory":
				return registrytest.New(b, registrytest.Options{InMemory: true})
			case "ggcr":
				return registrytest.New(b, registrytest.Options{Backend: ggcr.New(ggcr.Logger(log.New(io.Discard, "", 0)))})
			}
			return registrytest.New(b, registrytest.Options{Dir: benchDir(b)})
		}
		var first, again, orasLoop, firstCPU, againCPU, orasCPU time.Duration
		b.Run("configpub-first/"+storage, func(b *testing.B) {
			cpu := startCPU()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				reg := newReg(b)
				c := newClient(b, registry.Options{})
				b.StartTimer()
				sum, err := c.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/bench", Artifacts: arts, Signer: key})
				if err != nil {
					b.Fatal(err)
				}
				if sum.Pushed != benchTargets {
					b.Fatalf("got %d pushed, want %d", sum.Pushed, benchTargets)
				}
			}
			first, firstCPU = report(b, cpu)
		})
		b.Run("configpub-republish/"+storage, func(b *testing.B) {
			b.StopTimer()
			reg := newReg(b)
			c := newClient(b, registry.Options{})
			req := registry.PublishRequest{Prefix: reg.Host + "/bench", Artifacts: arts, Signer: key}
			if _, err := c.Publish(ctx, req); err != nil {
				b.Fatal(err)
			}
			reg.Reset()
			cpu := startCPU()
			b.StartTimer()
			for i := 0; i < b.N; i++ {
				sum, err := c.Publish(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				if sum.AlreadyPresent != benchTargets {
					b.Fatalf("got %d already present, want %d", sum.AlreadyPresent, benchTargets)
				}
			}
			b.StopTimer()
			if w := reg.Writes(); w != 0 {
				b.Fatalf("re-publish made %d writes, want 0", w)
			}
			again, againCPU = report(b, cpu)
		})
		b.Run("oras-push-loop/"+storage, func(b *testing.B) {
			oras, err := exec.LookPath("oras")
			if err != nil {
				b.Skip("baseline needs the oras CLI on $PATH (make bench-publish installs the pinned one)")
			}
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
			home := b.TempDir() // oras must not read or write the developer's Docker config
			cpu := startCPU()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				reg := newReg(b)
				b.StartTimer()
				for _, a := range arts {
					args := []string{"push", "--plain-http", "--no-tty", "--artifact-type", registry.ValuesArtifactType}
					for k, v := range a.Annotations() {
						args = append(args, "--annotation", k+"="+v)
					}
					args = append(args, registry.Repository(reg.Host+"/bench", a)+":"+registry.Tag(a.ReleaseVersion), "values.yml:application/yaml")
					cmd := exec.Command(oras, args...)
					cmd.Dir = filepath.Join(dir, a.Host, a.ServiceID)
					cmd.Env = append(os.Environ(), "HOME="+home, "DOCKER_CONFIG="+home)
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("oras push: %v\n%s", err, out)
					}
				}
			}
			orasLoop, orasCPU = report(b, cpu)
		})
		if first > 0 && again > 0 {
			b.Logf("%s: configpub first publish %v (cpu %v), unchanged re-publish %v (cpu %v): %.1f%% of first by wall time, %.1f%% by cpu",
				storage, first.Round(time.Millisecond), firstCPU.Round(time.Millisecond), again.Round(time.Millisecond), againCPU.Round(time.Millisecond),
				100*again.Seconds()/first.Seconds(), 100*againCPU.Seconds()/firstCPU.Seconds())
		}
		if first > 0 && orasLoop > 0 {
			b.Logf("%s: oras push loop %v (cpu %v): configpub first publish is %.1fx faster by wall time, %.1fx less cpu",
				storage, orasLoop.Round(time.Millisecond), orasCPU.Round(time.Millisecond), orasLoop.Seconds()/first.Seconds(), orasCPU.Seconds()/firstCPU.Seconds())
		}
	}
}

// cpuTime is user+system CPU of this process and its waited-for children.
func cpuTime() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(children.Utime) + tv(children.Stime)
}

type cpuStart time.Duration

func startCPU() cpuStart { return cpuStart(cpuTime()) }

// report records artifacts/s and cpu-ms/op and returns wall and CPU time
// per op.
// The CPU figure includes set-up done with the timer stopped (creating a
// registry), which is small next to 1,000 pushes.
func report(b *testing.B, start cpuStart) (wall, cpu time.Duration) {
	wall = b.Elapsed() / time.Duration(b.N)
	cpu = (cpuTime() - time.Duration(start)) / time.Duration(b.N)
	b.ReportMetric(float64(benchTargets)/wall.Seconds(), "artifacts/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000, "cpu-ms/op")
	return wall, cpu
}

// benchDir returns a storage directory for a filesystem-backed benchmark
// registry: on tmpfs (/dev/shm) when available, so the disk of a shared
// machine does not dominate; configpub and the oras baseline both use it.
func benchDir(b *testing.B) string {
	b.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if d, err := os.MkdirTemp("/dev/shm", "configpub-bench-"); err == nil {
			b.Cleanup(func() { _ = os.RemoveAll(d) })
			return d
		}
	}
	return b.TempDir()
}
