package main

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/gen"
)

// buildCLI builds the configpub binary for the test.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "configpub")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// hangingRegistry is an OCI registry that answers nothing: each request is
// held until its client goes. started receives once per request.
func hangingRegistry(t *testing.T) (host string, started <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case ch <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), ch
}

// interruptedRun is a configpub process run to its end.
type interruptedRun struct {
	code   int
	stderr string
}

// runInterrupted starts bin with args, sends sig once ready returns (it
// is called with the process running and returns when the command is
// mid-way), and waits for the process to end.
func runInterrupted(t *testing.T, bin string, sig syscall.Signal, ready func(), args ...string) interruptedRun {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ready()
	select {
	case err := <-done:
		t.Fatalf("configpub %s ended before it was interrupted: %v\n%s", args[0], err, stderr.String())
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("configpub %s did not end within 30s of %v\n%s", args[0], sig, stderr.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return interruptedRun{code: cmd.ProcessState.ExitCode(), stderr: stderr.String()}
}

// TestInterruptedCommandExitCode: the built binary, interrupted by a real
// SIGINT or SIGTERM in the middle of compile, publish or pull, exits 130 or
// 143 (128 plus the signal's number, as a shell reports a command a signal
// ended), says on stderr that it was interrupted and by which signal, and
// leaves nothing half-written: no release file, no --out tree, no staging
// directory or temporary file. A fetch --watch sidecar stopped so exits 0,
// as documented. They all exited 1, the code of a refusal the user can fix.
func TestInterruptedCommandExitCode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildCLI(t)
	interrupted := func(t *testing.T, r interruptedRun, sig syscall.Signal, want int) {
		t.Helper()
		if r.code != want {
			t.Errorf("exit %d, want %d\n%s", r.code, want, r.stderr)
		}
		if name := sig.String() + " signal received"; !strings.Contains(r.stderr, name) {
			t.Errorf("stderr does not say %q:\n%s", name, r.stderr)
		}
	}
	waitFor := func(started <-chan struct{}) func() {
		return func() {
			select {
			case <-started:
			case <-time.After(60 * time.Second):
				t.Fatal("no request reached the registry within 60s")
			}
		}
	}

	t.Run("pull SIGINT", func(t *testing.T) {
		host, started := hangingRegistry(t)
		dir := t.TempDir()
		out := filepath.Join(dir, "values.yml")
		r := runInterrupted(t, bin, syscall.SIGINT, waitFor(started),
			"pull", host+"/configpub/dev/h/svc@sha256:"+strings.Repeat("ab", 32), "--out", out, "--plain-http")
		interrupted(t, r, syscall.SIGINT, 130)
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("pull left %d file(s) beside --out: %v", len(ents), ents)
		}
	})

	t.Run("publish SIGTERM", func(t *testing.T) {
		host, started := hangingRegistry(t)
		t.Setenv(cosignkey.PasswordEnv, "pw")
		kp, err := cosignkey.GenerateKeyPair([]byte("pw"))
		if err != nil {
			t.Fatal(err)
		}
		keyPath, _, err := cosignkey.WriteKeyPair(t.TempDir(), kp)
		if err != nil {
			t.Fatal(err)
		}
		repo := copyDir(t, "../../fixtures/policy-repo")
		before := snapshot(t, repo)
		r := runInterrupted(t, bin, syscall.SIGTERM, waitFor(started),
			"publish", "--repo", repo, "--env", "dev", "--registry", host+"/configpub", "--key", keyPath, "--plain-http")
		interrupted(t, r, syscall.SIGTERM, 143)
		if after := snapshot(t, repo); after != before {
			t.Errorf("publish changed the repository:\n%s", after)
		}
	})

	t.Run("compile SIGINT", func(t *testing.T) {
		repo, outDir := t.TempDir(), t.TempDir()
		if err := gen.Write(repo, gen.Options{Targets: 1000, EnvTag: "bench"}); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, repo)
		// Interrupted while it writes --out: its staging directory exists.
		staging := func() {
			deadline := time.Now().Add(120 * time.Second)
			for time.Now().Before(deadline) {
				if m, _ := filepath.Glob(filepath.Join(outDir, ".bench.staging-*", "*")); len(m) > 0 {
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
			t.Fatal("compile did not start writing --out within 120s")
		}
		r := runInterrupted(t, bin, syscall.SIGINT, staging,
			"compile", "--repo", repo, "--env", "bench", "--out", outDir, "--created-at", time.Now().UTC().Format(time.RFC3339))
		interrupted(t, r, syscall.SIGINT, 130)
		if after := snapshot(t, repo); after != before {
			t.Errorf("compile wrote into the repository (a release file):\n%s", after)
		}
		if ents, _ := os.ReadDir(outDir); len(ents) != 0 {
			t.Errorf("compile left %v in --out's directory, want nothing", ents)
		}
	})

	t.Run("fetch --watch SIGTERM", func(t *testing.T) {
		s, key := newFetchServer(t, time.Hour)
		dir := t.TempDir()
		out := filepath.Join(dir, "values.yml")
		applied := func() {
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				if b, _ := os.ReadFile(out); bytes.Equal(b, s.values) {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Fatal("fetch --watch did not write --out within 60s")
		}
		r := runInterrupted(t, bin, syscall.SIGTERM, applied,
			append(s.args(t, key, filepath.Join(dir, "cache"), out), "--watch", "--interval", "1h")...)
		if r.code != 0 {
			t.Errorf("fetch --watch stopped by SIGTERM: exit %d, want 0\n%s", r.code, r.stderr)
		}
	})
}
