package promoter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Target states reported by Status.
const (
	TargetRevoked      = "REVOKED"       // the current snapshot is revoked
	TargetLeaseExpired = "LEASE_EXPIRED" // the current lease ran out (renew leases)
	TargetApplied      = "APPLIED"       // the runtime reported applying the current snapshot
	TargetRejected     = "REJECTED"      // the runtime reported rejecting the current snapshot
	TargetPublished    = "PUBLISHED"     // delivered; no runtime evidence for this snapshot yet
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
}

// TargetStatus is one current pointer.
type TargetStatus struct {
	Host            string    `json:"host"`
	ServiceID       string    `json:"serviceId"`
	EnvTag          string    `json:"envTag"`
	Audience        string    `json:"audience"`
	SnapshotID      string    `json:"snapshotId"`
	ReleaseVersion  int64     `json:"releaseVersion"` // release that created the snapshot
	ArtifactDigest  string    `json:"artifactDigest"`
	ContentDigest   string    `json:"contentDigest"`
	PolicyDigest    string    `json:"policyDigest"`
	State           string    `json:"state"`
	PreviousRelease int64     `json:"previousRelease,omitempty"` // release of the snapshot before the last move
	Sequence        int64     `json:"sequence"`
	MovedAt         time.Time `json:"movedAt"`
	LeaseExpiresAt  time.Time `json:"leaseExpiresAt"`
	LastEvidence    *Evidence `json:"lastEvidence,omitempty"`
}

// Evidence is a runtime's last report.
type Evidence struct {
	Outcome    string    `json:"outcome"`
	Reason     string    `json:"reason,omitempty"`
	SnapshotID string    `json:"snapshotId,omitempty"`
	ReportedAt time.Time `json:"reportedAt"`
}

// Status reads envTag's releases and, per target, the current snapshot,
// digests, state, previous release and last runtime evidence.
func (s *Store) Status(ctx context.Context, envTag string) (*Status, error) {
	st, err := s.status(ctx, envTag)
	if err != nil {
		return nil, fmt.Errorf("status %s: %w", envTag, err)
	}
	return st, nil
}

