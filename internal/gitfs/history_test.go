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
