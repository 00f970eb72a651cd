package gitfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

var when = time.Date(2026, 8, 13, 14, 0, 0, 0, time.UTC)

// makeRepo builds a go-git repository with files under sub/ and one commit
// by a fixed author at a fixed time.
func makeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for p, c := range files {
		fp := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fp, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddGlob("."); err != nil {
		t.Fatal(err)
	}
	sig := &object.Signature{Name: "configpub test", Email: "test@configpub.dev", When: when}
	if _, err := wt.Commit("fixture", &git.CommitOptions{Author: sig, Committer: sig}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestHeadCommitTime(t *testing.T) {
	dir := makeRepo(t, map[string]string{"a.yaml": "a: 1\n"})
	got, err := HeadCommitTime(filepath.Join(dir))
	if err != nil || !got.Equal(when) {
		t.Fatalf("got %v, %v; want %v", got, err, when)
	}
	if _, err := HeadCommitTime(t.TempDir()); err == nil {
		t.Fatal("want ErrNotRepository outside a repository")
	}
}

func TestTreeFSOfSubdirectory(t *testing.T) {
	dir := makeRepo(t, map[string]string{"repo/a.yaml": "a: 1\n", "repo/x/b.yaml": "b: 2\n", "other.txt": "x"})
	// A working-tree edit is not visible at HEAD.
	if err := os.WriteFile(filepath.Join(dir, "repo", "a.yaml"), []byte("a: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsys, err := TreeFS(filepath.Join(dir, "repo"), "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	b, err := fs.ReadFile(fsys, "a.yaml")
	if err != nil || string(b) != "a: 1\n" {
		t.Fatalf("got %q, %v; want the committed bytes", b, err)
	}
	var paths []string
	if err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 || paths[0] != "a.yaml" || paths[1] != "x/b.yaml" {
		t.Errorf("got %v, want [a.yaml x/b.yaml]", paths)
	}
	if err := fstest.TestFS(fsys, "a.yaml", "x/b.yaml"); err != nil {
		t.Errorf("fstest: %v", err)
	}
	if _, err := fs.ReadFile(fsys, "missing.yaml"); err == nil {
		t.Errorf("missing file readable")
	}
}
