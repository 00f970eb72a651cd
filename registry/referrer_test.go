package registry_test

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/internal/signing"
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
	got, err := rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{})
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
	if none, err := rc.DeliveryManifests(ctx, other, registry.DeliveryManifestOptions{}); err != nil || len(none) != 0 {
		t.Fatalf("another artifact: got %d manifests %v, want none", len(none), err)
	}
	missing := reg.Host + "/configpub/prod/nobody/none@" + arts[0].ArtifactDigest
	if _, err := rc.DeliveryManifests(ctx, missing, registry.DeliveryManifestOptions{}); !errors.Is(err, registry.ErrNotFound) {
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
		key := newKey(t)
		keep := registry.KeepOptions{Keep: registry.KeepDeliveryManifests, Keys: trusted(t, key)}
		at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
		renewal := func(n int) registry.SignedDeliveryManifest {
			return signedManifest(t, key, 3, at.Add(time.Duration(n)*5*time.Minute), `"renewal":`+strconv.Itoa(n))
		}
		for n := 1; n <= 6; n++ {
			if _, err := rc.AttachDeliveryManifest(ctx, ref, renewal(n)); err != nil {
				t.Fatalf("attach renewal %d: %v", n, err)
			}
		}
		deleted, err := rc.PruneDeliveryManifests(ctx, ref, keep)
		got, lerr := rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{})
		if lerr != nil {
			t.Fatal(lerr)
		}
		// Distribution keeps the referrers in a tagged index: without
		// deletes the pruned manifests stay stored, and are no longer
		// listed all the same.
		if err != nil || deleted != 4 {
			t.Fatalf("prune (deletes allowed: %v): pruned %d, %v; want 4", !noDelete, deleted, err)
		}
		if len(got) != 2 || string(got[0].Manifest) != string(renewal(6).Manifest) || string(got[1].Manifest) != string(renewal(5).Manifest) {
			t.Fatalf("after pruning: %d referrers, newest %q; want renewals 6 and 5", len(got), got[0].Manifest)
		}
		if deleted, err := rc.PruneDeliveryManifests(ctx, ref, keep); err != nil || deleted != 0 {
			t.Fatalf("second prune: deleted %d, %v; want nothing", deleted, err)
		}
		// Attaching and pruning in one call: the seventh renewal in, the
		// fifth out.
		seventh := renewal(7) // ECDSA signatures are randomized: the same signed manifest twice
		a, err := rc.AttachDeliveryManifestKeeping(ctx, ref, seventh, keep)
		if err != nil || a.Pruned != 1 || a.PruneErr != nil || a.Digest == "" {
			t.Fatalf("attach keeping %d: %+v, %v; want one pruned", registry.KeepDeliveryManifests, a, err)
		}
		got, err = rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{})
		if err != nil || len(got) != 2 || string(got[0].Manifest) != string(renewal(7).Manifest) || string(got[1].Manifest) != string(renewal(6).Manifest) {
			t.Fatalf("after attaching the seventh: %d referrers (%v); want renewals 7 and 6", len(got), err)
		}
		if again, err := rc.AttachDeliveryManifestKeeping(ctx, ref, seventh, keep); err != nil || again.Digest != a.Digest || again.Pruned != 0 {
			t.Fatalf("attaching the seventh again (deletes allowed: %v): %+v, %v; want the same referrer, nothing pruned", !noDelete, again, err)
		}
		if _, err := rc.PruneDeliveryManifests(ctx, ref, registry.KeepOptions{Keep: 2}); !errors.Is(err, registry.ErrInvalid) {
			t.Fatalf("prune with no way to tell genuine referrers: got %v, want ErrInvalid", err)
		}
	}
}

