package compiler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
)

// TestManifestOnlyKeepsManifestAndDigests: a ManifestOnly compile produces
// the same release bytes and manifest (every target's entry) as a full
// compile, keeps no compiled targets, and Write writes the same outputs
// from it.
func TestManifestOnlyKeepsManifestAndDigests(t *testing.T) {
	repo := gen.Repo(gen.Options{Targets: 3 * 12, AgentsPerHost: 10, EnvTag: "bench"})
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	full, err := compiler.Compile(context.Background(), repo, compiler.Options{EnvTag: "bench", CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	lean, err := compiler.Compile(context.Background(), repo, compiler.Options{EnvTag: "bench", CreatedAt: at, ManifestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(full.ManifestBytes, lean.ManifestBytes) {
		t.Fatal("ManifestOnly changed the release bytes")
	}
	if len(full.Targets) != 36 || lean.Targets != nil {
		t.Fatalf("%d full targets (want 36), ManifestOnly kept %d targets (want none)", len(full.Targets), len(lean.Targets))
	}
	if !reflect.DeepEqual(full.Manifest, lean.Manifest) {
		t.Fatal("ManifestOnly changed the manifest")
	}
	for i := range full.Targets {
		f, e := &full.Targets[i], &lean.Manifest.Targets[i]
		if f.Host != e.Host || f.ServiceID != e.ServiceID || f.ArtifactDigest != e.ArtifactDigest || f.Changed != e.Changed {
			t.Fatalf("target %d: compiled %s %s changed=%v, manifest entry %s/%s %s changed=%v", i, f.Identity(), f.ArtifactDigest, f.Changed, e.Host, e.ServiceID, e.ArtifactDigest, e.Changed)
		}
	}
	// Outputs written from it (compiled again, host by host) are the full
	// compile's, file for file.
	fullOut, leanOut := t.TempDir(), t.TempDir()
	if err := compiler.Write(context.Background(), full, "", fullOut); err != nil {
		t.Fatal(err)
	}
	if err := compiler.Write(context.Background(), lean, "", leanOut); err != nil {
		t.Fatal(err)
	}
	want, got := readTree(t, fullOut), readTree(t, leanOut)
	if len(want) != 2*36 || !reflect.DeepEqual(got, want) {
		t.Fatalf("outputs from a ManifestOnly result: %d files, differ from the full compile's %d", len(got), len(want))
	}
}

// TestCheckOnlyStopsAtTheDerivation: with CheckOnly, a stale committed
// release yields its re-derivation (same release version, Stale set, the
// first differing target named), not the next release. Without it, the
// derivation of the committed release stops at the first host whose
// inputs changed, named with the shard that records them, and the next
// release is compiled; an input every host reads is named itself.
func TestCheckOnlyStopsAtTheDerivation(t *testing.T) {
	dir := benchRepo(t, 2)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	compileWrite(t, dir, "bench", at)
	opts := compiler.Options{EnvTag: "bench", CreatedAt: at.Add(time.Hour), ManifestOnly: true, CheckOnly: true}
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.UpToDate || res.Stale() != nil {
		t.Fatalf("fresh release: UpToDate %v, Stale %v", res.UpToDate, res.Stale())
	}
	agent := filepath.Join(dir, "agents", "h0001.bench.lightapi.net-a002.yaml")
	edit(t, agent, "temperature: 0.2", "temperature: 0.3")
	res, err = compiler.Compile(context.Background(), os.DirFS(dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.UpToDate || !errors.Is(res.Stale(), compiler.ErrStale) {
		t.Fatalf("changed Agent: UpToDate %v, Stale %v", res.UpToDate, res.Stale())
	}
	if res.Manifest.ReleaseVersion != 1 {
		t.Fatalf("CheckOnly compiled release %d, want the re-derived release 1", res.Manifest.ReleaseVersion)
	}
	if !strings.Contains(res.Stale().Error(), "target h0001.bench.lightapi.net/com.networknt.agent-0001-002-1.0.0/bench: policyDigest is") {
		t.Fatalf("CheckOnly: %v, want the first differing target named", res.Stale())
	}
	opts.CheckOnly = false
	next, err := compiler.Compile(context.Background(), os.DirFS(dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	want := "releases/bench.yaml: the inputs of host h0001.bench.lightapi.net changed since release 1 (releases/bench/h0001.bench.lightapi.net.yaml states inputsDigest sha256:"
	if next.Manifest.ReleaseVersion != 2 || !errors.Is(next.Stale(), compiler.ErrStale) || !strings.Contains(next.Stale().Error(), want) {
		t.Fatalf("without CheckOnly: release %d, Stale %v; want release 2 and %q", next.Manifest.ReleaseVersion, next.Stale(), want)
	}

	edit(t, agent, "temperature: 0.3", "temperature: 0.2")
	env := filepath.Join(dir, "environments", "bench.yaml")
	b, err := os.ReadFile(env)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(env, append(b, "# a comment changes the file's digest\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	next, err = compiler.Compile(context.Background(), os.DirFS(dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	want = "releases/bench.yaml: environments/bench.yaml changed since release 1 (sha256:"
	if next.Manifest.ReleaseVersion != 2 || !strings.Contains(next.Stale().Error(), want) {
		t.Fatalf("changed environment: release %d, Stale %v; want release 2 and %q", next.Manifest.ReleaseVersion, next.Stale(), want)
	}
}

// TestEachTargetStreamsTheRelease: EachTarget on a ManifestOnly result
// compiles the release again host by host and hands over exactly the
// targets of a full compile, in manifest order, byte for byte; it does so
// for a re-derived committed release too; fn's error stops it; a manifest
// that no longer matches what compiles is refused.
func TestEachTargetStreamsTheRelease(t *testing.T) {
	ctx := context.Background()
	dir := benchRepo(t, 7)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	compile := func(lean bool) *compiler.Result {
		t.Helper()
		res, err := compiler.Compile(ctx, os.DirFS(dir), compiler.Options{EnvTag: "bench", CreatedAt: at, ManifestOnly: lean})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	check := func(name string) {
		t.Helper()
		full, lean := compile(false), compile(true)
		var got []compiler.Target
		if err := lean.EachTarget(ctx, func(x *compiler.Target) error { got = append(got, *x); return nil }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != len(full.Targets) || len(got) != 84 {
			t.Fatalf("%s: streamed %d targets, a full compile has %d (want 84)", name, len(got), len(full.Targets))
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], full.Targets[i]) {
				t.Fatalf("%s: target %d: streamed %s %s, full compile %s %s", name, i, got[i].Identity(), got[i].ArtifactDigest, full.Targets[i].Identity(), full.Targets[i].ArtifactDigest)
			}
		}
		// A full result streams its own targets.
		n := 0
		if err := full.EachTarget(ctx, func(*compiler.Target) error { n++; return nil }); err != nil || n != 84 {
			t.Fatalf("%s: full result streamed %d targets, %v", name, n, err)
		}
		// Restricted to two hosts, the stream is those hosts' targets
		// exactly, from a lean result (which compiles those hosts only)
		// and from a full one.
		keep := func(h string) bool { return h == full.Targets[13].Host || h == full.Targets[70].Host }
		var want []compiler.Target
		for _, x := range full.Targets {
			if keep(x.Host) {
				want = append(want, x)
			}
		}
		for which, r := range map[string]*compiler.Result{"lean": compile(true), "full": full} {
			var some []compiler.Target
			if err := r.EachTargetOf(ctx, keep, func(x *compiler.Target) error { some = append(some, *x); return nil }); err != nil {
				t.Fatalf("%s: %s result, two hosts: %v", name, which, err)
			}
			if len(want) != 24 || !reflect.DeepEqual(some, want) {
				t.Fatalf("%s: %s result streamed %d targets of two hosts, want their %d (24)", name, which, len(some), len(want))
			}
		}
	}
	check("release 1 from nothing")
	if err := compiler.Write(ctx, compile(true), dir, ""); err != nil {
		t.Fatal(err)
	}
	check("committed release 1, re-derived")

	lean := compile(true)
	stop := errors.New("stop here")
	n := 0
	err := lean.EachTarget(ctx, func(*compiler.Target) error {
		if n++; n == 30 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 30 {
		t.Fatalf("fn failed at target 30: EachTarget returned %v after %d calls", err, n)
	}
	lean.Manifest.Targets[40].ArtifactDigest = "sha256:" + string(bytes.Repeat([]byte("0"), 64))
	n = 0
	err = lean.EachTarget(ctx, func(*compiler.Target) error { n++; return nil })
	if !errors.Is(err, compiler.ErrNotReproduced) || n != 40 {
		t.Fatalf("manifest entry 40 edited: EachTarget returned %v after %d targets, want ErrNotReproduced after 40", err, n)
	}
}

// readCounter counts the files read from an fs.FS.
type readCounter struct {
	fs.FS
	n atomic.Int64
}

func (r *readCounter) Open(name string) (fs.File, error) {
	f, err := r.FS.Open(name)
	if err == nil {
		if st, serr := f.Stat(); serr == nil && !st.IsDir() {
			r.n.Add(1)
		}
	}
	return f, err
}

// TestCompileStopsWhenCancelled: a compile whose context is cancelled
// (SIGTERM, Ctrl-C) stops between files while loading the sources instead
// of reading the whole repository first.
func TestCompileStopsWhenCancelled(t *testing.T) {
	repo := &readCounter{FS: gen.Repo(gen.Options{Targets: 2000, EnvTag: "bench"})}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := compiler.Compile(ctx, repo, compiler.Options{EnvTag: "bench", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("compile with a cancelled context: %v, want context.Canceled", err)
	}
	if n := repo.n.Load(); n > 0 {
		t.Errorf("opened files %d times after the cancellation, want none", n)
	}
}

// TestEachTargetReadsTheSourcesAgain: a compile lets go of the sources as
// it goes, so EachTarget reads them again; sources that changed since the
// compile are refused, not streamed as the release the manifest states.
func TestEachTargetReadsTheSourcesAgain(t *testing.T) {
	ctx := context.Background()
	dir := benchRepo(t, 2)
	res, err := compiler.Compile(ctx, os.DirFS(dir), compiler.Options{EnvTag: "bench", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ManifestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	count := func() (int, error) {
		n := 0
		err := res.EachTarget(ctx, func(*compiler.Target) error { n++; return nil })
		return n, err
	}
	if n, err := count(); err != nil || n != 24 {
		t.Fatalf("EachTarget: %d targets, %v; want 24", n, err)
	}
	agents, err := filepath.Glob(filepath.Join(dir, "agents", "*.yaml"))
	if err != nil || len(agents) == 0 {
		t.Fatalf("no Agent documents in the generated repository: %v", err)
	}
	orig := readFile(t, agents[0])
	edit(t, agents[0], "maxToolCallsPerTurn: 8", "maxToolCallsPerTurn: 7")
	if n, err := count(); err == nil || !strings.Contains(err.Error(), "changed while it was compiled") || n != 0 {
		t.Fatalf("EachTarget after an Agent changed: %d targets, %v; want none and an error saying the repository changed", n, err)
	}
	writeFile(t, agents[0], orig)
	if n, err := count(); err != nil || n != 24 {
		t.Fatalf("EachTarget with the Agent restored: %d targets, %v; want 24", n, err)
	}
}

// TestChangedInputSkipsTheDerivation: a compile that will write the next
// release does not derive the committed one when an input its root lists
// changed, nor when a host's own inputs changed (the subjects resolved, no
// host compiled: the sources are read once); release N-1, which that
// derivation needs, is never asked for, and both name the change. With
// CheckOnly the committed release is derived whatever changed; with
// nothing changed it is derived, and found up to date.
func TestChangedInputSkipsTheDerivation(t *testing.T) {
	dir := benchRepo(t, 2)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r1 := compileWrite(t, dir, "bench", at).ManifestBytes
	agent := filepath.Join(dir, "agents", "h0001.bench.lightapi.net-a002.yaml")
	edit(t, agent, "temperature: 0.2", "temperature: 0.3")
	if v := compileWrite(t, dir, "bench", at.Add(time.Hour)).Manifest.ReleaseVersion; v != 2 {
		t.Fatalf("release %d, want 2", v)
	}
	asked := 0
	opts := compiler.Options{EnvTag: "bench", CreatedAt: at.Add(2 * time.Hour), ManifestOnly: true,
		Previous: func(_ context.Context, env string, v int64) ([]byte, error) {
			asked++
			if env != "bench" || v != 1 {
				return nil, fmt.Errorf("release %d of %s: %w", v, env, bundle.ErrReleaseNotRecorded)
			}
			return r1, nil
		}}
	compile := func(name, want string, wantAsked bool) {
		t.Helper()
		asked = 0
		res, err := compiler.Compile(context.Background(), os.DirFS(dir), opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wantV := int64(3) // the next release
		if opts.CheckOnly {
			wantV = 2 // the committed one, re-derived
		}
		if res.Manifest.ReleaseVersion != wantV || !errors.Is(res.Stale(), compiler.ErrStale) || !strings.Contains(res.Stale().Error(), want) {
			t.Fatalf("%s: release %d, Stale %v; want release %d and %q", name, res.Manifest.ReleaseVersion, res.Stale(), wantV, want)
		}
		if (asked > 0) != wantAsked {
			t.Fatalf("%s: release 1 asked for %d times; want asked: %v", name, asked, wantAsked)
		}
	}
	edit(t, agent, "temperature: 0.3", "temperature: 0.4")
	compile("changed Agent", "the inputs of host h0001.bench.lightapi.net changed since release 2", false)
	// The derivation stopped before compiling a host: the sources it read
	// compile the next release, not read a second time (as many opens of
	// the Agent's file as CheckOnly, which reads the sources once).
	opened := func(checkOnly bool) int {
		counted := &openCounter{FS: os.DirFS(dir), opened: map[string]int{}}
		o := opts
		o.CheckOnly = checkOnly
		if _, err := compiler.Compile(context.Background(), counted, o); err != nil {
			t.Fatal(err)
		}
		return counted.opened["agents/h0001.bench.lightapi.net-a002.yaml"]
	}
	if once, n := opened(true), opened(false); n != once || n == 0 {
		t.Fatalf("the changed Agent's file was opened %d times, want %d as by one read of the sources", n, once)
	}
	edit(t, agent, "temperature: 0.4", "temperature: 0.3")
	env := filepath.Join(dir, "environments", "bench.yaml")
	writeFile(t, env, readFile(t, env)+"# a comment changes the file's digest\n")
	compile("changed environment", "releases/bench.yaml: environments/bench.yaml changed since release 2 (sha256:", false)
	opts.CheckOnly = true
	compile("changed environment, CheckOnly", "releases/bench.yaml: ", true)

	writeFile(t, env, strings.TrimSuffix(readFile(t, env), "# a comment changes the file's digest\n"))
	for _, checkOnly := range []bool{false, true} {
		asked = 0
		opts.CheckOnly = checkOnly
		res, err := compiler.Compile(context.Background(), os.DirFS(dir), opts)
		if err != nil {
			t.Fatal(err)
		}
		if !res.UpToDate || res.Stale() != nil || asked != 1 {
			t.Fatalf("unchanged sources, CheckOnly %v: UpToDate %v, Stale %v, release 1 asked for %d times; want up to date, derived from release 1 asked for once",
				checkOnly, res.UpToDate, res.Stale(), asked)
		}
	}
}

// TestHostWithoutTargetsIsNotAChange: a host whose Agents have no targets
// in the environment (they compile for workflow views only) reads no
// inputs; compiling the unchanged repository again keeps the committed
// release. (Its shard, here for its workflow, states the digest of no
// inputs; a host without one is TestHostInputs's.)
func TestHostWithoutTargetsIsNotAChange(t *testing.T) {
	dir := benchRepo(t, 2)
	if err := os.RemoveAll(filepath.Join(dir, "targets", "h0001.bench.lightapi.net")); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if v := compileWrite(t, dir, "bench", at).Manifest.ReleaseVersion; v != 1 {
		t.Fatalf("release %d, want 1", v)
	}
	res, err := compiler.Compile(context.Background(), os.DirFS(dir), compiler.Options{EnvTag: "bench", CreatedAt: at.Add(time.Hour), ManifestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.UpToDate || res.Manifest.ReleaseVersion != 1 {
		t.Fatalf("unchanged repository: release %d, UpToDate %v, Stale %v; want release 1 up to date", res.Manifest.ReleaseVersion, res.UpToDate, res.Stale())
	}
}

// openCounter counts the files opened through it.
type openCounter struct {
	fs.FS
	mu     sync.Mutex
	opened map[string]int
}

func (c *openCounter) Open(name string) (fs.File, error) {
	c.mu.Lock()
	c.opened[name]++
	c.mu.Unlock()
	return c.FS.Open(name)
}

// TestForStreaming: a ManifestOnly result prepared for streaming lets go
// of its manifest's entries (collected once nothing else holds them),
// keeps the release header, digest, bytes and target count, and streams
// exactly the targets it streamed before; sources changed since the
// compile are still refused.
func TestForStreaming(t *testing.T) {
	ctx := context.Background()
	dir := benchRepo(t, 3)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	compileWrite(t, dir, "bench", at)
	compile := func() *compiler.Result {
		t.Helper()
		res, err := compiler.Compile(ctx, os.DirFS(dir), compiler.Options{EnvTag: "bench", CreatedAt: at, ManifestOnly: true, CheckOnly: true})
		if err != nil || !res.UpToDate {
			t.Fatalf("compile: %v (up to date %v)", err, res != nil && res.UpToDate)
		}
		return res
	}
	stream := func(res *compiler.Result) ([]compiler.Target, error) {
		var got []compiler.Target
		err := res.EachTarget(ctx, func(x *compiler.Target) error { got = append(got, *x); return nil })
		return got, err
	}
	want, err := stream(compile())
	if err != nil {
		t.Fatal(err)
	}
	res := compile()
	header, digest, b, n := res.Manifest.ReleaseHeader, res.Manifest.ReleaseDigest, res.ManifestBytes, len(res.Manifest.Targets)
	entries := weak.Make(&res.Manifest.Targets[0])
	res.ForStreaming()
	runtime.GC()
	if entries.Value() != nil {
		t.Fatal("the manifest's entries are still held after ForStreaming")
	}
	if res.Manifest.ReleaseHeader != header || res.Manifest.ReleaseDigest != digest || res.ManifestBytes != nil || !res.Unchanged() ||
		res.Manifest.Targets != nil || res.TargetCount() != n || n != 36 {
		t.Fatalf("after ForStreaming: header %v, digest %s, %d bytes held, %d entries, TargetCount %d; want the release's, no bytes, no entries, %d",
			res.Manifest.ReleaseHeader, res.Manifest.ReleaseDigest, len(res.ManifestBytes), len(res.Manifest.Targets), res.TargetCount(), n)
	}
	got, err := stream(res)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("streamed after ForStreaming: %d targets, %v; want the %d streamed before", len(got), err, len(want))
	}
	// The release's bytes are read again from the committed files, which
	// must be the ones compiled.
	if again, err := res.ReleaseArchive(); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("ReleaseArchive after ForStreaming: %d bytes, %v; want the %d compiled", len(again), err, len(b))
	}
	// LetGoOfArchive alone lets go of the bytes and keeps the entries (a
	// promotion records them after publishing).
	kept := compile()
	if !kept.LetGoOfArchive() || kept.ManifestBytes != nil || len(kept.Manifest.Targets) != n {
		t.Fatalf("LetGoOfArchive: %d bytes, %d entries held; want none and %d", len(kept.ManifestBytes), len(kept.Manifest.Targets), n)
	}
	if again, err := kept.ReleaseArchive(); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("ReleaseArchive after LetGoOfArchive: %d bytes, %v; want the %d compiled", len(again), err, len(b))
	}
	read := kept.ArchiveAgain()
	kept = nil // ArchiveAgain refers to nothing else of the result
	if again, err := read(); err != nil || !bytes.Equal(again, b) {
		t.Fatalf("ArchiveAgain after LetGoOfArchive: %d bytes, %v; want the %d compiled", len(again), err, len(b))
	}
	// A release that is not the committed one has nothing to read again.
	edited := filepath.Join(dir, "agents", "h0002.bench.lightapi.net-a002.yaml")
	edit(t, edited, "temperature: 0.2", "temperature: 0.3")
	next, err := compiler.Compile(ctx, os.DirFS(dir), compiler.Options{EnvTag: "bench", CreatedAt: at.Add(time.Hour), ManifestOnly: true})
	if err != nil || next.UpToDate || next.LetGoOfArchive() || next.ManifestBytes == nil {
		t.Fatalf("a new release: %v, up to date %v, %d bytes; want its bytes kept", err, next != nil && next.UpToDate, len(next.ManifestBytes))
	}
	if again, err := next.ArchiveAgain()(); err != nil || !bytes.Equal(again, next.ManifestBytes) {
		t.Fatalf("ArchiveAgain of a new release: %d bytes, %v; want its own %d", len(again), err, len(next.ManifestBytes))
	}
	edit(t, edited, "temperature: 0.3", "temperature: 0.2")
	shard := filepath.Join(dir, "releases", "bench", "h0001.bench.lightapi.net.yaml")
	edit(t, shard, "\ntargets:\n", "\n# edited\ntargets:\n")
	if _, err := res.ReleaseArchive(); err == nil || !strings.Contains(err.Error(), "changed since it was compiled") {
		t.Fatalf("ReleaseArchive after a shard changed: %v, want it refused", err)
	}
	edit(t, shard, "\n# edited\ntargets:\n", "\ntargets:\n")
	// A changed Agent: the stream refuses the sources.
	res = compile()
	res.ForStreaming()
	edit(t, filepath.Join(dir, "agents", "h0001.bench.lightapi.net-a002.yaml"), "temperature: 0.2", "temperature: 0.3")
	if _, err := stream(res); err == nil {
		t.Fatal("a release whose sources changed streamed after ForStreaming")
	}
}
