package bundle

// MaxEvidenceBytes bounds a POST /configs/evidence body: the client refuses
// to send more and the Config Server's default limit is this.
const MaxEvidenceBytes = 16 << 10

// Evidence outcomes a runtime reports (POST /configs/evidence accepts only
// these two).
const (
	OutcomeApplied  = "APPLIED"
	OutcomeRejected = "REJECTED"
)

// EvidenceReport is the JSON body of POST /configs/evidence: a runtime's
// report, for its own identity and audience, that it applied or rejected
// a snapshot, with what it runs and keeps as last-known-good afterwards.
// Empty optional fields are omitted; ObservedAt is RFC 3339 (nanoseconds
// allowed).
type EvidenceReport struct {
	Host                    string `json:"host"`
	ServiceID               string `json:"serviceId"`
	EnvTag                  string `json:"envTag"`
	Audience                string `json:"audience"`
	Outcome                 string `json:"outcome"`
	Reason                  string `json:"reason"`
	SnapshotID              string `json:"snapshotId,omitempty"`
	PublicationID           string `json:"publicationId,omitempty"`
	ReleaseVersion          int64  `json:"releaseVersion,omitempty"`
	Sequence                int64  `json:"sequence,omitempty"`
	CurrentSnapshotID       string `json:"currentSnapshotId,omitempty"`
	LastKnownGoodSnapshotID string `json:"lastKnownGoodSnapshotId,omitempty"`
	ArtifactDigest          string `json:"artifactDigest,omitempty"`
	ContentDigest           string `json:"contentDigest,omitempty"`
	PolicyDigest            string `json:"policyDigest,omitempty"`
	ObservedAt              string `json:"observedAt"`
}
