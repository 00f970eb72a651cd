package compiled_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/compiler"
	"github.com/configpub/configpub/internal/gen"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/registry"
	"github.com/configpub/configpub/registry/compiled"
)

func TestArtifactsOf(t *testing.T) {
	tg := compiler.Target{
		Host: "h.example", ServiceID: "svc", EnvTag: "prod", Audience: "agent",
		SnapshotID: "s", PublicationID: "p", PolicyDigest: "sha256:01", ContentDigest: "sha256:02", ArtifactDigest: "sha256:03",
		ReleaseVersion: 4, Values: []byte("v: 1\n"),
	}
	tg.Envelope.CreatedAt = "2026-08-13T14:00:00Z"
	m := &bundle.Manifest{ReleaseHeader: bundle.ReleaseHeader{EnvTag: "prod", ReleaseVersion: 5, CreatedAt: "2026-08-14T09:30:00Z"}}
	archive, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	arts, rel, err := compiled.Artifacts(&compiler.Result{Manifest: m, ManifestBytes: archive, Targets: []compiler.Target{tg}})
	if err != nil {
		t.Fatal(err)
	}
	want := registry.Artifact{
		Host: "h.example", ServiceID: "svc", EnvTag: "prod", Audience: "agent",
		SnapshotID: "s", PublicationID: "p", PolicyDigest: "sha256:01", ContentDigest: "sha256:02", ArtifactDigest: "sha256:03",
		ReleaseVersion: 4, CreatedAt: time.Date(2026, 8, 13, 14, 0, 0, 0, time.UTC), Values: []byte("v: 1\n"),
	}
	if len(arts) != 1 || !reflect.DeepEqual(arts[0], want) {
		t.Fatalf("got %+v, want %+v", arts[0], want)
	}
	files, err := m.Files()
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		ReleaseDigest string `json:"releaseDigest"`
		Files         []struct {
			Path, Digest, Content string
		} `json:"files"`
	}
	if err := json.Unmarshal(rel.Manifest, &doc); err != nil {
		t.Fatal(err)
	}
	if jc, err := render.Marshal(json.RawMessage(rel.Manifest)); err != nil || string(jc) != string(rel.Manifest) {
		t.Fatalf("release layer is not RFC 8785 JSON: %v", err)
	}
	if len(doc.Files) != len(files) || doc.Files[0].Path != "releases/prod.yaml" || doc.Files[0].Content != string(files[0].Bytes) ||
		doc.Files[0].Digest != render.BytesDigest(files[0].Bytes) || doc.ReleaseDigest != m.ReleaseDigest {
		t.Fatalf("release layer %s: want the release's files", rel.Manifest)
	}
	if rel.EnvTag != "prod" || rel.ReleaseVersion != 5 ||
		!rel.CreatedAt.Equal(time.Date(2026, 8, 14, 9, 30, 0, 0, time.UTC)) {
		t.Fatalf("got release %+v, want prod/5 with its createdAt", rel)
	}

	tg.Envelope.CreatedAt = "yesterday"
	if _, _, err := compiled.Artifacts(&compiler.Result{Manifest: m, ManifestBytes: archive, Targets: []compiler.Target{tg}}); !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("bad target createdAt: got %v, want ErrInvalid", err)
	}
	m.CreatedAt = ""
	if _, err := compiled.Release(&compiler.Result{Manifest: m, ManifestBytes: archive}); !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("bad release createdAt: got %v, want ErrInvalid", err)
	}
}

