package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
)

// gitFixture copies the fixture policy repository into a go-git repository
// with one commit by a fixed author at a fixed time.
func gitFixture(t *testing.T) string {
	t.Helper()
	dir := copyDir(t, "../../fixtures/policy-repo")
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddGlob("."); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "configpub test", Email: "test@configpub.dev", When: time.Date(2026, 10, 1, 9, 30, 0, 0, time.UTC)}
	if _, err := wt.Commit("fixture", &git.CommitOptions{Author: sig, Committer: sig}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPlanAgainstHead(t *testing.T) {
	dir := gitFixture(t)
	p := filepath.Join(dir, "agents", "tech-support.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "maxOutputTokens: 2048", "maxOutputTokens: 1024", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI("plan", "--repo", dir, "--env", "dev", "--output", "json")
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	var plan struct {
		Changed []struct {
			ServiceID string   `json:"serviceId"`
			Changed   []string `json:"changed"`
		} `json:"changed"`
		Unchanged int `json:"unchanged"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(plan.Changed) != 3 || plan.Unchanged != 2 {
		t.Fatalf("got %d changed / %d unchanged, want 3 / 2", len(plan.Changed), plan.Unchanged)
	}
	found := false
	for _, c := range plan.Changed {
		if c.ServiceID == "com.networknt.agent-tech-support-1.0.0" && len(c.Changed) == 1 && c.Changed[0] == "/agentPolicy/model/maxOutputTokens" {
			found = true
		}
	}
	if !found {
		t.Errorf("tech-support target not listed with /agentPolicy/model/maxOutputTokens: %s", out)
	}
	// A new release takes HEAD's commit time when no flag or SOURCE_DATE_EPOCH is set.
	t.Setenv("SOURCE_DATE_EPOCH", "")
	if _, err := runCLI("compile", "--repo", dir, "--env", "dev"); err != nil {
		t.Fatal(err)
	}
	m, _ := os.ReadFile(filepath.Join(dir, "releases", "dev.yaml"))
	if !strings.Contains(string(m), "createdAt: \"2026-10-01T09:30:00Z\"\n") || !strings.Contains(string(m), "releaseVersion: 2\n") {
		t.Errorf("release 2 does not carry HEAD's commit time")
	}
	if _, err := runCLI("plan", "--repo", dir, "--env", "dev", "--output", "yaml"); exitCode(err) != exitUsage {
		t.Errorf("bad --format: got exit %d, want %d", exitCode(err), exitUsage)
	}
}

// TestPlanAddedAndRetired: a change that drops one target and adds another
// shows them as ADDED and RETIRED in every format.
func TestPlanAddedAndRetired(t *testing.T) {
	dir := gitFixture(t)
	acc, err := os.ReadFile(filepath.Join(dir, "targets", "dev", "account.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	added := strings.Replace(strings.Replace(string(acc), "name: dev-account", "name: dev-account-2", 1),
		"serviceId: com.networknt.agent-account-1.0.0", "serviceId: com.networknt.agent-account-2.0.0", 1)
	if err := os.WriteFile(filepath.Join(dir, "targets", "dev", "account-2.yaml"), []byte(added), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "targets", "dev", "tech-support.yaml")); err != nil {
		t.Fatal(err)
	}
	js, err := runCLI("plan", "--repo", dir, "--env", "dev", "--output", "json")
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	var plan struct {
		Added   int `json:"addedTargets"`
		Retired int `json:"retiredTargets"`
		Changed []struct {
			ServiceID string `json:"serviceId"`
			Change    string `json:"change"`
		} `json:"changed"`
	}
	if err := json.Unmarshal([]byte(js), &plan); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range plan.Changed {
		got[c.ServiceID] = c.Change
	}
	if plan.Added != 1 || plan.Retired != 1 || got["com.networknt.agent-account-2.0.0"] != "added" || got["com.networknt.agent-tech-support-1.0.0"] != "retired" {
		t.Fatalf("json plan: %d added, %d retired, changes %v", plan.Added, plan.Retired, got)
	}
	for format, want := range map[string][]string{
		"text":     {"ADDED dev.lightapi.net/com.networknt.agent-account-2.0.0", "RETIRED dev.lightapi.net/com.networknt.agent-tech-support-1.0.0", "(1 added, 1 retired)"},
		"markdown": {"#### ADDED `dev.lightapi.net/com.networknt.agent-account-2.0.0`", "#### RETIRED `dev.lightapi.net/com.networknt.agent-tech-support-1.0.0`", "**1** added, **1** retired"},
	} {
		out, err := runCLI("plan", "--repo", dir, "--env", "dev", "--output", format)
		if err != nil {
			t.Fatalf("plan --format %s: %v", format, err)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("plan --format %s lacks %q:\n%s", format, w, out)
			}
		}
	}
}

// TestPlanDigestsAreTheCommittedOnes: once the change and its compiled
// release manifest are committed (what the pull-request workflow checks
// with compile --check), plan shows the manifest's digests, marked final,
// and a later commit at another time (a merge) does not change them: the
// createdAt of the release is the committed one, not HEAD's.
func TestPlanDigestsAreTheCommittedOnes(t *testing.T) {
	dir := gitFixture(t)
	t.Setenv("SOURCE_DATE_EPOCH", "")
	p := filepath.Join(dir, "agents", "tech-support.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "maxOutputTokens: 2048", "maxOutputTokens: 1024", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	provisional := planJSON(t, dir, "HEAD")
	if provisional.Final {
		t.Fatal("an uncompiled change is marked final")
	}
	if _, err := runCLI("compile", "--repo", dir, "--env", "dev"); err != nil {
		t.Fatal(err)
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, repo, "change", time.Date(2026, 10, 2, 8, 0, 0, 0, time.UTC))
	first := planJSON(t, dir, "HEAD~1")
	commitAll(t, repo, "merge", time.Date(2026, 10, 9, 17, 45, 0, 0, time.UTC)) // an empty commit a week later
	second := planJSON(t, dir, "HEAD~2")
	manifest, err := compiler.CommittedRelease(os.DirFS(dir), "dev") // root and shards
	if err != nil {
		t.Fatal(err)
	}
	if !first.Final || !second.Final {
		t.Fatalf("plan of a compiled, committed change not final")
	}
	if len(first.digests) != 3 || !reflect.DeepEqual(first.digests, second.digests) {
		t.Fatalf("digests moved with HEAD: %v then %v", first.digests, second.digests)
	}
	for svc, d := range first.digests {
		if !strings.Contains(string(manifest), d) {
			t.Errorf("%s: plan shows %s, not in the committed manifest", svc, d)
		}
	}
	// Until when the release can be promoted follows the committed
	// release's createdAt too, not HEAD's time: the same a week later.
	from, _ := bundle.ParseTime(first.From)
	until, _ := bundle.ParseTime(first.Until)
	if provisional.Until == "" || first.From == "" || !until.After(from) || first.From != second.From || first.Until != second.Until ||
		!strings.Contains(string(manifest), first.From) {
		t.Errorf("promotable %s..%s, a week later %s..%s (provisional %s..%s); want the committed release's createdAt to its snapshots' window end",
			first.From, first.Until, second.From, second.Until, provisional.From, provisional.Until)
	}
	out, err := runCLI("plan", "--repo", dir, "--env", "dev", "--base-ref", "HEAD~2")
	if err != nil || !strings.Contains(out, "promotable from "+first.From+" until "+first.Until+": promote refuses release 2") {
		t.Errorf("plan text lacks the promotable window %s..%s: %v\n%s", first.From, first.Until, err, out)
	}
}

// planDigests is what the tests read of plan -o json (same names).
type planDigests struct {
	Final         bool   // digestsFinal
	From, Until   string // promotableFrom, promotableUntil
	Release       int64
	RollbackTo    int64
	RollbackUntil string
	RollbackEnded bool
	Renewal       bool
	digests       map[string]string // artifact digest by changed serviceId
}

// planJSON runs plan -o json against base (with args added) and decodes it.
func planJSON(t *testing.T, dir, base string, args ...string) planDigests {
	t.Helper()
	out, err := runCLI(append([]string{"plan", "--repo", dir, "--env", "dev", "--base-ref", base, "--output", "json"}, args...)...)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	var plan struct {
		Final         bool   `json:"digestsFinal"`
		From          string `json:"promotableFrom"`
		Until         string `json:"promotableUntil"`
		Release       int64  `json:"release"`
		RollbackTo    int64  `json:"rollbackTo"`
		RollbackUntil string `json:"rollbackUntil"`
		RollbackEnded bool   `json:"rollbackEnded"`
		Renewal       bool   `json:"renewal"`
		Changed       []struct {
			ServiceID string `json:"serviceId"`
			Digests   map[string]struct {
				New string `json:"new"`
			} `json:"digests"`
		} `json:"changed"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	r := planDigests{Final: plan.Final, From: plan.From, Until: plan.Until, Release: plan.Release,
		RollbackTo: plan.RollbackTo, RollbackUntil: plan.RollbackUntil, RollbackEnded: plan.RollbackEnded, Renewal: plan.Renewal,
		digests: map[string]string{}}
	for _, c := range plan.Changed {
		r.digests[c.ServiceID] = c.Digests["artifactDigest"].New
	}
	return r
}

// TestPlanSaysUntilWhenTheBaseReleaseCanBeRolledBackTo: plan says until
// when a rollback to the base release is possible once the new release is
// promoted (the first end of the base release's snapshots' activation
// windows), and that there is none when that end is no later than the new
// release's createdAt — exactly at the end included, where the new release
// re-issues the target.
func TestPlanSaysUntilWhenTheBaseReleaseCanBeRolledBackTo(t *testing.T) {
	dir := gitFixture(t)
	committed, err := compiler.CommittedRelease(os.DirFS(dir), "dev")
	if err != nil {
		t.Fatal(err)
	}
	base, err := bundle.ParseManifest("releases/dev.yaml", committed)
	if err != nil {
		t.Fatal(err)
	}
	end := ""
	for _, e := range base.Targets {
		if end == "" || e.ExpiresAt < end {
			end = e.ExpiresAt
		}
	}
	endT, err := bundle.ParseTime(end)
	if err != nil || end == "" {
		t.Fatalf("release 1's first window end %q: %v", end, err)
	}
	p := filepath.Join(dir, "agents", "tech-support.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "maxOutputTokens: 2048", "maxOutputTokens: 1024", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at    time.Time
		ended bool
	}{
		{time.Date(2026, 10, 2, 8, 0, 0, 0, time.UTC), false},
		{endT.Add(-time.Second), false},
		{endT, true},
		{endT.Add(90 * 24 * time.Hour), true},
	} {
		at := c.at.Format(time.RFC3339)
		plan := planJSON(t, dir, "HEAD", "--created-at", at)
		if plan.RollbackTo != 1 || plan.RollbackUntil != end || plan.RollbackEnded != c.ended || plan.Renewal {
			t.Errorf("plan at %s: rollback to %d until %q, ended %v, renewal %v; want release 1 until %s, ended %v, a change",
				at, plan.RollbackTo, plan.RollbackUntil, plan.RollbackEnded, plan.Renewal, end, c.ended)
		}
		text, err := runCLI("plan", "--repo", dir, "--env", "dev", "--created-at", at)
		md, err2 := runCLI("plan", "--repo", dir, "--env", "dev", "--created-at", at, "--output", "markdown")
		if err != nil || err2 != nil {
			t.Fatalf("plan at %s: %v, %v", at, err, err2)
		}
		// plan does not read the store: the base release may be one
		// promote caught up (never active), which rollback refuses, so
		// the line says so and names activate.
		wantText, wantMD := "rollback to release 1 (if it was active; otherwise activate it) until "+end+": once release 2 is promoted",
			"**Rollback** to release 1 (if it was active; otherwise activate it) until **`"+end+"`**"
		if !c.ended && (!strings.Contains(text, "configpub activate --release 1") || !strings.Contains(md, "configpub activate \\-\\-release 1")) {
			t.Errorf("plan at %s does not name configpub activate --release 1 for a base release that was never active:\n%s\n%s", at, text, md)
		}
		if c.ended {
			wantText, wantMD = "no rollback: once release 2 is promoted, configpub rollback to release 1 is refused", "> **No rollback:** once release 2"
		}
		if !strings.Contains(text, wantText) || !strings.Contains(md, wantMD) {
			t.Errorf("plan at %s lacks %q (text) or %q (markdown):\n%s\n%s", at, wantText, wantMD, text, md)
		}
	}
}

// TestPlanSaysARenewalIsOne: the plan of a release compiled with
// compile --renew says it changes no policy source, and that the rollback
// it makes impossible is not needed.
func TestPlanSaysARenewalIsOne(t *testing.T) {
	dir := gitFixture(t)
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--renew", "--created-at", "2037-01-01T00:00:00Z"); err != nil {
		t.Fatalf("renew: %v\n%s", err, out)
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, repo, "renew", time.Date(2037, 1, 1, 0, 0, 0, 0, time.UTC))
	plan := planJSON(t, dir, "HEAD~1")
	if plan.Release != 2 || !plan.Renewal || !plan.RollbackEnded || len(plan.digests) == 0 {
		t.Fatalf("plan of the renewal: release %d, renewal %v, rollback ended %v, %d changed; want release 2, a renewal, no rollback",
			plan.Release, plan.Renewal, plan.RollbackEnded, len(plan.digests))
	}
	md, err := runCLI("plan", "--repo", dir, "--env", "dev", "--base-ref", "HEAD~1", "--output", "markdown")
	if text, err := runCLI("plan", "--repo", dir, "--env", "dev", "--base-ref", "HEAD~1"); err != nil ||
		!strings.Contains(text, fmt.Sprintf("list the new publications — %d target(s) on 1 host(s)", len(plan.digests))) {
		t.Errorf("plan of the renewal does not count its targets and hosts: %v\n%s", err, text)
	}
	if err != nil || !strings.Contains(md, "**Renewal:** release 2 is compiled from the same policy sources as release 1") ||
		!strings.Contains(md, "and not needed") || !strings.Contains(md, "release 2 changes no policy source") {
		t.Errorf("plan markdown of the renewal: %v\n%s", err, md)
	}
}

// TestPlanShowsARolloutPolicyChange: a pull request that changes only the
// environment's rollout policy (two-phase activation on, a freeze window
// added) changes no target, and the plan says what changes in the policy
// and when it holds, in every format.
func TestPlanShowsARolloutPolicyChange(t *testing.T) {
	dir := gitFixture(t)
	p := filepath.Join(dir, "environments", "dev.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	policy := "spec:\n  activation: two-phase\n  freezeWindows:\n    - name: launch\n      from: \"2030-01-01T00:00:00Z\"\n      until: \"2030-01-02T00:00:00Z\"\n"
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "spec:\n", policy, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI("plan", "--repo", dir, "--env", "dev", "--output", "json")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, out)
	}
	var plan struct {
		Changed        []json.RawMessage `json:"changed"`
		RolloutChanges []struct {
			Path string          `json:"path"`
			Old  json.RawMessage `json:"old"`
			New  json.RawMessage `json:"new"`
		} `json:"rolloutChanges"`
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(plan.Changed) != 0 || len(plan.RolloutChanges) != 2 || plan.RolloutChanges[0].Path != "activation" ||
		string(plan.RolloutChanges[0].New) != `"two-phase"` || plan.RolloutChanges[0].Old != nil ||
		plan.RolloutChanges[1].Path != "freezeWindows" || !strings.Contains(string(plan.RolloutChanges[1].New), `"launch"`) {
		t.Fatalf("plan of a rollout-only change: %s", out)
	}
	text, err := runCLI("plan", "--repo", dir, "--env", "dev")
	if err != nil || !strings.Contains(text, "0 target(s) change") || !strings.Contains(text, "rollout policy changes (they hold once release 2 is active") ||
		!strings.Contains(text, `~ activation: (none) -> "two-phase"`) {
		t.Fatalf("plan text: %v\n%s", err, text)
	}
	md, err := runCLI("plan", "--repo", dir, "--env", "dev", "--output", "markdown")
	if err != nil || !strings.Contains(md, "**Rollout policy changes**") || !strings.Contains(md, "`freezeWindows`") {
		t.Fatalf("plan markdown: %v\n%s", err, md)
	}
}

// TestPlanOfTheFirstRelease: the first pull request of a repository
// compiles release 1 on a base that holds no release; its plan is from
// release 0, every target added (it said "release 1 -> release 1" with the
// targets as changed, comparing with a release 1 the base never held).
func TestPlanOfTheFirstRelease(t *testing.T) {
	dir := copyDir(t, "../../fixtures/policy-repo")
	if err := os.RemoveAll(filepath.Join(dir, "releases")); err != nil {
		t.Fatal(err)
	}
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "sources", time.Date(2026, 10, 1, 9, 30, 0, 0, time.UTC))
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev"); err != nil {
		t.Fatalf("compile release 1: %v\n%s", err, out)
	}
	commitAll(t, r, "release 1", time.Date(2026, 10, 1, 10, 0, 0, 0, time.UTC))
	text, err := runCLI("plan", "--repo", dir, "--env", "dev", "--base-ref", "HEAD~1")
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, text)
	}
	if !strings.Contains(text, "plan dev: release 0 at HEAD~1 -> release 1: 5 target(s) change (5 added, 0 retired), 0 unchanged") {
		t.Fatalf("plan of the first release:\n%s", text)
	}
}
