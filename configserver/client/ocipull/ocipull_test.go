package ocipull_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
	"github.com/configpub/configpub/configserver/client/ocipull"
	"github.com/configpub/configpub/internal/registrytest"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/registry"
)

func trustedKey(t *testing.T) (*ecdsa.PrivateKey, []signing.TrustedKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := signing.NewTrustedKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return k, []signing.TrustedKey{tk}
}

func TestPullVerified(t *testing.T) {
	ctx := context.Background()
	rc, err := registry.New(registry.Options{Storage: registry.Memory()})
	if err != nil {
		t.Fatal(err)
	}
	key, keys := trustedKey(t)
	_, otherKeys := trustedKey(t)
	a := registrytest.Artifacts(1, "prod", 1)[0]
	sum, err := rc.Publish(ctx, registry.PublishRequest{Prefix: "registry.example/configpub", Artifacts: []registry.Artifact{a}, Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	ref := sum.Results[0].Ref()
	id := bundle.Identity{Host: a.Host, ServiceID: a.ServiceID, EnvTag: a.EnvTag}

	got, err := (&ocipull.Puller{Registry: rc, Keys: keys, ManifestKeys: keys, Identity: id}).PullVerified(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !got.SignatureVerified || got.Ref != ref || got.LayerDigest != a.ArtifactDigest || string(got.Values) != string(a.Values) ||
		got.Annotations[bundle.AnnotationSnapshotID] != a.SnapshotID {
		t.Fatalf("got %+v, want the published artifact %s with a verified signature", got, ref)
	}

	other := id
	other.ServiceID = "someone-else"
	missing := "registry.example/configpub/prod/nobody/none@" + a.ArtifactDigest
	for _, tc := range []struct {
		name   string
		p      ocipull.Puller
		ref    string
		reason client.Reason // "" = not a verification verdict
	}{
		{"another identity", ocipull.Puller{Registry: rc, Keys: keys, ManifestKeys: keys, Identity: other}, ref, client.ReasonIdentityMismatch},
		{"untrusted key", ocipull.Puller{Registry: rc, Keys: otherKeys, ManifestKeys: keys, Identity: id}, ref, client.ReasonUnsignedArtifact},
		{"nothing at the digest", ocipull.Puller{Registry: rc, Keys: keys, ManifestKeys: keys, Identity: id}, missing, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.p.PullVerified(ctx, tc.ref)
			var ve *client.VerificationError
			switch {
			case err == nil:
				t.Fatal("got no error")
			case tc.reason == "" && errors.As(err, &ve):
				t.Fatalf("got verification error %v, want a pull failure", err)
			case tc.reason != "" && (!errors.As(err, &ve) || ve.Reason != tc.reason):
				t.Fatalf("got %v, want a verification error with reason %s", err, tc.reason)
			}
		})
	}
}

// TestPullVerifiedCarriesTheRegistrysDate: the artifact pulled from a
// registry over HTTP carries the Date of the registry's answers (its
// clock, here set apart from the wall clock), which the client needs to
// name its own clock when it refuses a lease by it alone (CLOCK_SKEW); one
// read from a registry.Storage has none.
func TestPullVerifiedCarriesTheRegistrysDate(t *testing.T) {
	ctx := context.Background()
	regClock := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)
	reg := registrytest.New(t, registrytest.Options{Wrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Date", regClock.Format(http.TimeFormat))
			h.ServeHTTP(w, r)
		})
	}})
	key, keys := trustedKey(t)
	a := registrytest.Artifacts(1, "prod", 1)[0]
	id := bundle.Identity{Host: a.Host, ServiceID: a.ServiceID, EnvTag: a.EnvTag}
	for _, tc := range []struct {
		name   string
		opts   registry.Options
		prefix string
		want   time.Time
	}{
		{"over HTTP", registry.Options{PlainHTTP: true}, reg.Host + "/configpub", regClock},
		{"from a storage", registry.Options{Storage: registry.Memory()}, "registry.example/configpub", time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, err := registry.New(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := rc.Publish(ctx, registry.PublishRequest{Prefix: tc.prefix, Artifacts: []registry.Artifact{a}, Signer: key})
			if err != nil {
				t.Fatal(err)
			}
			got, err := (&ocipull.Puller{Registry: rc, Keys: keys, ManifestKeys: keys, Identity: id}).PullVerified(ctx, sum.Results[0].Ref())
			if err != nil {
				t.Fatal(err)
			}
			if !got.Date.Equal(tc.want) {
				t.Fatalf("Date %s, want %s", got.Date, tc.want)
			}
		})
	}
}

