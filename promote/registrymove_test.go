package promote_test

import (
	"context"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

// TestAttachAfterARegistryMove: release 1 is promoted to one registry,
// release 2 (some targets changed, the others carried over) to another. The
// promotion publishes every artifact of release 2 to the new registry, but
// the snapshots release 2 carried over still record the old one, so an
// attach by the recorded references leaves runtimes pulling from the new
// registry without a manifest for every unchanged target; attaching under
// the new prefix (registry attach --registry) covers them all.
func TestAttachAfterARegistryMove(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
	moved := registrytest.New(t, registrytest.Options{})
	o := h.Options(plumbing.ZeroHash)
	o.RegistryPrefix = moved.Host + "/configpub"
	res, err := h.Promote(t, o)
	if err != nil || res.ReleaseVersion != 2 {
		t.Fatalf("promote release 2 to the new registry: %+v, %v", res, err)
	}
	refs := map[string]string{} // host/service -> artifact reference in the new registry
	for _, r := range res.Published {
		if r.Repository != registry.ReleaseRepository(o.RegistryPrefix, promotertest.Env) {
			refs[r.Repository] = r.Ref()
		}
	}
	missing := func() (n int) {
		for _, ref := range refs {
			ms, err := h.Client.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{})
			if err != nil {
				t.Fatalf("%s: %v", ref, err)
			}
			if len(ms) == 0 {
				n++
			}
		}
		return n
	}
	unchanged := 0
	for k, v := range h.Repo.Snapshots[h.Repo.R2] {
		if h.Repo.Snapshots[h.Repo.R1][k] == v {
			unchanged++
		}
	}
	if unchanged == 0 || len(refs) != len(h.Repo.Snapshots[h.Repo.R2]) {
		t.Fatalf("fixture: %d unchanged targets, %d artifacts in the new registry for %d targets", unchanged, len(refs), len(h.Repo.Snapshots[h.Repo.R2]))
	}
	if _, err := h.Store.AttachDeliveryManifests(ctx, promotertest.Env, h.Client); err != nil {
		t.Fatal(err)
	}
	if n := missing(); n != unchanged {
		t.Fatalf("attach by the recorded references: %d artifacts in the new registry without a manifest, want the %d carried over", n, unchanged)
	}
	ar, err := h.Store.AttachDeliveryManifestsAt(ctx, promotertest.Env, h.Client, o.RegistryPrefix)
	if err != nil || ar.AttachedCount != len(refs) {
		t.Fatalf("attach under the new prefix: %+v, %v", ar, err)
	}
	if n := missing(); n != 0 {
		t.Fatalf("attach under the new prefix: %d artifacts in the new registry without a manifest, want none", n)
	}
}
