package client_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
)

// ociArtifact returns what a puller hands over for r (OCI annotations).
func ociArtifact(r *release) *client.OCIArtifact {
	return &client.OCIArtifact{
		Ref:         "registry.example/prod/payments.example/agent-42@sha256:" + r.ArtifactDigest()[7:],
		LayerDigest: r.ArtifactDigest(),
		Values:      append([]byte(nil), r.Values...),
		Annotations: map[string]string{
			bundle.AnnotationHost:           r.Envelope.Host,
			bundle.AnnotationServiceID:      r.Envelope.ServiceID,
			bundle.AnnotationEnvTag:         r.Envelope.EnvTag,
			bundle.AnnotationAudience:       r.Envelope.Audience,
			bundle.AnnotationSnapshotID:     r.Manifest.SnapshotID,
			bundle.AnnotationPublicationID:  r.Envelope.PublicationID,
			bundle.AnnotationPolicyDigest:   r.Envelope.PolicyDigest,
			bundle.AnnotationContentDigest:  r.Envelope.ContentDigest,
			bundle.AnnotationReleaseVersion: strconv.FormatInt(r.Envelope.ReleaseVersion, 10),
		},
		SignatureVerified: true,
		Manifests:         []client.SignedManifest{signedOf(r)},
	}
}

// signedOf returns r's signed delivery manifest as a registry referrer or
// the Config Server carries it.
func signedOf(r *release) client.SignedManifest {
	return client.SignedManifest{Bytes: r.ManifestBytes, Signature: r.Signature, KeyID: r.KeyID}
}

type stubPuller struct{ a *client.OCIArtifact }

func (p stubPuller) PullVerified(context.Context, string) (*client.OCIArtifact, error) {
	if p.a == nil {
		return nil, errors.New("manifest unknown")
	}
	return p.a, nil
}

func TestApplyOCI(t *testing.T) {
	cases := []struct {
		name   string
		mod    func(w *world, a *client.OCIArtifact)
		reason client.Reason
	}{
		{"verified artifact", func(*world, *client.OCIArtifact) {}, ""},
		{"signature not verified", func(_ *world, a *client.OCIArtifact) { a.SignatureVerified = false }, client.ReasonUnsignedArtifact},
		{"layer byte flipped", func(_ *world, a *client.OCIArtifact) { a.Values[10] ^= 1 }, client.ReasonDigestMismatch},
		{"annotation from another identity", func(_ *world, a *client.OCIArtifact) { a.Annotations[bundle.AnnotationHost] = "billing.example" }, client.ReasonManifestMismatch},
		{"annotation missing", func(_ *world, a *client.OCIArtifact) { delete(a.Annotations, bundle.AnnotationPolicyDigest) }, client.ReasonMissingField},
		{"envelope of another identity", func(w *world, a *client.OCIArtifact) {
			s := w.spec(2)
			s.envHost = "billing.example"
			*a = *ociArtifact(w.build(s))
		}, client.ReasonIdentityMismatch},
		{"activated outside the envelope window", func(w *world, a *client.OCIArtifact) {
			s := w.spec(2)
			s.envFrom, s.envTo = t0.AddDate(0, -2, 0), t0.AddDate(0, 0, -1)
			*a = *ociArtifact(w.build(s))
		}, client.ReasonOutsideActivationWindow},
		{"no delivery manifest", func(_ *world, a *client.OCIArtifact) { a.Manifests = nil }, client.ReasonNoDeliveryManifest},
		{"manifest lease expired", func(w *world, a *client.OCIArtifact) {
			s := w.spec(2)
			s.leaseFrom, s.leaseTo = t0.Add(-3*time.Hour), t0.Add(-time.Hour)
			a.Manifests = []client.SignedManifest{signedOf(w.build(s))}
		}, client.ReasonExpired},
		{"manifest of another artifact", func(w *world, a *client.OCIArtifact) {
			a.Manifests = []client.SignedManifest{signedOf(w.build(w.spec(3)))}
		}, client.ReasonManifestMismatch},
		{"manifest signed by an untrusted key", func(w *world, a *client.OCIArtifact) {
			s := w.spec(2)
			other := newKeyPair(w.t)
			s.signer = &other
			a.Manifests = []client.SignedManifest{signedOf(w.build(s))}
		}, client.ReasonUntrustedKey},
		{"manifest signature flipped", func(_ *world, a *client.OCIArtifact) {
			a.Manifests[0].Bytes = append([]byte(nil), a.Manifests[0].Bytes...)
			a.Manifests[0].Bytes[5] ^= 1
		}, client.ReasonSignatureInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			c := w.client()
			a := ociArtifact(w.build(w.spec(2)))
			tc.mod(w, a)
			ev, err := c.LoadOCI(context.Background(), stubPuller{a}, a.Ref)
			if tc.reason == "" {
				if err != nil || ev.Outcome != client.OutcomeApplied || ev.Source != client.SourceOCI {
					t.Fatalf("got %+v %v, want APPLIED from oci", ev, err)
				}
				s, err := c.Current()
				if err != nil || s.SnapshotID != a.Annotations[bundle.AnnotationSnapshotID] {
					t.Fatalf("Current: got %v, want the OCI snapshot", err)
				}
				return
			}
			if ev.Outcome != client.OutcomeRejected || ev.Reason != tc.reason {
				t.Fatalf("got %s %s (%s), want REJECTED %s", ev.Outcome, ev.Reason, ev.Detail, tc.reason)
			}
		})
	}
}

