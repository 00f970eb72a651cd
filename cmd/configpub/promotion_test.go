package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
)

// TestCompileWarnsWhenThePromotionWindowHasEnded: in a quiet repository
// whose HEAD commit is weeks old, the release compile writes (createdAt
// from HEAD's commit time) can be promoted only until a time already past;
// compile says so on stderr, naming --created-at, and its output is
// unchanged — it printed the ended window without a word. Compiling again
// with --created-at now writes the release again, promotable from now,
// without a warning.
func TestCompileWarnsWhenThePromotionWindowHasEnded(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	dir := filepath.Join(t.TempDir(), "policy")
	if out, err := runCLI("init", dir); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, r, "policy: initial repository", time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	root := newRootCmd()
	var stdout, stderr strings.Builder
	root.SetOut(&stdout)
	root.SetErr(&stderr)
	root.SetArgs([]string{"compile", "--repo", dir, "--env", "dev"})
	if err := root.Execute(); err != nil {
		t.Fatalf("compile: %v\n%s%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "promotable from 2026-03-01T12:00:00Z until 2026-03-22T12:00:00Z") {
		t.Errorf("stdout: %q, want the window", stdout.String())
	}
	want := "warning: release 1 can be promoted only until 2026-03-22T12:00:00Z, which has passed: its createdAt 2026-03-01T12:00:00Z is HEAD's commit time; compile with --created-at (the current time, say) for a release promote accepts\n"
	if stderr.String() != want {
		t.Errorf("stderr: %q, want %q", stderr.String(), want)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	out, err := runCLI("compile", "--repo", dir, "--env", "dev", "--created-at", now)
	if err != nil || strings.Contains(out, "warning") || !strings.Contains(out, "promotable from "+now) {
		t.Errorf("compile --created-at now: %v\n%s", err, out)
	}
}
