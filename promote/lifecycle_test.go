package promote_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promoter"
)

// TestPromoteForwardFixAfterRollback: on real Git, registry and
// PostgreSQL, rollback 2 -> 1, re-running release 2's promotion replays
// without re-activating it, and release 3 built on base 2 is promoted and
// activates every pointer.
func TestPromoteForwardFixAfterRollback(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	for _, c := range []plumbing.Hash{h.Repo.R1, h.Repo.R2} {
		if _, err := h.Promote(t, h.Options(c)); err != nil {
			t.Fatalf("promote %s: %v", c, err)
		}
	}
	if _, err := h.Store.Rollback(ctx, promoter.RollbackInput{CommandID: promotertest.ID("rb", "promote-lifecycle"), EnvTag: promotertest.Env,
		ToRelease: 1, Actor: "oncall", Reason: "bad logging"}); err != nil {
		t.Fatal(err)
	}
	s1 := promotertest.ReadState(t, h.Pool)
	if !promotertest.PointersAt(s1.Pointers, h.Repo.Snapshots[h.Repo.R1]) || s1.Current != 1 {
		t.Fatalf("after rollback got pointers %v current %d, want release 1", s1.Pointers, s1.Current)
	}

	// CI re-runs release 2's promotion: a replay that says release 2 is
	// rolled back and release 1 active; nothing moves.
	again, err := h.Promote(t, h.Options(h.Repo.R2))
	if err != nil {
		t.Fatalf("re-run release 2: %v", err)
	}
	if a := again.Activation; a == nil || !a.Replayed || a.StateNow != promoter.StateRolledBack || a.ActiveRelease != 1 {
		t.Fatalf("re-run release 2 got %+v, want a replay reporting ROLLED_BACK with release 1 active", again.Activation)
	}
	// A later commit on main that changes no policy input compiles to the
	// same release 2: reported as rolled back, nothing written.
	docs := h.Repo.Git.Commit(gittest.Commit{Files: map[string][]byte{"README.md": []byte("docs only\n")}, Message: "docs: README"})
	noop, err := h.Promote(t, h.Options(docs))
	if err != nil {
		t.Fatalf("promote a docs-only commit after the rollback: %v", err)
	}
	if noop.AlreadyRecordedFrom != h.Repo.R2.String() || noop.RecordedState != promoter.StateRolledBack || noop.ActiveRelease != 1 ||
		noop.Activation != nil || noop.AlreadyActiveFrom != "" {
		t.Fatalf("docs-only commit got %+v, want release 2 already recorded from %s, ROLLED_BACK, release 1 active", noop, h.Repo.R2)
	}
	if s := promotertest.ReadState(t, h.Pool); !promotertest.SameCounts(s.Counts, s1.Counts) || !promotertest.PointersAt(s.Pointers, h.Repo.Snapshots[h.Repo.R1]) {
		t.Fatalf("re-running a rolled-back release wrote rows %v (was %v) or moved pointers", s.Counts, s1.Counts)
	}

	// The forward fix: release 3 on base 2.
	// Release 3: gateway logging DEBUG -> WARN (only gateway targets change).
	r3 := promotertest.AddRelease3(t, h.Repo, "    gateway:\n      server:\n        httpsPort: 8443\n      logging:\n        level: DEBUG",
		"    gateway:\n      server:\n        httpsPort: 8443\n      logging:\n        level: WARN")
	res, err := h.Promote(t, h.Options(r3))
	if err != nil {
		t.Fatalf("promote release 3 on base 2 after the rollback: %v", err)
	}
	if res.ReleaseVersion != 3 || res.BaseRelease != 2 || res.Activation.PreviousRelease != 1 {
		t.Fatalf("got release %d base %d from %d, want release 3 on base 2 from release 1", res.ReleaseVersion, res.BaseRelease, res.Activation.PreviousRelease)
	}
	s3 := promotertest.ReadState(t, h.Pool)
	if !promotertest.PointersAt(s3.Pointers, h.Repo.Snapshots[r3]) || s3.Current != 3 {
		t.Fatalf("got pointers %v current %d, want every pointer on release 3 %v", s3.Pointers, s3.Current, h.Repo.Snapshots[r3])
	}
	promotertest.CheckJournal(t, s3)
	st, err := h.Store.Status(ctx, promotertest.Env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{1: promoter.StateSuperseded, 2: promoter.StateRolledBack, 3: promoter.StateActive}
	for _, r := range st.Releases {
		if r.State != want[r.ReleaseVersion] {
			t.Errorf("release %d is %s, want %s", r.ReleaseVersion, r.State, want[r.ReleaseVersion])
		}
	}
	// Rolled back and superseded, release 2 still never comes back by a re-run.
	again, err = h.Promote(t, h.Options(h.Repo.R2))
	if err != nil || again.Activation == nil || again.Activation.StateNow != promoter.StateRolledBack || again.Activation.ActiveRelease != 3 {
		t.Fatalf("re-run release 2 after release 3: got %+v, %v", again, err)
	}
	if s := promotertest.ReadState(t, h.Pool); !promotertest.PointersAt(s.Pointers, h.Repo.Snapshots[r3]) {
		t.Fatal("re-running release 2 after release 3 moved pointers")
	}
	// A release built on a base other than the head is stale, naming both.
	var cas *promoter.CASError
	if _, err := h.Store.Rollback(ctx, promoter.RollbackInput{CommandID: promotertest.ID("rb", "no-such"), EnvTag: promotertest.Env,
		ToRelease: 5, Actor: "oncall", Reason: "typo"}); !errors.Is(err, promoter.ErrNotFound) || errors.As(err, &cas) {
		t.Fatalf("rollback to release 5: got %v, want ErrNotFound", err)
	}
}
