package console

import (
	"net/url"
	"strconv"
	"time"
)

// Target states, in display order.
const (
	StateApplied      = "APPLIED"       // the runtime reported applying the current snapshot
	StateRejected     = "REJECTED"      // the runtime reported rejecting the current snapshot
	StatePublished    = "PUBLISHED"     // delivered, no evidence about the current snapshot yet
	StateLeaseExpired = "LEASE_EXPIRED" // the current lease ran out
	StateRevoked      = "REVOKED"       // the current snapshot or its publication is revoked
	StateRetired      = "RETIRED"       // the active release does not contain the identity
)

var stateOrder = []string{StateApplied, StatePublished, StateRejected, StateLeaseExpired, StateRevoked, StateRetired}

// Environment is one environment's overview.
type Environment struct {
	EnvTag         string       `json:"envTag"`
	CurrentRelease int64        `json:"currentRelease"`
	StagedRelease  int64        `json:"stagedRelease,omitempty"` // newest recorded, not yet activated release above the current one
	Releases       int          `json:"releases"`
	Targets        int          `json:"targets"`
	ByState        []StateCount `json:"byState"`
	// LeasesExpiring counts targets past their refresh point, or whose
	// lease is longer than the lease horizon and ends within it; Expiring
	// lists the soonest.
	LeasesExpiring int          `json:"leasesExpiring"`
	Expiring       []LeaseRow   `json:"expiring"`
	Divergent      int          `json:"divergent"` // runtimes whose last receipt (readback) is not about the current snapshot, or rejects it
	Divergence     []Divergence `json:"divergence"`
	UpdatedAt      time.Time    `json:"updatedAt"`
}

// StateCount is the number of targets in one state.
type StateCount struct {
	State string `json:"state"`
	Count int    `json:"count"`
}

// LeaseRow is a target whose lease needs attention.
type LeaseRow struct {
	Host         string    `json:"host"`
	ServiceID    string    `json:"serviceId"`
	RefreshAfter time.Time `json:"refreshAfter"`
	ExpiresAt    time.Time `json:"expiresAt"`
}

// Divergence is a target whose runtime last reported about another
// snapshot than the current one, or rejected the current one.
type Divergence struct {
	Host            string `json:"host"`
	ServiceID       string `json:"serviceId"`
	CurrentRelease  int64  `json:"currentRelease"`
	ReportedRelease int64  `json:"reportedRelease"`
	Outcome         string `json:"outcome"`
	ReportedDigest  string `json:"reportedDigest,omitempty"`
	CurrentDigest   string `json:"currentDigest"`
}

// Timeline is an environment's publication timeline, newest release first.
type Timeline struct {
	EnvTag         string         `json:"envTag"`
	CurrentRelease int64          `json:"currentRelease"`
	Releases       []Release      `json:"releases"`
	Events         []JournalEvent `json:"events"`
	// EventsMore counts the older events of the page's releases not listed
	// (each page lists the newest journalListed).
	EventsMore int   `json:"eventsMore,omitempty"`
	Older      int64 `json:"older,omitempty"` // "before" cursor of the next page; 0 = none
	// Newer is the "before" cursor of the page of newer releases (0: the
	// first page); absent on the first page.
	Newer *int64 `json:"newer,omitempty"`
	// Revocations are the environment's newest revocationsListed
	// revocations, newest first, on the first page only;
	// RevocationsMore says there are older ones.
	Revocations     []Revocation `json:"revocations"`
	RevocationsMore bool         `json:"revocationsMore,omitempty"`
}

// Revocation is one revocation of an environment: a snapshot (of one
// target) or a publication (every snapshot a release created), why, by
// whom and when, and how many current pointers are still at it.
type Revocation struct {
	ID             int64     `json:"revocationId"`
	SnapshotID     string    `json:"snapshotId,omitempty"`
	PublicationID  string    `json:"publicationId,omitempty"`
	Host           string    `json:"host,omitempty"`
	ServiceID      string    `json:"serviceId,omitempty"`
	ReleaseVersion int64     `json:"releaseVersion"`
	Snapshots      int64     `json:"snapshots"`
	Current        int64     `json:"current"`
	Reason         string    `json:"reason"`
	Actor          string    `json:"actor"`
	RevokedAt      time.Time `json:"revokedAt"`
}

