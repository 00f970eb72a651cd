package promoter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/dbschema"
)

// Target states reported by Status. The state says what the runtime runs
// relative to the desired pointer, as the control plane read it back
// (receipts); rejections, acknowledgement lag and divergence are reported
// apart from it (TargetStatus). A runtime's own reports (observations)
// never set a state.
const (
	TargetRetired      = "RETIRED"       // the active release does not contain the identity (served 410 Gone)
	TargetRevoked      = "REVOKED"       // the current snapshot is revoked
	TargetLeaseExpired = "LEASE_EXPIRED" // the current lease ran out (renew leases)
	TargetApplied      = "APPLIED"       // the last receipt, read since the pointer's last move, reads the runtime running the current snapshot
	TargetRejected     = "REJECTED"      // a receipt since the move reads the runtime rejecting the current snapshot and running another (or none)
	TargetPublished    = "PUBLISHED"     // delivered; no receipt since the move reads the runtime running it
)

// Status is an environment's publication timeline.
type Status struct {
	EnvTag         string          `json:"envTag"`
	CurrentRelease int64           `json:"currentRelease"`
	PendingRelease int64           `json:"pendingRelease,omitempty"`
	Releases       []ReleaseStatus `json:"releases"`
	Targets        []TargetStatus  `json:"targets"`
	// WorkflowViews are the recorded internal Workflow views per release.
	WorkflowViews []WorkflowViewStatus `json:"workflowViews"`
}

// ReleaseStatus is one release row.
type ReleaseStatus struct {
	ReleaseVersion     int64     `json:"releaseVersion"`
	BaseReleaseVersion int64     `json:"baseReleaseVersion"`
	State              string    `json:"state"`
	Outcome            string    `json:"outcome"`
	RowRevision        int64     `json:"rowRevision"`
	DefinitionHash     string    `json:"definitionHash"`
	SourceCommit       string    `json:"sourceCommit"`
	Actor              string    `json:"actor"`
	Reason             string    `json:"reason"`
	TargetCount        int       `json:"targetCount"`
	CreatedAt          time.Time `json:"createdAt"`
	UpdatedAt          time.Time `json:"updatedAt"`
	// ActivatableFrom and ActivatableUntil bound when every target of the
	// release can be moved to it, by an activation or a rollback: the
	// latest start and the earliest end of the activation windows of the
	// snapshots of its mapping (those it created and those it kept). Outside
	// them a move to a snapshot whose window does not contain the move time
	// is refused (ErrOutsideWindow); a target already at its snapshot does
	// not move. Nil when no snapshot of the release has a known window.
	ActivatableFrom  *time.Time `json:"activatableFrom,omitempty"`
	ActivatableUntil *time.Time `json:"activatableUntil,omitempty"`
	// Renewal marks a release compiled from the same policy sources as its
	// base release (configpub compile --renew): it renews activation
	// windows and changes no policy. Releases recorded before the store
	// kept the sources digest are not marked.
	Renewal bool `json:"renewal,omitempty"`
	// Revoked: a snapshot of the release's mapping, or its publication, is
	// revoked, so it can never be activated (or rolled back to) again,
	// whatever its activation window says.
	Revoked bool `json:"revoked,omitempty"`
}

