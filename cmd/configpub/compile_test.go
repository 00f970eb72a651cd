package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
)

func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

func runCLI(args ...string) (string, error) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestCompileCheck(t *testing.T) {
	repo := copyDir(t, "../../fixtures/policy-repo")
	for _, env := range []string{"dev", "prod"} {
		if out, err := runCLI("compile", "--repo", repo, "--env", env, "--check"); err != nil {
			t.Fatalf("check %s on the committed fixtures: %v (%s)", env, err, out)
		}
	}
	p := filepath.Join(repo, "agents", "advisor.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(b, []byte("tokensPerDay: 800000"), []byte("tokensPerDay: 900000"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runCLI("compile", "--repo", repo, "--env", "dev", "--check")
	if err == nil || exitCode(err) != exitRefused {
		t.Fatalf("got %v (exit %d), want a refusal (exit 1)", err, exitCode(err))
	}
	if !strings.Contains(err.Error(), "dev.lightapi.net/com.networknt.agent-advisor-1.0.0/dev") {
		t.Errorf("got %q, want it to name the advisor target", err)
	}
	if _, err := os.Stat(filepath.Join(repo, "releases", "dev.yaml")); err != nil {
		t.Fatal(err)
	}
}

func TestCompileRefusalWritesNothing(t *testing.T) {
	repo := copyDir(t, "../../fixtures/policy-repo")
	p := filepath.Join(repo, "agents", "account.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(b, []byte("temperature: 0.2"), []byte("temperature: .nan"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(repo, "releases", "dev.yaml"))
	out := filepath.Join(t.TempDir(), "out")
	_, err := runCLI("compile", "--repo", repo, "--env", "dev", "--out", out, "--created-at", "2026-09-01T00:00:00Z")
	if exitCode(err) != exitRefused || !strings.Contains(err.Error(), "agents/account.yaml:19: spec.model.temperature") {
		t.Fatalf("got %v (exit %d), want exit 1 naming agents/account.yaml:19: spec.model.temperature", err, exitCode(err))
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("output directory exists after a refusal")
	}
	after, _ := os.ReadFile(filepath.Join(repo, "releases", "dev.yaml"))
	if !bytes.Equal(before, after) {
		t.Errorf("release manifest rewritten after a refusal")
	}
}

func TestCompileNothingChangedWritesNothingNew(t *testing.T) {
	repo := copyDir(t, "../../fixtures/policy-repo")
	m := filepath.Join(repo, "releases", "dev.yaml")
	st0, _ := os.Stat(m)
	before, _ := os.ReadFile(m)
	if _, err := runCLI("compile", "--repo", repo, "--env", "dev", "--created-at", "2030-01-01T00:00:00Z"); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(m)
	st1, _ := os.Stat(m)
	if !bytes.Equal(before, after) || !st0.ModTime().Equal(st1.ModTime()) {
		t.Errorf("release manifest was rewritten though nothing changed")
	}
}

// TestCompileCheckDerivesFromGitHistory: --check re-derives release 2 from
// the sources and release 1 as committed in the first-parent history, so a
// hand-edited unchanged target (its whole window moved a year later,
// consistently with its lease profile, its digests fixed) is refused naming the target and field; compile repairs
// it; outside a Git repository release 2 cannot be verified.
func TestCompileCheckDerivesFromGitHistory(t *testing.T) {
	dir := gitFixture(t)
	p := filepath.Join(dir, "agents", "account.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(b, []byte("requestsPerMinute: 120"), []byte("requestsPerMinute: 150"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", "2026-10-02T00:00:00Z"); err != nil || !strings.Contains(out, "release dev/2 (base 1)") {
		t.Fatalf("compile release 2: %v %s", err, out)
	}
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "release 2", time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC))
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err != nil {
		t.Fatalf("check release 2: %v %s", err, out)
	}
	good, err := compiler.CommittedRelease(os.DirFS(dir), "dev")
	if err != nil {
		t.Fatal(err)
	}
	m, err := bundle.ParseManifest("dev.yaml", good)
	if err != nil {
		t.Fatal(err)
	}
	e := m.Target("dev.lightapi.net", "com.networknt.agent-advisor-1.0.0")
	if e == nil || e.Changed {
		t.Fatalf("advisor not carried over: %+v", e)
	}
	// The advisor's window moved a year later, consistent with its lease
	// profile, so only the derivation can tell.
	shift := func(s string) string {
		v, _ := bundle.ParseTime(s)
		return v.Add(365 * 24 * time.Hour).Format(bundle.TimeFormat)
	}
	e.CreatedAt, e.ValidFrom, e.RefreshAfter, e.ExpiresAt = shift(e.CreatedAt), shift(e.ValidFrom), shift(e.RefreshAfter), shift(e.ExpiresAt)
	forged, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := compiler.WriteReleaseFiles(context.Background(), dir, forged); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI("compile", "--repo", dir, "--env", "dev", "--check")
	if err == nil || exitCode(err) != exitRefused || !strings.Contains(err.Error(), "target dev.lightapi.net/com.networknt.agent-advisor-1.0.0/dev: createdAt") ||
		!strings.Contains(err.Error(), "base release 1") {
		t.Fatalf("check of the forged release 2: got %v (exit %d), want a refusal naming the advisor's createdAt", err, exitCode(err))
	}
	if after, _ := compiler.CommittedRelease(os.DirFS(dir), "dev"); !bytes.Equal(after, forged) {
		t.Fatal("--check wrote the manifest")
	}
	// Outside Git there is no recorded release 1 to derive from.
	plain := copyDir(t, dir)
	if err := os.RemoveAll(filepath.Join(plain, ".git")); err != nil {
		t.Fatal(err)
	}
	if err := compiler.WriteReleaseFiles(context.Background(), plain, good); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI("compile", "--repo", plain, "--env", "dev", "--check"); err == nil || !strings.Contains(err.Error(), "cannot be verified against release 1") {
		t.Fatalf("check without history: got %v", err)
	}
}

