package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompileAndPlanInALinkedWorktree: compile --check and plan work in a
// checkout made by `git worktree add` (its .git is a file; HEAD is the
// worktree's, objects and refs the main repository's) — both failed with
// "createdAt from HEAD: resolve HEAD: reference not found".
func TestCompileAndPlanInALinkedWorktree(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git binary not installed: git worktree add cannot be run")
	}
	dir := gitFixture(t)
	wt := filepath.Join(t.TempDir(), "wt")
	cmd := exec.Command(gitBin, "worktree", "add", "--detach", wt, "HEAD")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git worktree add: %v\n%s", err, out)
	}
	if out, err := runCLI("compile", "--repo", wt, "--env", "dev", "--check"); err != nil {
		t.Fatalf("compile --check in a linked worktree: %v (%s)", err, out)
	}
	p := filepath.Join(wt, "agents", "tech-support.yaml")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), "maxOutputTokens: 2048", "maxOutputTokens: 1024", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI("plan", "--repo", wt, "--env", "dev")
	if err != nil || !strings.Contains(out, "tech-support") {
		t.Fatalf("plan in a linked worktree: %v\n%s", err, out)
	}
}
