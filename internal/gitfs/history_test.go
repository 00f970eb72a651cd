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
	"github.com/go-git/go-git/v5/plumbing"

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
	release := numberedReleases(t)
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

// numberedReleases returns the files of a compiled release with its root
// numbered v, as a history of releases holds them (only the root's
// releaseVersion and releaseDigest lines differ, the digest numberedDigest(v);
// the walks read nothing else).
func numberedReleases(t *testing.T) func(v int) map[string]string {
	files := compiledRelease(t, 4)
	return func(v int) map[string]string {
		m := map[string]string{}
		for _, f := range files {
			b := string(f.Bytes)
			if f.Path == files[0].Path {
				b = strings.Replace(b, "releaseVersion: 1\n", fmt.Sprintf("releaseVersion: %d\n", v), 1)
				b = releaseDigestRE.ReplaceAllString(b, fmt.Sprintf(`releaseDigest: "%s"`, numberedDigest(v)))
			}
			m[f.Path] = b
		}
		return m
	}
}

// TestReleaseHistoryAcrossARevert: in a first-parent history of releases
// 1, 2, 1 (a revert), 3, release 2 is found below the revert — the walk does
// not stop at the older release the revert put back — and a release that
// is not there is not recorded, named by the first older release seen.
// NewerRelease finds release 2 above a working tree reverted to release 1,
// and nothing above a working tree at or past the newest release.
func TestReleaseHistoryAcrossARevert(t *testing.T) {
	release := numberedReleases(t)
	dir := makeRepo(t, release(1))
	two := commitFiles(t, dir, release(2), "release 2", when.Add(time.Hour))
	commitFiles(t, dir, release(1), "Revert release 2", when.Add(2*time.Hour))
	ctx := context.Background()

	// At the revert: the working tree holds release 1, release 2 above it.
	if v, c, err := NewerRelease(ctx, dir, "HEAD", "bench", 1, numberedDigest(1)); err != nil || v != 2 || c != two.String() {
		t.Fatalf("newer than 1 at the revert: %d %s %v, want release 2 at %s", v, c, err, two)
	}
	// Another release 1 (one built on an older base, not recorded here)
	// did not go back.
	if v, _, err := NewerRelease(ctx, dir, "HEAD", "bench", 1, numberedDigest(9)); err != nil || v != 0 {
		t.Fatalf("newer than a release 1 not in the history: %d %v, want none", v, err)
	}
	if v, _, err := NewerRelease(ctx, dir, "HEAD", "bench", 3, numberedDigest(3)); err != nil || v != 0 {
		t.Fatalf("newer than 3 (a working tree compiled past the revert): %d %v, want none", v, err)
	}
	three := commitFiles(t, dir, release(3), "release 3", when.Add(3*time.Hour))
	if v, _, err := NewerRelease(ctx, dir, "HEAD", "bench", 3, numberedDigest(3)); err != nil || v != 0 {
		t.Fatalf("newer than 3 at release 3: %d %v, want none", v, err)
	}

	trees := ReleaseTrees(dir, "HEAD")
	for v, at := range map[int64]plumbing.Hash{3: three, 2: two} {
		f, err := findRelease(ctx, dir, "HEAD", "bench", v)
		if err != nil || f.commit.Hash != at {
			t.Fatalf("release %d: %v, want it at %s", v, err, at)
		}
	}
	if _, err := trees(ctx, "bench", 1); err != nil {
		t.Fatalf("release 1: %v", err)
	}
	// A history that never held release 5 (1, 2, 1, 3, 4 then 6): not
	// recorded, naming release 4, the first older release.
	four := commitFiles(t, dir, release(4), "release 4", when.Add(4*time.Hour))
	commitFiles(t, dir, release(6), "release 6", when.Add(5*time.Hour))
	_, err := trees(ctx, "bench", 5)
	if !errors.Is(err, bundle.ErrReleaseNotRecorded) || !strings.Contains(err.Error(), "(release 4 at "+four.String()[:12]) {
		t.Fatalf("release 5: got %v, want not recorded naming release 4", err)
	}
}