// TestCompileInAShallowClone: in a clone whose history is cut below
// release 2's commit (fetch-depth: 1, the default of actions/checkout),
// release 1 cannot be read, so release 2 cannot be verified: --check fails
// saying so and how to fetch the rest — not that the manifest is stale,
// which it is not; compile writes nothing new and says release 2 was not
// verified; plan says why its digests are provisional. The full history
// back, --check passes.
func TestCompileInAShallowClone(t *testing.T) {
	dir := gitFixture(t)
	p := filepath.Join(dir, "agents", "account.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(b, []byte("requestsPerMinute: 120"), []byte("requestsPerMinute: 150"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", "2026-10-02T00:00:00Z"); err != nil {
		t.Fatalf("compile release 2: %v %s", err, out)
	}
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "release 2", time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC))
	head, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	// What git clone --depth 1 leaves: HEAD listed as shallow, its parent
	// (release 1's commit) not in the repository.
	parent := c.ParentHashes[0].String()
	loose := filepath.Join(dir, ".git", "objects", parent[:2], parent[2:])
	saved, err := os.ReadFile(loose)
	if err != nil {
		t.Fatal(err)
	}
	shallow := filepath.Join(dir, ".git", "shallow")
	if err := os.WriteFile(shallow, []byte(head.Hash().String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(loose); err != nil {
		t.Fatal(err)
	}

	_, err = runCLI("compile", "--repo", dir, "--env", "dev", "--check")
	if err == nil || exitCode(err) != exitRefused {
		t.Fatalf("check in a shallow clone: got %v (exit %d), want a refusal (exit 1)", err, exitCode(err))
	}
	for _, want := range []string{"release 2 cannot be verified against release 1", "a shallow clone", "fetch-depth: 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("check in a shallow clone: %q does not say %q", err, want)
		}
	}
	if errors.Is(err, compiler.ErrStale) || strings.Contains(err.Error(), "stale") {
		t.Errorf("check in a shallow clone: %q calls the manifest stale", err)
	}
	before, _ := compiler.CommittedRelease(os.DirFS(dir), "dev")
	out, err := runCLI("compile", "--repo", dir, "--env", "dev")
	if err != nil || !strings.Contains(out, "releases/dev.yaml unchanged") || !strings.Contains(out, "note: releases/dev.yaml: release 2 cannot be verified") {
		t.Fatalf("compile in a shallow clone: %v\n%s\nwant it unchanged, with a note that release 2 was not verified", err, out)
	}
	if after, _ := compiler.CommittedRelease(os.DirFS(dir), "dev"); !bytes.Equal(before, after) {
		t.Fatal("compile in a shallow clone rewrote release 2")
	}
	out, err = runCLI("plan", "--repo", dir, "--env", "dev")
	if err != nil || !strings.Contains(out, "note: the digests shown may still change: releases/dev.yaml: release 2 cannot be verified") ||
		!strings.Contains(out, "a shallow clone") || strings.Contains(out, "not compiled from these sources") {
		t.Fatalf("plan in a shallow clone: %v\n%s\nwant a note naming the missing history", err, out)
	}

	// The history fetched again (git fetch --unshallow).
	if err := os.WriteFile(loose, saved, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(shallow); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err != nil {
		t.Fatalf("check with the whole history: %v %s", err, out)
	}
}

// TestCompileSaysUntilWhenTheReleaseCanBePromoted: a compile that writes a
// new release names the activation windows of the snapshots it creates,
// which start at its createdAt; one that writes nothing new does not.
func TestCompileSaysUntilWhenTheReleaseCanBePromoted(t *testing.T) {
	repo := copyDir(t, "../../fixtures/policy-repo")
	p := filepath.Join(repo, "agents", "tech-support.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, bytes.Replace(b, []byte("maxOutputTokens: 2048"), []byte("maxOutputTokens: 1024"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	const at = "2030-01-01T00:00:00Z"
	out, err := runCLI("compile", "--repo", repo, "--env", "dev", "--created-at", at, "-o", "json")
	if err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	var sum compileSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.State != "rewritten" || sum.PromotableFrom != at || sum.PromotableUntil <= at {
		t.Fatalf("compile: %+v, want a rewritten release promotable from %s", sum, at)
	}
	out, err = runCLI("compile", "--repo", repo, "--env", "dev", "--created-at", "2030-02-01T00:00:00Z")
	if err != nil || strings.Contains(out, "promotable") {
		t.Errorf("a compile that writes nothing new: %v\n%s", err, out)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI("compile", "--repo", repo, "--env", "dev", "--created-at", "2030-03-01T00:00:00Z")
	if err != nil || !strings.Contains(out, "promotable from 2030-03-01T00:00:00Z until ") {
		t.Errorf("compile of the next release does not say until when it can be promoted: %v\n%s", err, out)
	}
}

// TestCompileRenew: compile --renew writes the next release when a
// snapshot's activation window no longer contains createdAt, re-issuing
// the targets with the same policy, and nothing while every window
// contains it; the renewal is verified like any release.
func TestCompileRenew(t *testing.T) {
	dir := gitFixture(t)
	manifest := filepath.Join(dir, "releases", "dev.yaml")
	before, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--renew", "--created-at", "2026-12-01T00:00:00Z")
	if err != nil || !strings.Contains(out, "nothing to renew: every snapshot of release 1 can be activated at 2026-12-01T00:00:00Z and for") {
		t.Fatalf("renew inside the windows: %v\n%s", err, out)
	}
	if after, _ := os.ReadFile(manifest); !bytes.Equal(before, after) {
		t.Fatal("renew inside the windows rewrote the release manifest")
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--renew", "--check"); err == nil || !strings.Contains(err.Error(), "use one") {
		t.Fatalf("--renew --check: %v\n%s", err, out)
	}
	// The dev profile's windows are ten years long.
	out, err = runCLI("compile", "--repo", dir, "--env", "dev", "--renew", "--created-at", "2037-01-01T00:00:00Z", "-o", "json")
	if err != nil {
		t.Fatalf("renew after the windows: %v\n%s", err, out)
	}
	var sum compileSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil {
		t.Fatal(err)
	}
	if sum.State != "rewritten" || sum.Release != 2 || sum.BaseRelease != 1 || sum.Reissued == 0 || sum.Changed != sum.Targets ||
		sum.PromotableFrom != "2037-01-01T00:00:00Z" {
		t.Fatalf("renew after the windows: %+v; want release 2 on 1 re-issuing every target from 2037-01-01", sum)
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, repo, "renew the activation windows", time.Date(2037, 1, 1, 0, 0, 0, 0, time.UTC))
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err != nil || !strings.Contains(out, "up to date: release 2") {
		t.Fatalf("check of the renewal: %v\n%s", err, out)
	}
}

// TestCompileRenewBefore: with the lease profile's renewBefore (a year, for
// the dev profile's ten-year windows ending 2036-08), setting it writes a
// release that re-issues nothing, `compile --renew` a year and a quarter
// before the windows end renews nothing, and once less than a year is left
// it writes a release re-issuing every target, ahead of the end.
func TestCompileRenewBefore(t *testing.T) {
	dir := gitFixture(t)
	p := filepath.Join(dir, "configpub.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "validFor: 87600h      # ten years", "validFor: 87600h      # ten years\n      renewBefore: 8760h", 1)
	if s == string(b) {
		t.Fatal("the fixture's dev lease profile is not as expected")
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	compileJSON := func(args ...string) compileSummary {
		t.Helper()
		out, err := runCLI(append([]string{"compile", "--repo", dir, "--env", "dev", "-o", "json"}, args...)...)
		if err != nil {
			t.Fatalf("compile %v: %v\n%s", args, err, out)
		}
		var sum compileSummary
		if err := json.Unmarshal([]byte(out), &sum); err != nil {
			t.Fatal(err)
		}
		return sum
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	if sum := compileJSON("--created-at", "2027-01-01T00:00:00Z"); sum.Release != 2 || sum.Reissued != 0 || sum.Changed != 0 {
		t.Fatalf("setting renewBefore: %+v; want release 2 changing and re-issuing nothing", sum)
	}
	commitAll(t, repo, "renew a year ahead", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	if sum := compileJSON("--renew", "--created-at", "2035-06-01T00:00:00Z"); sum.State != "unchanged" || sum.Release != 2 {
		t.Fatalf("renew 14 months before the windows end: %+v; want nothing to renew", sum)
	}
	sum := compileJSON("--renew", "--created-at", "2035-09-01T00:00:00Z")
	if sum.State != "rewritten" || sum.Release != 3 || sum.Reissued == 0 || sum.Changed != sum.Targets || sum.PromotableFrom != "2035-09-01T00:00:00Z" {
		t.Fatalf("renew 11 months before the windows end: %+v; want release 3 re-issuing every target", sum)
	}
	commitAll(t, repo, "renew the activation windows", time.Date(2035, 9, 1, 0, 0, 0, 0, time.UTC))
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err != nil || !strings.Contains(out, "up to date: release 3") {
		t.Fatalf("check of the renewal: %v\n%s", err, out)
	}
}

// TestCompileCheckNamesTheEditedSources: a commit that edits sources
// without compiling makes the committed release stale; --check names the
// files edited since the commit that introduced the release, and says
// when no target's values changed (a comment) — it named only the
// release digest, or inputs[1].digest for the environment document.
func TestCompileCheckNamesTheEditedSources(t *testing.T) {
	dir := gitFixture(t)
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	appendTo := func(rel, text string) {
		t.Helper()
		f, err := os.OpenFile(filepath.Join(dir, rel), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
	}
	appendTo("agents/account.yaml", "# reviewed\n")
	commitAll(t, r, "a comment", time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC))
	_, err = runCLI("compile", "--repo", dir, "--env", "dev", "--check")
	if want := "sources edited since release 1 was compiled: agents/account.yaml; no target's values changed (releaseDigest is"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want it to contain %q", err, want)
	}
	appendTo("environments/dev.yaml", "# reviewed\n")
	appendTo("targets/prod/account.yaml", "# not an input of dev\n")
	commitAll(t, r, "two more comments", time.Date(2026, 10, 3, 0, 0, 0, 0, time.UTC))
	_, err = runCLI("compile", "--repo", dir, "--env", "dev", "--check")
	if want := "sources edited since release 1 was compiled: agents/account.yaml, environments/dev.yaml; no target's values changed (inputs[1].digest is"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want it to contain %q", err, want)
	}
}
