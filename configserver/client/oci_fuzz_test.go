package client_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"testing"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/internal/jcs"
	"github.com/configpub/configpub/internal/signing"
)

// FuzzApplyOCI hands a runtime that runs release 2 an artifact of any
// values.yml bytes with a delivery manifest of any bytes: one the promoter
// signed when it is a canonical manifest (the signer is trusted, whatever
// it signs), else bytes under release 3's signature. An artifact that is
// applied is exactly what its signed manifest vouches for (digest,
// identity, audience, current phase, a sequence not below the one held),
// and is what Current then serves. A refused one is never half applied:
// Current, the last-known-good file and the seen state are what they were.
func FuzzApplyOCI(f *testing.F) {
	w := newWorld(f)
	r2, r3 := w.build(w.spec(2)), w.build(w.spec(3))
	s4 := w.spec(4)
	s4.envHost = "billing.example"
	r4 := w.build(s4)
	for _, r := range []*release{r2, r3, w.build(w.spec(1)), r4} {
		f.Add(r.Values, r.ManifestBytes)
	}
	f.Add(r3.Values, bytes.Replace(r3.ManifestBytes, []byte(`"phase"`), []byte(`"phase":"candidate","x"`), 1))
	f.Add(append(bytes.Clone(r3.Values), "extra: 1\n"...), r3.ManifestBytes)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, values, manifest []byte) {
		o := w.options()
		o.CacheDir = t.TempDir()
		c, err := client.New(o)
		if err != nil {
			t.Fatal(err)
		}
		if ev, err := c.ApplyOCI(ctx, ociArtifact(r2)); err != nil || ev.Outcome != client.OutcomeApplied {
			t.Fatalf("release 2: %+v %v", ev, err)
		}
		a := ociArtifact(r3)
		a.Values, a.LayerDigest = values, jcs.BytesDigest(values)
		a.Manifests = []client.SignedManifest{{Bytes: manifest, Signature: r3.Signature, KeyID: r3.KeyID}}
		m, perr := bundle.ParseDeliveryManifest(manifest)
		if perr == nil {
			sig, err := signing.SignBlob(w.key.priv, manifest)
			if err != nil {
				t.Fatal(err)
			}
			a.Manifests[0].Signature = sig
			for k, v := range map[string]string{
				bundle.AnnotationHost: m.Host, bundle.AnnotationServiceID: m.ServiceID, bundle.AnnotationEnvTag: m.EnvTag,
				bundle.AnnotationAudience: m.Audience, bundle.AnnotationSnapshotID: m.SnapshotID,
				bundle.AnnotationPublicationID: m.PublicationID, bundle.AnnotationPolicyDigest: m.PolicyDigest,
				bundle.AnnotationContentDigest: m.ContentDigest, bundle.AnnotationReleaseVersion: strconv.FormatInt(m.ReleaseVersion, 10),
			} {
				a.Annotations[k] = v
			}
		}
		lkg, _ := os.ReadFile(c.CachePath())
		seen, _ := os.ReadFile(c.SeenPath())
		ev, err := c.ApplyOCI(ctx, a)
		cur, cerr := c.Current()
		if cerr != nil {
			t.Fatalf("no current snapshot after ApplyOCI: %v", cerr)
		}
		if err != nil || ev.Outcome != client.OutcomeApplied {
			var ve *client.VerificationError
			if err != nil && !errors.As(err, &ve) {
				t.Fatalf("refusal is %T: %v", err, err)
			}
			lkg2, _ := os.ReadFile(c.CachePath())
			seen2, _ := os.ReadFile(c.SeenPath())
			if cur.SnapshotID != r2.Manifest.SnapshotID || !bytes.Equal(cur.Values, r2.Values) || !bytes.Equal(lkg, lkg2) || !bytes.Equal(seen, seen2) {
				t.Fatalf("refused (%s %s) but changed what the runtime holds: current %s", ev.Reason, ev.Detail, cur.SnapshotID)
			}
			return
		}
		if perr != nil {
			t.Fatalf("applied under a manifest that does not parse: %v", perr)
		}
		switch {
		case !bytes.Equal(cur.Values, values) || !bytes.Equal(cur.ManifestBytes, manifest):
			t.Fatalf("applied, but Current serves other bytes")
		case m.ArtifactDigest != jcs.BytesDigest(values):
			t.Fatalf("applied values of digest %s under a manifest for %s", jcs.BytesDigest(values), m.ArtifactDigest)
		case m.Identity() != w.id || m.Audience != w.aud || m.Phase != "":
			t.Fatalf("applied a manifest for %v %s phase %q", m.Identity(), m.Audience, m.Phase)
		case m.Sequence < r2.Manifest.Sequence:
			t.Fatalf("applied sequence %d below the held %d", m.Sequence, r2.Manifest.Sequence)
		case (bundle.Identity{Host: cur.Envelope.Host, ServiceID: cur.Envelope.ServiceID, EnvTag: cur.Envelope.EnvTag}) != w.id:
			t.Fatalf("applied an envelope for %s/%s/%s", cur.Envelope.Host, cur.Envelope.ServiceID, cur.Envelope.EnvTag)
		}
	})
}
