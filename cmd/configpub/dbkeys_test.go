package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/pgtest"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
)

// TestDBKeysListsTheRecordedSigningKeys: db keys shows, as the promoter's
// database user, the keys the store recorded as it signed — oldest first,
// with their first and last use over a simulated month and a rotation —
// and, in -o json, each public key as the PEM a runtime trusts.
func TestDBKeysListsTheRecordedSigningKeys(t *testing.T) {
	db := pgtest.New(t)
	d := "--database=" + db.URLFor(t, "configpub_promoter")

	// Nothing signed yet: an empty list, never null.
	out, code := runStore("db", "keys", d)
	if code != 0 || !strings.Contains(out, "no signing key recorded") {
		t.Fatalf("db keys on an empty store: exit %d\n%s", code, out)
	}
	out, code = runStore("db", "keys", d, "-o", "json")
	if code != 0 || !strings.Contains(out, `"signingKeys": []`) {
		t.Fatalf("db keys -o json on an empty store: exit %d\n%s", code, out)
	}

	_, oldKey := testKey(t)
	_, newKey := testKey(t)
	t0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	clock := simclock.New(t0)
	ctx := context.Background()
	store, err := promoter.Open(ctx, db.Pool(t), promoter.Options{Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	record := func(s *cosignkey.Signer) {
		t.Helper()
		if err := store.RecordSigningKey(ctx, s.Public()); err != nil {
			t.Fatal(err)
		}
	}
	// The old key signs daily for a month, then the new one takes over.
	for day := 0; day < 30; day++ {
		record(oldKey)
		clock.Advance(24 * time.Hour)
	}
	rotated := clock.Now()
	record(newKey)
	clock.Advance(3 * 24 * time.Hour)
	record(newKey)

	out, code = runStore("db", "keys", d)
	if code != 0 {
		t.Fatalf("db keys: exit %d\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "KEY ID") ||
		!strings.HasPrefix(lines[1], oldKey.KeyID()) || !strings.HasPrefix(lines[2], newKey.KeyID()) {
		t.Fatalf("db keys: want a header, the old key, then the new key:\n%s", out)
	}

	out, code = runStore("db", "keys", d, "-o", "json")
	if code != 0 {
		t.Fatalf("db keys -o json: exit %d\n%s", code, out)
	}
	var rep keysReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("db keys -o json is not one JSON document: %v\n%s", err, out)
	}
	want := []struct {
		signer      *cosignkey.Signer
		first, last time.Time
	}{
		{oldKey, t0, t0.Add(29 * 24 * time.Hour)},
		{newKey, rotated, rotated.Add(3 * 24 * time.Hour)},
	}
	if len(rep.SigningKeys) != len(want) {
		t.Fatalf("signingKeys: got %d, want %d\n%s", len(rep.SigningKeys), len(want), out)
	}
	for i, w := range want {
		k := rep.SigningKeys[i]
		if k.KeyID != w.signer.KeyID() || k.Algorithm != promoter.SigningKeyAlgorithm ||
			k.FirstUsedAt != w.first.Format(time.RFC3339) || k.LastUsedAt != w.last.Format(time.RFC3339) {
			t.Errorf("signingKeys[%d] = %+v, want key %s first used %s, last %s", i, k, w.signer.KeyID(), w.first, w.last)
		}
		block, _ := pem.Decode([]byte(k.PublicKey))
		if block == nil || block.Type != "PUBLIC KEY" {
			t.Fatalf("signingKeys[%d].publicKey is no PUBLIC KEY PEM: %q", i, k.PublicKey)
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if !w.signer.PublicKey().Equal(pub) {
			t.Errorf("signingKeys[%d].publicKey is not key %s", i, w.signer.KeyID())
		}
	}
}