// TestApplyOCIOldArtifactNeedsACurrentManifest: after release 3 is
// applied, release 2's artifact — validly signed in the registry, with the
// delivery manifest it once had — is refused (a replayed manifest), and so
// is the same artifact with no manifest; with a current manifest for it (a
// rollback re-signed at a higher sequence) it is applied. Months later,
// without lease renewals, the manifest has expired and even that artifact
// is refused.
func TestApplyOCIOldArtifactNeedsACurrentManifest(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	ctx := context.Background()
	if ev, err := c.ApplyOCI(ctx, ociArtifact(w.build(w.spec(3)))); err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("release 3: %+v %v", ev, err)
	}
	old := w.build(w.spec(2))
	for _, tc := range []struct {
		name   string
		ms     []client.SignedManifest
		reason client.Reason
	}{
		{"its own old manifest", []client.SignedManifest{signedOf(old)}, client.ReasonSequenceRegression},
		{"no manifest", nil, client.ReasonNoDeliveryManifest},
	} {
		a := ociArtifact(old)
		a.Manifests = tc.ms
		ev, err := c.ApplyOCI(ctx, a)
		if err == nil || ev.Outcome != client.OutcomeRejected || ev.Reason != tc.reason {
			t.Fatalf("old artifact with %s: got %s %s (%v), want REJECTED %s", tc.name, ev.Outcome, ev.Reason, err, tc.reason)
		}
		if cur, _ := c.Current(); cur == nil || cur.Envelope.ReleaseVersion != 3 {
			t.Fatalf("old artifact with %s: release 3 is no longer current", tc.name)
		}
	}
	s := w.spec(2)
	s.sequence, s.issuedAt = 4, w.clock.Now()
	rollback := w.build(s)
	a := ociArtifact(old)
	a.Manifests = []client.SignedManifest{signedOf(old), signedOf(rollback)}
	ev, err := c.ApplyOCI(ctx, a)
	if err != nil || ev.Outcome != client.OutcomeApplied || ev.Sequence != 4 {
		t.Fatalf("old artifact with a current manifest: got %+v %v, want APPLIED at sequence 4", ev, err)
	}
	if cur, err := c.Current(); err != nil || cur.Envelope.ReleaseVersion != 2 || cur.Source != client.SourceOCI {
		t.Fatalf("Current after the rollback: %v %v", cur, err)
	}
	w.clock.Advance(90 * 24 * time.Hour)
	c2 := w.client()
	ev, err = c2.ApplyOCI(ctx, a)
	if err == nil || ev.Reason != client.ReasonExpired {
		t.Fatalf("three months later without renewals: got %s %s %v, want REJECTED EXPIRED", ev.Outcome, ev.Reason, err)
	}
}

// TestLoadOCIManifestFromConfigServer: an artifact without a referrer is
// applied with the Config Server's current manifest (HEAD /configs), and
// refused when the server's current manifest is for another snapshot.
func TestLoadOCIManifestFromConfigServer(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r2 := w.build(w.spec(2))
	a := ociArtifact(r2)
	a.Manifests = nil
	w.srv.set(w.build(w.spec(3)), nil)
	ev, err := w.client().LoadOCI(ctx, stubPuller{a}, a.Ref)
	if err == nil || ev.Reason != client.ReasonManifestMismatch || ev.SnapshotID != r2.Manifest.SnapshotID {
		t.Fatalf("server's manifest for release 3: got %s %s %v naming snapshot %s, want REJECTED MANIFEST_MISMATCH naming the artifact's %s",
			ev.Outcome, ev.Reason, err, ev.SnapshotID, r2.Manifest.SnapshotID)
	}
	w.srv.set(r2, nil)
	a.Manifests = nil
	ev, err = w.client().LoadOCI(ctx, stubPuller{a}, a.Ref)
	if err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("server's manifest for release 2: got %+v %v, want APPLIED", ev, err)
	}
}

