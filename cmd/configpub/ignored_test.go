package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestGitIgnoredFilesAreNotCompiled: a source file Git ignores and does not
// track (a .gitignore'd local/target.yaml, a scratch file listed in
// .git/info/exclude) is not compiled — it added a target locally, and the
// release committed with it failed compile --check in a clean clone — and
// compile says so on stderr; a tracked file an ignore pattern matches is
// compiled, as Git keeps it.
func TestGitIgnoredFilesAreNotCompiled(t *testing.T) {
	dir := gitFixture(t)
	write := func(rel, s string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "targets", "dev", "account.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	extra := strings.Replace(strings.Replace(string(b), "name: dev-account", "name: dev-local", 1), "agent-account-1.0.0", "agent-local-1.0.0", 1)
	write("local/target.yaml", extra)
	write(".gitignore", "local/\n# the advisor is committed: it stays a source\nagents/advisor.yaml\n")
	write(".git/info/exclude", "scratch.yaml\n")
	write("scratch.yaml", "not: [a source\n")

	out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check")
	if err != nil {
		t.Fatalf("compile --check with ignored files: %v\n%s", err, out)
	}
	want := "warning: ignored by Git: not compiled: a release is compiled from what is committed: local/, scratch.yaml\n"
	if !strings.Contains(out, want) {
		t.Errorf("got %q, want the warning %q", out, want)
	}
	out, err = runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", "2026-10-02T00:00:00Z")
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "unchanged") {
		t.Errorf("compile with ignored files: %v\n%s\nwant the release unchanged and the warning", err, out)
	}
	// Outside Git nothing is ignored: the extra target is a source.
	if err := os.RemoveAll(filepath.Join(dir, ".git")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "scratch.yaml")); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--check"); err == nil || strings.Contains(out, "ignored by Git") {
		t.Errorf("compile --check outside Git: %v\n%s\nwant the local target compiled (stale)", err, out)
	}
}

// TestCheckNamesATargetNoSourceDeclares: a release committed with a target
// whose source file was not (compiled from an uncommitted or ignored file)
// fails compile --check saying so, not with the entry's JSON.
func TestCheckNamesATargetNoSourceDeclares(t *testing.T) {
	dir := gitFixture(t)
	b, err := os.ReadFile(filepath.Join(dir, "targets", "dev", "account.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	extra := strings.Replace(strings.Replace(string(b), "name: dev-account", "name: dev-local", 1), "agent-account-1.0.0", "agent-local-1.0.0", 1)
	if err := os.MkdirAll(filepath.Join(dir, "local"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "local", "target.yaml"), []byte(extra), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", "2026-10-02T00:00:00Z"); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Add("releases"); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "configpub test", Email: "test@configpub.dev", When: time.Date(2026, 10, 2, 9, 30, 0, 0, time.UTC)}
	if _, err := wt.Commit("release 2 without its source", &git.CommitOptions{Author: sig, Committer: sig}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "local")); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI("compile", "--repo", dir, "--env", "dev", "--check")
	want := "releases/dev.yaml: target dev.lightapi.net/com.networknt.agent-local-1.0.0/dev is not declared by any source (was it in an uncommitted or ignored file?)"
	if err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("got %v, want it to end %q", err, want)
	}
}

// ignoredLocalFiles adds to the Git repository dir what a developer's
// checkout may hold and a clean clone does not: a .gitignore'd
// local/target.yaml declaring one more target (and a second copy of a
// Workflow document), and a broken scratch.yaml listed in .git/info/exclude.
// A command that read them would compile one more target, refuse a second
// Workflow of one name, or refuse the scratch file.
func ignoredLocalFiles(t *testing.T, dir string) {
	t.Helper()
	write := func(rel, s string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(rel string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	target := read("targets/dev/account.yaml")
	write("local/target.yaml", strings.Replace(strings.Replace(target, "name: dev-account", "name: dev-local", 1), "agent-account-1.0.0", "agent-local-1.0.0", 1))
	write("local/workflow.yaml", read("workflows/account-onboarding.yaml"))
	write(".gitignore", "local/\n")
	write(".git/info/exclude", "scratch.yaml\n")
	write("scratch.yaml", "not: [a source\n")
}

// TestPublishSkipsGitIgnoredFiles: publish reads the sources compile reads —
// it compiled the files Git ignores, so a release compile --check accepted
// was refused as stale (the ignored local target) or not published at all
// (the broken scratch file).
func TestPublishSkipsGitIgnoredFiles(t *testing.T) {
	publish, _, _, repo := publisher(t)
	r, err := git.PlainInit(repo, false)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "fixture", time.Date(2026, 10, 1, 9, 30, 0, 0, time.UTC))
	ignoredLocalFiles(t, repo)
	if out, err := runCLI("compile", "--repo", repo, "--env", "dev", "--check"); err != nil {
		t.Fatalf("compile --check: %v\n%s", err, out)
	}
	out := publish()
	want := "warning: ignored by Git: not compiled: a release is compiled from what is committed: local/, scratch.yaml\n"
	if !strings.Contains(out, want) || !strings.Contains(out, "release dev/1") {
		t.Errorf("publish with ignored files:\n%s\nwant the release published and the warning %q", out, want)
	}
}

// TestWorkflowDiffSkipsGitIgnoredFiles: workflow diff reads the sources
// compile reads — it refused the broken scratch file Git ignores, and the
// ignored second copy of a Workflow document.
func TestWorkflowDiffSkipsGitIgnoredFiles(t *testing.T) {
	dir := gitFixture(t)
	ignoredLocalFiles(t, dir)
	out, err := runCLI("workflow", "diff", "account-onboarding", "1.0.0", "1.1.0", "--repo", dir)
	want := "warning: ignored by Git: not compiled: a release is compiled from what is committed: local/, scratch.yaml\n"
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "account-onboarding") {
		t.Errorf("workflow diff with ignored files: %v\n%s\nwant the diff and the warning %q", err, out, want)
	}
	// Outside Git nothing is ignored: the scratch file is a source.
	if err := os.RemoveAll(filepath.Join(dir, ".git")); err != nil {
		t.Fatal(err)
	}
	if out, err := runCLI("workflow", "diff", "account-onboarding", "1.0.0", "1.1.0", "--repo", dir); err == nil {
		t.Errorf("workflow diff outside Git read no scratch.yaml:\n%s", out)
	}
}
