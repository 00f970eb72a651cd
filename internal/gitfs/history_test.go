package gitfs

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
)

// compiledRelease compiles release 1 of a generated repository of n targets
// and returns its archive and its files.
func compiledRelease(t *testing.T, n int) ([]byte, []bundle.ReleaseFile) {
	t.Helper()
	res, err := compiler.Compile(context.Background(), gen.Repo(gen.Options{Targets: n}),
		compiler.Options{EnvTag: "bench", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ManifestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	files, err := bundle.SplitArchive(res.ManifestBytes)
	if err != nil {
		t.Fatal(err)
	}
	return res.ManifestBytes, files
}

// TestReleaseHistoryReadsTheCommittedRelease: a sharded release read back
// from a commit is the archive compile made of it, byte for byte, read
// into room allocated once at its size; a shard
// the root lists but the commit lacks is named, and so is a shard
// directory the commit lacks altogether.
func TestReleaseHistoryReadsTheCommittedRelease(t *testing.T) {
	archive, files := compiledRelease(t, 120)
	if len(files) < 3 {
		t.Fatalf("%d release files: the test needs several shards", len(files))
	}
	committed := map[string]string{"README.md": "policy\n"}
	for _, f := range files {
		committed[f.Path] = string(f.Bytes)
	}
	dir := makeRepo(t, committed)
	read := func() ([]byte, error) {
		return ReleaseHistory(dir, "HEAD")(context.Background(), "bench", 1)
	}
	got, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, archive) {
		t.Fatalf("release 1 read from Git: %d bytes, differs from the %d bytes compiled", len(got), len(archive))
	}
	if cap(got) != len(got) {
		t.Fatalf("release 1 read from Git into %d bytes of room for %d: the archive is not sized from the shards' sizes", cap(got), len(got))
	}

	remove := func(paths ...string) {
		t.Helper()
		r, err := git.PlainOpen(dir)
		if err != nil {
			t.Fatal(err)
		}
		wt, err := r.Worktree()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if _, err := wt.Remove(filepath.ToSlash(p)); err != nil {
				t.Fatal(err)
			}
		}
		sig := &object.Signature{Name: "configpub test", Email: "test@configpub.dev", When: when.Add(time.Hour)}
		if _, err := wt.Commit("remove", &git.CommitOptions{Author: sig, Committer: sig}); err != nil {
			t.Fatal(err)
		}
	}
	missing := files[2].Path
	remove(missing)
	if _, err := read(); err == nil || !strings.Contains(err.Error(), missing+" at ") {
		t.Fatalf("a listed shard missing from the commit: %v, want an error naming %s", err, missing)
	}
	var rest []string
	for _, f := range files[1:] {
		if f.Path != missing {
			rest = append(rest, f.Path)
		}
	}
	remove(rest...)
	d := bundle.ShardDir("bench")
	if _, err := read(); err == nil || !strings.Contains(err.Error(), d+" at ") || errors.Is(err, bundle.ErrReleaseNotRecorded) {
		t.Fatalf("the shard directory missing from the commit: %v, want an error naming %s", err, d)
	}
}

// TestReleaseTreesFindTheRecordingCommit: the tree ReleaseTrees returns for
// a release is the one of the commit that recorded it, rooted at the
// policy repository's directory: its release files are that release's,
// whatever later commits changed; a release the history does not hold is
// not recorded.
func TestReleaseTreesFindTheRecordingCommit(t *testing.T) {
	_, files := compiledRelease(t, 36)
	release1 := map[string]string{}
	for _, f := range files {
		release1["policy/"+f.Path] = string(f.Bytes)
	}
	dir := makeRepo(t, release1)
	// Release 2 recorded later: its root names release 2, and one shard
	// changed with it.
	root, shard := files[0], files[1]
	later := map[string]string{
		"policy/" + root.Path:  strings.Replace(string(root.Bytes), "releaseVersion: 1\n", "releaseVersion: 2\n", 1),
		"policy/" + shard.Path: string(shard.Bytes) + "# release 2\n",
	}
	commitFiles(t, dir, later, "release 2", when.Add(time.Hour))

	trees := ReleaseTrees(filepath.Join(dir, "policy"), "HEAD")
	fsys, err := trees(context.Background(), "bench", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		got, err := fs.ReadFile(fsys, f.Path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.Bytes) {
			t.Fatalf("%s in the tree of release 1 is not release 1's", f.Path)
		}
	}
	fsys, err = trees(context.Background(), "bench", 2)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := fs.ReadFile(fsys, shard.Path); err != nil || !strings.HasSuffix(string(got), "# release 2\n") {
		t.Fatalf("%s in the tree of release 2: %v, want release 2's", shard.Path, err)
	}
	if _, err := trees(context.Background(), "bench", 3); !errors.Is(err, bundle.ErrReleaseNotRecorded) {
		t.Fatalf("release 3: %v, want ErrReleaseNotRecorded", err)
	}
}
