package gitfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
)

// compiledRelease compiles release 1 of a generated repository of n targets
// and returns its files.
func compiledRelease(t *testing.T, n int) []bundle.ReleaseFile {
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
	return files
}

// TestReleaseTreesFindTheRecordingCommit: the tree ReleaseTrees returns for
// a release is the one of the commit that recorded it, rooted at the
// policy repository's directory: its release files are that release's,
// whatever later commits changed; a release the history does not hold is
// not recorded.
func TestReleaseTreesFindTheRecordingCommit(t *testing.T) {
	files := compiledRelease(t, 36)
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

// TestReleaseTreesIncompleteHistory: a walk that reaches a commit whose
// parent is not in the repository before it finds the release says so,
// wrapping bundle.ErrHistoryIncomplete — not ErrReleaseNotRecorded, since
// the release may be in the missing part — with the commit it ended at,
// how far below the revision, whether the clone is shallow, and how to
// fetch the rest; a release above the cut is still found.
func TestReleaseTreesIncompleteHistory(t *testing.T) {
	files := compiledRelease(t, 4)
	release := func(v int) map[string]string {
		m := map[string]string{}
		for _, f := range files {
			b := string(f.Bytes)
			if f.Path == files[0].Path {
				b = strings.Replace(b, "releaseVersion: 1\n", fmt.Sprintf("releaseVersion: %d\n", v), 1)
			}
			m[f.Path] = b
		}
		return m
	}
	dir := makeRepo(t, release(1))
	second := commitFiles(t, dir, release(2), "release 2", when.Add(time.Hour))
	commitFiles(t, dir, map[string]string{"README.md": "a later commit\n"}, "docs", when.Add(2*time.Hour))
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.CommitObject(second)
	if err != nil {
		t.Fatal(err)
	}
	first := c.ParentHashes[0].String()
	if err := os.Remove(filepath.Join(dir, ".git", "objects", first[:2], first[2:])); err != nil {
		t.Fatal(err)
	}
	trees := ReleaseTrees(dir, "HEAD")
	if _, err := trees(context.Background(), "bench", 2); err != nil {
		t.Fatalf("release 2, above the missing commit: %v", err)
	}
	_, err = trees(context.Background(), "bench", 1)
	if !errors.Is(err, bundle.ErrHistoryIncomplete) || errors.Is(err, bundle.ErrReleaseNotRecorded) {
		t.Fatalf("release 1, in the missing part: got %v, want ErrHistoryIncomplete only", err)
	}
	for _, want := range []string{"ends at commit " + second.String()[:12], "1 commits below HEAD", "its first parent " + first[:12] + " is not in the repository", "fetch-depth: 0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	// A shallow clone cut there says so.
	if err := os.WriteFile(filepath.Join(dir, ".git", "shallow"), []byte(second.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := trees(context.Background(), "bench", 1); !errors.Is(err, bundle.ErrHistoryIncomplete) || !strings.Contains(err.Error(), "a shallow clone, cut there") {
		t.Fatalf("release 1 in a shallow clone: got %v", err)
	}
}
