package promote_test

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promote"
	"github.com/configpub/configpub/promote/review"
	"github.com/configpub/configpub/promoter"
)

// TestPromoteRefusesUnreviewedCommits: a commit off the first-parent
// history, without a required trailer or without a trusted signature is
// refused before anything touches the registry or the database.
func TestPromoteRefusesUnreviewedCommits(t *testing.T) {
	h := promotertest.New(t)
	key := gittest.NewKey(t, "Alice", "alice@example.com")
	wip := h.Repo.Git.Commit(gittest.Commit{Branch: "wip", From: h.Repo.R2, Files: map[string][]byte{"README.md": []byte("wip\n")}, Message: "unmerged work", Trailers: []string{"Reviewed-by: Mallory <m@example.com>"}})
	// A reviewed, correctly compiled commit on main whose Repository
	// document declares another protected ref.
	files := h.Repo.Git.Files(h.Repo.R2)
	files[compiler.RepositoryFile] = bytes.Replace(files[compiler.RepositoryFile], []byte("\nspec:\n"), []byte("\nspec:\n  protectedRef: refs/heads/release\n"), 1)
	declared, _ := promotertest.CompiledFiles(t, files, gittest.Epoch.Add(2*time.Hour))
	h.Repo.Git.Commit(gittest.Commit{Branch: "declare", From: h.Repo.R2, Files: declared, Message: "declare refs/heads/release protected"})
	declares := h.Repo.Git.Merge(gittest.Main, "declare", gittest.Commit{Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}})
	before := promotertest.ReadState(t, h.Pool)
	tests := []struct {
		name    string
		mod     func(*promote.Options)
		wantErr error
	}{
		{name: "second parent of a merge", mod: func(o *promote.Options) { o.Review.Commit = h.Repo.Feature2.String() }, wantErr: review.ErrNotOnProtectedRef},
		{name: "commit only on a feature branch", mod: func(o *promote.Options) { o.Review.Commit = wip.String() }, wantErr: review.ErrNotOnProtectedRef},
		{name: "feature branch named as the protected ref is still checked against main by default", mod: func(o *promote.Options) {
			o.Review.Commit = h.Repo.Feature2.String()
			o.Review.RequireTrailers = []string{"Reviewed-by"}
		}, wantErr: review.ErrNotOnProtectedRef},
		{name: "missing trailer", mod: func(o *promote.Options) {
			o.Review.Commit = h.Repo.R1.String()
			o.Review.RequireTrailers = []string{"Approved-by"}
		}, wantErr: review.ErrMissingTrailer},
		{name: "unsigned", mod: func(o *promote.Options) { o.Review.RequireSignedBy = key.Armored }, wantErr: review.ErrUnsigned},
		{name: "caller names another ref as protected", mod: func(o *promote.Options) {
			o.Review.Ref = "refs/heads/release-2"
			o.Review.Commit = h.Repo.Feature2.String()
		}, wantErr: review.ErrNotProtectedRef},
		{name: "repository declares another protected ref", mod: func(o *promote.Options) { o.Review.Commit = declares.String() }, wantErr: review.ErrNotProtectedRef},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.Registry.Reset()
			o := h.Options(plumbing.ZeroHash)
			tt.mod(&o)
			_, err := h.Promote(t, o)
			if !errors.Is(err, tt.wantErr) || !errors.Is(err, review.ErrNotReviewed) {
				t.Fatalf("got %v, want %v (a refusal)", err, tt.wantErr)
			}
			if n := h.Registry.Total(); n != 0 {
				t.Errorf("got %d registry requests, want 0", n)
			}
			if after := promotertest.ReadState(t, h.Pool); !promotertest.SameCounts(before.Counts, after.Counts) {
				t.Errorf("got rows %v, want unchanged %v", after.Counts, before.Counts)
			}
		})
	}
}

