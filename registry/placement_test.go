package registry_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"oras.land/oras-go/v2"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

// TestVerifyRefusesAnArtifactOutsideItsRepository: a validly signed
// artifact copied (manifest, blobs and signature tag, as oras copy does)
// into another target's repository, or a release artifact into another
// environment's release repository, is refused by Verify with
// ErrIdentity naming the annotation and path component that differ,
// whether or not an identity is expected; the same artifact under another
// prefix (a mirror) verifies.
func TestVerifyRefusesAnArtifactOutsideItsRepository(t *testing.T) {
	reg := registrytest.New(t, registrytest.Options{})
	c := newClient(t, registry.Options{})
	key := newKey(t)
	ctx := context.Background()
	prefix := reg.Host + "/cp"
	all := registrytest.Artifacts(11, "prod", 1)
	arts := []registry.Artifact{all[0], all[10]} // another host and service
	sum, err := c.Publish(ctx, registry.PublishRequest{Prefix: prefix, Artifacts: arts, Release: testRelease(1), Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	var a, rel registry.Result
	for _, r := range sum.Results {
		switch {
		case r.Kind == registry.KindRelease:
			rel = r
		case r.Repository == registry.Repository(prefix, arts[0]):
			a = r
		}
	}
	if a.Digest == "" || rel.Digest == "" {
		t.Fatalf("publish results %+v: want arts[0]'s and the release artifact", sum.Results)
	}
	// copyTo copies r (manifest and signature) into repository dst and
	// returns its reference there.
	copyTo := func(r registry.Result, dst string) string {
		t.Helper()
		src, to := plainRepo(t, r.Repository), plainRepo(t, dst)
		for _, ref := range []string{r.Digest, signatureTag(r.Digest)} {
			if _, err := oras.Copy(ctx, src, ref, to, ref, oras.DefaultCopyOptions); err != nil {
				t.Fatalf("copy %s@%s to %s: %v", r.Repository, ref, dst, err)
			}
		}
		return dst + "@" + r.Digest
	}
	other := arts[1] // another target of the same environment
	own := &bundle.Identity{Host: arts[0].Host, ServiceID: arts[0].ServiceID, EnvTag: arts[0].EnvTag}
	tests := []struct {
		name     string
		ref      string
		identity *bundle.Identity
		reasons  []string // every one must appear in the reason; none: verifies
	}{
		{"in its own repository", a.Ref(), nil, nil},
		{"in its own repository, its identity expected", a.Ref(), own, nil},
		{"under another prefix (a mirror)", copyTo(a, reg.Host+"/mirror/of/cp/"+arts[0].EnvTag+"/"+arts[0].Host+"/"+arts[0].ServiceID), own, nil},
		{"in another target's repository", copyTo(a, registry.Repository(prefix, other)), nil, []string{
			`annotation dev.configpub.host is "` + arts[0].Host + `", the repository's host component is "` + other.Host + `"`,
			"dev.configpub.service-id",
		}},
		{"in another target's repository, the artifact's own identity expected", registry.Repository(prefix, other) + "@" + a.Digest, own, []string{
			"dev.configpub.host", "dev.configpub.service-id",
		}},
		{"in another service's repository on the same host", copyTo(a, prefix+"/prod/"+arts[0].Host+"/com.example.other"), nil, []string{
			`annotation dev.configpub.service-id is "` + arts[0].ServiceID + `", the repository's serviceId component is "com.example.other"`,
		}},
		{"in another environment's repository", copyTo(a, prefix+"/dev/"+arts[0].Host+"/"+arts[0].ServiceID), nil, []string{
			`annotation dev.configpub.env-tag is "prod", the repository's envTag component is "dev"`,
		}},
		{"in a repository too short for the layout", copyTo(a, reg.Host+"/"+arts[0].ServiceID), nil, []string{
			"has 1 path components",
		}},
		{"release artifact in its own repository", rel.Ref(), nil, nil},
		{"release artifact in another environment's", copyTo(rel, registry.ReleaseRepository(prefix, "dev")), nil, []string{
			`annotation dev.configpub.env-tag is "prod", the repository's envTag component is "dev"`,
		}},
		{"release artifact in a target's repository", copyTo(rel, prefix+"/prod/h/release-copy"), nil, []string{
			`its last path component is "release-copy", want "release"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Verify(ctx, tt.ref, registry.VerifyOptions{Keys: trusted(t, key), Identity: tt.identity})
			if len(tt.reasons) == 0 {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				return
			}
			var ve *registry.VerificationError
			if !errors.Is(err, registry.ErrIdentity) || !errors.As(err, &ve) {
				t.Fatalf("got %v, want a *VerificationError wrapping ErrIdentity", err)
			}
			for _, r := range tt.reasons {
				if !strings.Contains(ve.Reason, r) {
					t.Errorf("reason %q does not say %q", ve.Reason, r)
				}
			}
		})
	}
}
