package promoter_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
)

// TestStoreRecordsTheKeysItSignsWith runs thirty simulated days: a
// promotion, a lease renewal every day (as configpub_promoter), a key rotation on day ten. The
// store records each key the first time it signs with it (its public key
// and first use) and moves its last use at every signing, one row a key;
// a key id recorded with another public key (a row written with the
// table's check dropped: the check stops any other way) refuses to sign,
// naming the key id, and writes nothing.
func TestStoreRecordsTheKeysItSignsWith(t *testing.T) {
	ctx := context.Background()
	h := promotertest.New(t)
	start := time.Date(2026, 8, 14, 0, 0, 0, 0, time.UTC)
	clk := simclock.New(start)
	store, err := promoter.Open(ctx, h.Pool, promoter.Options{Signer: h.Signer, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	o := h.Options(h.Repo.R1)
	o.Review.Commit, o.Store = h.Repo.R1.String(), store
	if _, err := h.Promote(t, o); err != nil {
		t.Fatal(err)
	}
	newKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// lease renew connects as configpub_promoter.
	renewer := h.DB.PoolURL(t, h.DB.URLFor(t, "configpub_promoter"))
	if store, err = promoter.Open(ctx, renewer, promoter.Options{Signer: h.Signer, Clock: clk.Now}); err != nil {
		t.Fatal(err)
	}
	var rotated time.Time
	for day := 1; day <= 30; day++ {
		clk.Set(start.Add(time.Duration(day) * 24 * time.Hour))
		if day == 10 {
			if store, err = store.WithSigner(newKey); err != nil {
				t.Fatal(err)
			}
			rotated = clk.Now()
		}
		if _, err := store.RenewLeases(ctx, promotertest.Env); err != nil {
			t.Fatalf("day %d: %v", day, err)
		}
	}
	keys, err := store.SigningKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	oldID, newID := h.Signer.TrustedKey().ID, store.KeyID()
	if len(keys) != 2 || keys[0].ID != oldID || keys[1].ID != newID {
		t.Fatalf("recorded %d keys %v; want the old key %s, then the new %s", len(keys), keys, oldID, newID)
	}
	for _, tc := range []struct {
		k           promoter.SigningKey
		first, last time.Time
		pub         *ecdsa.PublicKey
	}{
		{keys[0], start, rotated.Add(-24 * time.Hour), h.Signer.Public().(*ecdsa.PublicKey)},
		{keys[1], rotated, start.Add(30 * 24 * time.Hour), &newKey.PublicKey},
	} {
		if !tc.k.FirstUsed.Equal(tc.first) || !tc.k.LastUsed.Equal(tc.last) || !tc.k.Key.Equal(tc.pub) || tc.k.Algorithm != promoter.SigningKeyAlgorithm {
			t.Errorf("key %s: first used %s, last %s, algorithm %s, same public key %v; want %s, %s, %s, true", tc.k.ID,
				tc.k.FirstUsed, tc.k.LastUsed, tc.k.Algorithm, tc.k.Key.Equal(tc.pub), tc.first, tc.last, promoter.SigningKeyAlgorithm)
		}
	}

	// A row naming a third key's id with the new key's public key.
	third, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	thirdID, err := signing.KeyID(&third.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&newKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Pool.Exec(ctx, `ALTER TABLE configpub.signing_key DROP CONSTRAINT signing_key_id_is_its_digest`); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Pool.Exec(ctx, `INSERT INTO configpub.signing_key VALUES ($1, $2, 'ecdsa-p256-sha256', now(), now())`, thirdID, der); err != nil {
		t.Fatal(err)
	}
	var before int
	if err := h.Pool.QueryRow(ctx, `SELECT count(*) FROM configpub.delivery_manifest`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if store, err = store.WithSigner(third); err != nil {
		t.Fatal(err)
	}
	clk.Set(clk.Now().Add(24 * time.Hour))
	_, err = store.RenewLeases(ctx, promotertest.Env)
	if !errors.Is(err, promoter.ErrIntegrity) || !strings.Contains(err.Error(), "key id "+thirdID+" is recorded with another public key") {
		t.Fatalf("renew with a key whose id is recorded with another public key: %v; want ErrIntegrity naming %s", err, thirdID)
	}
	var after int
	if err := h.Pool.QueryRow(ctx, `SELECT count(*) FROM configpub.delivery_manifest`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("the refused renewal wrote %d delivery manifests, want none", after-before)
	}
}
