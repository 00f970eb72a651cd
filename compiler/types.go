package compiler

import (
	"strconv"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/render"
)

// Spec types of the source kinds, decoded after schema validation. Field
// names are the schema names (schemas/source/*.json).

type repositorySpec struct {
	SchemaVersion           int                      `json:"schemaVersion"`
	CompatibilityGeneration int64                    `json:"compatibilityGeneration"`
	RevocationEpoch         int64                    `json:"revocationEpoch"`
	ProtectedRef            string                   `json:"protectedRef"`
	LeaseProfiles           map[string]leaseProfile  `json:"leaseProfiles"`
	Ceilings                map[string]*render.Value `json:"ceilings"`
}

type leaseProfile struct {
	ValidFor     string `json:"validFor"`
	RefreshAfter string `json:"refreshAfter"`
	// RenewBefore: a release re-issues a snapshot of this profile whose
	// window ends within RenewBefore of its createdAt ("" = 0).
	RenewBefore string `json:"renewBefore"`
	// RenewSpread spreads those renewals host by host: a host's snapshots
	// are re-issued at the host's last renewal time (one every
	// RenewSpread, at the host's own offset) before RenewBefore of their
	// window remains (renewal; "" = 0).
	RenewSpread string `json:"renewSpread"`
	Delivery    struct {
		RefreshAfter string `json:"refreshAfter"`
		ExpiresAfter string `json:"expiresAfter"`
	} `json:"delivery"`
}

type environmentSpec struct {
	Settings      map[string]*render.Value `json:"settings"`
	Activation    string                   `json:"activation"`
	FreezeWindows []bundle.FreezeWindow    `json:"freezeWindows"`
	HealthGate    *bundle.HealthGate       `json:"healthGate"`
}

type hostSpec struct {
	Tenant string `json:"tenant"`
	Owner  string `json:"owner"`
}

type modelSpec struct {
	Host            string `json:"host"`
	Provider        string `json:"provider"`
	Model           string `json:"model"`
	CredentialRef   string `json:"credentialRef"`
	ContextWindow   int64  `json:"contextWindow"`
	MaxOutputTokens int64  `json:"maxOutputTokens"`
}

type toolSpec struct {
	Host        string `json:"host"`
	Description string `json:"description"`
	Gateway     string `json:"gateway"`
	Endpoint    *struct {
		ServiceID string `json:"serviceId"`
		Method    string `json:"method"`
		Path      string `json:"path"`
	} `json:"endpoint"`
	Workflow *struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"workflow"`
	InputSchema *render.Value `json:"inputSchema"`
	Approval    string        `json:"approval"`
}

type skillSpec struct {
	Host         string   `json:"host"`
	Description  string   `json:"description"`
	Instructions string   `json:"instructions"`
	Tools        []string `json:"tools"`
}

type retrievalProfile struct {
	Name            string `json:"name"`
	TopK            int64  `json:"topK"`
	MaxResultTokens int64  `json:"maxResultTokens"`
	GraphBehavior   string `json:"graphBehavior"`
	Reranker        string `json:"reranker"`
}

type knowledgeBaseSpec struct {
	Host          string `json:"host"`
	Owner         string `json:"owner"`
	CredentialRef string `json:"credentialRef"`
	Index         struct {
		Engine         string `json:"engine"`
		Shards         int64  `json:"shards"`
		EmbeddingModel string `json:"embeddingModel"`
	} `json:"index"`
	IndexGenerations  []int64            `json:"indexGenerations"`
	RetrievalProfiles []retrievalProfile `json:"retrievalProfiles"`
	Limits            struct {
		QueriesPerMinute     int64 `json:"queriesPerMinute"`
		MaxIngestBytesPerDay int64 `json:"maxIngestBytesPerDay"`
	} `json:"limits"`
}

type agentSpec struct {
	Host       string `json:"host"`
	Definition struct {
		ID      string `json:"id"`
		Version string `json:"version"`
		Profile string `json:"profile"`
	} `json:"definition"`
	Prompt string `json:"prompt"`
	Model  struct {
		Alias               string   `json:"alias"`
		MaxOutputTokens     int64    `json:"maxOutputTokens"`
		Temperature         *float64 `json:"temperature"`
		MaxToolCallsPerTurn int64    `json:"maxToolCallsPerTurn"`
	} `json:"model"`
	Tools     []string `json:"tools"`
	Skills    []string `json:"skills"`
	Knowledge []struct {
		KnowledgeBase    string `json:"knowledgeBase"`
		RetrievalProfile string `json:"retrievalProfile"`
	} `json:"knowledge"`
	Execution struct {
		Placement        string   `json:"placement"`
		ApprovalRequired []string `json:"approvalRequired"`
	} `json:"execution"`
	Memory struct {
		Mode          string `json:"mode"`
		RetentionDays int64  `json:"retentionDays"`
	} `json:"memory"`
	DataBoundary struct {
		Region         string   `json:"region"`
		PIIAllowed     bool     `json:"piiAllowed"`
		AllowedTenants []string `json:"allowedTenants"`
	} `json:"dataBoundary"`
	Channels []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"channels"`
	Gateway struct {
		Name       string `json:"name"`
		Delegation *struct {
			MaxDepth int64    `json:"maxDepth"`
			Scopes   []string `json:"scopes"`
		} `json:"delegation"`
	} `json:"gateway"`
	Session struct {
		MaxLifetime   string `json:"maxLifetime"`
		MaxConcurrent int64  `json:"maxConcurrent"`
	} `json:"session"`
	Limits struct {
		RequestsPerMinute int64 `json:"requestsPerMinute"`
		TokensPerDay      int64 `json:"tokensPerDay"`
	} `json:"limits"`
}