// TestStreamYieldsWhatArtifactsLists: streaming a ManifestOnly result yields
// the artifacts of a full compile, in order; a cancelled context and an
// early stop end the stream and its compile.
func TestStreamYieldsWhatArtifactsLists(t *testing.T) {
	ctx := context.Background()
	repo := gen.Repo(gen.Options{Targets: 5 * 12, AgentsPerHost: 10, EnvTag: "bench"})
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	full, err := compiler.Compile(ctx, repo, compiler.Options{EnvTag: "bench", CreatedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	lean, err := compiler.Compile(ctx, repo, compiler.Options{EnvTag: "bench", CreatedAt: at, ManifestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := compiled.Artifacts(full)
	if err != nil {
		t.Fatal(err)
	}
	var got []registry.Artifact
	for a, err := range compiled.Stream(ctx, lean) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	if len(got) != 60 || !reflect.DeepEqual(got, want) {
		t.Fatalf("streamed %d artifacts, want the %d of a full compile, equal", len(got), len(want))
	}

	n := 0
	for range compiled.Stream(ctx, lean) {
		if n++; n == 7 {
			break
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n = 0
	var last error
	for _, err := range compiled.Stream(cctx, lean) {
		if err != nil {
			last = err
			break
		}
		if n++; n == 3 {
			cancel()
		}
	}
	if !errors.Is(last, context.Canceled) || n >= 60 {
		t.Fatalf("cancelled after 3: stream ended with %v after %d artifacts, want context.Canceled", last, n)
	}
}

// TestPublishReleaseStopsAtTheReleaseArtifact: the first publication
// pushes every target and the release; the next stops at the release
// artifact (nothing else checked), which FindPublished finds from the
// committed files alone, before any compile; committed files that differ
// from the published release are not found (a compile must decide); with
// recheck every artifact is found present.
func TestPublishReleaseStopsAtTheReleaseArtifact(t *testing.T) {
	ctx := context.Background()
	reg := registrytest.New(t, registrytest.Options{})
	c, err := registry.New(registry.Options{PlainHTTP: true, Credentials: credentials.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	repo := gen.Repo(gen.Options{Targets: 2 * 12, AgentsPerHost: 10, EnvTag: "bench"})
	res, err := compiler.Compile(ctx, repo, compiler.Options{EnvTag: "bench", CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), ManifestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	files, err := bundle.SplitArchive(res.ManifestBytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files { // committed
		repo[f.Path] = &fstest.MapFile{Data: f.Bytes}
	}
	committed, err := compiler.CommittedRelease(repo, "bench")
	if err != nil || !bytes.Equal(committed, res.ManifestBytes) {
		t.Fatalf("committed release: %v, equal to the compiled one: %v", err, bytes.Equal(committed, res.ManifestBytes))
	}
	prefix := reg.Host + "/p"
	req := registry.PublishRequest{Prefix: prefix, Signer: key}
	publish := func(recheck bool) (*registry.Summary, *registry.Result) {
		t.Helper()
		sum, present, err := compiled.PublishRelease(ctx, c, res, req, recheck)
		if err != nil {
			t.Fatal(err)
		}
		return sum, present
	}
	if _, _, ok := compiled.FindPublished(ctx, c, prefix, repo, "bench"); ok {
		t.Fatal("FindPublished found a release artifact before the first publication")
	}
	if sum, present := publish(false); present != nil || sum.Pushed != 25 || sum.AlreadyPresent != 0 {
		t.Fatalf("first publication: %+v, present %v; want 25 pushed", sum, present)
	}
	sum, present := publish(false)
	if present == nil || present.Kind != registry.KindRelease || sum.Pushed != 0 || sum.AlreadyPresent != 1 {
		t.Fatalf("second publication: %+v, present %+v; want it stopped at the release artifact", sum, present)
	}
	found, rel, ok := compiled.FindPublished(ctx, c, prefix, repo, "bench")
	if !ok || found != *present || rel.ReleaseVersion != 1 || rel.EnvTag != "bench" {
		t.Fatalf("FindPublished from the committed files: %+v, %+v, %v; want %+v", found, rel, ok, *present)
	}
	// Committed files that are not exactly the published release's are
	// not found: a compile must say what they are.
	root := files[0].Path
	for name, change := range map[string]func(fstest.MapFS){
		// A hand edit (a comment) in the root: files of another release
		// artifact than the one in place (its tag conflicts).
		"edited root": func(m fstest.MapFS) {
			m[root] = &fstest.MapFile{Data: bytes.Replace(m[root].Data, []byte("\nkind: "), []byte("\n# edited\nkind: "), 1)}
		},
		"edited shard": func(m fstest.MapFS) {
			m[files[1].Path] = &fstest.MapFile{Data: append(slices.Clone(files[1].Bytes), "# edited\n"...)}
		},
		"root without its shards": func(m fstest.MapFS) {
			for _, f := range files[1:] {
				delete(m, f.Path)
			}
		},
		"a shard the root does not list": func(m fstest.MapFS) {
			m[bundle.ShardPath("bench", "unlisted.example")] = &fstest.MapFile{Data: files[1].Bytes}
		},
		"no release": func(m fstest.MapFS) { delete(m, root) },
	} {
		m := maps.Clone(repo)
		change(m)
		if _, _, ok := compiled.FindPublished(ctx, c, prefix, m, "bench"); ok {
			t.Errorf("%s: FindPublished found the committed files published", name)
		}
	}
	if _, _, ok := compiled.FindPublished(ctx, c, prefix, repo, "bench"); !ok {
		t.Fatal("FindPublished no longer finds the unchanged committed files published")
	}
	if sum, present := publish(true); present != nil || sum.Pushed != 0 || sum.AlreadyPresent != 25 {
		t.Fatalf("recheck: %+v, present %v; want 25 present", sum, present)
	}
}