// TestJunkReferrersDoNotCrowdOutTheGenuineManifest attaches to a published
// artifact in an in-process Distribution a genuine delivery manifest and
// then twelve referrers of the delivery-manifest type with huge sequence
// annotations (what anyone with push access can attach): eight naming the
// trusted manifest key with a signature that does not verify, four signed
// by another key. A Puller with ManifestKeys hands over the genuine one
// only; a Puller without them is refused with ErrNoManifestKeys before any
// request (it handed over the eight newest junk referrers by their
// unsigned annotations, never the genuine manifest).
func TestJunkReferrersDoNotCrowdOutTheGenuineManifest(t *testing.T) {
	ctx := context.Background()
	reg := registrytest.New(t, registrytest.Options{})
	rc, err := registry.New(registry.Options{PlainHTTP: true, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	cosignKey, keys := trustedKey(t)
	manifestKey, manifestKeys := trustedKey(t)
	junkKey, _ := trustedKey(t)
	a := registrytest.Artifacts(1, "prod", 1)[0]
	sum, err := rc.Publish(ctx, registry.PublishRequest{Prefix: reg.Host + "/configpub", Artifacts: []registry.Artifact{a}, Signer: cosignKey})
	if err != nil {
		t.Fatal(err)
	}
	ref := sum.Results[0].Ref()
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	genuine := signedManifest(t, manifestKey, 3, at, "genuine")
	if _, err := rc.AttachDeliveryManifest(ctx, ref, genuine); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		junk := signedManifest(t, junkKey, 1<<62+int64(i), at.Add(time.Duration(i)*time.Minute), "junk-"+strconv.Itoa(i))
		if i < 8 {
			junk.KeyID = manifestKeys[0].ID // names the trusted key, signed by another
		}
		if _, err := rc.AttachDeliveryManifest(ctx, ref, junk); err != nil {
			t.Fatal(err)
		}
	}
	id := bundle.Identity{Host: a.Host, ServiceID: a.ServiceID, EnvTag: a.EnvTag}

	got, err := (&ocipull.Puller{Registry: rc, Keys: keys, ManifestKeys: manifestKeys, Identity: id}).PullVerified(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Manifests) != 1 || string(got.Manifests[0].Bytes) != string(genuine.Manifest) {
		names := make([]string, len(got.Manifests))
		for i, m := range got.Manifests {
			names[i] = string(m.Bytes)
		}
		t.Fatalf("with ManifestKeys: handed over %q, want the genuine manifest only", names)
	}

	reg.Reset()
	got, err = (&ocipull.Puller{Registry: rc, Keys: keys, Identity: id}).PullVerified(ctx, ref)
	var ve *client.VerificationError
	switch {
	case err == nil:
		t.Fatalf("without ManifestKeys: got %d manifests and no error, want ErrNoManifestKeys", len(got.Manifests))
	case !errors.Is(err, ocipull.ErrNoManifestKeys) || errors.As(err, &ve):
		t.Fatalf("without ManifestKeys: got %v, want ErrNoManifestKeys (not a verdict on the artifact)", err)
	case reg.Total() != 0:
		t.Fatalf("without ManifestKeys: %d registry requests, want none", reg.Total())
	}
}

// signedManifest is a delivery manifest (not a complete one: only what
// the registry reads) signed by key, with its sequence and issuedAt in the
// signed bytes and the annotations.
func signedManifest(t *testing.T, key *ecdsa.PrivateKey, seq int64, issued time.Time, note string) registry.SignedDeliveryManifest {
	t.Helper()
	at := issued.Format(time.RFC3339)
	b := []byte(`{"issuedAt":"` + at + `","note":"` + note + `","sequence":` + strconv.FormatInt(seq, 10) + `}`)
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
