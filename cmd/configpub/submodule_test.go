package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/configpub/configpub/internal/policytree"
)

// TestSubmodulesAreRefused: a submodule is refused as one by both readers —
// in the working tree (a directory holding a .git file: compile --check
// read the files in it) and in a commit's tree (a gitlink: plan refused it
// as "not a regular file or directory (device, FIFO...)").
func TestSubmodulesAreRefused(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git binary not installed: a gitlink cannot be committed with go-git")
	}
	dir := gitFixture(t)
	sub := filepath.Join(dir, "shared")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(sub, ".git"), []byte("gitdir: ../.git/modules/shared\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, policytree.ErrSubmodule) || !strings.Contains(err.Error(), "shared: submodule: policy is read only from this repository's commit") {
			t.Errorf("%s: got %v, want the submodule shared refused as one", what, err)
		}
	}
	_, err = runCLI("compile", "--repo", dir, "--env", "dev", "--check")
	refused("compile --check with a submodule in the working tree", err)

	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(gitBin, append([]string{"-c", "user.name=configpub test", "-c", "user.email=test@configpub.dev"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	head := git("rev-parse", "HEAD")
	git("update-index", "--add", "--cacheinfo", "160000,"+head+",shared")
	git("commit", "-q", "-m", "a submodule")
	_, err = runCLI("plan", "--repo", dir, "--env", "dev")
	refused("plan against a commit holding a gitlink", err)
}
