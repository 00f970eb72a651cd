package bundle

import (
	"strings"
	"testing"
)

func sampleManifest() *DeliveryManifest {
	return &DeliveryManifest{
		Type: DeliveryManifestType, Host: "dev.lightapi.net", ServiceID: "svc", EnvTag: "dev",
		Audience: AudienceAgent, SnapshotID: "0190a0b0-0000-8000-8000-000000000001",
		PublicationID: "0190a0b0-0000-8000-8000-000000000002", PolicySnapshotID: "0190a0b0-0000-8000-8000-000000000003",
		ReleaseVersion: 2, ArtifactDigest: "sha256:aa", ContentDigest: "sha256:bb", PolicyDigest: "sha256:cc",
		PropertySetDigest: "sha256:dd", SchemaVersion: 1, CompatibilityGeneration: 1, RevocationEpoch: 0,
		Sequence: 3, IssuedAt: "2026-11-29T13:00:00Z", ValidFrom: "2026-11-29T13:00:00Z",
		RefreshAfter: "2026-11-29T13:05:00Z", ExpiresAt: "2026-11-29T13:15:00Z",
	}
}

func TestDeliveryManifestRoundTrip(t *testing.T) {
	m := sampleManifest()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"artifactDigest":"sha256:aa","audience":"agent",`) {
		t.Errorf("not canonical (sorted keys): %s", b)
	}
	got, err := ParseDeliveryManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	if *got != *m {
		t.Errorf("got %+v, want %+v", got, m)
	}
	if got.Identity() != (Identity{Host: "dev.lightapi.net", ServiceID: "svc", EnvTag: "dev"}) {
		t.Errorf("identity %v", got.Identity())
	}
}

func TestParseDeliveryManifestRefuses(t *testing.T) {
	b, err := sampleManifest().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	wrongType := sampleManifest()
	wrongType.Type = "other"
	wb, _ := wrongType.Marshal()
	badPhase := sampleManifest()
	badPhase.Phase = "current"
	pb, _ := badPhase.Marshal()
	tests := []struct {
		name, in, want string
	}{
		{"unknown phase", string(pb), "phase"},
		{"unknown field", strings.Replace(s, `{`, `{"aaa":1,`, 1), "unknown field"},
		{"not canonical", strings.Replace(s, `{"artifactDigest"`, `{ "artifactDigest"`, 1), "not canonical"},
		{"trailing data", s + `{}`, "trailing data"},
		{"wrong type", string(wb), "type"},
		{"truncated", s[:len(s)-3], "parse delivery manifest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseDeliveryManifest([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestCandidatePhaseIsSignedAndCurrentBytesUnchanged: a current-phase
// manifest's canonical bytes carry no phase (what was signed before the
// field existed still parses to the same struct), a candidate manifest's
// carry "phase":"candidate", and the two differ in the signed bytes.
func TestCandidatePhaseIsSignedAndCurrentBytesUnchanged(t *testing.T) {
	cur, err := sampleManifest().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cur), "phase") {
		t.Fatalf("current-phase manifest carries a phase: %s", cur)
	}
	c := sampleManifest()
	c.Phase = PhaseCandidate
	cb, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cb), `"phase":"candidate"`) {
		t.Fatalf("candidate manifest lacks its phase: %s", cb)
	}
	got, err := ParseDeliveryManifest(cb)
	if err != nil || !got.IsCandidate() {
		t.Fatalf("parse candidate manifest: %+v, %v", got, err)
	}
	if got, err := ParseDeliveryManifest(cur); err != nil || got.IsCandidate() {
		t.Fatalf("parse current manifest: %+v, %v", got, err)
	}
}

func TestNamespace(t *testing.T) {
	for aud, want := range map[string]string{AudienceAgent: "agentPolicy", AudienceGateway: "gatewayPolicy", AudienceKnowledge: "knowledgePolicy", "x": ""} {
		if got := Namespace(aud); got != want {
			t.Errorf("Namespace(%q) = %q, want %q", aud, got, want)
		}
	}
}
