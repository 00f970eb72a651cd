package promote_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	godigest "github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry/remote"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
)

// TestPromoteAfterKeyRotation: CI switches to a new signing key (the
// documented rotation's step 3) and promotes release 2, which changes some
// targets and carries the others over with the artifacts release 1
// published under the old key. The promotion signs those with the new key
// too instead of stopping at the first one ("no trusted key verifies the
// signature"), so every artifact of release 2 verifies with the new key
// alone; the unchanged ones still verify with the old key; a re-run signs
// nothing and writes nothing.
func TestPromoteAfterKeyRotation(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	if _, err := h.Promote(t, h.Options(h.Repo.R1)); err != nil {
		t.Fatalf("promote release 1 with the old key: %v", err)
	}
	kp, err := cosignkey.GenerateKeyPair([]byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := cosignkey.LoadPrivateKey(kp.PrivatePEM, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := promoter.Open(ctx, h.Pool, promoter.Options{Signer: newKey})
	if err != nil {
		t.Fatal(err)
	}
	o := h.Options(plumbing.ZeroHash)
	o.Signer, o.Store = newKey, store
	res, err := h.Promote(t, o)
	if err != nil {
		t.Fatalf("promote release 2 with the new key: %v", err)
	}
	unchanged := 0
	for k, v := range h.Repo.Snapshots[h.Repo.R2] {
		if h.Repo.Snapshots[h.Repo.R1][k] == v {
			unchanged++
		}
	}
	if unchanged == 0 || unchanged == len(h.Repo.Snapshots[h.Repo.R2]) {
		t.Fatalf("fixture: %d of %d targets unchanged, want some", unchanged, len(h.Repo.Snapshots[h.Repo.R2]))
	}
	t.Logf("release 2: %d of %d targets carried over, %d re-signed", unchanged, len(h.Repo.Snapshots[h.Repo.R2]), res.Resigned)
	if res.ReleaseVersion != 2 || res.Resigned != int64(unchanged) {
		t.Fatalf("got release %d, %d re-signed; want release 2 with its %d unchanged targets re-signed", res.ReleaseVersion, res.Resigned, unchanged)
	}
	// The old key is one the store recorded as it signed release 1: a
	// rotation, named, not a replaced signature.
	if oldID := h.Signer.TrustedKey().ID; len(res.RotatedFrom) != 1 || res.RotatedFrom[0] != oldID || res.Replaced != 0 {
		t.Fatalf("rotated from %v, %d replaced; want rotated from the old key %s, none replaced", res.RotatedFrom, res.Replaced, oldID)
	}

	trust := func(s *cosignkey.Signer) []signing.TrustedKey {
		k, err := signing.NewTrustedKey(s.Public().(*ecdsa.PublicKey))
		if err != nil {
			t.Fatal(err)
		}
		return []signing.TrustedKey{k}
	}
	oldVerifies := 0
	for _, r := range res.Published {
		if _, err := h.Client.Verify(ctx, r.Ref(), registry.VerifyOptions{Keys: trust(newKey)}); err != nil {
			t.Errorf("%s with the new key alone: %v", r.Ref(), err)
		}
		if _, err := h.Client.Verify(ctx, r.Ref(), registry.VerifyOptions{Keys: trust(h.Signer)}); err == nil {
			oldVerifies++
		}
	}
	if oldVerifies != unchanged {
		t.Errorf("%d artifacts verify with the old key, want the %d published under it", oldVerifies, unchanged)
	}

	h.Registry.Reset()
	again, err := h.Promote(t, o)
	if err != nil {
		t.Fatalf("promote release 2 again: %v", err)
	}
	if again.Resigned != 0 || h.Registry.Writes() != 0 {
		t.Fatalf("re-run: %d re-signed, %d registry writes; want none", again.Resigned, h.Registry.Writes())
	}
}

// TestPromoteSaysWhenSignaturesWereReplaced: release 1's signatures are
// replaced in the registry by signatures of a key the store never signed
// with; promoting release 2 with the same key signs the artifacts it
// carries over again, as after a key rotation, but counts them apart
// (Replaced) and names no rotated key: the store recorded every key it
// signed with (configpub.signing_key), and the key of these signatures is
// not one. Before, they counted as re-signed after a key rotation.
func TestPromoteSaysWhenSignaturesWereReplaced(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	r1, err := h.Promote(t, h.Options(h.Repo.R1))
	if err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range r1.Published {
		if r.Kind != registry.KindValues {
			continue
		}
		deleteSignature(ctx, t, r)
		if _, err := h.Client.Sign(ctx, r.Ref(), other); err != nil {
			t.Fatalf("sign %s with another key: %v", r.Ref(), err)
		}
	}
	unchanged := 0
	for k, v := range h.Repo.Snapshots[h.Repo.R2] {
		if h.Repo.Snapshots[h.Repo.R1][k] == v {
			unchanged++
		}
	}
	res, err := h.Promote(t, h.Options(h.Repo.R2))
	if err != nil {
		t.Fatalf("promote release 2: %v", err)
	}
	if unchanged == 0 || res.Replaced != int64(unchanged) || res.Resigned != 0 || res.Unsigned != 0 || len(res.RotatedFrom) != 0 {
		t.Fatalf("got %d replaced, %d re-signed (rotated from %v), %d unsigned; want the %d carried-over artifacts replaced and nothing else",
			res.Replaced, res.Resigned, res.RotatedFrom, res.Unsigned, unchanged)
	}
}

// deleteSignature deletes the cosign signature manifest of the artifact r.
func deleteSignature(ctx context.Context, t *testing.T, r registry.Result) {
	t.Helper()
	repo, err := remote.NewRepository(r.Repository)
	if err != nil {
		t.Fatal(err)
	}
	repo.PlainHTTP = true
	sig, err := repo.Resolve(ctx, registry.SignatureTag(godigest.Digest(r.Digest)))
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.Delete(ctx, sig); err != nil {
		t.Fatalf("delete the signature of %s: %v", r.Ref(), err)
	}
}

// TestPromoteSaysWhenSignaturesWereDeleted: release 1's signatures are
// deleted from the registry; promoting release 2 with the same key signs
// the artifacts it carries over again, as after a key rotation, but counts
// them apart (Unsigned): "published before under another key" would hide
// that something removed them.
func TestPromoteSaysWhenSignaturesWereDeleted(t *testing.T) {
	h := promotertest.New(t)
	ctx := context.Background()
	r1, err := h.Promote(t, h.Options(h.Repo.R1))
	if err != nil {
		t.Fatalf("promote release 1: %v", err)
	}
	for _, r := range r1.Published {
		if r.Kind != registry.KindValues {
			continue
		}
		deleteSignature(ctx, t, r)
	}
	unchanged := 0
	for k, v := range h.Repo.Snapshots[h.Repo.R2] {
		if h.Repo.Snapshots[h.Repo.R1][k] == v {
			unchanged++
		}
	}
	res, err := h.Promote(t, h.Options(h.Repo.R2))
	if err != nil {
		t.Fatalf("promote release 2: %v", err)
	}
	if res.Unsigned != int64(unchanged) || res.Resigned != 0 {
		t.Fatalf("got %d unsigned and %d re-signed, want the %d carried-over artifacts unsigned and none re-signed", res.Unsigned, res.Resigned, unchanged)
	}
}
