package registry_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/registry"
)

// TestDeliveryManifestReferrers attaches delivery manifests to a published
// artifact in a real Distribution registry: attaching the same manifest
// twice stores one referrer, DeliveryManifests returns them newest first
// with the exact bytes, signature and key id, another artifact has none,
// and an artifact that does not exist is ErrNotFound.
func TestDeliveryManifestReferrers(t *testing.T) {
	ctx := context.Background()
	reg := registrytest.New(t, registrytest.Options{})
	rc, err := registry.New(registry.Options{PlainHTTP: true, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	arts := registrytest.Artifacts(2, "prod", 1)
	sum, err := rc.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/configpub", Artifacts: arts, Signer: newKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	ref, other := sum.Results[0].Ref(), sum.Results[1].Ref()
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	manifest := func(seq int64) registry.SignedDeliveryManifest {
		return registry.SignedDeliveryManifest{
			Manifest: []byte(`{"sequence":` + strconv.FormatInt(seq, 10) + `}`), Signature: "c2ln" + strconv.FormatInt(seq, 10),
			KeyID:    "sha256:0000000000000000000000000000000000000000000000000000000000000000",
			Sequence: seq, IssuedAt: at.Add(time.Duration(seq) * time.Minute).Format(time.RFC3339),
		}
	}
	for _, seq := range []int64{2, 7, 2, 5} {
		if _, err := rc.AttachDeliveryManifest(ctx, ref, manifest(seq)); err != nil {
			t.Fatalf("attach %d: %v", seq, err)
		}
	}
	got, err := rc.DeliveryManifests(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, m := range got {
		want := manifest(m.Sequence)
		if string(m.Manifest) != string(want.Manifest) || m.Signature != want.Signature || m.KeyID != want.KeyID || m.IssuedAt != want.IssuedAt {
			t.Fatalf("referrer %d: got %+v, want %+v", m.Sequence, m, want)
		}
		seqs = append(seqs, m.Sequence)
	}
	if len(seqs) != 3 || seqs[0] != 7 || seqs[1] != 5 || seqs[2] != 2 {
		t.Fatalf("got sequences %v, want [7 5 2] (newest first, the repeated attach stored once)", seqs)
	}
	if none, err := rc.DeliveryManifests(ctx, other); err != nil || len(none) != 0 {
		t.Fatalf("another artifact: got %d manifests %v, want none", len(none), err)
	}
	missing := reg.Host + "/configpub/prod/nobody/none@" + arts[0].ArtifactDigest
	if _, err := rc.DeliveryManifests(ctx, missing); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("missing artifact: got %v, want ErrNotFound", err)
	}
	if _, err := rc.AttachDeliveryManifest(ctx, missing, manifest(1)); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("attach to a missing artifact: got %v, want ErrNotFound", err)
	}
}

// TestPruneDeliveryManifests: an artifact renewed again and again lists only
// its newest KeepDeliveryManifests delivery-manifest referrers once pruned
// (the newest first, as a runtime reads them), also on a Distribution that
// refuses deletes (its default), where attaching a second referrer used to
// fail on the cleanup of the replaced referrers index.
func TestPruneDeliveryManifests(t *testing.T) {
	ctx := context.Background()
	for _, noDelete := range []bool{false, true} {
		reg := registrytest.New(t, registrytest.Options{NoDelete: noDelete})
		rc, err := registry.New(registry.Options{PlainHTTP: true, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		arts := registrytest.Artifacts(1, "prod", 1)
		sum, err := rc.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/configpub", Artifacts: arts, Signer: newKey(t)})
		if err != nil {
			t.Fatal(err)
		}
		ref := sum.Results[0].Ref()
		at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		for seq := int64(1); seq <= 6; seq++ {
			m := registry.SignedDeliveryManifest{Manifest: []byte(`{"renewal":` + strconv.FormatInt(seq, 10) + `}`), Signature: "c2ln",
				KeyID: "sha256:0000000000000000000000000000000000000000000000000000000000000000", Sequence: 3,
				IssuedAt: at.Add(time.Duration(seq) * 5 * time.Minute).Format(time.RFC3339)}
			if _, err := rc.AttachDeliveryManifest(ctx, ref, m); err != nil {
				t.Fatalf("attach renewal %d: %v", seq, err)
			}
		}
		deleted, err := rc.PruneDeliveryManifests(ctx, ref, registry.KeepDeliveryManifests)
		got, lerr := rc.DeliveryManifests(ctx, ref)
		if lerr != nil {
			t.Fatal(lerr)
		}
		// Distribution keeps the referrers in a tagged index: without
		// deletes the pruned manifests stay stored, and are no longer
		// listed all the same.
		if err != nil || deleted != 4 {
			t.Fatalf("prune (deletes allowed: %v): pruned %d, %v; want 4", !noDelete, deleted, err)
		}
		if len(got) != 2 || string(got[0].Manifest) != `{"renewal":6}` || string(got[1].Manifest) != `{"renewal":5}` {
			t.Fatalf("after pruning: %d referrers, newest %q; want renewals 6 and 5", len(got), got[0].Manifest)
		}
		if deleted, err := rc.PruneDeliveryManifests(ctx, ref, registry.KeepDeliveryManifests); err != nil || deleted != 0 {
			t.Fatalf("second prune: deleted %d, %v; want nothing", deleted, err)
		}
		// Attaching and pruning in one call: the seventh renewal in, the
		// fifth out.
		seventh := registry.SignedDeliveryManifest{Manifest: []byte(`{"renewal":7}`), Signature: "c2ln",
			KeyID: "sha256:0000000000000000000000000000000000000000000000000000000000000000", Sequence: 3,
			IssuedAt: at.Add(7 * 5 * time.Minute).Format(time.RFC3339)}
		a, err := rc.AttachDeliveryManifestKeeping(ctx, ref, seventh, registry.KeepDeliveryManifests)
		if err != nil || a.Pruned != 1 || a.PruneErr != nil || a.Digest == "" {
			t.Fatalf("attach keeping %d: %+v, %v; want one pruned", registry.KeepDeliveryManifests, a, err)
		}
		got, err = rc.DeliveryManifests(ctx, ref)
		if err != nil || len(got) != 2 || string(got[0].Manifest) != `{"renewal":7}` || string(got[1].Manifest) != `{"renewal":6}` {
			t.Fatalf("after attaching the seventh: %d referrers (%v); want renewals 7 and 6", len(got), err)
		}
		if again, err := rc.AttachDeliveryManifestKeeping(ctx, ref, seventh, registry.KeepDeliveryManifests); err != nil || again.Digest != a.Digest || again.Pruned != 0 {
			t.Fatalf("attaching the seventh again: %+v, %v; want the same referrer, nothing pruned", again, err)
		}
	}
}
