package promote_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

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
