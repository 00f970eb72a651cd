package client_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/signing"
)

// goldenTarget is the part of the compiler's target.json this test uses.
type goldenTarget struct {
	Host, ServiceID, EnvTag, Audience string
	SnapshotID                        string `json:"snapshotId"`
	PropertySetDigest                 string `json:"propertySetDigest"`
	ArtifactDigest                    string `json:"artifactDigest"`
	ContentDigest                     string `json:"contentDigest"`
}

// goldenRelease wraps the compiler's exact values.yml in a delivery manifest
// signed by the world's key, as the promoter would.
func goldenRelease(t *testing.T, w *world, values []byte, tg goldenTarget) *release {
	t.Helper()
	var doc struct {
		RuntimePolicy bundle.RuntimePolicy `yaml:"runtimePolicy"`
	}
	if err := yaml.Unmarshal(values, &doc); err != nil {
		t.Fatal(err)
	}
	env := doc.RuntimePolicy
	now := w.clock.Now()
	m := bundle.DeliveryManifest{
		Type: bundle.DeliveryManifestType, Host: env.Host, ServiceID: env.ServiceID, EnvTag: env.EnvTag,
		Audience: env.Audience, SnapshotID: tg.SnapshotID, PublicationID: env.PublicationID,
		PolicySnapshotID: env.PolicySnapshotID, ReleaseVersion: env.ReleaseVersion,
		ArtifactDigest: tg.ArtifactDigest, ContentDigest: env.ContentDigest, PolicyDigest: env.PolicyDigest,
		PropertySetDigest: tg.PropertySetDigest, SchemaVersion: env.SchemaVersion,
		CompatibilityGeneration: env.CompatibilityGeneration, RevocationEpoch: env.RevocationEpoch,
		Sequence: 1, IssuedAt: rfc(now.Add(-time.Minute)), ValidFrom: rfc(now.Add(-time.Minute)),
		RefreshAfter: rfc(now.Add(time.Hour)), ExpiresAt: rfc(now.Add(30 * 24 * time.Hour)),
	}
	mb, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signing.SignBlob(w.key.priv, mb)
	if err != nil {
		t.Fatal(err)
	}
	return &release{Envelope: env, Values: values, Manifest: m, ManifestBytes: mb, Signature: sig, KeyID: w.key.trusted.ID}
}

// TestGoldenFixturesLoad serves every values.yml the compiler produced under
// fixtures/golden through the test Config Server: each must be APPLIED with
// the compiler's own artifact and content digests.
func TestGoldenFixturesLoad(t *testing.T) {
	files, err := filepath.Glob("../../fixtures/golden/*/*/*/values.yml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden fixtures under fixtures/golden")
	}
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(filepath.Dir(f))))+"/"+filepath.Base(filepath.Dir(f)), func(t *testing.T) {
			values := readFile(t, f)
			var tg goldenTarget
			if err := json.Unmarshal(readFile(t, filepath.Join(filepath.Dir(f), "target.json")), &tg); err != nil {
				t.Fatal(err)
			}
			w := newWorld(t)
			w.id = bundle.Identity{Host: tg.Host, ServiceID: tg.ServiceID, EnvTag: tg.EnvTag}
			w.aud = tg.Audience
			w.srv.id = w.id
			var env struct {
				RuntimePolicy bundle.RuntimePolicy `yaml:"runtimePolicy"`
			}
			if err := yaml.Unmarshal(values, &env); err != nil {
				t.Fatal(err)
			}
			from, err := time.Parse(time.RFC3339, env.RuntimePolicy.ValidFrom)
			if err != nil {
				t.Fatal(err)
			}
			w.clock.Advance(from.Add(24 * time.Hour).Sub(w.clock.Now()))
			r := goldenRelease(t, w, values, tg)
			w.srv.set(r, nil)
			c := w.client()
			ev := mustLoad(t, c, client.OutcomeApplied)
			if ev.ArtifactDigest != tg.ArtifactDigest || ev.ContentDigest != tg.ContentDigest || ev.SnapshotID != tg.SnapshotID {
				t.Fatalf("evidence: got %s %s %s, want the compiler's %s %s %s",
					ev.ArtifactDigest, ev.ContentDigest, ev.SnapshotID, tg.ArtifactDigest, tg.ContentDigest, tg.SnapshotID)
			}
			s, err := c.Current()
			if err != nil {
				t.Fatal(err)
			}
			if len(s.Namespace) == 0 || len(s.Settings) == 0 {
				t.Fatalf("namespace %d keys, settings %d keys: want both non-empty", len(s.Namespace), len(s.Settings))
			}
		})
	}
}

// TestGoldenGatewayAcceptedPublications reads the accepted publications of
// the real Gateway projection and checks calls from its bound Agents.
func TestGoldenGatewayAcceptedPublications(t *testing.T) {
	dir := "../../fixtures/golden/dev/dev.lightapi.net/com.networknt.light-gateway-1.0.0"
	gw := readFileOrSkip(t, filepath.Join(dir, "values.yml"))
	var tg goldenTarget
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, "target.json")), &tg); err != nil {
		t.Fatal(err)
	}
	var advisor struct {
		RuntimePolicy bundle.RuntimePolicy `yaml:"runtimePolicy"`
	}
	if err := yaml.Unmarshal(readFile(t, "../../fixtures/golden/dev/dev.lightapi.net/com.networknt.agent-advisor-1.0.0/values.yml"), &advisor); err != nil {
		t.Fatal(err)
	}
	w := newWorld(t)
	w.id = bundle.Identity{Host: tg.Host, ServiceID: tg.ServiceID, EnvTag: tg.EnvTag}
	w.aud, w.srv.id = tg.Audience, w.id
	w.clock.Advance(time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC).Sub(w.clock.Now()))
	w.srv.set(goldenRelease(t, w, gw, tg), nil)
	c := w.client()
	mustLoad(t, c, client.OutcomeApplied)

	h := c.Middleware(client.AcceptedFromProjection(), http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		a, _ := client.PeerFromContext(r.Context())
		_, _ = rw.Write([]byte(a.Agent))
	}))
	cases := []struct {
		name   string
		digest string
		status int
		body   string
	}{
		{"the advisor's current publication", advisor.RuntimePolicy.PolicyDigest, http.StatusOK, "advisor"},
		{"the advisor's publication id with another digest", digestOf("forged"), http.StatusForbidden, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/v1/chat", nil)
			req.Header.Set("X-Policy-Publication-Id", advisor.RuntimePolicy.PublicationID)
			req.Header.Set("X-Policy-Snapshot-Id", advisor.RuntimePolicy.PolicySnapshotID)
			req.Header.Set("X-Policy-Digest", tc.digest)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || (tc.body != "" && rec.Body.String() != tc.body) {
				t.Fatalf("got %d %q, want %d %q", rec.Code, rec.Body, tc.status, tc.body)
			}
		})
	}
}

func readFileOrSkip(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden fixture missing: %v", err)
	}
	return b
}