func TestPromoteEndToEnd(t *testing.T) {
	h := promotertest.New(t)

	// Release 1.
	res, err := h.Promote(t, h.Options(h.Repo.R1))
	if err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
	if res.ReleaseVersion != 1 || res.Activation.Replayed || res.Activation.Moved != len(h.Repo.Snapshots[h.Repo.R1]) {
		t.Fatalf("got release %d moved %d replayed %v, want release 1 moving %d pointers", res.ReleaseVersion, res.Activation.Moved, res.Activation.Replayed, len(h.Repo.Snapshots[h.Repo.R1]))
	}
	if got, want := res.CommandID, promote.CommandID(h.Repo.R1.String(), promotertest.Env); got != want {
		t.Errorf("got command %s, want %s", got, want)
	}
	if len(res.Published) != len(h.Repo.Snapshots[h.Repo.R1])+1 {
		t.Errorf("got %d artifacts verified, want %d targets + the release", len(res.Published), len(h.Repo.Snapshots[h.Repo.R1]))
	}
	s1 := promotertest.ReadState(t, h.Pool)
	if !promotertest.PointersAt(s1.Pointers, h.Repo.Snapshots[h.Repo.R1]) || s1.Current != 1 {
		t.Fatalf("got pointers %v current %d, want release 1 %v", s1.Pointers, s1.Current, h.Repo.Snapshots[h.Repo.R1])
	}
	promotertest.CheckJournal(t, s1)
	var actor, reason string
	var reviewers []string
	if err := h.Pool.QueryRow(t.Context(), "SELECT actor, reason, reviewers FROM configpub.pointer_move WHERE release_version = 1 LIMIT 1").Scan(&actor, &reason, &reviewers); err != nil {
		t.Fatal(err)
	}
	if actor != gittest.AuthorName+" <"+gittest.AuthorEmail+">" || reason != "Merge pull request #1: release 1" || len(reviewers) != 1 || reviewers[0] != "Carol <carol@example.com>" {
		t.Errorf("got pointer_move actor %q reason %q reviewers %q, want the commit's author, subject and Reviewed-by", actor, reason, reviewers)
	}

	// Re-promoting the same commit replays: no new rows, nothing uploaded.
	h.Registry.Reset()
	again, err := h.Promote(t, h.Options(h.Repo.R1))
	if err != nil {
		t.Fatalf("re-promote release 1: %v", err)
	}
	if !again.Activation.Replayed || again.Activation.Moved != res.Activation.Moved {
		t.Errorf("got replayed %v moved %d, want the recorded result replayed", again.Activation.Replayed, again.Activation.Moved)
	}
	if n := h.Registry.Writes(); n != 0 {
		t.Errorf("got %d registry writes on replay, want 0", n)
	}
	if s := promotertest.ReadState(t, h.Pool); !promotertest.SameCounts(s.Counts, s1.Counts) {
		t.Errorf("got rows %v after replay, want %v", s.Counts, s1.Counts)
	}

	// Release 2 (the tip of main): only the agent targets move.
	res2, err := h.Promote(t, h.Options(plumbing.ZeroHash))
	if err != nil {
		t.Fatalf("promote release 2: %v", err)
	}
	changed := 0
	for k, v := range h.Repo.Snapshots[h.Repo.R2] {
		if h.Repo.Snapshots[h.Repo.R1][k] != v {
			changed++
		}
	}
	if changed == 0 || changed == len(h.Repo.Snapshots[h.Repo.R2]) {
		t.Fatalf("fixture change moved %d of %d targets, want some but not all", changed, len(h.Repo.Snapshots[h.Repo.R2]))
	}
	if res2.ReleaseVersion != 2 || res2.Activation.Moved != changed || res2.Review.Commit != h.Repo.R2.String() {
		t.Fatalf("got release %d moved %d commit %s, want release 2 moving %d at %s", res2.ReleaseVersion, res2.Activation.Moved, res2.Review.Commit, changed, h.Repo.R2)
	}
	s2 := promotertest.ReadState(t, h.Pool)
	if !promotertest.PointersAt(s2.Pointers, h.Repo.Snapshots[h.Repo.R2]) || s2.Current != 2 {
		t.Fatalf("got pointers %v, want release 2 %v", s2.Pointers, h.Repo.Snapshots[h.Repo.R2])
	}
	promotertest.CheckJournal(t, s2)
	if got, want := s2.Counts["pointer_move"]-s1.Counts["pointer_move"], int64(changed); got != want {
		t.Errorf("got %d pointer moves for release 2, want %d", got, want)
	}

	// A later commit on main that changes no policy input compiles to the
	// same release 2: already active, nothing written.
	h.Repo.Git.Commit(gittest.Commit{Files: map[string][]byte{"README.md": []byte("docs only\n")}, Message: "docs: README"})
	docs, err := h.Promote(t, h.Options(plumbing.ZeroHash))
	if err != nil {
		t.Fatalf("promote a docs-only commit: %v", err)
	}
	if docs.AlreadyActiveFrom != h.Repo.R2.String() || docs.Activation != nil || docs.ReleaseVersion != 2 {
		t.Errorf("got already-active-from %q activation %v release %d, want release 2 already active from %s", docs.AlreadyActiveFrom, docs.Activation, docs.ReleaseVersion, h.Repo.R2)
	}
	if s := promotertest.ReadState(t, h.Pool); !promotertest.SameCounts(s.Counts, s2.Counts) || !promotertest.PointersAt(s.Pointers, h.Repo.Snapshots[h.Repo.R2]) {
		t.Errorf("got rows %v pointers %v, want unchanged at release 2", s.Counts, s.Pointers)
	}

	// Promoting release 1 again is the same command: it replays its
	// recorded result and moves nothing back.
	old, err := h.Promote(t, h.Options(h.Repo.R1))
	if err != nil || !old.Activation.Replayed || old.ReleaseVersion != 1 {
		t.Fatalf("got %+v, %v re-promoting release 1, want its recorded result replayed", old, err)
	}
	if s := promotertest.ReadState(t, h.Pool); !promotertest.SameCounts(s.Counts, s2.Counts) || !promotertest.PointersAt(s.Pointers, h.Repo.Snapshots[h.Repo.R2]) {
		t.Errorf("got rows %v pointers %v, want unchanged at release 2", s.Counts, s.Pointers)
	}

	// Another release 2 on base 1 (a reviewed hotfix branch) lost the race:
	// a conflict (the registry's r2 tags already name release 2's
	// artifacts, or the store's compare-and-swap), nothing recorded.
	files := h.Repo.Git.Files(h.Repo.R1)
	envFile := "environments/" + promotertest.Env + ".yaml"
	files[envFile] = bytes.Replace(files[envFile], []byte("ttl: 30s"), []byte("ttl: 60s"), 1)
	hotfix, _ := promotertest.CompiledFiles(t, files, gittest.Epoch.Add(2*time.Hour))
	h.Repo.Git.Branch("hotfix", h.Repo.R1)
	h.Repo.Git.Commit(gittest.Commit{Branch: "hotfix-pr", From: h.Repo.R1, Files: hotfix, Message: "gateway cache ttl 60s"})
	hot := h.Repo.Git.Merge("hotfix", "hotfix-pr", gittest.Commit{Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}})
	o := h.Options(hot)
	o.Review.ProtectedRef = "refs/heads/hotfix" // the promoter configured for the hotfix branch
	h.Registry.Reset()
	_, err = h.Promote(t, o)
	if !errors.Is(err, promoter.ErrConflict) || errors.Is(err, promoter.ErrUnconfirmed) {
		t.Fatalf("got %v, want a conflict", err)
	}
	if s := promotertest.ReadState(t, h.Pool); !promotertest.SameCounts(s.Counts, s2.Counts) || !promotertest.PointersAt(s.Pointers, h.Repo.Snapshots[h.Repo.R2]) {
		t.Errorf("got rows %v pointers %v, want unchanged at release 2", s.Counts, s.Pointers)
	}
	// Published under another prefix, the registry has no r2 tags to
	// conflict with: the store's compare-and-swap refuses it.
	o.RegistryPrefix = h.Registry.Host + "/hotfix"
	_, err = h.Promote(t, o)
	var cas *promoter.CASError
	if !errors.As(err, &cas) || !errors.Is(err, promoter.ErrConflict) || cas.Expected != 1 || cas.Actual != 2 {
		t.Fatalf("got %v, want a *CASError expecting release 1, finding 2", err)
	}
	if s := promotertest.ReadState(t, h.Pool); !promotertest.SameCounts(s.Counts, s2.Counts) || !promotertest.PointersAt(s.Pointers, h.Repo.Snapshots[h.Repo.R2]) {
		t.Errorf("got rows %v pointers %v, want unchanged at release 2", s.Counts, s.Pointers)
	}
}