func (s *Store) status(ctx context.Context, envTag string) (*Status, error) {
	st := &Status{EnvTag: envTag, Releases: []ReleaseStatus{}, Targets: []TargetStatus{}}
	err := s.pool.QueryRow(ctx, `SELECT coalesce(current_release_version, 0), coalesce(pending_release_version, 0)
		FROM configpub.environment WHERE env_tag = $1`, envTag).Scan(&st.CurrentRelease, &st.PendingRelease)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, dbErr("read environment", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT release_version, base_release_version, lifecycle_state, execution_outcome,
			row_revision, definition_hash, source_commit, actor, reason, target_count, created_at, updated_at
		FROM configpub.config_release WHERE env_tag = $1 ORDER BY release_version`, envTag)
	if err != nil {
		return nil, dbErr("read releases", err)
	}
	for rows.Next() {
		var r ReleaseStatus
		if err := rows.Scan(&r.ReleaseVersion, &r.BaseReleaseVersion, &r.State, &r.Outcome, &r.RowRevision,
			&r.DefinitionHash, &r.SourceCommit, &r.Actor, &r.Reason, &r.TargetCount, &r.CreatedAt, &r.UpdatedAt); err != nil {
			rows.Close()
			return nil, dbErr("read releases", err)
		}
		st.Releases = append(st.Releases, r)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("read releases", err)
	}
	now := s.opts.Clock()
	rows, err = s.pool.Query(ctx, `SELECT p.host, p.service_id, p.env_tag, s.audience, p.snapshot_id::text,
			p.release_version, s.artifact_digest, s.content_digest, s.policy_digest, p.sequence, p.moved_at,
			p.lease_expires_at,
			(s.snapshot_id IN (SELECT snapshot_id FROM configpub.revocation WHERE snapshot_id IS NOT NULL)
			 OR s.publication_id IN (SELECT publication_id FROM configpub.revocation WHERE publication_id IS NOT NULL)),
			coalesce((SELECT ps.release_version FROM configpub.pointer_move m
				JOIN configpub.config_snapshot ps ON ps.snapshot_id = m.previous_snapshot_id
				WHERE m.env_tag = p.env_tag AND m.host = p.host AND m.service_id = p.service_id
				ORDER BY m.move_id DESC LIMIT 1), 0),
			ev.outcome, ev.reason, ev.snapshot_id::text, ev.reported_at
		FROM configpub.current_pointer p
		JOIN configpub.config_snapshot s ON s.snapshot_id = p.snapshot_id
		LEFT JOIN LATERAL (SELECT e.outcome, e.reason, e.snapshot_id, e.reported_at FROM configpub.runtime_evidence e
			WHERE e.env_tag = p.env_tag AND e.host = p.host AND e.service_id = p.service_id
			ORDER BY e.evidence_id DESC LIMIT 1) ev ON true
		WHERE p.env_tag = $1
		ORDER BY p.host, p.service_id`, envTag)
	if err != nil {
		return nil, dbErr("read pointers", err)
	}
	defer rows.Close()
	for rows.Next() {
		var t TargetStatus
		var revoked bool
		var evOutcome, evReason, evSnapshot *string
		var evAt *time.Time
		if err := rows.Scan(&t.Host, &t.ServiceID, &t.EnvTag, &t.Audience, &t.SnapshotID, &t.ReleaseVersion,
			&t.ArtifactDigest, &t.ContentDigest, &t.PolicyDigest, &t.Sequence, &t.MovedAt, &t.LeaseExpiresAt,
			&revoked, &t.PreviousRelease, &evOutcome, &evReason, &evSnapshot, &evAt); err != nil {
			return nil, dbErr("read pointers", err)
		}
		if evOutcome != nil {
			t.LastEvidence = &Evidence{Outcome: *evOutcome, Reason: deref(evReason), SnapshotID: deref(evSnapshot), ReportedAt: evAt.UTC()}
		}
		t.MovedAt, t.LeaseExpiresAt = t.MovedAt.UTC(), t.LeaseExpiresAt.UTC()
		switch {
		case revoked:
			t.State = TargetRevoked
		case !now.Before(t.LeaseExpiresAt):
			t.State = TargetLeaseExpired
		case t.LastEvidence != nil && t.LastEvidence.SnapshotID == t.SnapshotID:
			t.State = t.LastEvidence.Outcome
		default:
			t.State = TargetPublished
		}
		st.Targets = append(st.Targets, t)
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr("read pointers", err)
	}
	if st.WorkflowViews, err = workflowViews(ctx, s.pool, envTag); err != nil {
		return nil, err
	}
	return st, nil
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
}

// History returns envTag's pointer moves, oldest first.
func (s *Store) History(ctx context.Context, envTag string, f HistoryFilter) ([]Move, error) {
	limit := any(nil)
	if f.Limit > 0 {
		limit = f.Limit
	}
	rows, err := s.pool.Query(ctx, `SELECT * FROM (
			SELECT move_id, host, service_id, env_tag, coalesce(previous_snapshot_id::text, ''),
				next_snapshot_id::text, publication_id::text, release_version, coalesce(previous_release_version, 0),
				sequence, action, actor, reviewers, reason, command_id::text, moved_at
			FROM configpub.pointer_move
			WHERE env_tag = $1 AND ($2 = '' OR host = $2) AND ($3 = '' OR service_id = $3)
			ORDER BY move_id DESC LIMIT $4) m
		ORDER BY move_id`, envTag, f.Host, f.ServiceID, limit)
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", envTag, dbErr("read moves", err))
	}
	moves, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Move, error) {
		var m Move
		err := row.Scan(&m.MoveID, &m.Host, &m.ServiceID, &m.EnvTag, &m.PreviousSnapshotID, &m.NextSnapshotID,
			&m.PublicationID, &m.ReleaseVersion, &m.PreviousRelease, &m.Sequence, &m.Action, &m.Actor, &m.Reviewers,
			&m.Reason, &m.CommandID, &m.MovedAt)
		m.MovedAt = m.MovedAt.UTC()
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("history %s: %w", envTag, dbErr("read moves", err))
	}
	if moves == nil {
		moves = []Move{}
	}
	return moves, nil
}
