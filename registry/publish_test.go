package registry_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/registry"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func trusted(t testing.TB, keys ...*ecdsa.PrivateKey) []signing.TrustedKey {
	t.Helper()
	var out []signing.TrustedKey
	for _, k := range keys {
		tk, err := signing.NewTrustedKey(&k.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tk)
	}
	return out
}

func newClient(t testing.TB, opts registry.Options) *registry.Client {
	t.Helper()
	opts.PlainHTTP = true
	opts.Credentials = credentials.NewMemoryStore() // never read the developer's Docker config
	c, err := registry.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testRelease(rv int64) *registry.Release {
	return &registry.Release{EnvTag: "prod", ReleaseVersion: rv, Manifest: []byte(`{"envTag":"prod","releaseVersion":1}`), CreatedAt: registrytest.GeneratedCreatedAt}
}

func TestPublishPullVerify(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{})
	key := newKey(t)
	prefix := reg.Host + "/configpub"
	arts := registrytest.Artifacts(5, "prod", 1)
	ctx := context.Background()

	sum, err := c.Publish(ctx, registry.PublishRequest{Prefix: prefix, Artifacts: arts, Release: testRelease(1), Signer: key})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	if sum.Pushed != 6 || sum.AlreadyPresent != 0 || len(sum.Results) != 6 || sum.Bytes == 0 {
		t.Fatalf("got summary pushed=%d present=%d results=%d bytes=%d, want 6/0/6/>0", sum.Pushed, sum.AlreadyPresent, len(sum.Results), sum.Bytes)
	}
	for i, a := range arts {
		res := sum.Results[i]
		wantRepo := prefix + "/prod/" + a.Host + "/" + a.ServiceID
		if res.Repository != wantRepo || res.Tag != "r1" || !res.Signed {
			t.Fatalf("result %d: got %s:%s signed=%v, want %s:r1 signed", i, res.Repository, res.Tag, res.Signed, wantRepo)
		}
		want, err := registry.ManifestDigest(a)
		if err != nil {
			t.Fatal(err)
		}
		if res.Digest != want.String() {
			t.Fatalf("result %d: got digest %s, want %s (ManifestDigest)", i, res.Digest, want)
		}
		p, err := c.Pull(ctx, res.Ref())
		if err != nil {
			t.Fatalf("pull %s: %v", res.Ref(), err)
		}
		if !bytes.Equal(p.Content, a.Values) {
			t.Fatalf("pull %s: got %q, want %q", res.Ref(), p.Content, a.Values)
		}
		m := p.Manifest
		if m.ArtifactType != registry.ValuesArtifactType || m.Config.MediaType != ocispec.MediaTypeEmptyJSON ||
			p.Layer.MediaType != "application/yaml" || p.Layer.Digest.String() != a.ArtifactDigest ||
			p.Layer.Annotations[ocispec.AnnotationTitle] != "values.yml" {
			t.Fatalf("manifest %s: got artifactType %q config %q layer %q %s %v", res.Ref(), m.ArtifactType, m.Config.MediaType, p.Layer.MediaType, p.Layer.Digest, p.Layer.Annotations)
		}
		v, err := c.Verify(ctx, res.Ref(), registry.VerifyOptions{Keys: trusted(t, key), Identity: &bundle.Identity{Host: a.Host, ServiceID: a.ServiceID, EnvTag: a.EnvTag}})
		if err != nil {
			t.Fatalf("verify %s: %v", res.Ref(), err)
		}
		if got := v.Artifact; !reflect.DeepEqual(got, a) {
			t.Fatalf("verify %s: got artifact %+v, want %+v", res.Ref(), got, a)
		}
	}
	rel := sum.Results[5]
	if rel.Kind != "release" || rel.Repository != prefix+"/prod/release" || rel.Tag != "r1" {
		t.Fatalf("release result: got %s %s:%s, want release %s/prod/release:r1", rel.Kind, rel.Repository, rel.Tag, prefix)
	}
	if _, err := c.Verify(ctx, rel.Ref(), registry.VerifyOptions{Keys: trusted(t, key)}); err != nil {
		t.Fatalf("verify release: %v", err)
	}
}

