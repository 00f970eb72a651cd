package registry_test

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content/oci"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

// publishAndVerify publishes 3 targets and a release with c, verifies each
// result with verifier, and checks that a second publish uploads nothing.
func publishAndVerify(t *testing.T, c, verifier *registry.Client, prefix string, key *ecdsa.PrivateKey) *registry.Summary {
	t.Helper()
	ctx := context.Background()
	req := registry.PublishRequest{Prefix: prefix, Artifacts: registrytest.Artifacts(3, "prod", 1), Release: testRelease(1), Signer: key}
	sum, err := c.Publish(ctx, req)
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	if sum.Pushed != 4 || len(sum.Results) != 4 {
		t.Fatalf("got pushed=%d results=%d, want 4/4", sum.Pushed, len(sum.Results))
	}
	for i, r := range sum.Results {
		opts := registry.VerifyOptions{Keys: trusted(t, key)}
		if r.Kind == "values" {
			a := req.Artifacts[i]
			opts.Identity = &bundle.Identity{Host: a.Host, ServiceID: a.ServiceID, EnvTag: a.EnvTag}
		}
		v, err := verifier.Verify(ctx, r.Ref(), opts)
		if err != nil {
			t.Fatalf("verify %s: %v", r.Ref(), err)
		}
		if r.Kind == "values" && string(v.Content) != string(req.Artifacts[i].Values) {
			t.Fatalf("verify %s: got other values bytes than published", r.Ref())
		}
	}
	again, err := c.Publish(ctx, req)
	if err != nil {
		t.Fatalf("re-publish: %v", err)
	}
	if again.Pushed != 0 || again.AlreadyPresent != 4 || again.Bytes != 0 {
		t.Fatalf("re-publish: got pushed=%d present=%d bytes=%d, want 0/4/0", again.Pushed, again.AlreadyPresent, again.Bytes)
	}
	return sum
}

func TestPublishToMemory(t *testing.T) {
	c := newClient(t, registry.Options{Storage: registry.Memory()})
	publishAndVerify(t, c, c, "registry.example/configpub", newKey(t))
}

// TestPublishToOCILayout publishes into OCI layout directories, reads them
// back from disk with a fresh client, and copies one artifact with its
// signature tag to a registry with oras-go (what `oras cp
// --from-oci-layout` does), where the remote client verifies it.
func TestPublishToOCILayout(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	prefix := reg.Host + "/configpub"
	dir := t.TempDir()
	c := newClient(t, registry.Options{Storage: registry.OCILayout(dir, prefix)})
	fromDisk := newClient(t, registry.Options{Storage: registry.OCILayout(dir, prefix)})
	key := newKey(t)
	sum := publishAndVerify(t, c, fromDisk, prefix, key)

	ctx := context.Background()
	remote := newClient(t, registry.Options{})
	for _, r := range sum.Results {
		path := strings.TrimPrefix(r.Repository, prefix+"/")
		layout := filepath.Join(dir, filepath.FromSlash(path))
		b, err := os.ReadFile(filepath.Join(layout, ocispec.ImageIndexFile))
		if err != nil {
			t.Fatalf("%s: %v", r.Repository, err)
		}
		var idx ocispec.Index
		if err := json.Unmarshal(b, &idx); err != nil {
			t.Fatal(err)
		}
		tags := map[string]string{}
		for _, m := range idx.Manifests {
			tags[m.Annotations[ocispec.AnnotationRefName]] = m.Digest.String()
		}
		sigTag := strings.Replace(r.Digest, ":", "-", 1) + ".sig"
		if tags[r.Tag] != r.Digest || tags[sigTag] == "" {
			t.Fatalf("%s: got index tags %v, want %s -> %s and %s", layout, tags, r.Tag, r.Digest, sigTag)
		}

		src, err := oci.New(layout)
		if err != nil {
			t.Fatal(err)
		}
		dst := plainRepo(t, r.Repository)
		for _, tag := range []string{r.Tag, sigTag} {
			if _, err := oras.Copy(ctx, src, tag, dst, tag, oras.DefaultCopyOptions); err != nil {
				t.Fatalf("copy %s:%s: %v", r.Repository, tag, err)
			}
		}
		if _, err := remote.Verify(ctx, r.Ref(), registry.VerifyOptions{Keys: trusted(t, key)}); err != nil {
			t.Fatalf("verify %s after the copy: %v", r.Ref(), err)
		}
	}
}

func TestOCILayoutRefusesRepositoryOutsidePrefix(t *testing.T) {
	dir := t.TempDir()
	c := newClient(t, registry.Options{Storage: registry.OCILayout(dir, "registry.example/configpub")})
	_, err := c.Publish(context.Background(), registry.PublishRequest{
		Prefix: "other.example/configpub", Artifacts: registrytest.Artifacts(1, "prod", 1), Signer: newKey(t),
	})
	if !errors.Is(err, registry.ErrInvalid) || !strings.Contains(err.Error(), "not under the layout's prefix") {
		t.Fatalf("got %v, want ErrInvalid naming the prefix", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("got %d entries in the layout directory, want nothing written", len(entries))
	}
}
