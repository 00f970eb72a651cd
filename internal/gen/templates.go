package gen

const repository = `apiVersion: configpub.dev/v1
kind: Repository
metadata:
  name: bench
spec:
  schemaVersion: 1
  compatibilityGeneration: 1
  revocationEpoch: 0
  leaseProfiles:
    production:
      validFor: 504h
      refreshAfter: 168h
      delivery:
        refreshAfter: 5m
        expiresAfter: 15m
  ceilings:
    maxToolsPerAgent: 16
    maxSkillsPerAgent: 8
    maxOutputTokens: 16384
    maxToolCallsPerTurn: 16
    maxRequestsPerMinute: 600
    maxTokensPerDay: 2000000
    maxConcurrentSessions: 200
    maxSessionLifetime: 24h
    maxDelegationDepth: 3
    maxTopK: 50
    maxResultTokens: 8000
    maxQueriesPerMinute: 1200
    maxIngestBytesPerDay: 10737418240
    maxWorkflowConcurrency: 50
    maxWorkflowRetries: 5
    maxWorkflowTimeout: 2h
`

const environment = `apiVersion: configpub.dev/v1
kind: Environment
metadata:
  name: %s
spec:
  settings:
    agent:
      server:
        httpsPort: 8443
        enableHttp2: true
      logging:
        level: INFO
      operationalStore:
        url: jdbc:postgresql://postgres:5432/agent
        user: agent_rw
        password: vault://secret/bench/agent/db#password
        maxPoolSize: 20
    gateway:
      server:
        httpsPort: 8443
      cache:
        ttl: 5m
    knowledge:
      server:
        httpsPort: 8443
`

const hostDoc = `apiVersion: configpub.dev/v1
kind: Host
metadata:
  name: %s
spec:
  tenant: tenant-%d
  owner: platform
`

const modelDoc = `apiVersion: configpub.dev/v1
kind: ModelAlias
metadata:
  name: %s-m%d
spec:
  host: %[1]s
  provider: openai
  model: gpt-%[3]d
  credentialRef: vault://secret/llm/openai#apiKey
  contextWindow: 128000
  maxOutputTokens: 8192
`

const workflowDoc = `apiVersion: configpub.dev/v1
kind: Workflow
metadata:
  name: %s-wf
spec:
  host: %[1]s
  wfDefId: 3f0c9a52-7d1e-4b8a-9c61-%012[2]d
  versions:
    - version: 1.0.0
      state: PUBLISHED
      definition:
        start: a
        tasks:
          - name: a
            call: com.networknt.a-1.0.0/run
          - name: b
            call: com.networknt.b-1.0.0/run
      limits:
        timeout: 30m
        retries: 3
        concurrency: 10
      agents: []
      runner:
        sandbox: gvisor
`

const toolDoc = `apiVersion: configpub.dev/v1
kind: Tool
metadata:
  name: %s-t%d
spec:
  host: %s
  description: Synthetic endpoint tool %d.
  gateway: %s-gw
  endpoint:
    serviceId: com.networknt.svc-%d-1.0.0
    method: GET
    path: /v1/items/{id}
  approval: none
  inputSchema:
    type: object
    required: [id]
    properties:
      id:
        type: string
        maxLength: %d
`

const workflowToolDoc = `apiVersion: configpub.dev/v1
kind: Tool
metadata:
  name: %s-t%d
spec:
  host: %s
  description: Synthetic workflow-backed tool.
  gateway: %s-gw
  workflow:
    name: %s-wf
    version: 1.0.0
  approval: required
  inputSchema:
    type: object
`

const skillDoc = `apiVersion: configpub.dev/v1
kind: Skill
metadata:
  name: %s-s%d
spec:
  host: %s
  description: Synthetic skill %d.
  instructions: |
    Use the tools carefully and confirm before acting.
  tools: [%s-t%d, %s-t%d, %s-t%d]
`

const kbDoc = `apiVersion: configpub.dev/v1
kind: KnowledgeBase
metadata:
  name: %s-kb%d
spec:
  host: %s
  owner: docs
  credentialRef: vault://secret/kb/%s-%d#dsn
  index:
    engine: pgvector
    shards: 2
    embeddingModel: text-embedding-3-small
  indexGenerations: [%d]
  retrievalProfiles:
    - name: default
      topK: 8
      maxResultTokens: 2000
      graphBehavior: none
    - name: deep
      topK: 20
      maxResultTokens: 6000
      graphBehavior: neighbors
  limits:
    queriesPerMinute: 600
    maxIngestBytesPerDay: 1073741824
`

const gatewayDoc = `apiVersion: configpub.dev/v1
kind: Gateway
metadata:
  name: %s-gw
spec:
  host: %s
  issuers:
    - issuer: https://oauth.%s
      audiences: [gateway]
      requiredClaims: [sub]
      signingKeyRef: vault://secret/gateway/jwks#pem
  routing:
    timeout: 30s
    retries: 1
  budgets:
    tokensPerDay: 5000000
  rateLimits:
    requestsPerMinute: 1200
`

const agentDoc = `apiVersion: configpub.dev/v1
kind: Agent
metadata:
  name: %s
spec:
  host: %s
  definition:
    id: 5b2f7c1e-9a34-4d6b-8f20-%06d%06d
    version: 1.0.0
    profile: synthetic
  prompt: |
    You are %s, a synthetic agent used to measure the compiler. Answer briefly,
    use the granted tools only, and never reveal data of another customer.
  model:
    alias: %s-m%d
    maxOutputTokens: 4096
    temperature: 0.2
    maxToolCallsPerTurn: 8
  tools: [%s-t%d, %s-t%d, %s-t%d]
  skills: []
  knowledge:
    - knowledgeBase: %s-kb%d
      retrievalProfile: default
  execution:
    placement: sandbox
  memory:
    mode: session
  dataBoundary:
    region: ca-central
    piiAllowed: false
  channels:
    - type: web
      name: portal
  gateway:
    name: %s-gw
    delegation:
      maxDepth: 1
      scopes: [items.read]
  session:
    maxLifetime: 1h
    maxConcurrent: 50
  limits:
    requestsPerMinute: %d
    tokensPerDay: %d
`

const targetDoc = `apiVersion: configpub.dev/v1
kind: Target
metadata:
  name: %s
spec:
  host: %s
  serviceId: %s
  envTag: %s
  audience: %s
  subject:
    kind: %s
    name: %s
  leaseProfile: production
%s`
