package gitfs

import (
	"bytes"
	"context"
	"errors"
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

// TestReleaseHistoryReadsTheCommittedRelease: a sharded release read back
// from a commit is the archive compile made of it, byte for byte, read
// into room allocated once at its size; a shard
// the root lists but the commit lacks is named, and so is a shard
// directory the commit lacks altogether.
func TestReleaseHistoryReadsTheCommittedRelease(t *testing.T) {
	res, err := compiler.Compile(context.Background(), gen.Repo(gen.Options{Targets: 120}),
		compiler.Options{EnvTag: "bench", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ManifestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	files, err := bundle.SplitArchive(res.ManifestBytes)
	if err != nil {
		t.Fatal(err)
	}
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
	if !bytes.Equal(got, res.ManifestBytes) {
		t.Fatalf("release 1 read from Git: %d bytes, differs from the %d bytes compiled", len(got), len(res.ManifestBytes))
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
