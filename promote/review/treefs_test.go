package review_test

import (
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/configpub/configpub/internal/gittest"
	"github.com/configpub/configpub/promote/review"
)

func TestCommitFS(t *testing.T) {
	r := gittest.New(t)
	files := map[string][]byte{
		"configpub.yaml":          []byte("kind: Repository\n"),
		"releases/dev.yaml":       []byte("releaseVersion: 1\n"),
		"hosts/a/agent.yaml":      []byte("kind: Agent\n"),
		"hosts/a-b.yaml":          []byte("kind: Host\n"), // sorts between "hosts/a" and "hosts/a/" in Git order
		"hosts/a/sub/deep/x.yaml": []byte("x: 1\n"),
		"empty.txt":               []byte{},
	}
	first := r.Commit(gittest.Commit{Files: files, Message: "one"})
	second := r.Commit(gittest.Commit{Files: map[string][]byte{"releases/dev.yaml": []byte("releaseVersion: 2\n"), "empty.txt": nil}, Message: "two"})

	fsys, when, err := review.CommitFS(r.Git, first.String())
	if err != nil {
		t.Fatal(err)
	}
	if !when.Equal(gittest.Epoch) {
		t.Errorf("got commit time %v, want %v", when, gittest.Epoch)
	}
	if err := fstest.TestFS(fsys, "configpub.yaml", "releases/dev.yaml", "hosts/a/agent.yaml", "hosts/a-b.yaml", "hosts/a/sub/deep/x.yaml", "empty.txt"); err != nil {
		t.Fatal(err)
	}
	got, err := fs.ReadFile(fsys, "releases/dev.yaml")
	if err != nil || string(got) != "releaseVersion: 1\n" {
		t.Errorf("got %q, %v at first commit, want release 1", got, err)
	}
	if _, err := fs.Stat(fsys, "nope.yaml"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v, want fs.ErrNotExist", err)
	}
	if _, err := fsys.Open("../etc/passwd"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("got %v, want fs.ErrInvalid", err)
	}

	fsys2, _, err := review.CommitFS(r.Git, second.String())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := fs.ReadFile(fsys2, "releases/dev.yaml"); string(got) != "releaseVersion: 2\n" {
		t.Errorf("got %q at second commit, want release 2", got)
	}
	if _, err := fs.Stat(fsys2, "empty.txt"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("got %v for a deleted file, want fs.ErrNotExist", err)
	}
}