// TargetStatus is one identity: the desired pointer (SnapshotID and the
// fields after it up to LeaseExpiresAt), what the runtime runs (Running),
// its last rejection (LastRejection, with the count since the pointer
// moved), how long it took (or is taking) to acknowledge the desired
// snapshot, and whether what it runs diverges from the desired pointer.
// All of these, and State, come from receipts: what the control plane read
// back from the runtime's status endpoint with its own credential
// (configpub readback). A runtime's own reports (POST /configs/evidence
// with its workload token) are unverified observations: LastObservation
// shows the last one, and they decide nothing.
type TargetStatus struct {
	Host            string    `json:"host"`
	ServiceID       string    `json:"serviceId"`
	EnvTag          string    `json:"envTag"`
	Audience        string    `json:"audience"`
	SnapshotID      string    `json:"snapshotId"`     // desired: the current pointer
	ReleaseVersion  int64     `json:"releaseVersion"` // release that created the desired snapshot
	PublicationID   string    `json:"publicationId"`
	ArtifactDigest  string    `json:"artifactDigest"`
	ContentDigest   string    `json:"contentDigest"`
	PolicyDigest    string    `json:"policyDigest"`
	State           string    `json:"state"`
	PreviousRelease int64     `json:"previousRelease,omitempty"` // release of the snapshot before the last move
	Sequence        int64     `json:"sequence"`
	MovedAt         time.Time `json:"movedAt"`
	LeaseExpiresAt  time.Time `json:"leaseExpiresAt"`

	// Running is the snapshot the last receipt read the runtime running
	// (its running snapshot, or the snapshot of an APPLIED receipt).
	Running *RunningSnapshot `json:"running,omitempty"`
	// Diverged is true when a receipt reads the runtime running another
	// snapshot than the desired one.
	Diverged bool `json:"diverged"`
	// AcknowledgedAt is the first receipt of the runtime running the
	// desired snapshot since the pointer moved; AckLagSeconds is the time
	// from the move to it, or to now while unacknowledged.
	AcknowledgedAt *time.Time `json:"acknowledgedAt,omitempty"`
	AckLagSeconds  int64      `json:"ackLagSeconds"`
	// LastRejection is the last REJECTED receipt, whatever it was about;
	// RejectionsSinceMove counts those since the pointer moved.
	LastRejection       *Evidence `json:"lastRejection,omitempty"`
	RejectionsSinceMove int       `json:"rejectionsSinceMove"`
	// LastEvidence is the last receipt or observation of any outcome.
	LastEvidence *Evidence `json:"lastEvidence,omitempty"`
	// LastObservation is the runtime's last own report (unverified; shown,
	// never counted).
	LastObservation *Evidence `json:"lastObservation,omitempty"`
	// LastReceipt is the last receipt about the runtime's current
	// configuration: what the control plane read back from the runtime's
	// status endpoint with its own credential (configpub readback), as
	// opposed to the runtime's own unverified observations above.
	LastReceipt *Evidence `json:"lastReceipt,omitempty"`
}

// RunningSnapshot is the snapshot a runtime reports running.
type RunningSnapshot struct {
	SnapshotID     string    `json:"snapshotId"`               // "" when the runtime runs nothing (failed closed)
	ReleaseVersion int64     `json:"releaseVersion,omitempty"` // 0 when the id is not a known snapshot
	PublicationID  string    `json:"publicationId,omitempty"`
	ReportedAt     time.Time `json:"reportedAt"`
}

// Evidence is one runtime report: an observation the runtime made about
// itself (Kind "observation", unverified) or a receipt read back by the
// control plane (Kind "receipt").
type Evidence struct {
	Outcome                 string     `json:"outcome"`
	Reason                  string     `json:"reason,omitempty"`
	SnapshotID              string     `json:"snapshotId,omitempty"` // the snapshot the report is about
	PublicationID           string     `json:"publicationId,omitempty"`
	ReleaseVersion          int64      `json:"releaseVersion,omitempty"`
	RunningSnapshotID       string     `json:"runningSnapshotId,omitempty"`
	LastKnownGoodSnapshotID string     `json:"lastKnownGoodSnapshotId,omitempty"`
	Kind                    string     `json:"kind"`
	Phase                   string     `json:"phase"`                // "current" or "candidate" (receipts of a staged release)
	Endpoint                string     `json:"endpoint,omitempty"`   // receipts: the status endpoint read
	LoadedAt                *time.Time `json:"loadedAt,omitempty"`   // receipts: when the runtime loaded it (its clock)
	ObservedAt              *time.Time `json:"observedAt,omitempty"` // the runtime's clock
	ReportedAt              time.Time  `json:"reportedAt"`           // the database's clock
}

// evidenceColumns selects an Evidence from runtime_evidence e.
const evidenceColumns = `e.outcome, e.reason, coalesce(e.snapshot_id::text, ''), coalesce(e.publication_id::text, ''),
	coalesce(e.release_version, 0), coalesce(e.running_snapshot_id::text, ''), coalesce(e.lkg_snapshot_id::text, ''),
	e.kind, e.phase, e.endpoint, e.loaded_at, e.observed_at, e.reported_at`

// scanEvidence scans evidenceColumns (all NULL for a missing row) into a
// new Evidence, or nil.
type evidenceScan struct {
	outcome, reason, snapshot, publication *string
	release                                *int64
	running, lkg, kind, phase, endpoint    *string
	loaded, observed, reported             *time.Time
}