// TestPromoteStale: a reviewed commit whose release manifest is not what
// its sources compile to is STALE; no pointer moves, nothing is uploaded.
func TestPromoteStale(t *testing.T) {
	h := promotertest.New(t)
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatal(err)
	}
	files := h.Repo.Git.Files(h.Repo.R2)
	envFile := "environments/" + promotertest.Env + ".yaml"
	files[envFile] = append(files[envFile], []byte("# edited without recompiling\n")...)
	edited := map[string][]byte{envFile: files[envFile]}
	h.Repo.Git.Commit(gittest.Commit{Branch: "edit", From: h.Repo.R2, Files: edited, Message: "edit sources, forget compile"})
	stale := h.Repo.Git.Merge(gittest.Main, "edit", gittest.Commit{Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}})
	before := promotertest.ReadState(t, h.Pool)
	h.Registry.Reset()

	_, err := h.Promote(t, h.Options(stale))
	var se *promote.StaleManifestError
	if !errors.As(err, &se) || !errors.Is(err, promoter.ErrStale) || !errors.Is(err, compiler.ErrStale) {
		t.Fatalf("got %v, want a *StaleManifestError matching promoter.ErrStale and compiler.ErrStale", err)
	}
	if se.Commit != stale.String() || se.EnvTag != promotertest.Env {
		t.Errorf("got stale commit %s env %s, want %s %s", se.Commit, se.EnvTag, stale, promotertest.Env)
	}
	// Compared, not compiled anew: the committed release is derived whole
	// and its first difference named.
	if !strings.Contains(err.Error(), "but the sources and base release 1 derive") || !strings.Contains(err.Error(), "run configpub compile --env "+promotertest.Env+" on the branch") {
		t.Errorf("got %v, want the first difference from the derived release named", err)
	}
	if n := h.Registry.Total(); n != 0 {
		t.Errorf("got %d registry requests, want 0", n)
	}
	after := promotertest.ReadState(t, h.Pool)
	if !promotertest.SameCounts(before.Counts, after.Counts) || !promotertest.PointersAt(after.Pointers, h.Repo.Snapshots[h.Repo.R1]) {
		t.Errorf("got rows %v pointers %v, want unchanged at release 1", after.Counts, after.Pointers)
	}
}

