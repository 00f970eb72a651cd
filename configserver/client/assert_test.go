package client_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
)

// TestVerifyPeerAssertionRules: a receiver with an empty accepted list
// admits a caller only by its signed delivery manifest; each rule of
// VerifyPeer refuses with its own reason.
func TestVerifyPeerAssertionRules(t *testing.T) {
	w := newWorld(t)
	w.srv.set(w.build(w.spec(1)), nil)
	recv := w.client()
	mustLoad(t, recv, client.OutcomeApplied)
	none := func(*client.Snapshot) ([]client.AcceptedPublication, error) { return nil, nil }
	self := func(*http.Request) (bundle.Identity, error) { return w.id, nil }
	other := newKeyPair(t)

	headers := func(r *release) http.Header {
		h := http.Header{}
		h.Set(client.HeaderPeerPublicationID, r.Manifest.PublicationID)
		h.Set(client.HeaderPeerSnapshotID, r.Manifest.PolicySnapshotID)
		h.Set(client.HeaderPeerPolicyDigest, r.Manifest.PolicyDigest)
		h.Set(client.HeaderPeerManifest, base64.RawURLEncoding.EncodeToString(r.ManifestBytes))
		h.Set(client.HeaderPeerManifestSignature, r.Signature)
		h.Set(client.HeaderPeerManifestKeyID, r.KeyID)
		return h
	}
	variant := func(mod func(*spec)) *release {
		s := w.spec(2)
		mod(&s)
		return w.build(s)
	}
	good := variant(func(*spec) {})
	for _, tc := range []struct {
		name   string
		h      http.Header
		caller client.CallerFunc
		want   client.Reason // "" = admitted by assertion
	}{
		{"valid", headers(good), self, ""},
		{"caller not authenticated", headers(good), func(*http.Request) (bundle.Identity, error) { return bundle.Identity{}, errors.New("no") }, client.ReasonCallerUnauthenticated},
		{"no caller function", headers(good), nil, client.ReasonCallerUnauthenticated},
		{"another caller", headers(good), func(*http.Request) (bundle.Identity, error) {
			return bundle.Identity{Host: w.id.Host, ServiceID: "agent-43", EnvTag: w.id.EnvTag}, nil
		}, client.ReasonPeerSubjectMismatch},
		{"revocation epoch below the receiver's", headers(variant(func(s *spec) { s.epoch = 2 })), self, client.ReasonAssertionStaleEpoch},
		{"candidate manifest", headers(variant(func(s *spec) { s.phase = bundle.PhaseCandidate })), self, client.ReasonAssertionInvalid},
		{"lease over", headers(variant(func(s *spec) { s.leaseFrom, s.leaseTo = w.clock.Now().Add(-3*time.Hour), w.clock.Now().Add(-time.Hour) })), self, client.ReasonAssertionExpired},
		{"untrusted key", headers(variant(func(s *spec) { s.signer = &other })), self, client.ReasonAssertionUntrustedKey},
		{"signed by the trusted key's id, not its key", headers(variant(func(s *spec) { s.signer = &other; s.keyID = w.key.trusted.ID })), self, client.ReasonAssertionForged},
		{"headers name another digest", func() http.Header {
			h := headers(good)
			h.Set(client.HeaderPeerPolicyDigest, digestOf("other"))
			return h
		}(), self, client.ReasonAssertionMismatch},
		{"signature missing", func() http.Header { h := headers(good); h.Del(client.HeaderPeerManifestSignature); return h }(), self, client.ReasonAssertionInvalid},
		{"manifest not base64url", func() http.Header { h := headers(good); h.Set(client.HeaderPeerManifest, "!!"); return h }(), self, client.ReasonAssertionInvalid},
		{"no assertion", func() http.Header {
			h := headers(good)
			h.Del(client.HeaderPeerManifest)
			h.Del(client.HeaderPeerManifestSignature)
			h.Del(client.HeaderPeerManifestKeyID)
			return h
		}(), self, client.ReasonUnknownPublication},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header = tc.h
			v, err := recv.VerifyPeer(r, client.PeerOptions{Accepted: none, Caller: tc.caller})
			var pe *client.PeerError
			switch {
			case tc.want == "" && (err != nil || v.Via != client.ViaAssertion || v.Manifest.SnapshotID != good.Manifest.SnapshotID):
				t.Fatalf("got %+v, %v; want admitted by assertion", v, err)
			case tc.want != "" && (!errors.As(err, &pe) || pe.Reason != tc.want || !errors.Is(err, client.ErrPublicationRejected)):
				t.Fatalf("got %+v, %v; want %s", v, err, tc.want)
			}
		})
	}
	if _, err := recv.PeerMiddleware(client.PeerOptions{}, http.NotFoundHandler()); err == nil {
		t.Fatal("PeerMiddleware without Caller: want an error")
	}
}