// Release is one release with its per-audience publication status.
type Release struct {
	EnvTag          string           `json:"envTag"`
	Version         int64            `json:"releaseVersion"`
	BaseVersion     int64            `json:"baseReleaseVersion"`
	State           string           `json:"state"`
	Outcome         string           `json:"outcome"`
	Current         bool             `json:"current"`
	ReleaseDigest   string           `json:"releaseDigest"`
	DefinitionHash  string           `json:"definitionHash"`
	SourceCommit    string           `json:"sourceCommit"`
	SourceRef       string           `json:"sourceRef"`
	Actor           string           `json:"actor"`
	Reviewers       []string         `json:"reviewers"`
	Reason          string           `json:"reason"`
	TargetCount     int              `json:"targetCount"`
	CreatedAt       time.Time        `json:"createdAt"`
	UpdatedAt       time.Time        `json:"updatedAt"`
	PolicyState     string           `json:"policyState"` // VALIDATED when every snapshot was valid at creation
	Audiences       []AudienceStatus `json:"audiences"`
	PreviousRelease int64            `json:"previousRelease,omitempty"` // the release it replaced when it became current
	// ActivatableFrom and ActivatableUntil bound when every target of the
	// release can be moved to it (activated, or rolled back to): the latest
	// start and earliest end of its snapshots' activation windows; nil when
	// unknown. Activatable is "until", "ended" or "from" (before the
	// windows open) at the time the page was read, "revoked" when a
	// snapshot of its mapping (or its publication) is revoked — it can
	// never be activated again — and "" when unknown.
	ActivatableFrom  *time.Time `json:"activatableFrom,omitempty"`
	ActivatableUntil *time.Time `json:"activatableUntil,omitempty"`
	Activatable      string     `json:"activatable,omitempty"`
	// Renewal: the release is compiled from the same policy sources as its
	// base release (configpub compile --renew): it renews activation
	// windows and changes no policy. False when either was recorded
	// without its sources digest.
	Renewal bool `json:"renewal,omitempty"`
}

// AudienceStatus summarizes the snapshots a release created for one audience.
type AudienceStatus struct {
	Audience string `json:"audience"`
	Status   string `json:"status"` // APPLIED, REJECTED, PUBLISHED, STAGED or RECORDED (never activated)
	Targets  int    `json:"targets"`
	Applied  int    `json:"applied"`
	Rejected int    `json:"rejected"`
	// Ready and CandidateRejected count the snapshots a prefetch read back
	// READY, or REJECTED, in the candidate phase (a staged release's
	// two-phase activation waits for READY).
	Ready             int      `json:"ready"`
	CandidateRejected int      `json:"candidateRejected"`
	Digests           []string `json:"digests"` // artifact digests of the first few targets
	More              int      `json:"more"`    // targets not listed in Digests
}

// JournalEvent is one release-journal row.
type JournalEvent struct {
	Release    int64     `json:"releaseVersion"`
	Sequence   int64     `json:"sequence"`
	Kind       string    `json:"kind"`
	FromState  string    `json:"fromState,omitempty"`
	ToState    string    `json:"toState"`
	ToOutcome  string    `json:"toOutcome"`
	Actor      string    `json:"actor"`
	Reason     string    `json:"reason,omitempty"`
	RecordedAt time.Time `json:"recordedAt"`
}

