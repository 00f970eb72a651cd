package replica_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/jcs"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/knowledge/replica"
)

type fixedClock time.Time

func (c fixedClock) Now() time.Time { return time.Time(c) }

// TestApplyClientVerifiedSnapshot takes the compiler's golden Knowledge
// values.yml through the runtime client (an OCI-pulled artifact with a
// signed delivery manifest, every check of a load) and materializes the
// snapshot the client returns: the tables hold exactly the inventory the
// compiler wrote, with the client's snapshot as the applied pointer.
func TestApplyClientVerifiedSnapshot(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join("..", "..", "fixtures", "golden", "prod", "dev.lightapi.net", "com.networknt.knowledge-1.0.0")
	values, err := os.ReadFile(filepath.Join(dir, "values.yml"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "target.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tg struct {
		SnapshotID        string `json:"snapshotId"`
		PropertySetDigest string `json:"propertySetDigest"`
	}
	if err := json.Unmarshal(raw, &tg); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Env bundle.RuntimePolicy `yaml:"runtimePolicy"`
		KP  struct {
			Inventory struct {
				Items []bundle.InventoryItem `yaml:"items"`
			} `yaml:"inventory"`
		} `yaml:"knowledgePolicy"`
	}
	if err := yaml.Unmarshal(values, &doc); err != nil {
		t.Fatal(err)
	}
	e := doc.Env
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := client.NewTrustedKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 8, 20, 12, 0, 0, 0, time.UTC) // inside the golden activation window
	m := bundle.DeliveryManifest{
		Type: bundle.DeliveryManifestType, Host: e.Host, ServiceID: e.ServiceID, EnvTag: e.EnvTag, Audience: e.Audience,
		SnapshotID: tg.SnapshotID, PublicationID: e.PublicationID, PolicySnapshotID: e.PolicySnapshotID,
		ReleaseVersion: e.ReleaseVersion, ArtifactDigest: jcs.BytesDigest(values), ContentDigest: e.ContentDigest,
		PolicyDigest: e.PolicyDigest, PropertySetDigest: tg.PropertySetDigest, SchemaVersion: e.SchemaVersion,
		CompatibilityGeneration: e.CompatibilityGeneration, RevocationEpoch: e.RevocationEpoch, Sequence: 7,
		ActivatedAt: e.ValidFrom, IssuedAt: now.Format(time.RFC3339), ValidFrom: now.Add(-time.Minute).Format(time.RFC3339),
		RefreshAfter: now.Add(5 * time.Minute).Format(time.RFC3339), ExpiresAt: now.Add(15 * time.Minute).Format(time.RFC3339),
	}
	mb, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signing.SignBlob(key, mb)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(client.Options{Identity: m.Identity(), Audience: bundle.AudienceKnowledge,
		TrustedKeys: []client.TrustedKey{tk}, Clock: fixedClock(now), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := c.ApplyOCI(ctx, &client.OCIArtifact{
		Ref:         "registry.example/configpub/prod/dev.lightapi.net/com.networknt.knowledge-1.0.0@" + jcs.BytesDigest([]byte("manifest")),
		LayerDigest: jcs.BytesDigest(values), Values: values, SignatureVerified: true,
		Annotations: map[string]string{
			bundle.AnnotationHost: e.Host, bundle.AnnotationServiceID: e.ServiceID, bundle.AnnotationEnvTag: e.EnvTag,
			bundle.AnnotationAudience: e.Audience, bundle.AnnotationSnapshotID: tg.SnapshotID,
			bundle.AnnotationPublicationID: e.PublicationID, bundle.AnnotationPolicyDigest: e.PolicyDigest,
			bundle.AnnotationContentDigest: e.ContentDigest, bundle.AnnotationReleaseVersion: strconv.FormatInt(e.ReleaseVersion, 10),
		},
		Manifests: []client.SignedManifest{{Bytes: mb, Signature: sig, KeyID: tk.ID}},
	})
	if err != nil {
		t.Fatalf("client: %+v %v", ev, err)
	}
	snap, err := c.Current()
	if err != nil {
		t.Fatal(err)
	}

	_, pool := newDB(t)
	s := replica.New(pool, replica.Options{})
	res, err := s.Apply(ctx, snap)
	if err != nil || res.Outcome != replica.OutcomeApplied || res.Inserted != len(doc.KP.Inventory.Items) {
		t.Fatalf("apply: %+v %v", res, err)
	}
	var want []string
	for _, it := range doc.KP.Inventory.Items {
		want = append(want, it.Kind+" "+it.ID+" "+it.Digest)
	}
	slices.Sort(want)
	items, err := s.Replicas(ctx, m.Identity())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, it.Kind+" "+it.ID+" "+it.Digest)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("tables hold %v, want the golden inventory %v", got, want)
	}
	p, err := s.Applied(ctx, m.Identity())
	if err != nil || p.SnapshotID != tg.SnapshotID || p.ManifestSequence != 7 || p.SourceEventSequence != e.SourceEventSequence {
		t.Fatalf("applied pointer %+v %v", p, err)
	}
}
