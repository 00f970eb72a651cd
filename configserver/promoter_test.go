package configserver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/promoter"
)

// TestServesWhatThePromoterStored records and activates a compiled golden
// target with the real promoter (as a configpub_promoter member), then
// checks every header against the rows the promoter wrote, verifies the
// manifest signature with the promoter's key, loads it with the runtime
// client, and follows a lease renewal within 1 s.
func TestServesWhatThePromoterStored(t *testing.T) {
	t.Parallel()
	values, tg := readGoldenAdvisor(t)
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	var mu sync.Mutex
	now := goldenCreatedAt // inside the envelope's validity window
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ps, key := e.openPromoter(t, clock)
	trusted, err := signing.NewTrustedKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	id := bundle.Identity{Host: tg.Host, ServiceID: tg.ServiceID, EnvTag: tg.EnvTag}
	target := tg.promoterTarget(values)
	if _, err := ps.RecordAndActivate(ctx, promoter.ReleaseInput{
		CommandID: uuid.NewString(), EnvTag: tg.EnvTag, ReleaseVersion: 1, BaseReleaseVersion: 0,
		ManifestBytes: []byte("release manifest bytes of the test\n"), Actor: "configserver-test",
		Targets: []promoter.Target{target},
	}); err != nil {
		t.Fatalf("promoter: record and activate: %v", err)
	}
	if d := waitServed(t, e, id, tg.Audience, tg.SnapshotID); d > time.Second {
		t.Fatalf("activation visible after %s, want within 1s", d)
	}

	tok := e.token(t, id, tg.Audience)
	resp, body := e.do(t, "GET", configsPath(id), tok)
	var manifest []byte
	var sig, keyID string
	if err := e.db.Pool(t).QueryRow(ctx, `SELECT manifest, manifest_signature, manifest_key_id FROM configpub.current_pointer
		WHERE host = $1 AND service_id = $2 AND env_tag = $3`, id.Host, id.ServiceID, id.EnvTag).Scan(&manifest, &sig, &keyID); err != nil {
		t.Fatal(err)
	}
	m, err := bundle.ParseDeliveryManifest(manifest)
	if err != nil {
		t.Fatalf("promoter-stored manifest: %v", err)
	}
	if !bytes.Equal(body, values) {
		t.Fatal("body differs from the promoted values.yml")
	}
	for k, v := range map[string]string{
		"ETag": `"` + tg.ArtifactDigest + `"`, "X-Artifact-Digest": tg.ArtifactDigest,
		"X-Config-Snapshot-Id": tg.SnapshotID, "X-Policy-Publication-Id": tg.PublicationID,
		"X-Policy-Digest": tg.PolicyDigest, "X-Content-Digest": tg.ContentDigest, "X-Config-Release-Version": "1",
		"X-Config-Valid-From": m.ValidFrom, "X-Config-Refresh-After": m.RefreshAfter, "X-Config-Expires-At": m.ExpiresAt,
		"X-Config-Manifest": base64.RawURLEncoding.EncodeToString(manifest), "X-Manifest-Signature": sig,
		"X-Manifest-Key-Id": keyID,
	} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("header %s: got %q, want %q (promoter-stored)", k, got, v)
		}
	}
	if _, err := signing.VerifyBlob([]signing.TrustedKey{trusted}, manifest, resp.Header.Get("X-Manifest-Signature"), resp.Header.Get("X-Manifest-Key-Id")); err != nil {
		t.Fatalf("served manifest does not verify with the promoter's key: %v", err)
	}

	c, err := client.New(client.Options{ServerURL: e.srv.URL, Identity: id, Audience: tg.Audience,
		TokenSource: func(context.Context) (string, error) { return tok, nil },
		TrustedKeys: []signing.TrustedKey{trusted}, Clock: fixedClock{now.Add(time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := c.Load(ctx); err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("runtime client on promoter data: %v (%+v)", err, ev)
	}

	// A lease renewal (same snapshot and sequence, later issuedAt) is served
	// within 1 s.
	mu.Lock()
	now = now.Add(4 * time.Minute)
	mu.Unlock()
	if _, err := ps.RenewLeases(ctx, tg.EnvTag); err != nil {
		t.Fatalf("renew leases: %v", err)
	}
	want := now.Add(15 * time.Minute)
	start := time.Now()
	for {
		resp, _ := e.do(t, "HEAD", configsPath(id), tok)
		if got, err := time.Parse(time.RFC3339Nano, resp.Header.Get("X-Config-Expires-At")); err == nil && got.Equal(want) {
			break
		}
		if time.Since(start) > time.Second {
			t.Fatalf("renewed lease (expiresAt %s) not served within 1s; serving %q", want, resp.Header.Get("X-Config-Expires-At"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if resp, _ := e.do(t, "GET", configsPath(id), tok); resp.StatusCode != http.StatusOK {
		t.Fatalf("after renewal: got %d, want 200", resp.StatusCode)
	}
}
