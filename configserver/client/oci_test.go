package client_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

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
	}
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
		{"envelope expired", func(w *world, a *client.OCIArtifact) {
			s := w.spec(2)
			s.envFrom, s.envTo = t0.AddDate(0, -2, 0), t0.AddDate(0, 0, -1)
			*a = *ociArtifact(w.build(s))
		}, client.ReasonExpired},
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

func TestLoadOCIPullFailureIsUnavailable(t *testing.T) {
	w := newWorld(t)
	ev, err := w.client().LoadOCI(context.Background(), stubPuller{}, "registry.example/x@sha256:00")
	if ev.Outcome != client.OutcomeUnavailable || !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("got %s %v, want UNAVAILABLE", ev.Outcome, err)
	}
}