// ReleaseDetail is the release page: the release, its journal and its diff
// against its base release.
type ReleaseDetail struct {
	Release
	Journal []JournalEvent `json:"journal"`
	// JournalMore counts the older journal events not listed (the newest
	// journalListed are).
	JournalMore int `json:"journalMore,omitempty"`
	// Against says what the diff compares the release with: "base" (the
	// release it was compiled on, AgainstRelease = baseReleaseVersion) or
	// "current" (the environment's current release: what activating it,
	// or rolling back to it, would change); AgainstRelease is 0 when there
	// is none (a first release, or no current release: every target new).
	Against        string `json:"against"`
	AgainstRelease int64  `json:"againstRelease"`
	// CurrentRelease is the environment's current release (0: none).
	CurrentRelease int64 `json:"currentRelease"`
	// DiffMode is "values" when the diff was computed from the stored
	// artifact bytes, "metadata" when only digests were compared.
	DiffMode string `json:"diffMode"`
	// Inputs are the policy sources whose digest changed, by path: the
	// first inputsListed of InputsTotal.
	Inputs       []InputChange `json:"inputChanges"`
	InputsTotal  int           `json:"inputChangesTotal"`
	Changed      []TargetDiff  `json:"changed"`
	ChangedTotal int           `json:"changedTotal"`
	// ChangedFrom is the offset of Changed[0] among the changed targets
	// (query parameter from); ChangedNext the offset of the next page, 0
	// on the last one.
	ChangedFrom int `json:"changedFrom"`
	ChangedNext int `json:"changedNext,omitempty"`
	// ChangedPrev is the offset of the previous page (absent on the first).
	ChangedPrev *int `json:"changedPrev,omitempty"`
	// FilterAudience and FilterHost, when set, restrict the changed and
	// retired targets (and their counts) to one audience and to the hosts
	// whose name starts with FilterHost (query parameters audience and
	// host: a whole host name or the start of one).
	FilterAudience string     `json:"filterAudience,omitempty"`
	FilterHost     string     `json:"filterHost,omitempty"`
	Retired        []Identity `json:"retired"`
	// Workflows are the Workflow views recorded when the release was
	// activated (metadata only): the first workflowViewsListed, by
	// workflow and version, of WorkflowsTotal.
	Workflows      []WorkflowView `json:"workflows"`
	WorkflowsTotal int            `json:"workflowsTotal"`
	// CommitURL and PullRequestURL link the reviewed commit and the pull
	// request it came from, when the console knows the repository's address.
	CommitURL      string `json:"commitUrl,omitempty"`
	PullRequestURL string `json:"pullRequestUrl,omitempty"`
}

// Identity names a runtime target.
type Identity struct {
	Host      string `json:"host"`
	ServiceID string `json:"serviceId"`
}

