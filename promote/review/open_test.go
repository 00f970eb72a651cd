package review_test

import (
	"errors"
	"io/fs"
	"os/exec"
	"path/filepath"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/promote/review"
)

// TestOpen opens a repository with a worktree and a bare clone of it: both
// read the same commit and file, and only the first has a worktree.
func TestOpen(t *testing.T) {
	r := gittest.New(t)
	tip := r.Commit(gittest.Commit{Files: map[string][]byte{"configpub.yaml": []byte("kind: Repository\n")}, Message: "one"})
	bare := filepath.Join(t.TempDir(), "bare.git")
	if _, err := git.PlainClone(bare, true, &git.CloneOptions{URL: r.Dir}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir  string
		bare bool
	}{{r.Dir, false}, {bare, true}} {
		repo, err := review.Open(c.dir)
		if err != nil {
			t.Fatalf("%s: %v", c.dir, err)
		}
		ref, err := repo.Reference(plumbing.NewBranchReferenceName(gittest.Main), true)
		if err != nil || ref.Hash() != tip {
			t.Fatalf("%s: main is %v (%v), want %s", c.dir, ref, err, tip)
		}
		fsys, _, err := review.CommitFS(repo, tip.String())
		if err != nil {
			t.Fatal(err)
		}
		if b, err := fs.ReadFile(fsys, "configpub.yaml"); err != nil || string(b) != "kind: Repository\n" {
			t.Errorf("%s: read %q, %v", c.dir, b, err)
		}
		_, err = repo.Worktree()
		if c.bare != errors.Is(err, git.ErrIsBareRepository) {
			t.Errorf("%s: worktree: %v, want bare %v", c.dir, err, c.bare)
		}
	}
	if _, err := review.Open(t.TempDir()); err == nil {
		t.Error("opened a directory that is not a repository")
	}
}

// TestOpenLinkedWorktree: a worktree made by `git worktree add` opens with
// the main repository's branches and objects (its own directory holds
// neither).
func TestOpenLinkedWorktree(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git binary not installed: git worktree add cannot be run")
	}
	r := gittest.New(t)
	tip := r.Commit(gittest.Commit{Files: map[string][]byte{"configpub.yaml": []byte("kind: Repository\n")}, Message: "one"})
	wt := filepath.Join(t.TempDir(), "wt")
	cmd := exec.Command(gitBin, "worktree", "add", "--detach", wt, gittest.Main)
	cmd.Dir = r.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git worktree add: %v\n%s", err, out)
	}
	repo, err := review.Open(wt)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := repo.Reference(plumbing.NewBranchReferenceName(gittest.Main), true)
	if err != nil || ref.Hash() != tip {
		t.Fatalf("main is %v (%v), want %s", ref, err, tip)
	}
	if _, _, err := review.CommitFS(repo, tip.String()); err != nil {
		t.Fatal(err)
	}
}

// TestOpenPolicyInASubdirectory: OpenPolicy opens the Git repository that
// contains a policy repository in a subdirectory of its worktree (a
// monorepo's policy/) and returns that directory, which CommitDirFS
// reads the commit's policy files from; the repository itself (worktree
// root or bare) is the root. `promote --repo policy/` failed: Open does not
// search parent directories.
func TestOpenPolicyInASubdirectory(t *testing.T) {
	r := gittest.New(t)
	tip := r.Commit(gittest.Commit{Files: map[string][]byte{"README.md": []byte("monorepo\n"), "policy/configpub.yaml": []byte("kind: Repository\n")}, Message: "one"})
	r.Checkout()
	for _, c := range []struct{ dir, want string }{{r.Dir, ""}, {filepath.Join(r.Dir, "policy"), "policy"}} {
		repo, dir, err := review.OpenPolicy(c.dir)
		if err != nil || dir != c.want {
			t.Fatalf("OpenPolicy(%s): dir %q, %v; want %q", c.dir, dir, err, c.want)
		}
		fsys, _, err := review.CommitDirFS(repo, tip.String(), dir)
		if err != nil {
			t.Fatal(err)
		}
		want := "configpub.yaml"
		if dir == "" {
			want = "policy/configpub.yaml"
		}
		if _, err := fs.Stat(fsys, want); err != nil {
			t.Errorf("%s at %s: %v", want, c.dir, err)
		}
	}
	if _, _, err := review.OpenPolicy(t.TempDir()); err == nil {
		t.Error("OpenPolicy of a directory outside any repository: no error")
	}
}