func TestLoadOCIPullFailureIsUnavailable(t *testing.T) {
	w := newWorld(t)
	ev, err := w.client().LoadOCI(context.Background(), stubPuller{}, "registry.example/x@sha256:00")
	if ev.Outcome != client.OutcomeUnavailable || !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("got %s %v, want UNAVAILABLE", ev.Outcome, err)
	}
}

// TestLoadOCIKeepsTheLastKnownGoodAcrossARestart: a runtime that pulled a
// snapshot from the registry and is restarted over its cache directory
// while the registry cannot be reached, or with an artifact it refuses,
// runs on its last-known-good until the lease ends, as one loading from a
// Config Server does — it does not fail closed at once. A pull of the same
// artifact again is UNCHANGED, not a new snapshot.
func TestLoadOCIKeepsTheLastKnownGoodAcrossARestart(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r2 := w.build(w.spec(2))
	a := ociArtifact(r2)
	noServer := func(o *client.Options) { o.ServerURL = "" }
	if ev, err := w.client(noServer).LoadOCI(ctx, stubPuller{a}, a.Ref); err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("first pull: %+v %v, want APPLIED", ev, err)
	}

	down := w.client(noServer) // restarted; the registry cannot be reached
	ev, err := down.LoadOCI(ctx, stubPuller{}, a.Ref)
	if ev.Outcome != client.OutcomeUnavailable || !errors.Is(err, client.ErrUnavailable) || errors.Is(err, client.ErrNoSnapshot) {
		t.Fatalf("registry down after a restart: %s %v, want UNAVAILABLE with the last-known-good current", ev.Outcome, err)
	}
	if s, err := down.Current(); err != nil || s.SnapshotID != r2.Manifest.SnapshotID {
		t.Fatalf("current after a failed pull: %v %v, want release 2's snapshot", s, err)
	}

	refused := ociArtifact(r2)
	refused.SignatureVerified = false
	restarted := w.client(noServer)
	ev, err = restarted.ApplyOCI(ctx, refused)
	if ev.Outcome != client.OutcomeRejected || errors.Is(err, client.ErrNoSnapshot) {
		t.Fatalf("an unsigned artifact after a restart: %s %v, want REJECTED with the last-known-good current", ev.Outcome, err)
	}
	if s, err := restarted.Current(); err != nil || s.SnapshotID != r2.Manifest.SnapshotID {
		t.Fatalf("current after a refused artifact: %v %v, want release 2's snapshot", s, err)
	}
	if ev, err := w.client(noServer).ApplyOCI(ctx, ociArtifact(r2)); err != nil || ev.Outcome != client.OutcomeUnchanged {
		t.Fatalf("the same artifact after a restart: %s %v, want UNCHANGED", ev.Outcome, err)
	}
}

// TestLoadOCISupersededByTheConfigServer: a runtime with an empty cache
// pointed at an old artifact whose attached manifest is still within its
// lease is refused it when the Config Server's current manifest (verified:
// trusted key, identity, lease) names another snapshot with a higher
// sequence — the pointer moved on; without a server it has nothing to
// tell, and applies it. A rollback to the artifact (a newer manifest for
// it) applies.
func TestLoadOCISupersededByTheConfigServer(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	r2, r3 := w.build(w.spec(2)), w.build(w.spec(3))
	if r3.Manifest.Sequence <= r2.Manifest.Sequence {
		t.Fatalf("fixture: release 3's sequence %d is not above release 2's %d", r3.Manifest.Sequence, r2.Manifest.Sequence)
	}
	a := ociArtifact(r2)
	w.srv.set(r3, nil)
	ev, err := w.client().LoadOCI(ctx, stubPuller{a}, a.Ref)
	if err == nil || ev.Reason != client.ReasonSequenceRegression {
		t.Fatalf("old artifact while the server's current is release 3: %s %s %v, want REJECTED SEQUENCE_REGRESSION", ev.Outcome, ev.Reason, err)
	}
	other := newWorld(t)
	other.key = w.key
	if ev, err := other.client(func(o *client.Options) { o.ServerURL = "" }).LoadOCI(ctx, stubPuller{ociArtifact(r2)}, a.Ref); err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("the same artifact without a server: %s %s %v, want APPLIED", ev.Outcome, ev.Reason, err)
	}
	// Rolled back to release 2: the server's current manifest names it
	// again, with a sequence above release 3's.
	back := w.spec(2)
	back.sequence = r3.Manifest.Sequence + 1
	w.srv.set(w.build(back), nil)
	if ev, err := w.client().LoadOCI(ctx, stubPuller{ociArtifact(r2)}, a.Ref); err != nil || ev.Outcome != client.OutcomeApplied {
		t.Fatalf("the artifact after a rollback to it: %s %s %v, want APPLIED", ev.Outcome, ev.Reason, err)
	}
}