// InputChange is a policy source file whose digest differs from the base.
type InputChange struct {
	Path string `json:"path"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
}

// TargetDiff is one changed target of a release.
type TargetDiff struct {
	Host          string   `json:"host"`
	ServiceID     string   `json:"serviceId"`
	Audience      string   `json:"audience"`
	OldSnapshotID string   `json:"oldSnapshotId,omitempty"`
	NewSnapshotID string   `json:"newSnapshotId"`
	OldDigest     string   `json:"oldArtifactDigest,omitempty"`
	NewDigest     string   `json:"newArtifactDigest"`
	OldPolicy     string   `json:"oldPolicyDigest,omitempty"`
	NewPolicy     string   `json:"newPolicyDigest"`
	Changes       []Change `json:"changes,omitempty"`
	// EnvelopeChanges counts changed runtimePolicy fields (publication
	// identity, release version, lease window), which every release changes.
	EnvelopeChanges int `json:"envelopeChanges,omitempty"`
}

// Change is one changed value: Old is empty for an added path, New for a
// removed one. Secret references are shown as "(secret reference)".
type Change struct {
	Path string `json:"path"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// TargetDetail is the target page.
type TargetDetail struct {
	EnvTag    string     `json:"envTag"`
	Host      string     `json:"host"`
	ServiceID string     `json:"serviceId"`
	Current   *Pointer   `json:"current,omitempty"`
	Moves     []Move     `json:"moves"`
	Evidence  []Evidence `json:"evidence"`
}

// Pointer is a target's current pointer and lease.
type Pointer struct {
	SnapshotID     string     `json:"snapshotId"`
	Audience       string     `json:"audience"`
	Release        int64      `json:"releaseVersion"` // release that created the snapshot
	PointerRelease int64      `json:"pointerReleaseVersion"`
	Sequence       int64      `json:"sequence"`
	ArtifactDigest string     `json:"artifactDigest"`
	ContentDigest  string     `json:"contentDigest"`
	PolicyDigest   string     `json:"policyDigest"`
	State          string     `json:"state"`
	MovedAt        time.Time  `json:"movedAt"`
	LeaseValidFrom time.Time  `json:"leaseValidFrom"`
	RefreshAfter   time.Time  `json:"leaseRefreshAfter"`
	ExpiresAt      time.Time  `json:"leaseExpiresAt"`
	RetiredAt      *time.Time `json:"retiredAt,omitempty"`
}

// Move is one pointer move of a target.
type Move struct {
	MoveID          int64     `json:"moveId"`
	Host            string    `json:"host"`
	ServiceID       string    `json:"serviceId"`
	Action          string    `json:"action"`
	Release         int64     `json:"releaseVersion"`
	PreviousRelease int64     `json:"previousReleaseVersion,omitempty"`
	SnapshotID      string    `json:"snapshotId"`
	SnapshotRelease int64     `json:"snapshotReleaseVersion"`
	ArtifactDigest  string    `json:"artifactDigest"`
	Audience        string    `json:"audience"`
	Sequence        int64     `json:"sequence"`
	Actor           string    `json:"actor"`
	Reason          string    `json:"reason,omitempty"`
	Retired         bool      `json:"retired,omitempty"`
	MovedAt         time.Time `json:"movedAt"`
}

// Evidence is one runtime report.
type Evidence struct {
	EvidenceID      int64     `json:"evidenceId"`
	Kind            string    `json:"kind"` // observation (reported by the runtime, unverified) or receipt
	currentReceipt  bool      // a receipt about the current configuration (sets the state)
	runs            string    // the snapshot such a receipt reads the runtime running ("" when it names none)
	Outcome         string    `json:"outcome"`
	Reason          string    `json:"reason,omitempty"`
	SnapshotID      string    `json:"snapshotId,omitempty"`
	SnapshotRelease int64     `json:"snapshotReleaseVersion,omitempty"`
	ArtifactDigest  string    `json:"artifactDigest,omitempty"`
	ReportedAt      time.Time `json:"reportedAt"`
}

// IdentityAt answers "what was identity X served at time T".
type IdentityAt struct {
	EnvTag    string    `json:"envTag"`
	Host      string    `json:"host"`
	ServiceID string    `json:"serviceId"`
	At        time.Time `json:"at"`
	Served    *Move     `json:"served,omitempty"` // the last move at or before At; nil: nothing was served yet
}

// EnvironmentAt answers "what did environment E look like at time T".
type EnvironmentAt struct {
	EnvTag        string         `json:"envTag"`
	At            time.Time      `json:"at"`
	Release       int64          `json:"releaseVersion"` // the release that was current at At; 0 = none
	ReleaseDigest string         `json:"releaseDigest,omitempty"`
	Targets       int            `json:"targets"`
	ByRelease     []ReleaseCount `json:"byRelease"`
	Rows          []Move         `json:"targetsServed"` // one page, by host and service, from offset From
	From          int            `json:"from,omitempty"`
	More          int            `json:"more"`           // targets after this page
	Next          int            `json:"next,omitempty"` // offset of the next page; 0 = none
	Prev          *int           `json:"prev,omitempty"` // offset of the previous page; absent on the first
}

// ReleaseCount counts targets served a snapshot of one release.
type ReleaseCount struct {
	Release int64 `json:"releaseVersion"`
	Count   int   `json:"count"`
}

// PageURL is the release page's path showing this diff (its base, filters)
// from offset from on.
func (d *ReleaseDetail) PageURL(from int) string {
	q := url.Values{}
	q.Set("against", d.Against)
	if d.FilterAudience != "" {
		q.Set("audience", d.FilterAudience)
	}
	if d.FilterHost != "" {
		q.Set("host", d.FilterHost)
	}
	if from > 0 {
		q.Set("from", strconv.Itoa(from))
	}
	return "/env/" + url.PathEscape(d.EnvTag) + "/releases/" + strconv.FormatInt(d.Version, 10) + "?" + q.Encode()
}
