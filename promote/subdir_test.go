package promote_test

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promote"
	"github.com/configpub/configpub/promote/review"
	"github.com/configpub/configpub/promoter"
)

// TestPromoteCatchesUpInASubdirectory: on real Git, registry and
// PostgreSQL, the policy repository lives in policy/ of a monorepo and the
// store is two releases behind the commit's base: it holds release 1, the
// commit holds release 4, releases 2 and 3 were never promoted, and the
// commit after release 2 edited a source without compiling (so release 2
// is caught up from the commit that introduced it). Promoting with
// Options.Dir "policy" catches up 2 and 3 from their commits and activates
// 4 — catch-up read releases/ENV.yaml, the sources and the base releases at
// the Git root, where there are none, and refused the promotion. Without
// Dir the same promotion is refused naming what is missing, nothing
// written; a Dir the commit does not hold is named.
func TestPromoteCatchesUpInASubdirectory(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	g := gittest.New(t)
	reviewed := []string{"Reviewed-by: Carol <carol@example.com>"}
	var last map[string][]byte // root-relative files of the last commit
	commit := func(files map[string][]byte, msg string) plumbing.Hash {
		t.Helper()
		overlay := map[string][]byte{"README.md": []byte("a monorepo: the policy lives in policy/\n")}
		for p := range last {
			overlay["policy/"+p] = nil // deleted unless still there
		}
		for p, b := range files {
			overlay["policy/"+p] = b
		}
		last = files
		return g.Commit(gittest.Commit{Files: overlay, Message: msg, Trailers: reviewed})
	}
	logging := func(files map[string][]byte, from, to string) map[string][]byte {
		t.Helper()
		out := make(map[string][]byte, len(files))
		for p, b := range files {
			out[p] = b
		}
		promotertest.Replace(t, out, "environments/"+promotertest.Env+".yaml", "level: "+from, "level: "+to)
		return out
	}
	v1, _ := promotertest.CompiledFiles(t, gittest.ReadDir(t, filepath.Join("..", "fixtures", "policy-repo")), gittest.Epoch)
	r1 := commit(v1, "release 1")
	v2, _ := promotertest.CompiledFiles(t, logging(v1, "DEBUG", "INFO"), gittest.Epoch.Add(time.Hour))
	r2 := commit(v2, "release 2")
	edited := make(map[string][]byte, len(v2))
	for p, b := range v2 {
		edited[p] = b
	}
	var agent string
	for p := range edited {
		if strings.HasPrefix(p, "agents/") {
			agent = p
			break
		}
	}
	edited[agent] = append(bytes.Clone(edited[agent]), "# reviewed, not compiled\n"...)
	stale := commit(edited, "a comment (not compiled)")
	v3, _ := promotertest.CompiledFiles(t, logging(edited, "INFO", "WARN"), gittest.Epoch.Add(2*time.Hour))
	r3 := commit(v3, "release 3")
	v4, res4 := promotertest.CompiledFiles(t, logging(v3, "WARN", "ERROR"), gittest.Epoch.Add(3*time.Hour))
	r4 := commit(v4, "release 4")
	if res4.Manifest.ReleaseVersion != 4 || res4.Manifest.BaseReleaseVersion != 3 {
		t.Fatalf("fixture: release %d on %d, want 4 on 3", res4.Manifest.ReleaseVersion, res4.Manifest.BaseReleaseVersion)
	}

	repo, err := review.Open(g.Dir)
	if err != nil {
		t.Fatal(err)
	}
	run := func(o promote.Options) (*promote.Result, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		return promote.Run(ctx, repo, o)
	}
	o := h.Options(r1)
	o.Dir = "policy"
	if _, err := run(o); err != nil {
		t.Fatalf("promote release 1 from policy/: %v", err)
	}
	before := promotertest.ReadState(t, h.Pool)

	root := h.Options(r4)
	if _, err := run(root); err == nil {
		t.Fatal("promote with the policy taken at the Git root: no error")
	}
	missing := h.Options(r4)
	missing.Dir = "config/"
	if _, err := run(missing); err == nil || !strings.Contains(err.Error(), "has no directory config/") {
		t.Errorf("promote with Dir config/: got %v, want it named", err)
	}
	if s := promotertest.ReadState(t, h.Pool); !promotertest.SameCounts(s.Counts, before.Counts) {
		t.Fatalf("a refused promotion wrote rows: %v (was %v)", s.Counts, before.Counts)
	}

	o = h.Options(r4)
	o.Dir = "./policy/"
	res, err := run(o)
	if err != nil {
		t.Fatalf("promote release 4 from policy/ with releases 2 and 3 not promoted: %v", err)
	}
	if len(res.CaughtUp) != 2 || res.CaughtUp[0].ReleaseVersion != 2 || res.CaughtUp[0].Commit != r2.String() ||
		res.CaughtUp[1].ReleaseVersion != 3 || res.CaughtUp[1].Commit != r3.String() {
		t.Fatalf("caught up %+v, want release 2 from %s (which introduced it, not %s) and 3 from %s", res.CaughtUp, r2, stale, r3)
	}
	for _, c := range res.CaughtUp {
		if c.Result == nil || c.Result.Recorded == nil || c.Result.Activation != nil {
			t.Errorf("release %d: %+v, want recorded, not activated", c.ReleaseVersion, c.Result)
		}
	}
	if res.ReleaseVersion != 4 || res.Activation == nil || res.Activation.PreviousRelease != 1 {
		t.Fatalf("got release %d activated %+v, want release 4 activated over release 1", res.ReleaseVersion, res.Activation)
	}
	s := promotertest.ReadState(t, h.Pool)
	if !promotertest.PointersAt(s.Pointers, promotertest.SnapshotsOf(res4)) || s.Current != 4 {
		t.Fatalf("got pointers %v current %d, want every pointer on release 4", s.Pointers, s.Current)
	}
	st, err := h.Store.Status(ctx, promotertest.Env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{1: promoter.StateSuperseded, 2: promoter.StateRecorded, 3: promoter.StateRecorded, 4: promoter.StateActive}
	if len(st.Releases) != len(want) {
		t.Fatalf("%d releases recorded, want %d", len(st.Releases), len(want))
	}
	for _, r := range st.Releases {
		if r.State != want[r.ReleaseVersion] {
			t.Errorf("release %d is %s, want %s", r.ReleaseVersion, r.State, want[r.ReleaseVersion])
		}
	}
}
