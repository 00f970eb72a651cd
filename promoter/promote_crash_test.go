package promoter_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/promoter/review"
	"github.com/configpub/configpub/registry"
)

// TestPromoteKillNine runs `configpub promote` as a real process and kills
// it with SIGKILL at a random moment (seeded: CONFIGPUB_CRASH_SEED, default
// 1; CONFIGPUB_CRASH_RUNS runs, default 50), each run on a fresh database
// whose environment is at release 1 while the process promotes release 2.
// After every kill, every pointer is at release 1 or every pointer is at
// release 2 — never a mix — the environment's current release agrees, and
// each release's journal sequences are exactly 1..row_revision. A re-run
// of the same promote then converges: release 2 active, its pointers moved
// exactly once.
func TestPromoteKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop: builds configpub and kills `configpub promote` at least 50 times; skipped under -short")
	}
	runs := envInt(t, "CONFIGPUB_CRASH_RUNS", 50)
	seed := uint64(envInt(t, "CONFIGPUB_CRASH_SEED", 1))
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	bin := buildConfigpub(t)
	p := newPromoteRepo(t)
	reg := registrytest.New(t, registrytest.Options{})
	prefix := reg.Host + "/configpub"
	const password = "crash-test"
	kp, err := cosignkey.GenerateKeyPair([]byte(password))
	if err != nil {
		t.Fatal(err)
	}
	keyPath, _, err := cosignkey.WriteKeyPair(t.TempDir(), kp)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := cosignkey.LoadPrivateKey(kp.PrivatePEM, []byte(password))
	if err != nil {
		t.Fatal(err)
	}
	client, err := registry.New(registry.Options{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := p.snapshots[p.r1], p.snapshots[p.r2]
	changed := 0
	for k, v := range r2 {
		if r1[k] != v {
			changed++
		}
	}

	promote := func(ctx context.Context, dbURL string, commit plumbing.Hash) *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, "promote", "--repo", p.repo.Dir, "--env", promoteEnv,
			"--database", dbURL, "--registry", prefix, "--plain-http", "--key", keyPath,
			"--commit", commit.String(), "--require-trailer", "Reviewed-by", "-v")
		cmd.Env = append(os.Environ(), cosignkey.PasswordEnv+"="+password)
		return cmd
	}

	// Calibrate (twice: the first run also pushes release 2's artifacts):
	// the process's whole life, and its database phase — from the log line
	// "artifacts published and verified" to exit.
	var life, dbPhase time.Duration
	for i := range 2 {
		t.Run(fmt.Sprintf("calibrate%d", i), func(t *testing.T) {
			db := pgtest.New(t)
			activateRelease1(t, db, p, client, prefix, signer)
			pr := startPromote(t, promote(context.Background(), db.URLFor(t, "configpub_promoter"), p.r2))
			var marked time.Time
			select {
			case <-pr.marker:
				marked = time.Now()
			case err := <-pr.done:
				t.Fatalf("configpub promote exited before publishing: %v\n%s", err, pr.output())
			}
			if err := <-pr.done; err != nil {
				t.Fatalf("configpub promote: %v\n%s", err, pr.output())
			}
			life, dbPhase = time.Since(pr.start), time.Since(marked)
			t.Logf("an uninterrupted promote of release 2 took %v, its database phase %v", life, dbPhase)
		})
	}
	if life == 0 {
		t.Fatal("calibration failed")
	}

	var atOld, atNew, exited, inFlight int
	for i := range runs {
		// A third of the runs are killed anywhere in the process's life;
		// the others in its database phase: after the log line "artifacts
		// published and verified", within the phase's calibrated length.
		anywhere := i%3 == 0
		delay := time.Duration(rng.Int64N(int64(life)))
		if !anywhere {
			delay = time.Duration(rng.Int64N(int64(dbPhase)))
		}
		ok := t.Run(fmt.Sprintf("run%02d", i), func(t *testing.T) {
			db := pgtest.New(t)
			pool := db.Pool(t)
			activateRelease1(t, db, p, client, prefix, signer)
			url := db.URLFor(t, "configpub_promoter")

			pr := startPromote(t, promote(context.Background(), url, p.r2))
			if exitedFirst, err := pr.killAt(anywhere, delay); exitedFirst {
				exited++
				if err != nil {
					t.Fatalf("promote exited before the kill: %v\n%s", err, pr.output())
				}
			}

			s := readState(t, pool)
			switch {
			case pointersAt(s.Pointers, r1) && s.Current == 1:
				atOld++
			case pointersAt(s.Pointers, r2) && s.Current == 2:
				atNew++
			default:
				t.Fatalf("after a kill at %v: got pointers %v (current release %d), want all at release 1 %v or all at release 2 %v", delay, s.Pointers, s.Current, r1, r2)
			}
			checkJournal(t, s)
			var pending *int64
			if err := pool.QueryRow(context.Background(), "SELECT pending_release_version FROM configpub.environment WHERE env_tag = $1", promoteEnv).Scan(&pending); err != nil {
				t.Fatal(err)
			}
			if pending != nil {
				inFlight++
			}

			// The same promote converges.
			rerun := promote(context.Background(), url, p.r2)
			if b, err := rerun.CombinedOutput(); err != nil {
				t.Fatalf("re-run after a kill at %v: %v\n%s", delay, err, b)
			}
			s = readState(t, pool)
			if !pointersAt(s.Pointers, r2) || s.Current != 2 {
				t.Fatalf("after the re-run: got pointers %v (current %d), want release 2", s.Pointers, s.Current)
			}
			checkJournal(t, s)
			var moves int
			if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM configpub.pointer_move WHERE env_tag = $1 AND release_version = 2", promoteEnv).Scan(&moves); err != nil {
				t.Fatal(err)
			}
			if moves != changed {
				t.Fatalf("after the re-run: got %d pointer moves for release 2, want %d (exactly once)", moves, changed)
			}
		})
		if !ok {
			t.Fatalf("seed %d run %d failed (kill %v after %s); rerun with CONFIGPUB_CRASH_SEED=%d", seed, i, delay, map[bool]string{true: "start", false: "publishing"}[anywhere], seed)
		}
	}
	t.Logf("seed %d: %d runs; after the kill %d at release 1 (%d with release 2's intent recorded, unconfirmed), %d at release 2 (%d finished before the kill)", seed, runs, atOld, inFlight, atNew, exited)
}

