package compiler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
)

// releaseFiles returns every file under dir/releases with its bytes.
func releaseFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out, err := gen.ReleaseFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// statFiles describes the files of dir named by the keys of files.
func statFiles(t *testing.T, dir string, files map[string][]byte) map[string]os.FileInfo {
	t.Helper()
	out := make(map[string]os.FileInfo, len(files))
	for p := range files {
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		out[p] = fi
	}
	return out
}

func compileWrite(t *testing.T, dir, env string, at time.Time) *compiler.Result {
	t.Helper()
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: env, CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	if err := compiler.Write(context.Background(), res, dir, ""); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestArchiveRoomFromTheCommittedRelease: the derived release's archive is
// rendered into one buffer, of the committed release's size and a little
// more, not grown while the shards are appended.
func TestArchiveRoomFromTheCommittedRelease(t *testing.T) {
	dir := benchRepo(t, 36)
	compileWrite(t, dir, "bench", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "bench", CheckOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.UpToDate {
		t.Fatalf("release 1 is not up to date: %v", res.Stale())
	}
	n := len(res.ManifestBytes)
	if n < 256<<10 {
		t.Fatalf("a release archive of %d bytes; the test needs one over 256 KiB", n)
	}
	// MarshalSize leaves a 32nd more room, for a larger next release.
	if c := cap(res.ManifestBytes); c < n+n/32 || c > n+n/16+8192 {
		t.Errorf("release archive of %d bytes in a buffer of %d, want %d to %d", n, c, n+n/32, n+n/16+8192)
	}
}

// TestOneAgentChangesRootAndOneShard: on a generated repository of five
// hosts, a change to one Agent's policy rewrites exactly the root and that
// host's shard; every file stays in the canonical form the next compile
// reproduces.
func TestOneAgentChangesRootAndOneShard(t *testing.T) {
	dir := benchRepo(t, 5)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res1 := compileWrite(t, dir, "bench", at)
	v1 := releaseFiles(t, dir)
	if len(v1) != 6 || len(res1.Targets) != 60 {
		t.Fatalf("release 1: %d files, %d targets; want root + 5 shards, 60 targets", len(v1), len(res1.Targets))
	}
	agent := filepath.Join(dir, "agents", "h0002.bench.lightapi.net-a003.yaml")
	b, err := os.ReadFile(agent)
	if err != nil {
		t.Fatal(err)
	}
	changed := bytes.Replace(b, []byte("temperature: 0.2"), []byte("temperature: 0.3"), 1)
	if bytes.Equal(changed, b) {
		t.Fatal("generated agent has no temperature: 0.2 to change")
	}
	if err := os.WriteFile(agent, changed, 0o644); err != nil {
		t.Fatal(err)
	}
	before := statFiles(t, dir, v1)
	res2 := compileWrite(t, dir, "bench", at.Add(24*time.Hour))
	if res2.Manifest.ReleaseVersion != 2 {
		t.Fatalf("release %d, want 2", res2.Manifest.ReleaseVersion)
	}
	// The Agent changed, and with it the host's Gateway and Knowledge
	// targets, which list the Agent's accepted publications.
	var changedTargets []string
	for _, tg := range res2.Targets {
		if tg.Changed {
			changedTargets = append(changedTargets, tg.Host+"/"+tg.ServiceID)
		}
	}
	wantChanged := []string{"h0002.bench.lightapi.net/com.networknt.agent-0002-003-1.0.0",
		"h0002.bench.lightapi.net/com.networknt.gateway-0002-000-1.0.0", "h0002.bench.lightapi.net/com.networknt.knowledge-0002-000-1.0.0"}
	if !reflect.DeepEqual(changedTargets, wantChanged) {
		t.Fatalf("changed targets %v, want %v", changedTargets, wantChanged)
	}
	got := gen.Changed(v1, releaseFiles(t, dir))
	want := []string{"releases/bench.yaml", "releases/bench/h0002.bench.lightapi.net.yaml"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("files changed by one Agent: %v, want %v", got, want)
	}
	// Only those are written: every other file is the one on disk before
	// (a write replaces a file by renaming a new one over it).
	after := statFiles(t, dir, v1)
	var written []string
	for p, fi := range before {
		if !os.SameFile(fi, after[p]) {
			written = append(written, p)
		}
	}
	sort.Strings(written)
	if !reflect.DeepEqual(written, want) {
		t.Fatalf("files written after one Agent changed: %v, want %v", written, want)
	}
	again, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "bench"})
	if err != nil {
		t.Fatal(err)
	}
	if !again.UpToDate && !errors.Is(again.Stale(), compiler.ErrStale) {
		t.Fatalf("recompile: %v", again.Stale())
	}
	if !bytes.Equal(again.ManifestBytes, res2.ManifestBytes) {
		t.Fatal("recompile of release 2 does not reproduce it")
	}
}

