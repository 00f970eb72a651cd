package promote_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/promoter"
)

// TestPromoteCLIFreezeAndStage: a reviewed commit whose Environment declares
// a freeze window covering now is refused by `configpub promote` (exit 1,
// the window named, nothing recorded); with --stage --break-glass --reason
// it is recorded STAGED with the reason journaled and no pointer moved.
func TestPromoteCLIFreezeAndStage(t *testing.T) {
	c := newCLIHarness(t)
	url := c.DB.URLFor(t, "configpub_promoter")
	if code, out := c.run(t, url, "--commit", c.Repo.R1.String()); code != 0 {
		t.Fatalf("promote release 1: exit %d\n%s", code, out)
	}
	r := c.Repo.Git
	files := r.Files(c.Repo.R1)
	envFile := "environments/" + promotertest.Env + ".yaml"
	files[envFile] = append(files[envFile], "  freezeWindows:\n    - name: change-freeze\n      from: \"2000-01-01T00:00:00Z\"\n      until: \"2100-01-01T00:00:00Z\"\n"...)
	v2, res := promotertest.CompiledFiles(t, files, gittest.Epoch.Add(2*time.Hour))
	if res.Manifest.ReleaseVersion != 2 || len(res.Rollout.FreezeWindows) != 1 {
		t.Fatalf("compiled release %d with rollout %+v, want release 2 with one freeze window", res.Manifest.ReleaseVersion, res.Rollout)
	}
	r.Commit(gittest.Commit{Branch: "freeze", From: c.Repo.R1, Files: v2, Message: "freeze for the year"})
	frozen := r.Merge(gittest.Main, "freeze", gittest.Commit{Message: "Merge pull request #3: freeze", Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}})

	code, out := c.run(t, url, "--commit", frozen.String())
	if code != 1 || !strings.Contains(out, `freeze window "change-freeze"`) || !strings.Contains(out, "--break-glass") {
		t.Fatalf("promote inside the window: exit %d, want 1 naming the window\n%s", code, out)
	}
	ctx := context.Background()
	var releases int
	if err := c.Pool.QueryRow(ctx, "SELECT count(*) FROM configpub.config_release").Scan(&releases); err != nil || releases != 1 {
		t.Fatalf("after the refusal: %d releases recorded (%v), want 1", releases, err)
	}
	if code, out := c.run(t, url, "--commit", frozen.String(), "--break-glass"); code != 2 {
		t.Fatalf("--break-glass without --reason: exit %d, want 2\n%s", code, out)
	}
	code, out = c.run(t, url, "--commit", frozen.String(), "--stage", "--break-glass", "--reason", "INC-7 hotfix")
	if code != 0 || !strings.Contains(out, "staged; no pointer moved") {
		t.Fatalf("promote --stage --break-glass: exit %d\n%s", code, out)
	}
	var state, reason string
	if err := c.Pool.QueryRow(ctx, `SELECT r.lifecycle_state, j.reason FROM configpub.config_release r
		JOIN configpub.config_release_journal j ON j.env_tag = r.env_tag AND j.release_version = r.release_version AND j.event_kind = 'stage'
		WHERE r.env_tag = $1 AND r.release_version = 2`, promotertest.Env).Scan(&state, &reason); err != nil {
		t.Fatal(err)
	}
	if state != promoter.StateStaged || reason != `break-glass in freeze window "change-freeze": INC-7 hotfix` {
		t.Fatalf("release 2: %s, journaled reason %q", state, reason)
	}
	s := promotertest.ReadState(t, c.Pool)
	if !promotertest.PointersAt(s.Pointers, c.Repo.Snapshots[c.Repo.R1]) || s.Current != 1 {
		t.Fatalf("staging moved pointers: %v (current %d)", s.Pointers, s.Current)
	}
	// history --releases shows the staged release and the journaled reason.
	hist, err := exec.Command(c.bin, "history", "--env", promotertest.Env, "--releases", "--database", url).CombinedOutput()
	if err != nil {
		t.Fatalf("history --releases: %v\n%s", err, hist)
	}
	for _, want := range []string{"stage", "RECORDED->STAGED", "UNCONFIRMED->NOT_REQUESTED", `break-glass in freeze window "change-freeze": INC-7 hotfix`} {
		if !strings.Contains(string(hist), want) {
			t.Errorf("history --releases lacks %q:\n%s", want, hist)
		}
	}
}