// TestJunkReferrersNeitherCrowdOutNorPrune attaches, after a genuine signed
// delivery manifest, twelve referrers of the delivery-manifest type with
// huge sequence annotations (what anyone with push access can attach with
// oras attach): eight naming the trusted key id with a signature that does
// not verify, four naming another key. DeliveryManifests with the trusted
// keys still returns the genuine one (it returned the eight newest by the
// junk's annotations: none genuine), and an attach that prunes keeps the
// manifest it attached and the one before it and removes the junk (it
// removed everything below the junk's sequence, the manifest it had just
// attached included).
func TestJunkReferrersNeitherCrowdOutNorPrune(t *testing.T) {
	ctx := context.Background()
	reg := registrytest.New(t, registrytest.Options{})
	rc, ref := publishedArtifact(ctx, t, reg)
	key, other := newKey(t), newKey(t)
	keys := trusted(t, key)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	genuine := signedManifest(t, key, 3, at, `"renewal":1`)
	if _, err := rc.AttachDeliveryManifest(ctx, ref, genuine); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		junk := signedManifest(t, other, 1<<62, at.Add(time.Duration(i)*time.Minute), `"junk":`+strconv.Itoa(i))
		if i < 8 {
			junk.KeyID = keys[0].ID // names the trusted key, signed by another
		}
		junk.Sequence = 1<<62 + int64(i)
		if _, err := rc.AttachDeliveryManifest(ctx, ref, junk); err != nil {
			t.Fatal(err)
		}
	}
	got, err := rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{Keys: keys})
	if err != nil || len(got) != 1 || string(got[0].Manifest) != string(genuine.Manifest) {
		t.Fatalf("with 12 junk referrers: got %d manifests (%v), want the genuine one", len(got), err)
	}

	next := signedManifest(t, key, 3, at.Add(5*time.Minute), `"renewal":2`)
	a, err := rc.AttachDeliveryManifestKeeping(ctx, ref, next, registry.KeepOptions{Keep: registry.KeepDeliveryManifests, Keys: keys})
	if err != nil || a.PruneErr != nil || a.Pruned != 12 {
		t.Fatalf("attach keeping 2: %+v, %v; want the 12 junk referrers removed", a, err)
	}
	got, err = rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{})
	if err != nil || len(got) != 2 || string(got[0].Manifest) != string(next.Manifest) || string(got[1].Manifest) != string(genuine.Manifest) {
		t.Fatalf("after the attach: %d referrers (%v); want renewals 2 and 1, nothing else", len(got), err)
	}

	// An issuer that vouches for what it issued (a promoter without the
	// public keys) keeps the same: the junk back, then pruned by Issued.
	for i := range 3 {
		junk := signedManifest(t, other, 1<<62, at.Add(time.Duration(i)*time.Minute), `"again":`+strconv.Itoa(i))
		if _, err := rc.AttachDeliveryManifest(ctx, ref, junk); err != nil {
			t.Fatal(err)
		}
	}
	issued := func(_ context.Context, m registry.SignedDeliveryManifest) (bool, error) {
		return string(m.Manifest) == string(genuine.Manifest) || string(m.Manifest) == string(next.Manifest), nil
	}
	third := signedManifest(t, key, 3, at.Add(10*time.Minute), `"renewal":3`)
	if a, err := rc.AttachDeliveryManifestKeeping(ctx, ref, third, registry.KeepOptions{Keep: registry.KeepDeliveryManifests, Issued: issued}); err != nil || a.PruneErr != nil || a.Pruned != 4 {
		t.Fatalf("attach keeping 2 by what was issued: %+v, %v; want the 3 junk and renewal 1 removed", a, err)
	}
	got, err = rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{})
	if err != nil || len(got) != 2 || string(got[0].Manifest) != string(third.Manifest) || string(got[1].Manifest) != string(next.Manifest) {
		t.Fatalf("after the third attach: %d referrers (%v); want renewals 3 and 2", len(got), err)
	}
}

