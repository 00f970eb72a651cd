package bundle

// Audiences a target can be compiled for.
const (
	AudienceAgent     = "agent"
	AudienceGateway   = "gateway"
	AudienceKnowledge = "knowledge"
)

// Namespace returns the values.yml key that holds an audience's policy
// ("agentPolicy", "gatewayPolicy", "knowledgePolicy"), or "" for an unknown
// audience.
func Namespace(audience string) string {
	switch audience {
	case AudienceAgent:
		return "agentPolicy"
	case AudienceGateway:
		return "gatewayPolicy"
	case AudienceKnowledge:
		return "knowledgePolicy"
	}
	return ""
}

// SchemaVersion is the runtimePolicy schema version this module writes and
// the only one its client accepts.
const SchemaVersion = 1

// RuntimePolicy is the envelope that opens every values.yml. Field order is
// normative and is the order the renderer writes. Times are UTC
// RFC 3339 strings; ids are lowercase UUID strings.
type RuntimePolicy struct {
	PublicationID           string `json:"publicationId" yaml:"publicationId"`
	ReleaseVersion          int64  `json:"releaseVersion" yaml:"releaseVersion"`
	PolicySnapshotID        string `json:"policySnapshotId" yaml:"policySnapshotId"`
	PolicyVersion           int64  `json:"policyVersion" yaml:"policyVersion"`
	PolicyDigest            string `json:"policyDigest" yaml:"policyDigest"`
	ContentDigest           string `json:"contentDigest" yaml:"contentDigest"`
	Audience                string `json:"audience" yaml:"audience"`
	Host                    string `json:"host" yaml:"host"`
	ServiceID               string `json:"serviceId" yaml:"serviceId"`
	EnvTag                  string `json:"envTag" yaml:"envTag"`
	SourceEventSequence     int64  `json:"sourceEventSequence" yaml:"sourceEventSequence"`
	SchemaVersion           int    `json:"schemaVersion" yaml:"schemaVersion"`
	CreatedAt               string `json:"createdAt" yaml:"createdAt"`
	ValidFrom               string `json:"validFrom" yaml:"validFrom"`
	RefreshAfter            string `json:"refreshAfter" yaml:"refreshAfter"`
	ExpiresAt               string `json:"expiresAt" yaml:"expiresAt"`
	RevocationEpoch         int64  `json:"revocationEpoch" yaml:"revocationEpoch"`
	CompatibilityGeneration int64  `json:"compatibilityGeneration" yaml:"compatibilityGeneration"`
}

// Identity is a runtime's lookup identity: the complete key of a current
// pointer.
type Identity struct {
	Host      string `json:"host"`
	ServiceID string `json:"serviceId"`
	EnvTag    string `json:"envTag"`
}

// String renders the identity as host/serviceId/envTag for messages.
func (id Identity) String() string { return id.Host + "/" + id.ServiceID + "/" + id.EnvTag }
