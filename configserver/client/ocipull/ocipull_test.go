package ocipull_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
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

	got, err := (&ocipull.Puller{Registry: rc, Keys: keys, Identity: id}).PullVerified(ctx, ref)
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
		{"another identity", ocipull.Puller{Registry: rc, Keys: keys, Identity: other}, ref, client.ReasonIdentityMismatch},
		{"untrusted key", ocipull.Puller{Registry: rc, Keys: otherKeys, Identity: id}, ref, client.ReasonUnsignedArtifact},
		{"nothing at the digest", ocipull.Puller{Registry: rc, Keys: keys, Identity: id}, missing, ""},
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
			got, err := (&ocipull.Puller{Registry: rc, Keys: keys, Identity: id}).PullVerified(ctx, sum.Results[0].Ref())
			if err != nil {
				t.Fatal(err)
			}
			if !got.Date.Equal(tc.want) {
				t.Fatalf("Date %s, want %s", got.Date, tc.want)
			}
		})
	}
}
