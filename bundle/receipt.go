package bundle

// Receipt results: what a runtime answered about a snapshot when the control
// plane read its status back.
const (
	// ResultApplied: the snapshot is the runtime's current configuration.
	ResultApplied = "APPLIED"
	// ResultReady: a candidate snapshot (of a staged release) was fetched and
	// fully verified; it is held, not applied.
	ResultReady = "READY"
	// ResultRejected: the snapshot failed verification; the runtime keeps
	// its last-known-good.
	ResultRejected = "REJECTED"
)

// Receipt phases: whether a receipt is about the runtime's current
// configuration or about a candidate of a staged release.
const (
	PhaseCurrent   = "current"
	PhaseCandidate = "candidate"
)

// RuntimeStatusType is the "type" of a RuntimeStatus document.
const RuntimeStatusType = "configpub.dev/runtime-status/v1"

// MaxRuntimeStatusBytes bounds a runtime status document: a collector
// refuses a longer one.
const MaxRuntimeStatusBytes = 64 << 10

// SnapshotState is one snapshot as a runtime holds it: its identity and
// digests, when the runtime loaded (or rejected) it, the result and a stable
// reason code. Times are RFC 3339 UTC strings.
type SnapshotState struct {
	SnapshotID     string `json:"snapshotId"`
	PublicationID  string `json:"publicationId,omitempty"`
	ReleaseVersion int64  `json:"releaseVersion,omitempty"`
	Sequence       int64  `json:"sequence,omitempty"`
	ArtifactDigest string `json:"artifactDigest,omitempty"`
	ContentDigest  string `json:"contentDigest,omitempty"`
	PolicyDigest   string `json:"policyDigest,omitempty"`
	// LoadedAt is when the runtime verified (or rejected) it, by its clock.
	LoadedAt string `json:"loadedAt,omitempty"`
	// ExpiresAt is the end of the signed lease it was applied under.
	ExpiresAt string `json:"expiresAt,omitempty"`
	Result    string `json:"result"`
	Reason    string `json:"reason,omitempty"`
}

// LoadState is the runtime's last load attempt, whatever its outcome
// (APPLIED, UNCHANGED, REJECTED, UNAVAILABLE).
type LoadState struct {
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	At      string `json:"at"`
}

// RuntimeStatus is the JSON document a runtime's status endpoint serves (GET
// <status>/status) and its reload endpoint answers (POST <status>/reload):
// its identity, the current, last-known-good and last-rejected snapshot, the
// staged candidate it holds (if any), its last load and whether it fails
// closed. It never carries a body, a token or a key.
type RuntimeStatus struct {
	Type          string         `json:"type"`
	Host          string         `json:"host"`
	ServiceID     string         `json:"serviceId"`
	EnvTag        string         `json:"envTag"`
	Audience      string         `json:"audience"`
	Current       *SnapshotState `json:"current,omitempty"`
	LastKnownGood *SnapshotState `json:"lastKnownGood,omitempty"`
	LastRejected  *SnapshotState `json:"lastRejected,omitempty"`
	Candidate     *SnapshotState `json:"candidate,omitempty"`
	LastLoad      *LoadState     `json:"lastLoad,omitempty"`
	FailedClosed  bool           `json:"failedClosed"`
	// ObservedAt is when the document was produced, by the runtime's clock.
	ObservedAt string `json:"observedAt"`
}

// Identity returns the runtime identity the status is about.
func (s *RuntimeStatus) Identity() Identity {
	return Identity{Host: s.Host, ServiceID: s.ServiceID, EnvTag: s.EnvTag}
}

// Receipt is what the control plane records after reading a runtime's status
// back with its own credential: one snapshot of one identity, the phase it
// belongs to (current configuration or staged candidate), the runtime's
// result and reason, and what the runtime runs and keeps as last-known-good
// at that moment. Receipts are evidence written by the control plane; a
// runtime's own report with its workload token is never one.
type Receipt struct {
	Host      string `json:"host"`
	ServiceID string `json:"serviceId"`
	EnvTag    string `json:"envTag"`
	Audience  string `json:"audience"`
	// Phase is PhaseCurrent or PhaseCandidate.
	Phase string `json:"phase"`
	// Result is ResultApplied, ResultReady (candidate only) or
	// ResultRejected; Reason is the runtime's stable reason code.
	Result string `json:"result"`
	Reason string `json:"reason,omitempty"`

	SnapshotID     string `json:"snapshotId"`
	PublicationID  string `json:"publicationId,omitempty"`
	ReleaseVersion int64  `json:"releaseVersion,omitempty"`
	Sequence       int64  `json:"sequence,omitempty"`
	ArtifactDigest string `json:"artifactDigest,omitempty"`
	ContentDigest  string `json:"contentDigest,omitempty"`
	PolicyDigest   string `json:"policyDigest,omitempty"`

	// RunningSnapshotID and LastKnownGoodSnapshotID are what the runtime
	// runs and keeps when it answered ("" when none).
	RunningSnapshotID       string `json:"runningSnapshotId,omitempty"`
	LastKnownGoodSnapshotID string `json:"lastKnownGoodSnapshotId,omitempty"`
	// LoadedAt is when the runtime loaded or rejected the snapshot, by its
	// clock (RFC 3339).
	LoadedAt string `json:"loadedAt,omitempty"`
	// Endpoint is the status endpoint the receipt was read from.
	Endpoint string `json:"endpoint,omitempty"`
}

// Identity returns the runtime identity the receipt is about.
func (r *Receipt) Identity() Identity {
	return Identity{Host: r.Host, ServiceID: r.ServiceID, EnvTag: r.EnvTag}
}

// Receipts derives the receipts a runtime status carries: the current
// snapshot (APPLIED), the last rejected one (REJECTED; phase current unless
// it names the candidate's snapshot) and the candidate (READY or REJECTED,
// phase candidate). endpoint is recorded as where they were read.
func (s *RuntimeStatus) Receipts(endpoint string) []Receipt {
	base := Receipt{Host: s.Host, ServiceID: s.ServiceID, EnvTag: s.EnvTag, Audience: s.Audience, Endpoint: endpoint}
	if s.Current != nil {
		base.RunningSnapshotID = s.Current.SnapshotID
	}
	if s.LastKnownGood != nil {
		base.LastKnownGoodSnapshotID = s.LastKnownGood.SnapshotID
	}
	var out []Receipt
	add := func(st *SnapshotState, phase, result string) {
		r := base
		r.Phase, r.Result, r.Reason = phase, result, st.Reason
		r.SnapshotID, r.PublicationID, r.ReleaseVersion, r.Sequence = st.SnapshotID, st.PublicationID, st.ReleaseVersion, st.Sequence
		r.ArtifactDigest, r.ContentDigest, r.PolicyDigest, r.LoadedAt = st.ArtifactDigest, st.ContentDigest, st.PolicyDigest, st.LoadedAt
		out = append(out, r)
	}
	if s.Current != nil && s.Current.SnapshotID != "" {
		add(s.Current, PhaseCurrent, ResultApplied)
	}
	if s.Candidate != nil && s.Candidate.SnapshotID != "" && (s.Candidate.Result == ResultReady || s.Candidate.Result == ResultRejected) {
		add(s.Candidate, PhaseCandidate, s.Candidate.Result)
	}
	if r := s.LastRejected; r != nil && r.SnapshotID != "" && (s.Candidate == nil || r.SnapshotID != s.Candidate.SnapshotID) {
		add(r, PhaseCurrent, ResultRejected)
	}
	return out
}
