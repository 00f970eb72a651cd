package gitfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

var when = time.Date(2026, 8, 13, 14, 0, 0, 0, time.UTC)

// makeRepo builds a go-git repository with files under sub/ and one commit
// by a fixed author at a fixed time.
func makeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := git.PlainInit(dir, false); err != nil {
		t.Fatal(err)
	}
	commitFiles(t, dir, files, "fixture", when)
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

// commitAll writes files into the worktree of dir and commits them an hour
// after the first commit.
func commitAll(t *testing.T, dir string, files map[string]string) plumbing.Hash {
	t.Helper()
	return commitFiles(t, dir, files, "next", when.Add(time.Hour))
}

// commitFiles writes files into the worktree of dir and commits them by a
// fixed author at at.
func commitFiles(t testing.TB, dir string, files map[string]string, msg string, at time.Time) plumbing.Hash {
	t.Helper()
	r, err := git.PlainOpen(dir)
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
	sig := &object.Signature{Name: "configpub test", Email: "test@configpub.dev", When: at}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestTreeFSRevisions(t *testing.T) {
	dir := makeRepo(t, map[string]string{"repo/a.yaml": "a: 1\n"})
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	head, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	first := head.Hash()
	// A "main" branch and a tag at the first commit, then a second commit on
	// the current branch that changes a.yaml and adds the new/ directory.
	if err := r.Storer.SetReference(plumbing.NewHashReference("refs/heads/main", first)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.CreateTag("v1", first, nil); err != nil {
		t.Fatal(err)
	}
	second := commitAll(t, dir, map[string]string{"repo/a.yaml": "a: 2\n", "new/b.yaml": "b: 1\n"})

	tests := []struct {
		name, sub, rev string
		wantA          string // contents of a.yaml; "" = the FS must be empty
		wantErr        bool
	}{
		{name: "HEAD", sub: "repo", rev: "HEAD", wantA: "a: 2\n"},
		{name: "branch name", sub: "repo", rev: "main", wantA: "a: 1\n"},
		{name: "full ref", sub: "repo", rev: "refs/heads/main", wantA: "a: 1\n"},
		{name: "tag", sub: "repo", rev: "v1", wantA: "a: 1\n"},
		{name: "parent expression", sub: "repo", rev: "HEAD~1", wantA: "a: 1\n"},
		{name: "full hash", sub: "repo", rev: second.String(), wantA: "a: 2\n"},
		{name: "abbreviated hash", sub: "repo", rev: first.String()[:8], wantA: "a: 1\n"},
		{name: "directory absent at revision", sub: "new", rev: "main", wantA: ""},
		{name: "unknown revision", sub: "repo", rev: "nope", wantErr: true},
	}
	// A parent expression past the root commit names the revision and why;
	// go-git's own answer is a bare EOF ("resolve HEAD~5: EOF").
	if _, err := TreeFS(filepath.Join(dir, "repo"), "HEAD~5"); err == nil ||
		err.Error() != "resolve HEAD~5: reference not found: the history ends before it" {
		t.Errorf("HEAD~5 of a two-commit history: got %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys, err := TreeFS(filepath.Join(dir, tt.sub), tt.rev)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got no error, want one for %q", tt.rev)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantA == "" {
				ents, err := fs.ReadDir(fsys, ".")
				if err != nil || len(ents) != 0 {
					t.Fatalf("got %v, %v; want an empty directory", ents, err)
				}
				if err := fstest.TestFS(fsys); err != nil {
					t.Errorf("fstest: %v", err)
				}
				return
			}
			b, err := fs.ReadFile(fsys, "a.yaml")
			if err != nil || string(b) != tt.wantA {
				t.Fatalf("got %q, %v; want %q", b, err, tt.wantA)
			}
		})
	}
}

func TestTreeFSOutsideRepository(t *testing.T) {
	if _, err := TreeFS(t.TempDir(), "HEAD"); !errors.Is(err, ErrNotRepository) {
		t.Fatalf("got %v, want ErrNotRepository", err)
	}
}

// TestReadsBlobsOfEverySize reads blobs around the read buffer sizes and
// past the size allocated up front: every byte, nothing more, through
// ReadFile and Open alike.
func TestReadsBlobsOfEverySize(t *testing.T) {
	files := map[string]string{}
	for _, n := range []int{0, 1, 511, 512, 513, 4096, 64<<10 + 3, exactSizeLimit, exactSizeLimit + 1} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + (i*7+n)%26)
		}
		files[fmt.Sprintf("f%d.txt", n)] = string(b)
	}
	dir := makeRepo(t, files)
	if err := os.Symlink("f1.txt", filepath.Join(dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	commitAll(t, dir, map[string]string{"sub/x.txt": "x"})
	fsys, err := TreeFS(dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.ReadFile(fsys, "sub"); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("ReadFile of a directory: %v, want is a directory", err)
	}
	if _, err := fs.ReadFile(fsys, "link.txt"); !errors.Is(err, errSymlink) {
		t.Errorf("ReadFile of a symbolic link: %v, want %v", err, errSymlink)
	}
	for name, want := range files {
		got, err := fs.ReadFile(fsys, name)
		if err != nil || string(got) != want {
			t.Errorf("ReadFile(%s): %d bytes, %v; want %d bytes as committed", name, len(got), err, len(want))
		}
		f, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		got, err = io.ReadAll(f)
		f.Close()
		if err != nil || string(got) != want {
			t.Errorf("Open(%s): %d bytes, %v; want %d bytes as committed", name, len(got), err, len(want))
		}
	}
}