// signedManifest is a delivery manifest signed by key, with the given
// sequence and issuedAt (in the signed bytes and the annotations) and the
// JSON member extra.
func signedManifest(t testing.TB, key *ecdsa.PrivateKey, seq int64, issued time.Time, extra string) registry.SignedDeliveryManifest {
	t.Helper()
	at := issued.Format(time.RFC3339)
	b := []byte(`{` + extra + `,"issuedAt":"` + at + `","sequence":` + strconv.FormatInt(seq, 10) + `}`)
	sig, err := signing.SignBlob(key, b)
	if err != nil {
		t.Fatal(err)
	}
	id, err := signing.KeyID(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return registry.SignedDeliveryManifest{Manifest: b, Signature: sig, KeyID: id, Sequence: seq, IssuedAt: at}
}

// TestAttachRelistsAReferrerItsIndexMissed interrupts an attach between the
// referrer's push and the update of the tagged referrers index (Distribution
// has no referrers API): a fault-injecting handler fails the index's PUT
// once. Attaching again lists the referrer (an attach that found it stored
// reported success and left it unlisted, so no runtime saw it), while a
// manifest pruned after a newer one was attached stays off the list when it
// is attached again, on a Distribution that refuses deletes.
func TestAttachRelistsAReferrerItsIndexMissed(t *testing.T) {
	ctx := context.Background()
	fault := &failIndexPut{}
	reg := registrytest.New(t, registrytest.Options{NoDelete: true, Wrap: func(h http.Handler) http.Handler { fault.next = h; return fault }})
	rc, ref := publishedArtifact(ctx, t, reg)
	key := newKey(t)
	keep := registry.KeepOptions{Keep: registry.KeepDeliveryManifests, Keys: trusted(t, key)}
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	first := signedManifest(t, key, 3, at, `"renewal":1`)

	fault.arm()
	if _, err := rc.AttachDeliveryManifestKeeping(ctx, ref, first, keep); err == nil {
		t.Fatal("attach with the referrers index PUT failing: got no error")
	}
	if got, err := rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{}); err != nil || len(got) != 0 {
		t.Fatalf("after the interrupted attach: %d listed (%v), want none", len(got), err)
	}
	if _, err := rc.AttachDeliveryManifestKeeping(ctx, ref, first, keep); err != nil {
		t.Fatal(err)
	}
	got, err := rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{})
	if err != nil || len(got) != 1 || string(got[0].Manifest) != string(first.Manifest) {
		t.Fatalf("after attaching again: %d listed (%v), want the manifest", len(got), err)
	}

	// Renewals 2 and 3 prune renewal 1 (kept stored: no deletes); attached
	// again, it stays pruned.
	for n := 2; n <= 3; n++ {
		if _, err := rc.AttachDeliveryManifestKeeping(ctx, ref, signedManifest(t, key, 3, at.Add(time.Duration(n)*time.Minute), `"renewal":`+strconv.Itoa(n)), keep); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rc.AttachDeliveryManifestKeeping(ctx, ref, first, keep); err != nil {
		t.Fatal(err)
	}
	got, err = rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{})
	if err != nil || len(got) != 2 || string(got[1].Manifest) == string(first.Manifest) {
		t.Fatalf("renewal 1 attached again after it was pruned: %d listed (%v), want renewals 3 and 2 only", len(got), err)
	}
}

// failIndexPut is a fault-injecting handler in front of the registry: once
// armed, it answers the next PUT of a referrers index (the tag
// sha256-<hex> of the referrers tag schema) with 500 itself.
type failIndexPut struct {
	next  http.Handler
	mu    sync.Mutex
	armed bool
}

func (f *failIndexPut) arm() { f.mu.Lock(); f.armed = true; f.mu.Unlock() }

func (f *failIndexPut) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	fail := f.armed && r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/sha256-")
	if fail {
		f.armed = false
	}
	f.mu.Unlock()
	if fail {
		http.Error(w, "injected fault", http.StatusInternalServerError)
		return
	}
	f.next.ServeHTTP(w, r)
}

// TestJunkReferrersWithoutALayerArePruned attaches, after a genuine signed
// delivery manifest, forty referrers of the delivery-manifest type with
// huge sequence annotations naming the trusted key, and deletes each one's
// layer blob from the repository (Distribution allows it): their manifests
// stay listed and can never be read whole. They use up the 32 referrers a
// runtime reads, so until a prune it finds no manifest; an attach that
// prunes removes them, 32 at a time (it skipped them as if a concurrent
// prune had removed them, so they were never removed and the runtime never
// found a manifest again).
func TestJunkReferrersWithoutALayerArePruned(t *testing.T) {
	ctx := context.Background()
	reg := registrytest.New(t, registrytest.Options{})
	rc, ref := publishedArtifact(ctx, t, reg)
	key, other := newKey(t), newKey(t)
	keys := trusted(t, key)
	keep := registry.KeepOptions{Keep: registry.KeepDeliveryManifests, Keys: keys}
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	first := signedManifest(t, key, 3, at, `"renewal":1`)
	if _, err := rc.AttachDeliveryManifest(ctx, ref, first); err != nil {
		t.Fatal(err)
	}
	repository, _, _ := strings.Cut(ref, "@")
	blobs := plainRepo(t, repository).Blobs()
	const junkCount = 40
	for i := range junkCount {
		junk := signedManifest(t, other, 1<<62+int64(i), at.Add(time.Duration(i)*time.Minute), `"junk":`+strconv.Itoa(i))
		junk.KeyID = keys[0].ID
		if _, err := rc.AttachDeliveryManifest(ctx, ref, junk); err != nil {
			t.Fatal(err)
		}
		layer := ocispec.Descriptor{MediaType: registry.DeliveryManifestArtifactType, Digest: digest.FromBytes(junk.Manifest), Size: int64(len(junk.Manifest))}
		if err := blobs.Delete(ctx, layer); err != nil {
			t.Fatalf("delete junk %d's layer: %v", i, err)
		}
	}
	if got, err := rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{Keys: keys}); err != nil || len(got) != 0 {
		t.Fatalf("before a prune: %d manifests (%v), want none: the junk uses up the 32 referrers read", len(got), err)
	}

	second := signedManifest(t, key, 3, at.Add(5*time.Minute), `"renewal":2`)
	a, err := rc.AttachDeliveryManifestKeeping(ctx, ref, second, keep)
	if err != nil || a.PruneErr != nil || a.Pruned != 32 {
		t.Fatalf("attach keeping 2: %+v, %v; want 32 junk referrers without a layer removed (a prune reads 32)", a, err)
	}
	got, err := rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{Keys: keys})
	if err != nil || len(got) != 2 || string(got[0].Manifest) != string(second.Manifest) || string(got[1].Manifest) != string(first.Manifest) {
		t.Fatalf("after the first prune: %d manifests (%v), want renewals 2 and 1", len(got), err)
	}

	third := signedManifest(t, key, 3, at.Add(10*time.Minute), `"renewal":3`)
	a, err = rc.AttachDeliveryManifestKeeping(ctx, ref, third, keep)
	if err != nil || a.PruneErr != nil || a.Pruned != junkCount-32+1 {
		t.Fatalf("attach keeping 2 again: %+v, %v; want the other %d junk referrers and renewal 1 removed", a, err, junkCount-32)
	}
	got, err = rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{})
	if err != nil || len(got) != 2 || string(got[0].Manifest) != string(third.Manifest) || string(got[1].Manifest) != string(second.Manifest) {
		t.Fatalf("after the second prune: %d referrers listed (%v), want renewals 3 and 2, nothing else", len(got), err)
	}
}