// promoteProcess is a running `configpub promote -v`.
type promoteProcess struct {
	cmd    *exec.Cmd
	start  time.Time
	marker chan struct{} // closed when the publish step has been logged
	done   chan error    // receives Wait's result once
	mu     sync.Mutex
	out    bytes.Buffer
}

// publishedMarker is the log message Promote writes after the registry
// step, just before the store's transactions.
const publishedMarker = `msg="artifacts published and verified"`

func startPromote(t *testing.T, cmd *exec.Cmd) *promoteProcess {
	t.Helper()
	return startMarked(t, cmd, publishedMarker)
}

// killAt sends SIGKILL delay after the process started (anywhere) or
// delay after its marker line, and waits for it. exitedFirst reports that
// the process ended on its own before the kill, with err its exit.
func (pr *promoteProcess) killAt(anywhere bool, delay time.Duration) (exitedFirst bool, err error) {
	var timer <-chan time.Time
	if anywhere {
		timer = time.After(delay)
	}
	marker := pr.marker
	for {
		select {
		case <-marker:
			marker = nil
			if !anywhere {
				timer = time.After(delay)
			}
		case <-timer:
			_ = pr.cmd.Process.Signal(syscall.SIGKILL)
			<-pr.done
			return false, nil
		case err := <-pr.done:
			return true, err
		}
	}
}

// startMarked starts cmd; its marker channel is closed when a stderr line
// contains markerText.
func startMarked(t *testing.T, cmd *exec.Cmd, markerText string) *promoteProcess {
	t.Helper()
	pr := &promoteProcess{cmd: cmd, marker: make(chan struct{}), done: make(chan error, 1)}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = &lockedWriter{pr}
	pr.start = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		marked := false
		for sc.Scan() {
			line := sc.Text()
			_, _ = (&lockedWriter{pr}).Write([]byte(line + "\n"))
			if !marked && strings.Contains(line, markerText) {
				marked = true
				close(pr.marker)
			}
		}
		pr.done <- cmd.Wait()
	}()
	return pr
}

func (pr *promoteProcess) output() string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.out.String()
}

type lockedWriter struct{ pr *promoteProcess }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.pr.mu.Lock()
	defer w.pr.mu.Unlock()
	return w.pr.out.Write(b)
}

// activateRelease1 promotes release 1 in-process on db.
func activateRelease1(t *testing.T, db *pgtest.DB, p *promoteRepo, client *registry.Client, prefix string, signer *cosignkey.Signer) {
	t.Helper()
	store, err := promoter.Open(context.Background(), db.Pool(t), promoter.Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	repo, err := review.Open(p.repo.Dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = promoter.Promote(context.Background(), repo, promoter.PromoteOptions{
		EnvTag: promoteEnv, Review: review.Options{Commit: p.r1.String()},
		Store: store, Registry: client, RegistryPrefix: prefix, Signer: signer,
	})
	if err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
}

// buildConfigpub builds the configpub binary into a temp dir.
func buildConfigpub(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "configpub")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/configpub")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/configpub: %v\n%s", err, out)
	}
	return bin
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