// mergeNewYearFreeze merges, on release 1 of h, a reviewed release 2 that
// changes a setting and declares a freeze window "new-year" of 72 hours
// opening a day after the release is compiled (inside its targets'
// activation windows, which the store checks on the same clock). It
// returns when the window opens and the merge commit.
func mergeNewYearFreeze(t *testing.T, h *promotertest.Harness) (opens time.Time, merge plumbing.Hash) {
	t.Helper()
	opens = gittest.Epoch.Add(26 * time.Hour)
	r := h.Repo.Git
	files := r.Files(h.Repo.R1)
	envFile := "environments/" + promotertest.Env + ".yaml"
	promotertest.Replace(t, files, envFile, "level: DEBUG", "level: INFO")
	files[envFile] = append(files[envFile], fmt.Sprintf("  freezeWindows:\n    - name: new-year\n      from: %q\n      until: %q\n",
		opens.Format(time.RFC3339), opens.Add(72*time.Hour).Format(time.RFC3339))...)
	v2, res := promotertest.CompiledFiles(t, files, gittest.Epoch.Add(2*time.Hour))
	if res.Manifest.ReleaseVersion != 2 || len(res.Rollout.FreezeWindows) != 1 {
		t.Fatalf("compiled release %d with rollout %+v, want release 2 with one freeze window", res.Manifest.ReleaseVersion, res.Rollout)
	}
	r.Commit(gittest.Commit{Branch: "freeze", From: h.Repo.R1, Files: v2, Message: "logging INFO, freeze over new year"})
	return opens, r.Merge(gittest.Main, "freeze", gittest.Commit{Message: "Merge pull request #3: freeze", Trailers: []string{"Reviewed-by: Carol <carol@example.com>"}})
}

// TestPromoteFreezeOpeningDuringThePublication promotes release 2, whose
// Environment declares a freeze window that opens while its artifacts are
// published (at 100,000 targets most of an hour): the store checks the
// windows again in the transaction that records and activates the release,
// under the environment's lock and on its clock (the promotion's), so no
// pointer moves inside it and nothing is recorded; with --break-glass the
// promotion activates and journals the window it broke.
func TestPromoteFreezeOpeningDuringThePublication(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
	opens, c2 := mergeNewYearFreeze(t, h)

	// The promotion starts a minute before the window; by the time its
	// artifacts are in the registry the window is open. Run's own clock
	// stays before it: only the store's, read in the transaction that
	// records and activates, says the window is open — the check that
	// decides is that one.
	before := h.Registry.Writes()
	clock := func() time.Time {
		if h.Registry.Writes() > before {
			return opens.Add(time.Minute)
		}
		return opens.Add(-time.Minute)
	}
	store, err := promoter.Open(ctx, h.Pool, promoter.Options{Signer: h.Signer, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	o := h.Options(c2)
	o.Clock = func() time.Time { return opens.Add(-time.Minute) }
	o.Store = store
	_, err = h.Promote(t, o)
	var fe *promoter.FreezeError
	if !errors.As(err, &fe) || fe.Window.Name != "new-year" || !strings.Contains(err.Error(), "opened after the check before publishing") ||
		!strings.Contains(err.Error(), "artifacts are published") || !strings.Contains(err.Error(), "nothing recorded, no pointer moved") ||
		strings.Contains(err.Error(), "nothing written") {
		t.Fatalf("promote into a window that opened during the publication: %v; want a refusal naming the window", err)
	}
	t.Log(err)
	if h.Registry.Writes() == before {
		t.Fatal("nothing was published before the window opened: the test does not test the recheck")
	}
	s := promotertest.ReadState(t, h.Pool)
	if !promotertest.PointersAt(s.Pointers, h.Repo.Snapshots[h.Repo.R1]) || s.Current != 1 || s.Counts["config_release"] != 1 {
		t.Fatalf("after the refusal: current %d, %d releases, pointers %v; want release 1 alone, unmoved", s.Current, s.Counts["config_release"], s.Pointers)
	}

	o.BreakGlass, o.BreakGlassReason = true, "INC-9 hotfix"
	got, err := h.Promote(t, o)
	if err != nil || got.Activation == nil {
		t.Fatalf("promote --break-glass: %+v, %v", got, err)
	}
	var reason string
	if err := h.Pool.QueryRow(ctx, `SELECT reason FROM configpub.config_release_journal
		WHERE env_tag = $1 AND release_version = 2 AND to_state = 'ACTIVE' ORDER BY sequence DESC LIMIT 1`, promotertest.Env).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if want := `break-glass in freeze window "new-year": INC-9 hotfix`; reason != want {
		t.Fatalf("journaled reason %q, want %q", reason, want)
	}
}
