package promote_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/promote"
	"github.com/configpub/configpub/promote/review"
	"github.com/configpub/configpub/promoter"
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
	loop := promotertest.NewCrashLoop(t, 50)
	runs, seed := loop.Runs, loop.Seed
	bin := promotertest.BuildConfigpub(t)
	p := promotertest.NewRepo(t)
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
	r1, r2 := p.Snapshots[p.R1], p.Snapshots[p.R2]
	changed := 0
	for k, v := range r2 {
		if r1[k] != v {
			changed++
		}
	}

	promote := func(ctx context.Context, dbURL string, commit plumbing.Hash) *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, "promote", "--repo", p.Git.Dir, "--env", promotertest.Env,
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
			pr := startPromote(t, promote(context.Background(), db.URLFor(t, "configpub_promoter"), p.R2))
			var err error
			if life, dbPhase, err = pr.Wait(); err != nil {
				t.Fatalf("uninterrupted configpub promote: %v\n%s", err, pr.Output())
			}
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
		anywhere, delay := loop.Kill(i, life, dbPhase)
		ok := t.Run(fmt.Sprintf("run%02d", i), func(t *testing.T) {
			db := pgtest.New(t)
			pool := db.Pool(t)
			activateRelease1(t, db, p, client, prefix, signer)
			url := db.URLFor(t, "configpub_promoter")

			pr := startPromote(t, promote(context.Background(), url, p.R2))
			if exitedFirst, err := pr.KillAt(anywhere, delay); exitedFirst {
				exited++
				if err != nil {
					t.Fatalf("promote exited before the kill: %v\n%s", err, pr.Output())
				}
			}

			s := promotertest.ReadState(t, pool)
			switch {
			case promotertest.PointersAt(s.Pointers, r1) && s.Current == 1:
				atOld++
			case promotertest.PointersAt(s.Pointers, r2) && s.Current == 2:
				atNew++
			default:
				t.Fatalf("after a kill at %v: got pointers %v (current release %d), want all at release 1 %v or all at release 2 %v", delay, s.Pointers, s.Current, r1, r2)
			}
			promotertest.CheckJournal(t, s)
			var pending *int64
			if err := pool.QueryRow(context.Background(), "SELECT pending_release_version FROM configpub.environment WHERE env_tag = $1", promotertest.Env).Scan(&pending); err != nil {
				t.Fatal(err)
			}
			if pending != nil {
				inFlight++
			}

			// The same promote converges.
			rerun := promote(context.Background(), url, p.R2)
			if b, err := rerun.CombinedOutput(); err != nil {
				t.Fatalf("re-run after a kill at %v: %v\n%s", delay, err, b)
			}
			s = promotertest.ReadState(t, pool)
			if !promotertest.PointersAt(s.Pointers, r2) || s.Current != 2 {
				t.Fatalf("after the re-run: got pointers %v (current %d), want release 2", s.Pointers, s.Current)
			}
			promotertest.CheckJournal(t, s)
			var moves int
			if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM configpub.pointer_move WHERE env_tag = $1 AND release_version = 2", promotertest.Env).Scan(&moves); err != nil {
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

// publishedMarker is the log message Run writes after the registry
// step, just before the store's transactions.
const publishedMarker = `msg="artifacts published and verified"`

func startPromote(t *testing.T, cmd *exec.Cmd) *promotertest.Process {
	t.Helper()
	return promotertest.Start(t, cmd, publishedMarker)
}

// activateRelease1 promotes release 1 in-process on db.
func activateRelease1(t *testing.T, db *pgtest.DB, p *promotertest.Repo, client *registry.Client, prefix string, signer *cosignkey.Signer) {
	t.Helper()
	store, err := promoter.Open(context.Background(), db.Pool(t), promoter.Options{Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	repo, err := review.Open(p.Git.Dir)
	if err != nil {
		t.Fatal(err)
	}
	_, err = promote.Run(context.Background(), repo, promote.Options{
		EnvTag: promotertest.Env, Review: review.Options{Commit: p.R1.String()},
		Store: store, Registry: client, RegistryPrefix: prefix, Signer: signer,
	})
	if err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
}
