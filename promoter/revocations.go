package promoter

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/dbschema"
)

// RevocationRecord is one recorded revocation of an environment: a
// snapshot (of one target) or a publication (every snapshot one release
// created), why, by whom and when, and how much of the environment it
// still holds back.
type RevocationRecord struct {
	RevocationID  int64  `json:"revocationId"`
	SnapshotID    string `json:"snapshotId,omitempty"`
	PublicationID string `json:"publicationId,omitempty"`
	// Host and ServiceID name the target of a revoked snapshot.
	Host      string `json:"host,omitempty"`
	ServiceID string `json:"serviceId,omitempty"`
	// ReleaseVersion is the release that created what was revoked.
	ReleaseVersion int64 `json:"releaseVersion"`
	// Snapshots counts the snapshots the revocation covers; Current how
	// many of the environment's current pointers are at one of them now
	// (those runtimes lose their configuration when their lease ends,
	// unless a release or a rollback moves them).
	Snapshots int64     `json:"snapshots"`
	Current   int64     `json:"current"`
	Reason    string    `json:"reason"`
	Actor     string    `json:"actor"`
	RevokedAt time.Time `json:"revokedAt"`
	CommandID string    `json:"commandId,omitempty"`
}

// Revocations returns the revocations of envTag, newest first (limit 0 =
// all). An environment that does not exist is ErrNotFound.
func (s *Store) Revocations(ctx context.Context, envTag string, limit int) ([]RevocationRecord, error) {
	var known bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.environment WHERE env_tag = $1)`, envTag).Scan(&known); err != nil {
		return nil, fmt.Errorf("revocations of %s: %w", envTag, dbErr("read environment", err))
	}
	if !known {
		return nil, fmt.Errorf("revocations of %s: %w", envTag, errNoEnvironment(envTag))
	}
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, dbschema.RevocationsSQL, envTag, lim)
	if err != nil {
		return nil, fmt.Errorf("revocations of %s: %w", envTag, dbErr("read revocations", err))
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RevocationRecord, error) {
		var v RevocationRecord
		err := r.Scan(&v.RevocationID, &v.SnapshotID, &v.PublicationID, &v.Reason, &v.Actor, &v.RevokedAt, &v.CommandID,
			&v.Host, &v.ServiceID, &v.ReleaseVersion, &v.Snapshots, &v.Current)
		v.RevokedAt = v.RevokedAt.UTC()
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("revocations of %s: %w", envTag, dbErr("read revocations", err))
	}
	return out, nil
}
