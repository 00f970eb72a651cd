package compiler_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
)

// TestManifestOnlyKeepsManifestAndDigests: a ManifestOnly compile produces
// the same release bytes and manifest (every target's entry) as a full
// compile, keeps no compiled targets, and Write refuses to write outputs
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
	if err := compiler.Write(context.Background(), lean, "", t.TempDir()); err == nil {
		t.Fatal("Write wrote outputs from a ManifestOnly result")
	}
}

// TestCheckOnlyStopsAtTheDerivation: with CheckOnly, a stale committed
// release yields its re-derivation (same release version, Stale set), not
// the next release.
func TestCheckOnlyStopsAtTheDerivation(t *testing.T) {
	dir := t.TempDir()
	if err := gen.Write(dir, gen.Options{Targets: 2 * 12, AgentsPerHost: 10, EnvTag: "bench"}); err != nil {
		t.Fatal(err)
	}
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
	opts.CheckOnly = false
	next, err := compiler.Compile(context.Background(), os.DirFS(dir), opts)
	if err != nil {
		t.Fatal(err)
	}
	if next.Manifest.ReleaseVersion != 2 || next.Stale() == nil || next.Stale().Error() != res.Stale().Error() {
		t.Fatalf("without CheckOnly: release %d, Stale %v; want release 2 and the same reason as %v", next.Manifest.ReleaseVersion, next.Stale(), res.Stale())
	}
}