// TestAnUnreadableReferrerDoesNotStopThePrune loses, in the registry's
// storage, the layer blobs of three junk referrers while the registry runs
// (Distribution still announces them and cuts the body: they cannot be
// read, and cannot be told from a connection cut). An attach that prunes
// leaves them as they are, removes the genuine referrer beyond the newest
// two all the same, and says how many it could not read (the first one
// that could not be read stopped the prune: nothing was ever pruned again
// on that artifact, and every renewal added a referrer).
func TestAnUnreadableReferrerDoesNotStopThePrune(t *testing.T) {
	ctx := context.Background()
	reg := registrytest.New(t, registrytest.Options{})
	rc, ref := publishedArtifact(ctx, t, reg)
	key, other := newKey(t), newKey(t)
	keys := trusted(t, key)
	keep := registry.KeepOptions{Keep: registry.KeepDeliveryManifests, Keys: keys}
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	renewal := func(n int) registry.SignedDeliveryManifest {
		return signedManifest(t, key, 3, at.Add(time.Duration(n)*time.Minute), `"renewal":`+strconv.Itoa(n))
	}
	for n := 1; n <= 2; n++ {
		if _, err := rc.AttachDeliveryManifestKeeping(ctx, ref, renewal(n), keep); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		junk := signedManifest(t, other, 1<<62+int64(i), at, `"junk":`+strconv.Itoa(i))
		junk.KeyID = keys[0].ID
		if _, err := rc.AttachDeliveryManifest(ctx, ref, junk); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(reg.BlobPath(digest.FromBytes(junk.Manifest).String())); err != nil {
			t.Fatal(err)
		}
	}
	a, err := rc.AttachDeliveryManifestKeeping(ctx, ref, renewal(3), keep)
	if err != nil {
		t.Fatal(err)
	}
	if a.Pruned != 1 || a.PruneErr == nil || !strings.Contains(a.PruneErr.Error(), "3 referrer(s) could not be read") {
		t.Fatalf("attach of renewal 3: pruned %d (%v); want renewal 1 removed and the 3 unreadable referrers named", a.Pruned, a.PruneErr)
	}
	got, err := rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{Keys: keys})
	if err != nil || len(got) != 2 || string(got[0].Manifest) != string(renewal(3).Manifest) || string(got[1].Manifest) != string(renewal(2).Manifest) {
		t.Fatalf("after the prune: %d manifests (%v), want renewals 3 and 2", len(got), err)
	}
}

// publishedArtifact publishes one signed artifact to reg through a new
// plain-HTTP client that does not retry, and returns the client and the
// artifact's reference.
func publishedArtifact(ctx context.Context, t testing.TB, reg *registrytest.Registry) (*registry.Client, string) {
	t.Helper()
	rc, err := registry.New(registry.Options{PlainHTTP: true, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	sum, err := rc.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/configpub", Artifacts: registrytest.Artifacts(1, "prod", 1), Signer: newKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	return rc, sum.Results[0].Ref()
}
