package promoter_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/configserver/client/ocipull"
	"github.com/configpub/configpub/internal/promotertest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/simclock"
	"github.com/configpub/configpub/promoter"
	"github.com/configpub/configpub/registry"
)

// TestAttachKeepsRenewalsGCDeleted runs two simulated hours: leases are
// renewed every five minutes, and every half hour db gc collects the
// renewals superseded more than ten minutes ago and then the registry
// attach runs. Each attach keeps the newest two manifests the store issued
// — the one it attached and the one the attach before it attached, which
// gc has since deleted from the store — and removes a forgery of the
// latter (its bytes with a later issuedAt, naming the store's key id,
// signed by another key). The attach counted a renewal gc had deleted as
// not issued and removed it: one referrer was left, not the two the docs
// promise, and a runtime that had listed it just before found nothing.
// The signing key is rotated after the first hour, so the renewal gc
// deleted at the first attach after it is signed by a key the store no
// longer signs with. The attach runs as lease renew --attach does, on a
// store that holds the signing key, and as registry attach does, on a
// store that holds none (as configpub_promoter): both recognise the
// renewal by the public keys the store recorded as it signed
// (configpub.signing_key).
func TestAttachKeepsRenewalsGCDeleted(t *testing.T) {
	t.Run("lease renew --attach", func(t *testing.T) { attachKeepsRenewalsGCDeleted(t, true) })
	t.Run("registry attach", func(t *testing.T) { attachKeepsRenewalsGCDeleted(t, false) })
}

func attachKeepsRenewalsGCDeleted(t *testing.T, withKey bool) {
	ctx := context.Background()
	h := promotertest.New(t)
	clk := simclock.New(time.Date(2026, 8, 14, 0, 0, 0, 0, time.UTC))
	store, err := promoter.Open(ctx, h.Pool, promoter.Options{Signer: h.Signer, Clock: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	attacher := store
	if !withKey {
		pool := h.DB.PoolURL(t, h.DB.URLFor(t, "configpub_promoter"))
		if attacher, err = promoter.Open(ctx, pool, promoter.Options{Clock: clk.Now}); err != nil {
			t.Fatal(err)
		}
	}
	newKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	newTrusted, err := signing.NewTrustedKey(&newKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := registry.New(registry.Options{PlainHTTP: true, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	const host, svc = "dev.lightapi.net", "com.networknt.agent-advisor-1.0.0"
	id := bundle.Identity{Host: host, ServiceID: svc, EnvTag: promotertest.Env}
	ref := promotedRef(t, h, store, h.Repo.R1.String(), host, svc)
	trusted := []signing.TrustedKey{h.Signer.TrustedKey(), newTrusted}
	forger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	puller := &ocipull.Puller{Registry: rc, Keys: trusted, ManifestKeys: trusted, Identity: id}
	current := func() registry.SignedDeliveryManifest {
		t.Helper()
		var m registry.SignedDeliveryManifest
		if err := h.Pool.QueryRow(ctx, `SELECT manifest, manifest_signature, manifest_key_id FROM configpub.current_pointer
			WHERE host = $1 AND service_id = $2 AND env_tag = $3`, host, svc, promotertest.Env).Scan(&m.Manifest, &m.Signature, &m.KeyID); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if _, err := attacher.AttachDeliveryManifests(ctx, promotertest.Env, rc); err != nil {
		t.Fatal(err)
	}
	before := current() // what the last attach attached
	collected := int64(0)
	for step := 1; step <= 24; step++ {
		clk.Set(clk.Now().Add(5 * time.Minute))
		if step == 13 { // the key rotation
			if store, err = store.WithSigner(newKey); err != nil {
				t.Fatal(err)
			}
			if withKey {
				attacher = store
			}
		}
		if _, err := store.RenewLeases(ctx, promotertest.Env); err != nil {
			t.Fatal(err)
		}
		if step%6 != 0 {
			continue
		}
		at := clk.Now().Format(time.RFC3339)
		gc, err := store.CollectRenewals(ctx, promoter.RenewalCollectOptions{MinAge: 10 * time.Minute})
		if err != nil {
			t.Fatalf("%s: gc: %v", at, err)
		}
		collected += gc.Manifests
		var left bool
		if err := h.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.delivery_manifest
			WHERE host = $1 AND service_id = $2 AND env_tag = $3 AND manifest = $4)`, host, svc, promotertest.Env, before.Manifest).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left && step > 6 {
			t.Fatalf("%s: gc left the renewal the previous attach attached; the test wants it deleted", at)
		}
		// A forgery of the renewal gc deleted, ranked above it.
		dm, err := bundle.ParseDeliveryManifest(before.Manifest)
		if err != nil {
			t.Fatal(err)
		}
		issued, err := time.Parse(time.RFC3339Nano, dm.IssuedAt)
		if err != nil {
			t.Fatal(err)
		}
		later := issued.Add(time.Second).UTC().Format("2006-01-02T15:04:05.000Z") // as the store writes it
		forged := []byte(strings.Replace(string(before.Manifest), `"issuedAt":"`+dm.IssuedAt+`"`, `"issuedAt":"`+later+`"`, 1))
		sig, err := signing.SignBlob(forger, forged)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rc.AttachDeliveryManifest(ctx, ref, registry.SignedDeliveryManifest{Manifest: forged, Signature: sig,
			KeyID: before.KeyID, Sequence: dm.Sequence, IssuedAt: later}); err != nil {
			t.Fatal(err)
		}

		ar, err := attacher.AttachDeliveryManifests(ctx, promotertest.Env, rc)
		if err != nil || ar.PruneFailures != 0 {
			t.Fatalf("%s: attach: %+v, %v", at, ar, err)
		}
		now := current()
		ms, err := rc.DeliveryManifests(ctx, ref, registry.DeliveryManifestOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 2 || string(ms[0].Manifest) != string(now.Manifest) || string(ms[1].Manifest) != string(before.Manifest) {
			got := make([]string, len(ms))
			for i, m := range ms {
				got[i] = m.IssuedAt
			}
			t.Fatalf("%s: after the attach the referrers are issued at %v; want the manifest attached now and the one attached at the previous attach (%d renewals gc'd so far)", at, got, collected)
		}
		for _, m := range ms {
			if _, err := signing.VerifyBlob(trusted, m.Manifest, m.Signature, m.KeyID); err != nil {
				t.Fatalf("%s: kept referrer issued at %s: %v", at, m.IssuedAt, err)
			}
		}
		c, err := client.New(client.Options{Identity: id, Audience: bundle.AudienceAgent, TrustedKeys: trusted, Clock: clk, CacheDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if ev, err := c.LoadOCI(ctx, puller, ref); err != nil || ev.Outcome != client.OutcomeApplied {
			t.Fatalf("%s: a fresh runtime got %s %s (%v), want APPLIED", at, ev.Outcome, ev.Reason, err)
		}
		before = now
	}
	if collected == 0 {
		t.Fatal("gc deleted no renewal: the test exercised nothing")
	}
}