func TestGoldenManifestAndPayload(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{})
	a := registrytest.Artifacts(1, "prod", 3)[0]
	sum, err := c.Publish(context.Background(), registry.PublishRequest{Prefix: reg.Host + "/p", Artifacts: []registry.Artifact{a}, Signer: newKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.Pull(context.Background(), sum.Results[0].Ref())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := registry.ManifestDigest(a)
	payload, err := registry.SignaturePayload("registry.example/p/prod/h000.example/svc-0", d)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []struct {
		name string
		got  []byte
	}{{"manifest.golden.json", p.ManifestBytes}, {"payload.golden.json", payload}} {
		path := filepath.Join("testdata", g.name)
		if *update {
			if err := os.WriteFile(path, g.got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create)", err)
		}
		if !bytes.Equal(g.got, want) {
			t.Errorf("%s: got\n%s\nwant\n%s", g.name, g.got, want)
		}
	}
}

func TestRepublishUploadsNothing(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{})
	key := newKey(t)
	req := registry.PublishRequest{Prefix: reg.Host + "/cp", Artifacts: registrytest.Artifacts(20, "prod", 1), Release: testRelease(1), Signer: key}
	if _, err := c.Publish(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if reg.Writes() == 0 {
		t.Fatal("first publish: got 0 writes at the registry, want uploads")
	}
	reg.Reset()
	sum, err := c.Publish(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if w := reg.Writes(); w != 0 {
		t.Errorf("re-publish: got %d PUT/POST/PATCH requests, want 0", w)
	}
	if sum.Pushed != 0 || sum.AlreadyPresent != 21 || sum.Bytes != 0 {
		t.Errorf("re-publish: got pushed=%d present=%d bytes=%d, want 0/21/0", sum.Pushed, sum.AlreadyPresent, sum.Bytes)
	}
	if n := reg.Total(); n != 21 {
		t.Errorf("re-publish: got %d requests, want 21 (one tag resolve per artifact)", n)
	}
}

func TestInterruptedPublishIsFinished(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{})
	key := newKey(t)
	ctx := context.Background()
	prefix := reg.Host + "/cp"
	arts := registrytest.Artifacts(2, "prod", 1)
	sum, err := c.Publish(ctx, registry.PublishRequest{Prefix: prefix, Artifacts: arts, Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	// Simulate a publish that died after the signature, before the tag:
	// delete arts[0]'s manifest (and with it its tag).
	r0 := sum.Results[0]
	repo := plainRepo(t, r0.Repository)
	desc, err := repo.Resolve(ctx, r0.Tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Delete(ctx, desc); err != nil {
		t.Fatalf("delete manifest: %v", err)
	}
	reg.Reset()
	sum, err = c.Publish(ctx, registry.PublishRequest{Prefix: prefix, Artifacts: arts, Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Pushed != 1 || sum.AlreadyPresent != 1 {
		t.Fatalf("got pushed=%d present=%d, want 1/1", sum.Pushed, sum.AlreadyPresent)
	}
	if got := reg.Count("PUT manifest"); got != 1 {
		t.Errorf("got %d manifest PUTs, want 1 (the artifact; its signature was already there)", got)
	}
	if got := reg.Count("POST upload"); got != 0 {
		t.Errorf("got %d blob uploads, want 0", got)
	}
	if _, err := c.Verify(ctx, r0.Ref(), registry.VerifyOptions{Keys: trusted(t, key)}); err != nil {
		t.Fatalf("verify after finishing: %v", err)
	}
}

func TestEnsureSignaturesAfterKeyRotation(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{})
	oldKey, newKey2 := newKey(t), newKey(t)
	ctx := context.Background()
	req := registry.PublishRequest{Prefix: reg.Host + "/cp", Artifacts: registrytest.Artifacts(3, "prod", 1), Signer: oldKey}
	if _, err := c.Publish(ctx, req); err != nil {
		t.Fatal(err)
	}
	req.Signer = newKey2
	sum, err := c.Publish(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Pushed != 0 {
		t.Fatalf("without EnsureSignatures: got %d pushed, want 0", sum.Pushed)
	}
	req.EnsureSignatures = true
	if sum, err = c.Publish(ctx, req); err != nil {
		t.Fatal(err)
	}
	if sum.Pushed != 3 {
		t.Fatalf("with EnsureSignatures: got %d pushed, want 3 (new signatures)", sum.Pushed)
	}
	for _, r := range sum.Results {
		for name, k := range map[string]*ecdsa.PrivateKey{"old": oldKey, "new": newKey2} {
			if _, err := c.Verify(ctx, r.Ref(), registry.VerifyOptions{Keys: trusted(t, k)}); err != nil {
				t.Fatalf("verify %s with the %s key only: %v", r.Ref(), name, err)
			}
		}
	}
	reg.Reset()
	if _, err := c.Publish(ctx, req); err != nil {
		t.Fatal(err)
	}
	if w := reg.Writes(); w != 0 {
		t.Errorf("EnsureSignatures re-publish: got %d writes, want 0", w)
	}
}

func TestConcurrentPublishesConverge(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	key := newKey(t)
	arts := registrytest.Artifacts(10, "prod", 2)
	req := registry.PublishRequest{Prefix: reg.Host + "/cp", Artifacts: arts, Release: testRelease(2), Signer: key}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() {
			c := newClient(t, registry.Options{Concurrency: 3})
			_, errs[i] = c.Publish(context.Background(), req)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("publisher %d: %v", i, err)
		}
	}
	c := newClient(t, registry.Options{})
	for _, a := range arts {
		d, _ := registry.ManifestDigest(a)
		repo := registry.Repository(req.Prefix, a)
		tags := listTags(t, c, repo)
		want := []string{"r2", registry.SignatureTag(d)}
		if len(tags) != 2 || !contains(tags, want[0]) || !contains(tags, want[1]) {
			t.Fatalf("%s: got tags %v, want %v", repo, tags, want)
		}
		if _, err := c.Verify(context.Background(), repo+"@"+d.String(), registry.VerifyOptions{Keys: trusted(t, key)}); err != nil {
			t.Fatalf("verify %s: %v", repo, err)
		}
	}
	// And the set is complete: one more publish uploads nothing.
	reg.Reset()
	if _, err := c.Publish(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if w := reg.Writes(); w != 0 {
		t.Errorf("publish after concurrent publishes: got %d writes, want 0", w)
	}
}

func TestTagConflict(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{})
	key := newKey(t)
	a := registrytest.Artifacts(1, "prod", 1)[0]
	if _, err := c.Publish(context.Background(), registry.PublishRequest{Prefix: reg.Host + "/cp", Artifacts: []registry.Artifact{a}, Signer: key}); err != nil {
		t.Fatal(err)
	}
	b := a
	b.Values = []byte("agentPolicy: {}\n")
	b.ArtifactDigest = "sha256:" + sha256hex(b.Values)
	_, err := c.Publish(context.Background(), registry.PublishRequest{Prefix: reg.Host + "/cp", Artifacts: []registry.Artifact{b}, Signer: key})
	if !errors.Is(err, registry.ErrConflict) {
		t.Fatalf("got %v, want ErrConflict", err)
	}
}

func TestInvalidArtifacts(t *testing.T) {
	c := newClient(t, registry.Options{})
	good := registrytest.Artifacts(1, "prod", 1)[0]
	tests := []struct {
		name   string
		mutate func(*registry.Artifact)
		want   error
	}{
		{"digest does not match values", func(a *registry.Artifact) { a.Values = []byte("x: 1\n") }, registry.ErrDigestMismatch},
		{"upper-case host", func(a *registry.Artifact) { a.Host = "Host.Example" }, registry.ErrInvalid},
		{"zero createdAt", func(a *registry.Artifact) { a.CreatedAt = time.Time{} }, registry.ErrInvalid},
		{"zero release version", func(a *registry.Artifact) { a.ReleaseVersion = 0 }, registry.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := good
			tt.mutate(&a)
			_, err := c.Publish(context.Background(), registry.PublishRequest{Prefix: "127.0.0.1:1/x", Artifacts: []registry.Artifact{a}, Signer: newKey(t)})
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// TestReleaseIsTheCommitPoint: the release artifact is pushed only once
// every target artifact is complete. A publication whose last target fails
// (its tag names other content) leaves no release tag, for Publish and
// PublishSeq alike; Published then reports the release missing, and true
// once a publication completes; a release tag naming other content is a
// conflict.
func TestReleaseIsTheCommitPoint(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{Concurrency: 8})
	key := newKey(t)
	ctx := context.Background()
	for _, streamed := range []bool{false, true} {
		prefix := fmt.Sprintf("%s/commit%v", reg.Host, streamed)
		arts := registrytest.Artifacts(12, "prod", 1)
		// The last target's tag already names other content.
		other := arts[11]
		other.Values = []byte("agentPolicy: {}\n")
		other.ArtifactDigest = "sha256:" + sha256hex(other.Values)
		if _, err := c.Publish(ctx, registry.PublishRequest{Prefix: prefix, Artifacts: []registry.Artifact{other}, Signer: key}); err != nil {
			t.Fatal(err)
		}
		rel := registry.Release{EnvTag: "prod", ReleaseVersion: 1, Manifest: []byte(`{"release":1}`)}
		publish := func(arts []registry.Artifact) error {
			req := registry.PublishRequest{Prefix: prefix, Signer: key, Release: &rel}
			if !streamed {
				req.Artifacts = arts
				_, err := c.Publish(ctx, req)
				return err
			}
			_, err := c.PublishSeq(ctx, req, func(yield func(registry.Artifact, error) bool) {
				for _, a := range arts {
					if !yield(a, nil) {
						return
					}
				}
			})
			return err
		}
		if err := publish(arts); !errors.Is(err, registry.ErrConflict) {
			t.Fatalf("streamed=%v: got %v, want ErrConflict", streamed, err)
		}
		res, ok, err := c.Published(ctx, prefix, rel)
		if err != nil || ok {
			t.Fatalf("streamed=%v: after a failed target the release is published=%v (%v), want false", streamed, ok, err)
		}
		if err := publish(arts[:11]); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := c.Published(ctx, prefix, rel); err != nil || !ok {
			t.Fatalf("streamed=%v: after a complete publication Published = %v, %v; want true", streamed, ok, err)
		}
		// Named by its document's digest and size, without the bytes: the
		// same answer; another digest is another release; and such a
		// release cannot be published.
		ref := registry.Release{EnvTag: rel.EnvTag, ReleaseVersion: rel.ReleaseVersion,
			ManifestDigest: digest.FromBytes(rel.Manifest), ManifestSize: int64(len(rel.Manifest))}
		if got, ok, err := c.Published(ctx, prefix, ref); err != nil || !ok || got.Digest != res.Digest {
			t.Fatalf("streamed=%v: the release named by its digest: Published = %+v, %v, %v; want %s", streamed, got, ok, err, res.Digest)
		}
		another := ref
		another.ManifestDigest = digest.FromString(`{"release":"1b"}`)
		if _, _, err := c.Published(ctx, prefix, another); !errors.Is(err, registry.ErrConflict) {
			t.Fatalf("streamed=%v: a release named by another digest: got %v, want ErrConflict", streamed, err)
		}
		if _, err := c.Publish(ctx, registry.PublishRequest{Prefix: prefix, Signer: key, Release: &ref}); !errors.Is(err, registry.ErrInvalid) {
			t.Fatalf("streamed=%v: publishing a release without its bytes: got %v, want ErrInvalid", streamed, err)
		}
		wrong := rel
		wrong.ManifestDigest, wrong.ManifestSize = another.ManifestDigest, ref.ManifestSize
		if _, _, err := c.Published(ctx, prefix, wrong); !errors.Is(err, registry.ErrInvalid) {
			t.Fatalf("streamed=%v: a release whose bytes are not its stated digest: got %v, want ErrInvalid", streamed, err)
		}
		if _, err := c.Verify(ctx, res.Ref(), registry.VerifyOptions{Keys: trusted(t, key)}); err != nil {
			t.Fatalf("streamed=%v: the release artifact %s: %v", streamed, res.Ref(), err)
		}
		changed := rel
		changed.Manifest = []byte(`{"release":"1b"}`)
		if _, _, err := c.Published(ctx, prefix, changed); !errors.Is(err, registry.ErrConflict) {
			t.Fatalf("streamed=%v: a release tag naming other content: got %v, want ErrConflict", streamed, err)
		}
	}
}

// TestLargeReleaseArtifactVerifies: a release artifact larger than any
// values artifact may be (a release of 100,000 targets is about 69 MB)
// publishes, pulls and verifies; it was refused as "out of range" past
// 64 MiB, so a promotion of 100,000 targets failed at its last
// verification.
func TestLargeReleaseArtifactVerifies(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{})
	key := newKey(t)
	ctx := context.Background()
	doc := append([]byte(`{"envTag":"prod","releaseVersion":1,"pad":"`), bytes.Repeat([]byte("x"), 64<<20)...)
	doc = append(doc, `"}`...)
	rel := &registry.Release{EnvTag: "prod", ReleaseVersion: 1, Manifest: doc, CreatedAt: registrytest.GeneratedCreatedAt}
	sum, err := c.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/configpub", Release: rel, Signer: key})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	r := sum.Results[len(sum.Results)-1]
	if r.Kind != registry.KindRelease {
		t.Fatalf("last result is a %s artifact, want the release", r.Kind)
	}
	v, err := c.Verify(ctx, r.Ref(), registry.VerifyOptions{Keys: trusted(t, key)})
	if err != nil {
		t.Fatalf("verify a %d-byte release: %v", len(doc), err)
	}
	if !bytes.Equal(v.Content, doc) {
		t.Fatalf("verified %d bytes, want the %d published", len(v.Content), len(doc))
	}
}

// TestSignAddsASignatureOnce: Sign adds a key's signature next to the
// ones there, once, and refuses an artifact that does not exist.
func TestSignAddsASignatureOnce(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{})
	oldKey, newKey2 := newKey(t), newKey(t)
	ctx := context.Background()
	sum, err := c.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/cp", Artifacts: registrytest.Artifacts(1, "prod", 1), Signer: oldKey})
	if err != nil {
		t.Fatal(err)
	}
	ref := sum.Results[0].Ref()
	for i, want := range []bool{true, false} {
		added, err := c.Sign(ctx, ref, newKey2)
		if err != nil || added != want {
			t.Fatalf("sign #%d: added %v, %v; want %v", i+1, added, err, want)
		}
	}
	for name, k := range map[string]*ecdsa.PrivateKey{"old": oldKey, "new": newKey2} {
		if _, err := c.Verify(ctx, ref, registry.VerifyOptions{Keys: trusted(t, k)}); err != nil {
			t.Errorf("verify with the %s key only: %v", name, err)
		}
	}
	repo, _, _ := strings.Cut(ref, "@")
	missing := repo + "@sha256:" + strings.Repeat("0", 64)
	if _, err := c.Sign(ctx, missing, newKey2); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("sign a missing artifact: got %v, want ErrNotFound", err)
	}
}

// TestRecheckRepairsWhatWasDeleted deletes from a real Distribution
// registry, after a publication, one artifact's layer blob, another's
// signature manifest and a third's signature payload blob. Publishing again
// with Recheck pushes each back (it reported all three present: their tags
// name the expected digests) and every artifact pulls and verifies again;
// a fourth, untouched, uploads nothing.
func TestRecheckRepairsWhatWasDeleted(t *testing.T) {
	ctx := context.Background()
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{MaxRetries: -1})
	key := newKey(t)
	arts := registrytest.Artifacts(4, "prod", 1)
	req := registry.PublishRequest{Prefix: reg.Host + "/cp", Artifacts: arts, Signer: key}
	sum, err := c.Publish(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	res := sum.Results
	repoOf := func(r registry.Result) *remote.Repository { return plainRepo(t, r.Repository) }

	// 0: the layer blob.
	layer := ocispec.Descriptor{Digest: digest.Digest(arts[0].ArtifactDigest), Size: int64(len(arts[0].Values))}
	if err := repoOf(res[0]).Blobs().Delete(ctx, layer); err != nil {
		t.Fatalf("delete layer: %v", err)
	}
	// 1: the signature manifest.
	r1 := repoOf(res[1])
	sig1, err := r1.Resolve(ctx, registry.SignatureTag(digest.Digest(res[1].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Delete(ctx, sig1); err != nil {
		t.Fatalf("delete signature: %v", err)
	}
	// 2: the signature's payload blob.
	r2 := repoOf(res[2])
	sig2, err := r2.Resolve(ctx, registry.SignatureTag(digest.Digest(res[2].Digest)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := r2.Fetch(ctx, sig2)
	if err != nil {
		t.Fatal(err)
	}
	var sm ocispec.Manifest
	err = json.NewDecoder(rc).Decode(&sm)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Blobs().Delete(ctx, sm.Layers[0]); err != nil {
		t.Fatalf("delete signature payload: %v", err)
	}

	keys := trusted(t, key)
	for i := range 3 {
		if _, err := c.Verify(ctx, res[i].Ref(), registry.VerifyOptions{Keys: keys}); err == nil {
			t.Fatalf("artifact %d verifies after its deletion", i)
		}
	}
	plain, err := c.Publish(ctx, req)
	if err != nil || plain.AlreadyPresent != 4 {
		t.Fatalf("publish without recheck: %+v, %v; want all four present by their tags", plain, err)
	}
	req.Recheck = true
	again, err := c.Publish(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.Pushed != 3 || again.AlreadyPresent != 1 || !again.Results[1].Signed || again.Results[0].Blobs != 1 || again.Results[3].Pushed {
		t.Fatalf("publish --recheck: %+v; want the three broken ones pushed again, the fourth untouched", again.Results)
	}
	for i, r := range again.Results {
		if _, err := c.Verify(ctx, r.Ref(), registry.VerifyOptions{Keys: keys}); err != nil {
			t.Fatalf("artifact %d after the recheck: %v", i, err)
		}
	}
}
