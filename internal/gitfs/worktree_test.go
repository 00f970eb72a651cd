package gitfs

import (
	"io/fs"
	"os/exec"
	"path/filepath"
	"testing"

	git "github.com/go-git/go-git/v5"
)

// TestLinkedWorktree: in a worktree made by `git worktree add` (its .git is
// a file naming $GIT_DIR/worktrees/NAME, whose HEAD is its own and whose
// objects and refs are the main repository's), HEAD's commit time, HEAD's
// tree and the first-parent history are read — go-git without the common
// directory found no reference: "resolve HEAD: reference not found".
func TestLinkedWorktree(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git binary not installed: git worktree add cannot be run")
	}
	dir := makeRepo(t, map[string]string{"repo/a.yaml": "a: 1\n"})
	wt := filepath.Join(t.TempDir(), "wt")
	cmd := exec.Command(gitBin, "worktree", "add", "--detach", wt, "HEAD")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git worktree add: %v\n%s", err, out)
	}
	got, err := HeadCommitTime(filepath.Join(wt, "repo"))
	if err != nil || !got.Equal(when) {
		t.Fatalf("HeadCommitTime in a linked worktree: got %v, %v; want %v", got, err, when)
	}
	fsys, err := TreeFS(filepath.Join(wt, "repo"), "HEAD")
	if err != nil {
		t.Fatalf("TreeFS in a linked worktree: %v", err)
	}
	if b, err := fs.ReadFile(fsys, "a.yaml"); err != nil || string(b) != "a: 1\n" {
		t.Fatalf("a.yaml at HEAD: got %q, %v", b, err)
	}
	main, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	head, err := main.Head()
	if err != nil {
		t.Fatal(err)
	}
	// A branch of the main repository, read from the linked worktree.
	if err := Contains(wt, "HEAD", head.Name().Short()); err != nil {
		t.Fatalf("Contains in a linked worktree: %v", err)
	}
}