type gatewaySpec struct {
	Host    string `json:"host"`
	Issuers []struct {
		Issuer         string   `json:"issuer"`
		Audiences      []string `json:"audiences"`
		RequiredClaims []string `json:"requiredClaims"`
		SigningKeyRef  string   `json:"signingKeyRef"`
	} `json:"issuers"`
	Routing struct {
		Timeout       string `json:"timeout"`
		Retries       int64  `json:"retries"`
		LoadBalancing string `json:"loadBalancing"`
	} `json:"routing"`
	Budgets struct {
		TokensPerDay int64    `json:"tokensPerDay"`
		CostPerDay   *float64 `json:"costPerDay"`
	} `json:"budgets"`
	RateLimits struct {
		RequestsPerMinute int64  `json:"requestsPerMinute"`
		Burst             *int64 `json:"burst"`
	} `json:"rateLimits"`
}

type workflowVersion struct {
	Version    string        `json:"version"`
	State      string        `json:"state"`
	Definition *render.Value `json:"definition"`
	Limits     struct {
		Timeout     string   `json:"timeout"`
		Retries     int64    `json:"retries"`
		Concurrency int64    `json:"concurrency"`
		CostCeiling *float64 `json:"costCeiling"`
	} `json:"limits"`
	Approvals []string `json:"approvals"`
	Agents    []string `json:"agents"`
	Runner    struct {
		Sandbox string `json:"sandbox"`
		Image   string `json:"image"`
	} `json:"runner"`
	Retention *struct {
		ArtifactsDays int64 `json:"artifactsDays"`
	} `json:"retention"`
}

type workflowSpec struct {
	Host     string            `json:"host"`
	WfDefID  string            `json:"wfDefId"`
	Versions []workflowVersion `json:"versions"`
}

type targetSpec struct {
	Host      string `json:"host"`
	ServiceID string `json:"serviceId"`
	EnvTag    string `json:"envTag"`
	Audience  string `json:"audience"`
	Subject   struct {
		Kind string `json:"kind"`
		Name string `json:"name"`
	} `json:"subject"`
	LeaseProfile string        `json:"leaseProfile"`
	Settings     *render.Value `json:"settings"`
}

func itoa(i int) string { return strconv.Itoa(i) }

// idx returns the path segment of list item i.
func idx(i int) string { return "[" + strconv.Itoa(i) + "]" }
