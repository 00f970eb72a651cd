package promote_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promoter"
)

// TestPromoteCatchesUpReleasesThatWereNotPromoted: on real Git, registry
// and PostgreSQL, release 2's promotion never ran (a CI run cancelled while
// a newer push queued) and the next push holds release 3, built on it.
// Promoting release 3 records release 2 first, from its own commit,
// without activating it, then promotes release 3: the store holds 1, 2 and
// 3 in order, every pointer moved once, from release 1 to release 3 —
// release 2, superseded before its promotion ran, was never served. With
// NoCatchUp the same promotion is refused as stale, naming release 2 as
// not recorded, and nothing is written.
func TestPromoteCatchesUpReleasesThatWereNotPromoted(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatal(err)
	}
	r3 := promotertest.AddRelease3(t, h.Repo, "    gateway:\n      server:\n        httpsPort: 8443\n      logging:\n        level: DEBUG",
		"    gateway:\n      server:\n        httpsPort: 8443\n      logging:\n        level: WARN")
	before := promotertest.ReadState(t, h.Pool)

	only := h.Options(r3)
	only.NoCatchUp = true
	_, err := h.Promote(t, only)
	if !errors.Is(err, promoter.ErrStale) || !errors.Is(err, bundle.ErrReleaseNotRecorded) {
		t.Fatalf("release 3 alone: got %v, want stale, release 2 not recorded", err)
	}
	if s := promotertest.ReadState(t, h.Pool); !promotertest.SameCounts(s.Counts, before.Counts) {
		t.Fatalf("a refused promotion wrote rows: %v (was %v)", s.Counts, before.Counts)
	}

	// Twenty years later release 2's windows have ended: it cannot be
	// caught up, nothing is written, and the error says how to promote the
	// change without it.
	late, err := promoter.Open(ctx, h.Pool, promoter.Options{Signer: h.Signer, Clock: func() time.Time { return gittest.Epoch.AddDate(20, 0, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	o := h.Options(r3)
	o.Store = late
	_, err = h.Promote(t, o)
	if !errors.Is(err, promoter.ErrOutsideWindow) || !strings.Contains(err.Error(), "catching up release 2 from "+h.Repo.R2.String()[:12]) ||
		!strings.Contains(err.Error(), "rebuild it on release 1, the store's latest: configpub compile --base-ref "+h.Repo.R1.String()[:12]) {
		t.Fatalf("release 3 after release 2's windows ended: got %v, want release 2's refusal and the way around it", err)
	}
	if s := promotertest.ReadState(t, h.Pool); !promotertest.SameCounts(s.Counts, before.Counts) {
		t.Fatalf("a catch-up refused wrote rows: %v (was %v)", s.Counts, before.Counts)
	}

	res, err := h.Promote(t, h.Options(r3))
	if err != nil {
		t.Fatalf("promote release 3 with release 2 not promoted: %v", err)
	}
	if len(res.CaughtUp) != 1 || res.CaughtUp[0].ReleaseVersion != 2 || res.CaughtUp[0].Commit != h.Repo.R2.String() ||
		res.CaughtUp[0].Result == nil || res.CaughtUp[0].Result.Activation != nil || res.CaughtUp[0].Result.Staged != nil ||
		res.CaughtUp[0].Result.Recorded == nil || res.CaughtUp[0].Result.Recorded.ActiveRelease != 1 {
		t.Fatalf("caught up %+v, want release 2 recorded, not activated, from %s", res.CaughtUp, h.Repo.R2)
	}
	if res.ReleaseVersion != 3 || res.Activation == nil || res.Activation.PreviousRelease != 1 {
		t.Fatalf("got release %d activated %+v, want release 3 activated over release 1", res.ReleaseVersion, res.Activation)
	}
	// No pointer ever moved to release 2, and release 3's activation
	// moved each pointer from release 1's snapshot.
	var toTwo, fromOne, moves int
	if err := h.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE release_version = 2),
			count(*) FILTER (WHERE release_version = 3 AND previous_release_version = 1), count(*) FILTER (WHERE release_version = 3)
		FROM configpub.pointer_move WHERE env_tag = $1`, promotertest.Env).Scan(&toTwo, &fromOne, &moves); err != nil {
		t.Fatal(err)
	}
	if toTwo != 0 || moves == 0 || fromOne != moves {
		t.Fatalf("pointer moves: %d to release 2, %d of %d to release 3 from release 1; want none to release 2 and every move from release 1",
			toTwo, fromOne, moves)
	}
	s := promotertest.ReadState(t, h.Pool)
	if !promotertest.PointersAt(s.Pointers, h.Repo.Snapshots[r3]) || s.Current != 3 {
		t.Fatalf("got pointers %v current %d, want every pointer on release 3", s.Pointers, s.Current)
	}
	promotertest.CheckJournal(t, s)
	st, err := h.Store.Status(ctx, promotertest.Env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{1: promoter.StateSuperseded, 2: promoter.StateRecorded, 3: promoter.StateActive}
	if len(st.Releases) != 3 {
		t.Fatalf("%d releases recorded, want 3", len(st.Releases))
	}
	for _, r := range st.Releases {
		if r.State != want[r.ReleaseVersion] {
			t.Errorf("release %d is %s, want %s", r.ReleaseVersion, r.State, want[r.ReleaseVersion])
		}
	}
	for _, r := range st.Releases {
		if r.ReleaseVersion == 2 && r.Outcome != promoter.OutcomeNotRequested {
			t.Errorf("release 2's outcome is %s, want %s (never asked to be activated)", r.Outcome, promoter.OutcomeNotRequested)
		}
	}
	// Run again: a replay, nothing to catch up.
	again, err := h.Promote(t, h.Options(r3))
	if err != nil || len(again.CaughtUp) != 0 || again.Activation == nil || !again.Activation.Replayed {
		t.Fatalf("re-run: %+v %v, want a replay with nothing caught up", again, err)
	}
}

// TestCatchUpFromTheCommitThatIntroducedTheRelease: release 2's promotion
// never ran, and the commit after it on main changed a source without
// compiling (a pull-request check bypassed), so it still holds release 2
// with sources release 2 is not compiled from; the next commit compiles
// release 3 on release 2. Promoting release 3 catches release 2 up from
// the commit that introduced it, not the newest commit holding it, which
// is stale.
func TestCatchUpFromTheCommitThatIntroducedTheRelease(t *testing.T) {
	h := promotertest.New(t)
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatal(err)
	}
	reviewed := []string{"Reviewed-by: Carol <carol@example.com>"}
	files := h.Repo.Git.Files(h.Repo.R2)
	promotertest.Replace(t, files, "environments/"+promotertest.Env+".yaml",
		"    gateway:\n      server:\n        httpsPort: 8443\n      logging:\n        level: DEBUG",
		"    gateway:\n      server:\n        httpsPort: 8443\n      logging:\n        level: WARN")
	stale := h.Repo.Git.Commit(gittest.Commit{Files: files, Message: "gateway logging WARN (not compiled)", Trailers: reviewed})
	v3, res3 := promotertest.CompiledFiles(t, files, gittest.Epoch.Add(2*time.Hour))
	r3 := h.Repo.Git.Commit(gittest.Commit{Files: v3, Message: "release 3", Trailers: reviewed})
	h.Repo.Snapshots[r3] = promotertest.SnapshotsOf(res3)

	res, err := h.Promote(t, h.Options(r3))
	if err != nil {
		t.Fatalf("promote release 3 over a stale commit holding release 2: %v", err)
	}
	if len(res.CaughtUp) != 1 || res.CaughtUp[0].Commit != h.Repo.R2.String() || res.CaughtUp[0].Commit == stale.String() {
		t.Fatalf("caught up %+v, want release 2 from %s (introduced it), not %s (stale)", res.CaughtUp, h.Repo.R2, stale)
	}
	s := promotertest.ReadState(t, h.Pool)
	if !promotertest.PointersAt(s.Pointers, h.Repo.Snapshots[r3]) || s.Current != 3 {
		t.Fatalf("got pointers %v current %d, want every pointer on release 3", s.Pointers, s.Current)
	}
}

// TestCatchUpInARepositoryStoringCRLF: a repository whose files are
// stored with CRLF line endings in Git (committed from a Windows checkout
// without core.autocrlf), not only checked out so. Release 2's promotion
// never ran; promoting release 3 catches it up from the commit that holds
// it. The walk matched releaseVersion lines ending in LF only, passed
// over every CRLF release and refused release 3 as stale, release 2 "not
// in the first-parent history"; the compiler reads the same files as LF
// and had no quarrel.
func TestCatchUpInARepositoryStoringCRLF(t *testing.T) {
	h := promotertest.New(t)
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatal(err)
	}
	crlf := func(files map[string][]byte) map[string][]byte {
		out := map[string][]byte{}
		for p, b := range files {
			if strings.HasSuffix(p, ".yaml") {
				b = []byte(strings.ReplaceAll(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n", "\r\n"))
			}
			out[p] = b
		}
		return out
	}
	reviewed := []string{"Reviewed-by: Carol <carol@example.com>"}
	files := h.Repo.Git.Files(h.Repo.R2)
	r2 := h.Repo.Git.Commit(gittest.Commit{Branch: "windows", From: h.Repo.R1, Files: crlf(files), Message: "release 2, committed with CRLF", Trailers: reviewed})
	promotertest.Replace(t, files, "environments/"+promotertest.Env+".yaml",
		"    gateway:\n      server:\n        httpsPort: 8443\n      logging:\n        level: DEBUG",
		"    gateway:\n      server:\n        httpsPort: 8443\n      logging:\n        level: WARN")
	v3, res3 := promotertest.CompiledFiles(t, crlf(files), gittest.Epoch.Add(2*time.Hour))
	if res3.Manifest.ReleaseVersion != 3 {
		t.Fatalf("compiled release %d on the CRLF release 2, want 3", res3.Manifest.ReleaseVersion)
	}
	r3 := h.Repo.Git.Commit(gittest.Commit{Branch: "windows", Files: crlf(v3), Message: "release 3, committed with CRLF", Trailers: reviewed})
	h.Repo.Git.Branch(gittest.Main, r3)
	root := h.Repo.Git.Files(r3)["releases/"+promotertest.Env+".yaml"]
	if !strings.Contains(string(root), "\r\nreleaseVersion: 3\r\n") {
		t.Fatal("release 3's root is not stored with CRLF line endings")
	}

	res, err := h.Promote(t, h.Options(r3))
	if err != nil {
		t.Fatalf("promote release 3 of a CRLF repository, release 2 not promoted: %v", err)
	}
	if len(res.CaughtUp) != 1 || res.CaughtUp[0].ReleaseVersion != 2 || res.CaughtUp[0].Commit != r2.String() {
		t.Fatalf("caught up %+v, want release 2 from %s", res.CaughtUp, r2)
	}
	if s := promotertest.ReadState(t, h.Pool); !promotertest.PointersAt(s.Pointers, promotertest.SnapshotsOf(res3)) || s.Current != 3 {
		t.Fatalf("got pointers %v current %d, want every pointer on release 3", s.Pointers, s.Current)
	}
}