// TestPromoteConcurrentSameCommit: eight promotes of one commit at once
// give exactly one activation and one set of pointer moves.
func TestPromoteConcurrentSameCommit(t *testing.T) {
	h := promotertest.New(t)
	const n = 8
	var wg sync.WaitGroup
	results := make([]*promote.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = h.Promote(t, h.Options(h.Repo.R1))
		}()
	}
	wg.Wait()
	activated := 0
	for i := range n {
		switch {
		case errs[i] == nil && !results[i].Activation.Replayed:
			activated++
		case errs[i] == nil:
		case errors.Is(errs[i], promoter.ErrConflict):
			// lost the race while the winner's activation was in flight
		default:
			t.Errorf("promote %d: got %v, want success, replay or a conflict", i, errs[i])
		}
	}
	if activated != 1 {
		t.Errorf("got %d activations, want exactly 1", activated)
	}
	s := promotertest.ReadState(t, h.Pool)
	if !promotertest.PointersAt(s.Pointers, h.Repo.Snapshots[h.Repo.R1]) {
		t.Errorf("got pointers %v, want release 1", s.Pointers)
	}
	if got, want := s.Counts["pointer_move"], int64(len(h.Repo.Snapshots[h.Repo.R1])); got != want {
		t.Errorf("got %d pointer moves, want %d (one set)", got, want)
	}
	if got := s.Counts["config_release"]; got != 1 {
		t.Errorf("got %d release rows, want 1", got)
	}
	promotertest.CheckJournal(t, s)
}