// TestReleaseHistoryStoredWithCRLF: a repository that stores its release
// files with CRLF line endings in Git (committed from a Windows checkout
// without core.autocrlf; the compiler reads them as LF) holds releases the
// walks find. They matched releaseVersion and releaseDigest lines ending
// in LF only, so every CRLF release was passed over: release 2 was not
// recorded (promote's catch-up and validate of an older release), no
// newer release was seen above a revert. The history here is 1, 2, 1
// again (a revert), 3, all in CRLF.
func TestReleaseHistoryStoredWithCRLF(t *testing.T) {
	release := numberedReleases(t)
	crlf := func(v int) map[string]string {
		m := release(v)
		for p, b := range m {
			m[p] = strings.ReplaceAll(b, "\n", "\r\n")
		}
		return m
	}
	dir := makeRepo(t, crlf(1))
	two := commitFiles(t, dir, crlf(2), "release 2", when.Add(time.Hour))
	commitFiles(t, dir, crlf(1), "Revert release 2", when.Add(2*time.Hour))
	ctx := context.Background()
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.CommitObject(two)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := c.File("releases/bench.yaml"); err != nil {
		t.Fatal(err)
	} else if b, err := readBlob(f); err != nil || !bytes.Contains(b, []byte("\r\nreleaseVersion: 2\r\n")) {
		t.Fatalf("the blob of release 2 does not hold CRLF line endings (%v)", err)
	}

	if v, at, err := NewerRelease(ctx, dir, "HEAD", "bench", 1, numberedDigest(1)); err != nil || v != 2 || at != two.String() {
		t.Fatalf("newer than 1 at the revert: %d %s %v, want release 2 at %s", v, at, err, two)
	}
	three := commitFiles(t, dir, crlf(3), "release 3", when.Add(3*time.Hour))
	for v, want := range map[int64]plumbing.Hash{3: three, 2: two} {
		if got, err := ReleaseCommit(ctx, r, "", "HEAD", "bench", v); err != nil || got != want.String() {
			t.Fatalf("release %d: %s %v, want it at %s", v, got, err, want)
		}
	}
	fsys, err := ReleaseTrees(dir, "HEAD")(ctx, "bench", 2)
	if err != nil {
		t.Fatalf("the tree of release 2: %v", err)
	}
	if b, err := fs.ReadFile(fsys, "releases/bench.yaml"); err != nil || !bytes.Contains(b, []byte("releaseVersion: 2\r\n")) {
		t.Fatalf("releases/bench.yaml in the tree of release 2: %v", err)
	}
	if _, err := ReleaseTrees(dir, "HEAD")(ctx, "bench", 1); err != nil {
		t.Fatalf("release 1, below the CRLF ones: %v", err)
	}
}

// numberedDigest is the releaseDigest numberedReleases gives release v.
func numberedDigest(v int) string { return fmt.Sprintf("sha256:%064x", v) }

// TestReleaseHistoryStartsWhereTheFileDoes: the walks end at a commit
// without the release file, where its history starts — in a long history
// before the first release they do not read every commit down to the root.
// A file deleted and added again hides what is below the gap (stated in
// the docs of both).
func TestReleaseHistoryStartsWhereTheFileDoes(t *testing.T) {
	release := numberedReleases(t)
	dir := makeRepo(t, release(2))
	for p := range release(2) {
		if err := os.Remove(filepath.Join(dir, p)); err != nil {
			t.Fatal(err)
		}
	}
	gap := commitFiles(t, dir, map[string]string{"README.md": "no releases here\n"}, "remove the releases", when.Add(time.Hour))
	commitFiles(t, dir, release(1), "release 1 again", when.Add(2*time.Hour))
	ctx := context.Background()
	if v, _, err := NewerRelease(ctx, dir, "HEAD", "bench", 1, numberedDigest(1)); err != nil || v != 0 {
		t.Fatalf("newer than 1 across the gap: %d %v, want none", v, err)
	}
	_, err := ReleaseTrees(dir, "HEAD")(ctx, "bench", 0)
	if !errors.Is(err, bundle.ErrReleaseNotRecorded) || !strings.Contains(err.Error(), "is not in "+gap.String()[:12]) {
		t.Fatalf("release 0: got %v, want not recorded, the walk ended at %s", err, gap)
	}
}

// TestIntroducedTreeInASubdirectory: IntroducedTree finds the commit that
// introduced the release of a policy repository in a subdirectory of the
// Git repository (its releases/ENV.yaml under policy/), and returns that
// commit's files rooted at the subdirectory — the command line opened the
// Git repository at the policy directory and looked for releases/ENV.yaml
// at the Git root, so a monorepo's stale release named no edited source.
func TestIntroducedTreeInASubdirectory(t *testing.T) {
	dir := makeRepo(t, map[string]string{
		"policy/releases/dev.yaml": "releaseVersion: 1\n",
		"policy/agents/a.yaml":     "first\n",
	})
	commitFiles(t, dir, map[string]string{"policy/agents/a.yaml": "edited\n"}, "an edit without compiling", when.Add(time.Hour))
	fsys, err := IntroducedTree(context.Background(), filepath.Join(dir, "policy"), "dev")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := fs.ReadFile(fsys, "agents/a.yaml"); err != nil || string(b) != "first\n" {
		t.Errorf("agents/a.yaml at the introducing commit: %q, %v; want the first version", b, err)
	}
}
