package scaffold

import "strings"

type document struct {
	path, kind, body string
}

// documents returns the minimal repository for one environment. Every
// value is a conservative default meant to be edited.
func documents(env string) []document {
	r := strings.NewReplacer("ENV", env)
	docs := []document{
		{"configpub.yaml", "Repository", `apiVersion: configpub.dev/v1
kind: Repository
metadata:
  name: policy
  description: Runtime policy. Every *.yaml file outside releases/ and hidden directories is a source document.
spec:
  schemaVersion: 1
  compatibilityGeneration: 1
  revocationEpoch: 0
  leaseProfiles:
    standard:
      validFor: 504h        # a compiled snapshot may be activated for three weeks
      refreshAfter: 168h
      renewBefore: 168h     # compile --renew re-issues it a week before that ends
      renewSpread: 168h     # on a day of the week of each host's own, so hosts renew on different days
      delivery:
        refreshAfter: 5m    # runtimes fetch a fresh signed lease every 5 minutes
        expiresAfter: 15m   # and fail closed 15 minutes after the last one
  ceilings:
    maxToolsPerAgent: 16
    maxSkillsPerAgent: 8
    maxOutputTokens: 8192
    maxToolCallsPerTurn: 8
    maxRequestsPerMinute: 600
    maxTokensPerDay: 1000000
    maxConcurrentSessions: 100
    maxSessionLifetime: 8h
    maxDelegationDepth: 2
    maxTopK: 20
    maxResultTokens: 4000
    maxQueriesPerMinute: 600
    maxIngestBytesPerDay: 1073741824
    maxWorkflowConcurrency: 10
    maxWorkflowRetries: 3
    maxWorkflowTimeout: 1h
`},
		{"environments/ENV.yaml", "Environment", `apiVersion: configpub.dev/v1
kind: Environment
metadata:
  name: ENV
spec:
  settings:
    agent:
      logging:
        level: INFO
`},
		{"hosts/app.example.com.yaml", "Host", `apiVersion: configpub.dev/v1
kind: Host
metadata:
  name: app.example.com
spec:
  tenant: example
  owner: platform-team
`},
		{"models/default.yaml", "ModelAlias", `apiVersion: configpub.dev/v1
kind: ModelAlias
metadata:
  name: default
spec:
  host: app.example.com
  provider: openai
  model: gpt-4.1-mini
  credentialRef: vault://secret/llm/openai#apiKey   # a reference, never the key itself
  contextWindow: 128000
  maxOutputTokens: 8192
`},
		{"gateways/gateway.yaml", "Gateway", `apiVersion: configpub.dev/v1
kind: Gateway
metadata:
  name: gateway
spec:
  host: app.example.com
  issuers:
    - issuer: https://login.app.example.com
      audiences: [gateway]
      signingKeyRef: https://login.app.example.com/.well-known/jwks.json
  routing:
    timeout: 30s
    retries: 1
  budgets:
    tokensPerDay: 1000000
  rateLimits:
    requestsPerMinute: 600
`},
		{"agents/assistant.yaml", "Agent", `apiVersion: configpub.dev/v1
kind: Agent
metadata:
  name: assistant
spec:
  host: app.example.com
  definition:
    id: 00000000-0000-4000-8000-000000000001
    version: 0.1.0
    profile: default
  prompt: |
    You are a helpful assistant.
  model:
    alias: default
    maxOutputTokens: 1024
    maxToolCallsPerTurn: 4
  execution:
    placement: sandbox
  memory:
    mode: session
  dataBoundary:
    region: eu-west
    piiAllowed: false
  gateway:
    name: gateway
  session:
    maxLifetime: 1h
    maxConcurrent: 10
  limits:
    requestsPerMinute: 60
    tokensPerDay: 100000
`},
		{"targets/ENV/assistant.yaml", "Target", `apiVersion: configpub.dev/v1
kind: Target
metadata:
  name: ENV-assistant
spec:
  host: app.example.com
  serviceId: com.example.assistant
  envTag: ENV
  audience: agent
  subject:
    kind: Agent
    name: assistant
  leaseProfile: standard
`},
	}
	for i := range docs {
		docs[i].path = r.Replace(docs[i].path)
		docs[i].body = r.Replace(docs[i].body)
	}
	return docs
}