func (e *evidenceScan) dest() []any {
	return []any{&e.outcome, &e.reason, &e.snapshot, &e.publication, &e.release, &e.running, &e.lkg, &e.kind, &e.phase, &e.endpoint, &e.loaded, &e.observed, &e.reported}
}

func (e *evidenceScan) evidence() *Evidence {
	if e.outcome == nil {
		return nil
	}
	ev := &Evidence{Outcome: *e.outcome, Reason: deref(e.reason), SnapshotID: deref(e.snapshot), PublicationID: deref(e.publication),
		RunningSnapshotID: deref(e.running), LastKnownGoodSnapshotID: deref(e.lkg), Kind: deref(e.kind),
		Phase: deref(e.phase), Endpoint: deref(e.endpoint), ReportedAt: e.reported.UTC()}
	if e.loaded != nil {
		t := e.loaded.UTC()
		ev.LoadedAt = &t
	}
	if e.release != nil {
		ev.ReleaseVersion = *e.release
	}
	if e.observed != nil {
		t := e.observed.UTC()
		ev.ObservedAt = &t
	}
	return ev
}

// Status reads envTag's releases and, per target, the desired snapshot, what
// the runtime reports running, its last rejection, acknowledgement lag and
// divergence. An environment without releases is ErrNotFound.
func (s *Store) Status(ctx context.Context, envTag string) (*Status, error) {
	st, err := s.StatusHead(ctx, envTag)
	if err != nil {
		return nil, err
	}
	err = s.EachTargetStatus(ctx, envTag, func(t *TargetStatus) error {
		st.Targets = append(st.Targets, *t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// StatusHead is Status without the targets: envTag's releases and Workflow
// views, Targets empty.
func (s *Store) StatusHead(ctx context.Context, envTag string) (*Status, error) {
	st, err := s.statusHead(ctx, envTag)
	if err != nil {
		return nil, fmt.Errorf("status %s: %w", envTag, err)
	}
	return st, nil
}

// EachTargetStatus calls fn with each of envTag's targets as Status reports
// it, in (host, serviceId) order, as it is read, holding none of them: fn
// must not keep t. An error from fn stops the read and is returned as it
// is. An environment without releases is ErrNotFound.
func (s *Store) EachTargetStatus(ctx context.Context, envTag string, fn func(t *TargetStatus) error) error {
	err := s.eachTargetStatus(ctx, envTag, fn)
	var cb callbackError
	if errors.As(err, &cb) {
		return cb.err
	}
	if err != nil {
		return fmt.Errorf("status %s: %w", envTag, err)
	}
	return nil
}

// utcOrNil returns t in UTC, nil for nil.
func utcOrNil(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// callbackError carries the error of an EachTargetStatus callback out of
// the read, so that it is returned as it is.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// errNoEnvironment names an environment that has no releases.
func errNoEnvironment(envTag string) error {
	return fmt.Errorf("environment %q has no releases: %w", envTag, ErrNotFound)
}

func (s *Store) statusHead(ctx context.Context, envTag string) (*Status, error) {
	st := &Status{EnvTag: envTag, Releases: []ReleaseStatus{}, Targets: []TargetStatus{}}
	err := s.pool.QueryRow(ctx, `SELECT coalesce(current_release_version, 0), coalesce(pending_release_version, 0)
		FROM configpub.environment WHERE env_tag = $1`, envTag).Scan(&st.CurrentRelease, &st.PendingRelease)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errNoEnvironment(envTag)
	}
	if err != nil {
		return nil, dbErr("read environment", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT r.release_version, r.base_release_version, r.lifecycle_state, r.execution_outcome,
			r.row_revision, r.definition_hash, r.source_commit, r.actor, r.reason, r.target_count, r.created_at, r.updated_at,
			x.activatable_from, x.activatable_until
		FROM configpub.config_release r
		LEFT JOIN configpub.release_target_summary x ON x.env_tag = r.env_tag AND x.release_version = r.release_version
		WHERE r.env_tag = $1 ORDER BY r.release_version`, envTag)
	if err != nil {
		return nil, dbErr("read releases", err)
	}
	for rows.Next() {
		var r ReleaseStatus
		if err := rows.Scan(&r.ReleaseVersion, &r.BaseReleaseVersion, &r.State, &r.Outcome, &r.RowRevision,
			&r.DefinitionHash, &r.SourceCommit, &r.Actor, &r.Reason, &r.TargetCount, &r.CreatedAt, &r.UpdatedAt,
			&r.ActivatableFrom, &r.ActivatableUntil); err != nil {
			rows.Close()
			return nil, dbErr("read releases", err)
		}
		r.ActivatableFrom, r.ActivatableUntil = utcOrNil(r.ActivatableFrom), utcOrNil(r.ActivatableUntil)
		st.Releases = append(st.Releases, r)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("read releases", err)
	}
	renewals, err := s.renewalReleases(ctx, envTag)
	if err != nil {
		return nil, err
	}
	versions := make([]int64, len(st.Releases))
	for i := range st.Releases {
		st.Releases[i].Renewal = renewals[st.Releases[i].ReleaseVersion]
		versions[i] = st.Releases[i].ReleaseVersion
	}
	rows, err = s.pool.Query(ctx, dbschema.RevokedReleasesSQL, envTag, versions)
	if err != nil {
		return nil, dbErr("read revoked releases", err)
	}
	revoked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, dbErr("read revoked releases", err)
	}
	for i := range st.Releases {
		st.Releases[i].Revoked = slices.Contains(revoked, st.Releases[i].ReleaseVersion)
	}
	if st.WorkflowViews, err = workflowViews(ctx, s.pool, envTag); err != nil {
		return nil, err
	}
	return st, nil
}

func (s *Store) eachTargetStatus(ctx context.Context, envTag string, fn func(*TargetStatus) error) error {
	var known bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.environment WHERE env_tag = $1)`, envTag).Scan(&known); err != nil {
		return dbErr("read environment", err)
	}
	if !known {
		return errNoEnvironment(envTag)
	}
	now := s.opts.Clock()
	// Per pointer, from the receipts about the current configuration: the
	// last one naming what runs (running_snapshot_id, or the snapshot of an
	// APPLIED receipt), the last rejection with the count since the move,
	// the first receipt of running the desired snapshot since the move, and
	// the last receipt; apart from them, the last report of any kind and
	// the last observation.
	rows, err := s.pool.Query(ctx, `WITH ev AS (
			SELECT e.*, coalesce(e.running_snapshot_id, CASE WHEN e.outcome = 'APPLIED' THEN e.snapshot_id END) AS runs
			FROM configpub.runtime_evidence e WHERE e.env_tag = $1 AND e.kind = 'receipt' AND e.phase = 'current'),
		anyev AS (SELECT e.* FROM configpub.runtime_evidence e WHERE e.env_tag = $1)
		SELECT p.host, p.service_id, p.env_tag, s.audience, p.snapshot_id::text, s.publication_id::text,
			p.release_version, s.artifact_digest, s.content_digest, s.policy_digest, p.sequence, p.moved_at,
			p.lease_expires_at, `+snapshotRevokedSQL+`,
			coalesce((SELECT ps.release_version FROM configpub.pointer_move m
				JOIN configpub.config_snapshot ps ON ps.snapshot_id = m.previous_snapshot_id
				WHERE m.env_tag = p.env_tag AND m.host = p.host AND m.service_id = p.service_id
				ORDER BY m.move_id DESC LIMIT 1), 0),
			run.runs::text, run.reported_at, rs.release_version, rs.publication_id::text,
			(SELECT min(a.reported_at) FROM ev a WHERE a.host = p.host AND a.service_id = p.service_id
				AND a.runs = p.snapshot_id AND a.reported_at >= p.moved_at),
			(SELECT count(*) FROM ev r WHERE r.host = p.host AND r.service_id = p.service_id
				AND r.outcome = 'REJECTED' AND r.reported_at >= p.moved_at),
			`+prefixed("lastev", evidenceColumns)+`,
			`+prefixed("rejev", evidenceColumns)+`,
			`+prefixed("rcpt", evidenceColumns)+`,
			`+prefixed("obs", evidenceColumns)+`,
			p.retired_at IS NOT NULL
		FROM configpub.current_pointer p
		JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
		LEFT JOIN LATERAL (SELECT e.runs, e.reported_at FROM ev e
			WHERE e.host = p.host AND e.service_id = p.service_id
			ORDER BY e.evidence_id DESC LIMIT 1) run ON true
		LEFT JOIN configpub.config_snapshot rs ON rs.snapshot_id = run.runs
		LEFT JOIN LATERAL (SELECT * FROM anyev e WHERE e.host = p.host AND e.service_id = p.service_id
			ORDER BY e.evidence_id DESC LIMIT 1) lastev ON true
		LEFT JOIN LATERAL (SELECT * FROM ev e WHERE e.host = p.host AND e.service_id = p.service_id AND e.outcome = 'REJECTED'
			ORDER BY e.evidence_id DESC LIMIT 1) rejev ON true
		LEFT JOIN LATERAL (SELECT * FROM ev e WHERE e.host = p.host AND e.service_id = p.service_id
			ORDER BY e.evidence_id DESC LIMIT 1) rcpt ON true
		LEFT JOIN LATERAL (SELECT * FROM anyev e WHERE e.host = p.host AND e.service_id = p.service_id
			AND e.kind = 'observation'
			ORDER BY e.evidence_id DESC LIMIT 1) obs ON true
		WHERE p.env_tag = $1
		ORDER BY p.host, p.service_id`, envTag)
	if err != nil {
		return dbErr("read pointers", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t TargetStatus
		var revoked, retired bool
		var runID, runPub *string
		var runAt, ackAt *time.Time
		var runRelease *int64
		var last, rej, rcpt, obs evidenceScan
		dest := []any{&t.Host, &t.ServiceID, &t.EnvTag, &t.Audience, &t.SnapshotID, &t.PublicationID, &t.ReleaseVersion,
			&t.ArtifactDigest, &t.ContentDigest, &t.PolicyDigest, &t.Sequence, &t.MovedAt, &t.LeaseExpiresAt,
			&revoked, &t.PreviousRelease, &runID, &runAt, &runRelease, &runPub, &ackAt, &t.RejectionsSinceMove}
		dest = append(append(append(append(append(dest, last.dest()...), rej.dest()...), rcpt.dest()...), obs.dest()...), &retired)
		if err := rows.Scan(dest...); err != nil {
			return dbErr("read pointers", err)
		}
		t.MovedAt, t.LeaseExpiresAt = t.MovedAt.UTC(), t.LeaseExpiresAt.UTC()
		t.LastEvidence, t.LastRejection, t.LastReceipt, t.LastObservation = last.evidence(), rej.evidence(), rcpt.evidence(), obs.evidence()
		if runAt != nil {
			// The last receipt: a REJECTED one that names nothing running
			// reads a runtime that failed closed (SnapshotID "").
			t.Running = &RunningSnapshot{SnapshotID: deref(runID), PublicationID: deref(runPub), ReportedAt: runAt.UTC()}
			if runRelease != nil {
				t.Running.ReleaseVersion = *runRelease
			}
			t.Diverged = t.Running.SnapshotID != t.SnapshotID
		}
		lagEnd := now
		if ackAt != nil {
			a := ackAt.UTC()
			t.AcknowledgedAt, lagEnd = &a, a
		}
		t.AckLagSeconds = max(int64(lagEnd.Sub(t.MovedAt)/time.Second), 0)
		t.State = targetState(&t, revoked, now)
		if retired {
			t.State = TargetRetired
		}
		if err := fn(&t); err != nil {
			return callbackError{err}
		}
	}
	if err := rows.Err(); err != nil {
		return dbErr("read pointers", err)
	}
	return nil
}

// targetState derives a target's state: revoked and lease-expired first;
// then what the receipts read the runtime running decides, so that a
// rejection of a tampered response by a runtime that still runs the
// desired snapshot leaves it APPLIED (the rejection is reported apart).
// Only a receipt read since the pointer's last move confirms it: one read
// before — an identity retired and brought back at the very snapshot it
// had, or a pointer rolled back to a snapshot it ran before — says
// nothing about the move, and the target stays PUBLISHED until readback
// reads it again.
func targetState(t *TargetStatus, revoked bool, now time.Time) string {
	switch {
	case revoked:
		return TargetRevoked
	case !now.Before(t.LeaseExpiresAt):
		return TargetLeaseExpired
	case t.Running != nil && !t.Diverged && !t.Running.ReportedAt.Before(t.MovedAt):
		return TargetApplied
	case t.LastRejection != nil && t.LastRejection.SnapshotID == t.SnapshotID && t.RejectionsSinceMove > 0:
		return TargetRejected
	default:
		return TargetPublished
	}
}

// prefixed qualifies the "e." columns of cols with alias.
func prefixed(alias, cols string) string {
	return strings.ReplaceAll(cols, "e.", alias+".")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// HistoryFilter narrows History. The zero value lists every move.
type HistoryFilter struct {
	Host      string // "" = any
	ServiceID string // "" = any
	Limit     int    // 0 = no limit; the newest moves are kept
}

// Move is one pointer_move row.
type Move struct {
	MoveID             int64     `json:"moveId"`
	Host               string    `json:"host"`
	ServiceID          string    `json:"serviceId"`
	EnvTag             string    `json:"envTag"`
	PreviousSnapshotID string    `json:"previousSnapshotId,omitempty"`
	NextSnapshotID     string    `json:"nextSnapshotId"`
	PublicationID      string    `json:"publicationId"`
	ReleaseVersion     int64     `json:"releaseVersion"`
	PreviousRelease    int64     `json:"previousRelease,omitempty"`
	Sequence           int64     `json:"sequence"`
	Action             string    `json:"action"`
	Actor              string    `json:"actor"`
	Reviewers          []string  `json:"reviewers"`
	Reason             string    `json:"reason"`
	CommandID          string    `json:"commandId"`
	MovedAt            time.Time `json:"movedAt"`
	// Retired marks the retirement of the identity by the activation of
	// ReleaseVersion (which does not contain it); NextSnapshotID is then the
	// snapshot it was retired from.
	Retired bool `json:"retired,omitempty"`
	// AppliedAt is the first receipt (read back by the control plane) of
	// the runtime running NextSnapshotID after this move and before the
	// identity's next move; Rejections counts the receipts rejecting it in
	// that time. They stay with this move whatever the runtime runs later;
	// the runtime's own reports (observations) never set them.
	AppliedAt  *time.Time `json:"appliedAt,omitempty"`
	Rejections int        `json:"rejections"`
	// ReceiptAt is the first receipt that names NextSnapshotID as the
	// runtime's running snapshot in the same span.
	ReceiptAt *time.Time `json:"receiptAt,omitempty"`
	// Renewal marks a move to or by a renewal release (ReleaseStatus.Renewal).
	Renewal bool `json:"renewal,omitempty"`
}

// History returns envTag's pointer moves, oldest first, each with the
// runtime reports about the snapshot it moved to. An environment without
// releases is ErrNotFound.
func (s *Store) History(ctx context.Context, envTag string, f HistoryFilter) ([]Move, error) {
	moves := []Move{}
	err := s.EachMove(ctx, envTag, f, func(m *Move) error {
		moves = append(moves, *m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return moves, nil
}

// EachMove calls fn with each of History's moves as it is read, oldest
// first, holding none of them: fn must not keep m. An error from fn stops
// the read and is returned as it is.
func (s *Store) EachMove(ctx context.Context, envTag string, f HistoryFilter, fn func(m *Move) error) error {
	limit := any(nil)
	if f.Limit > 0 {
		limit = f.Limit
	}
	var known bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.environment WHERE env_tag = $1)`, envTag).Scan(&known); err != nil {
		return fmt.Errorf("history %s: %w", envTag, dbErr("read environment", err))
	}
	if !known {
		return fmt.Errorf("history %s: %w", envTag, errNoEnvironment(envTag))
	}
	if f.Host != "" {
		// A mistyped target must not read as one that never moved.
		if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.config_snapshot
				WHERE env_tag = $1 AND host = $2 AND ($3 = '' OR service_id = $3))`, envTag, f.Host, f.ServiceID).Scan(&known); err != nil {
			return fmt.Errorf("history %s: %w", envTag, dbErr("read targets", err))
		}
		if !known {
			target := f.Host
			if f.ServiceID != "" {
				target += "/" + f.ServiceID
			}
			return fmt.Errorf("history %s: no release of environment %q has a target %q: %w", envTag, envTag, target, ErrNotFound)
		}
	}
	renewals, err := s.renewalReleases(ctx, envTag)
	if err != nil {
		return fmt.Errorf("history %s: %w", envTag, err)
	}
	rows, err := s.pool.Query(ctx, `SELECT m.*,
			(SELECT min(e.reported_at) FROM configpub.runtime_evidence e
				WHERE e.env_tag = m.env_tag AND e.host = m.host AND e.service_id = m.service_id
				AND e.kind = 'receipt' AND e.phase = 'current'
				AND coalesce(e.running_snapshot_id, CASE WHEN e.outcome = 'APPLIED' THEN e.snapshot_id END) = m.next_snapshot_id::uuid
				AND e.reported_at >= m.moved_at AND (nm.moved_at IS NULL OR e.reported_at < nm.moved_at)),
			(SELECT count(*) FROM configpub.runtime_evidence e
				WHERE e.env_tag = m.env_tag AND e.host = m.host AND e.service_id = m.service_id
				AND e.kind = 'receipt' AND e.phase = 'current'
				AND e.outcome = 'REJECTED' AND e.snapshot_id = m.next_snapshot_id::uuid
				AND e.reported_at >= m.moved_at AND (nm.moved_at IS NULL OR e.reported_at < nm.moved_at)),
			(SELECT min(e.reported_at) FROM configpub.runtime_evidence e
				WHERE e.env_tag = m.env_tag AND e.host = m.host AND e.service_id = m.service_id
				AND e.kind = 'receipt' AND e.phase = 'current' AND e.running_snapshot_id = m.next_snapshot_id::uuid
				AND e.reported_at >= m.moved_at AND (nm.moved_at IS NULL OR e.reported_at < nm.moved_at))
		FROM (
			SELECT move_id, host, service_id, env_tag, coalesce(previous_snapshot_id::text, '') AS previous_snapshot_id,
				next_snapshot_id::text AS next_snapshot_id, publication_id::text AS publication_id, release_version,
				coalesce(previous_release_version, 0) AS previous_release_version,
				sequence, action, actor, reviewers, reason, command_id::text AS command_id, moved_at, retired
			FROM configpub.pointer_move
			WHERE env_tag = $1 AND ($2 = '' OR host = $2) AND ($3 = '' OR service_id = $3)
			ORDER BY move_id DESC LIMIT $4) m
		LEFT JOIN LATERAL (SELECT n.moved_at FROM configpub.pointer_move n
			WHERE n.env_tag = m.env_tag AND n.host = m.host AND n.service_id = m.service_id AND n.move_id > m.move_id
			ORDER BY n.move_id LIMIT 1) nm ON true
		ORDER BY m.move_id`, envTag, f.Host, f.ServiceID, limit)
	if err != nil {
		return fmt.Errorf("history %s: %w", envTag, dbErr("read moves", err))
	}
	defer rows.Close()
	for rows.Next() {
		var m Move
		if err := rows.Scan(&m.MoveID, &m.Host, &m.ServiceID, &m.EnvTag, &m.PreviousSnapshotID, &m.NextSnapshotID,
			&m.PublicationID, &m.ReleaseVersion, &m.PreviousRelease, &m.Sequence, &m.Action, &m.Actor, &m.Reviewers,
			&m.Reason, &m.CommandID, &m.MovedAt, &m.Retired, &m.AppliedAt, &m.Rejections, &m.ReceiptAt); err != nil {
			return fmt.Errorf("history %s: %w", envTag, dbErr("read moves", err))
		}
		m.MovedAt = m.MovedAt.UTC()
		m.Renewal = renewals[m.ReleaseVersion]
		if m.ReceiptAt != nil {
			r := m.ReceiptAt.UTC()
			m.ReceiptAt = &r
		}
		if m.AppliedAt != nil {
			a := m.AppliedAt.UTC()
			m.AppliedAt = &a
		}
		if err := fn(&m); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("history %s: %w", envTag, dbErr("read moves", err))
	}
	return nil
}

// renewalReleases returns the versions of envTag's renewal releases: those
// recorded with the same policy sources digest as their base release (see
// ReleaseStatus.Renewal). A database that records no sources digests has
// none. An environment has a release per renewal or change, not per
// target: the set is small beside what its readers stream.
func (s *Store) renewalReleases(ctx context.Context, envTag string) (map[int64]bool, error) {
	renewals := map[int64]bool{}
	has, err := sourcesColumn(ctx, s.pool)
	if err != nil || !has {
		return renewals, err
	}
	rows, err := s.pool.Query(ctx, `SELECT r.release_version FROM configpub.config_release r
		JOIN configpub.config_release b ON b.env_tag = r.env_tag AND b.release_version = r.base_release_version
		WHERE r.env_tag = $1 AND r.sources_digest <> '' AND r.sources_digest = b.sources_digest`, envTag)
	if err != nil {
		return nil, dbErr("read renewal releases", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, dbErr("read renewal releases", err)
	}
	for _, v := range versions {
		renewals[v] = true
	}
	return renewals, nil
}
