package bundle

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/configpub/configpub/internal/render"
	"github.com/configpub/configpub/internal/strictjson"
)

// DeliveryManifestType is the value of DeliveryManifest.Type.
const DeliveryManifestType = "configpub.dev/delivery-manifest/v1"

// DeliveryManifest is signed by the promoter at every pointer move (and at
// every lease renewal) for one target, stored with its signature, and streamed
// by the Config Server in X-Config-Manifest. Its canonical
// bytes are the RFC 8785 form of this struct; the signature is ECDSA P-256
// (ASN.1 DER, SHA-256) over exactly those bytes, base64-encoded, which is what
// `cosign verify-blob --key cosign.pub` checks.
//
// Sequence increases with every pointer move of the identity and is never
// below the move time in microseconds since the Unix epoch, so a store
// restored from a backup still issues sequences above any a runtime has
// seen; a renewal keeps the sequence and issues a later IssuedAt.
// ActivatedAt is the time of the pointer move (unchanged by renewals and by
// an epoch re-sign): a runtime checks that the envelope's activation window
// contains it. It is empty only in manifests signed before it existed.
// RevocationEpoch is authoritative: never below the envelope's.
// ValidFrom/RefreshAfter/ExpiresAt are the short rolling lease a runtime
// obeys.
//
// Phase is empty in every manifest signed at a pointer move, renewal or
// re-sign (the current phase; such manifests are byte-for-byte what they
// were before the field existed) and PhaseCandidate in a candidate manifest,
// signed when a release is staged for the candidate snapshot a runtime
// prefetches (configPhase=candidate). The signature covers it: a runtime
// loading its current configuration refuses a candidate manifest, and a
// prefetch accepts only one. For a candidate manifest, Sequence is above
// the identity's current pointer's when it was signed (a prefetch never
// raises a runtime's seen floor) and ActivatedAt is the staging time.
type DeliveryManifest struct {
	Type                    string `json:"type"`
	Host                    string `json:"host"`
	ServiceID               string `json:"serviceId"`
	EnvTag                  string `json:"envTag"`
	Audience                string `json:"audience"`
	SnapshotID              string `json:"snapshotId"`
	PublicationID           string `json:"publicationId"`
	PolicySnapshotID        string `json:"policySnapshotId"`
	ReleaseVersion          int64  `json:"releaseVersion"`
	ArtifactDigest          string `json:"artifactDigest"`
	ContentDigest           string `json:"contentDigest"`
	PolicyDigest            string `json:"policyDigest"`
	PropertySetDigest       string `json:"propertySetDigest"`
	SchemaVersion           int    `json:"schemaVersion"`
	CompatibilityGeneration int64  `json:"compatibilityGeneration"`
	RevocationEpoch         int64  `json:"revocationEpoch"`
	Sequence                int64  `json:"sequence"`
	ActivatedAt             string `json:"activatedAt,omitempty"`
	IssuedAt                string `json:"issuedAt"`
	ValidFrom               string `json:"validFrom"`
	RefreshAfter            string `json:"refreshAfter"`
	ExpiresAt               string `json:"expiresAt"`
	Phase                   string `json:"phase,omitempty"`
}

// IsCandidate reports whether m is a candidate manifest (Phase is
// PhaseCandidate).
func (m *DeliveryManifest) IsCandidate() bool { return m.Phase == PhaseCandidate }

// Identity returns the manifest's runtime identity.
func (m *DeliveryManifest) Identity() Identity {
	return Identity{Host: m.Host, ServiceID: m.ServiceID, EnvTag: m.EnvTag}
}

// Marshal returns the canonical (RFC 8785) bytes that are signed and served.
func (m *DeliveryManifest) Marshal() ([]byte, error) {
	b, err := render.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("marshal delivery manifest: %w", err)
	}
	return b, nil
}

// ParseDeliveryManifest decodes canonical delivery-manifest bytes strictly:
// unknown fields, trailing data, a wrong type, or bytes that are not already
// canonical are errors.
func ParseDeliveryManifest(b []byte) (*DeliveryManifest, error) {
	var m DeliveryManifest
	if err := strictjson.Decode(b, &m); errors.Is(err, strictjson.ErrTrailingData) {
		return nil, fmt.Errorf("parse delivery manifest: trailing data: %w", err)
	} else if err != nil {
		return nil, fmt.Errorf("parse delivery manifest: %w", err)
	}
	if m.Type != DeliveryManifestType {
		return nil, fmt.Errorf("parse delivery manifest: type %q, want %q", m.Type, DeliveryManifestType)
	}
	if m.Phase != "" && m.Phase != PhaseCandidate {
		return nil, fmt.Errorf("parse delivery manifest: phase %q, want %q or none", m.Phase, PhaseCandidate)
	}
	canon, err := m.Marshal()
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(canon, b) {
		return nil, fmt.Errorf("parse delivery manifest: bytes are not canonical JSON")
	}
	return &m, nil
}
