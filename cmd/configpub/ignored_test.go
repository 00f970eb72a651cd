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