// TestNextReleaseReadsTheBaseHostByHost: the release a compile builds on is
// read and checked whole, but its target entries are decoded again host by
// host, each shard read once more at its host's turn; a shard that
// changed since it was checked is refused, not used.
func TestNextReleaseReadsTheBaseHostByHost(t *testing.T) {
	dir := benchRepo(t, 5)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	res1 := compileWrite(t, dir, "bench", at)
	v1 := releaseFiles(t, dir)
	edit(t, filepath.Join(dir, "agents", "h0002.bench.lightapi.net-a003.yaml"), "temperature: 0.2", "temperature: 0.3")

	f := &rereadFS{FS: os.DirFS(dir), opens: map[string]int{}}
	res, err := compiler.Compile(context.Background(), f, compiler.Options{EnvTag: "bench", CreatedAt: at.Add(24 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest.ReleaseVersion != 2 || !errors.Is(res.Stale(), compiler.ErrStale) {
		t.Fatalf("release %d (%v), want release 2 on a stale release 1", res.Manifest.ReleaseVersion, res.Stale())
	}
	for p := range v1 {
		want := 3 - btoi(p == compiler.ManifestPath("bench")) // hashed, checked whole, its host's turn (the root: not a host's)
		if f.opens[p] != want {
			t.Errorf("%s opened %d times, want %d", p, f.opens[p], want)
		}
	}
	// The release a check derives on release 1 read from the history
	// given (an archive in memory, not the policy repository's files).
	if err := compiler.Write(context.Background(), res, dir, ""); err != nil {
		t.Fatal(err)
	}
	history := func(_ context.Context, env string, n int64) ([]byte, error) {
		if env != "bench" || n != 1 {
			return nil, fmt.Errorf("release %s/%d asked for", env, n)
		}
		return res1.ManifestBytes, nil
	}
	check, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "bench", CheckOnly: true, Previous: history})
	if err != nil {
		t.Fatal(err)
	}
	if !check.UpToDate {
		t.Fatalf("release 2 compiled on release 1 read host by host is not what a check derives on release 1 from history: %v", check.Stale())
	}
	// The same from the policy tree that recorded release 1 (what Git
	// history gives the CLI), its files read there one at a time.
	recorded := t.TempDir()
	for p, b := range v1 {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(recorded, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(recorded, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	treeOf := func(dir string) compiler.PreviousTree {
		return func(_ context.Context, env string, n int64) (fs.FS, error) {
			if env != "bench" || n != 1 {
				return nil, fmt.Errorf("release %s/%d asked for", env, n)
			}
			return os.DirFS(dir), nil
		}
	}
	rf := &rereadFS{FS: os.DirFS(recorded), opens: map[string]int{}}
	check, err = compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "bench", CheckOnly: true,
		PreviousTree: func(context.Context, string, int64) (fs.FS, error) { return rf, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if !check.UpToDate {
		t.Fatalf("release 2 checked against release 1 read from its policy tree: %v", check.Stale())
	}
	for p := range v1 {
		if want := 3 - btoi(p == compiler.ManifestPath("bench")); rf.opens[p] != want {
			t.Errorf("release 1's %s opened %d times, want %d", p, rf.opens[p], want)
		}
	}
	for name, c := range map[string]struct {
		dir  string
		want string
	}{
		"a tree recording release 2": {dir, "the recorded release asked for as bench/1 is bench/2"},
		"a tree without the release": {t.TempDir(), "releases/bench.yaml does not exist there"},
	} {
		check, err = compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "bench", CheckOnly: true, PreviousTree: treeOf(c.dir)})
		if err != nil {
			t.Fatal(err)
		}
		if err := check.Stale(); !errors.Is(err, compiler.ErrStale) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want a stale release saying %q", name, err, c.want)
		}
	}
	for p, b := range v1 { // release 1 again

		if err := os.WriteFile(filepath.Join(dir, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	shard := filepath.Join(dir, bundle.ShardPath("bench", "h0003.bench.lightapi.net"))
	f = &rereadFS{FS: os.DirFS(dir), opens: map[string]int{}, rereadAt: bundle.ShardPath("bench", "h0003.bench.lightapi.net"), rereadOpen: 3,
		onReread: func() { edit(t, shard, "\nkind: ", "\nkind:  ") }}
	_, err = compiler.Compile(context.Background(), f, compiler.Options{EnvTag: "bench", CreatedAt: at.Add(24 * time.Hour)})
	if err == nil || !strings.Contains(err.Error(), "releases/bench.yaml changed while it was compiled") || errors.Is(err, compiler.ErrStale) {
		t.Fatalf("shard edited between its check and its host's turn: %v", err)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSingleFileManifestMigrates: a release committed in the single-file
// layout of earlier versions is stale for --check (naming the layout) and
// the next compile rewrites the same release (same version, createdAt and
// targets) as a root and one shard per host, which then checks clean.
func TestSingleFileManifestMigrates(t *testing.T) {
	dir := copyRepo(t)
	legacy, err := os.ReadFile(filepath.Join("testdata", "single-file", "dev.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "releases", "dev")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, compiler.ManifestPath("dev")), legacy, 0o644); err != nil {
		t.Fatal(err)
	}
	old, err := bundle.ParseManifest("dev.yaml", legacy)
	if err != nil || !old.SingleFile {
		t.Fatalf("legacy manifest: %v (single file %v)", err, old != nil && old.SingleFile)
	}
	// No --created-at: a migration is not a new release.
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if res.UpToDate || !strings.Contains(res.Stale().Error(), "single-file release manifest") {
		t.Fatalf("check of a single-file manifest: up to date %v, %v", res.UpToDate, res.Stale())
	}
	m := res.Manifest
	// (as JSON: an empty list and none are the same entry)
	mt, _ := json.Marshal(m.Targets)
	ot, _ := json.Marshal(old.Targets)
	if m.ReleaseVersion != old.ReleaseVersion || m.CreatedAt != old.CreatedAt || !bytes.Equal(mt, ot) ||
		!reflect.DeepEqual(m.WorkflowLedger, old.WorkflowLedger) {
		t.Fatalf("migrated release differs: release %d created %s", m.ReleaseVersion, m.CreatedAt)
	}
	if err := compiler.Write(context.Background(), res, dir, ""); err != nil {
		t.Fatal(err)
	}
	files := releaseFiles(t, dir)
	if _, ok := files["releases/dev/dev.lightapi.net.yaml"]; !ok || len(files) != 4 {
		t.Fatalf("after migration: %v, want dev's root and one shard next to prod's", keys(files))
	}
	after, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if !after.UpToDate {
		t.Fatalf("migrated release is not up to date: %v", after.Stale())
	}
}

// TestUnlistedShardIsStaleAndRemoved: a shard file the root does not list
// makes the release stale; compile removes it and nothing else changes.
func TestUnlistedShardIsStaleAndRemoved(t *testing.T) {
	dir := copyRepo(t)
	before := releaseFiles(t, dir)
	extra := filepath.Join(dir, "releases", "dev", "old.example.yaml")
	if err := os.WriteFile(extra, []byte("apiVersion: \"configpub.dev/v1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if res.UpToDate || !strings.Contains(res.Stale().Error(), "releases/dev/old.example.yaml is not listed") {
		t.Fatalf("unlisted shard: up to date %v, %v", res.UpToDate, res.Stale())
	}
	if err := compiler.Write(context.Background(), res, dir, ""); err != nil {
		t.Fatal(err)
	}
	if got := gen.Changed(before, releaseFiles(t, dir)); len(got) != 0 {
		t.Fatalf("compile changed %v, want only the unlisted shard removed", got)
	}
	if _, err := os.Stat(extra); !os.IsNotExist(err) {
		t.Fatalf("unlisted shard still there: %v", err)
	}
}

func keys(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// rereadFS is the fixture directory through os.DirFS, counting the opens of
// the release files; before the root is opened a second time it calls
// onReread (a test edits the release on disk there, as a concurrent writer
// would while it is compiled).
type rereadFS struct {
	fs.FS
	opens    map[string]int
	onReread func()
	// rereadAt is the file whose second open (or open number rereadOpen)
	// calls onReread (default the root).
	rereadAt   string
	rereadOpen int
}

func (f *rereadFS) Open(name string) (fs.File, error) {
	if strings.HasPrefix(name, compiler.ReleasesDir+"/") {
		f.opens[name]++
		at := f.rereadAt
		if at == "" {
			at = compiler.ManifestPath("dev")
		}
		n := f.rereadOpen
		if n == 0 {
			n = 2
		}
		if name == at && f.opens[name] == n && f.onReread != nil {
			f.onReread()
		}
	}
	return f.FS.Open(name)
}

// Stat does not count as a read.
func (f *rereadFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(f.FS, name) }

// TestCommittedReleaseHeldByDigest: while release N derives, the committed
// release is held by its digest only. Up to date, its files are read once;
// when it differs they are read again to be parsed, and a release that
// changed in between is refused rather than compared half old, half new.
func TestCommittedReleaseHeldByDigest(t *testing.T) {
	dir := copyRepo(t)
	root := filepath.Join(dir, compiler.ManifestPath("dev"))

	f := &rereadFS{FS: os.DirFS(dir), opens: map[string]int{}}
	res, err := compiler.Compile(context.Background(), f, compiler.Options{EnvTag: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.UpToDate || f.opens[compiler.ManifestPath("dev")] != 1 {
		t.Fatalf("up to date %v (%v), root opened %d times, want up to date, once", res.UpToDate, res.Stale(), f.opens[compiler.ManifestPath("dev")])
	}
	if !res.Unchanged() {
		t.Fatal("an up-to-date result's base is not the derived release")
	}

	// Stale (an unlisted shard): read again, parsed, reported as before.
	if err := os.WriteFile(filepath.Join(dir, "releases", "dev", "old.example.yaml"), []byte("apiVersion: \"configpub.dev/v1\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f = &rereadFS{FS: os.DirFS(dir), opens: map[string]int{}}
	res, err = compiler.Compile(context.Background(), f, compiler.Options{EnvTag: "dev"})
	if err != nil {
		t.Fatal(err)
	}
	if res.UpToDate || !errors.Is(res.Stale(), compiler.ErrStale) || f.opens[compiler.ManifestPath("dev")] != 2 {
		t.Fatalf("stale: up to date %v, %v, root opened %d times, want 2", res.UpToDate, res.Stale(), f.opens[compiler.ManifestPath("dev")])
	}
	if res.Unchanged() {
		t.Fatal("a stale result is the committed release")
	}

	// Edited between the two reads: refused, naming the file.
	f = &rereadFS{FS: os.DirFS(dir), opens: map[string]int{}, onReread: func() {
		edit(t, root, "releaseVersion: 1\n", "releaseVersion: 1 # edited\n")
	}}
	_, err = compiler.Compile(context.Background(), f, compiler.Options{EnvTag: "dev"})
	if err == nil || !strings.Contains(err.Error(), "releases/dev.yaml changed while it was compiled") {
		t.Fatalf("release edited while compiled: %v", err)
	}

	// A shard edited between the two reads, the root left as it was: the
	// parse reads the shards again one by one, and refuses this one as
	// changed (not as a shard that breaks the root's digest: the release
	// first read was whole).
	edit(t, root, "releaseVersion: 1 # edited\n", "releaseVersion: 1\n")
	shard := filepath.Join(dir, "releases", "dev", "dev.lightapi.net.yaml") // the one the root lists
	f = &rereadFS{FS: os.DirFS(dir), opens: map[string]int{}, rereadAt: "releases/dev/" + filepath.Base(shard), onReread: func() {
		b, err := os.ReadFile(shard)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(shard, append([]byte("# edited\n"), b...), 0o644); err != nil {
			t.Fatal(err)
		}
	}}
	_, err = compiler.Compile(context.Background(), f, compiler.Options{EnvTag: "dev"})
	if err == nil || !strings.Contains(err.Error(), "releases/dev.yaml changed while it was compiled") || errors.Is(err, compiler.ErrStale) {
		t.Fatalf("shard edited while compiled: %v", err)
	}
}
