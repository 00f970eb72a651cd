package pgstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
)

var _ configserver.CandidateStore = (*Store)(nil)

// Candidate returns the identity's snapshot in its newest staged release
// (candidate_pointer), served like a historical snapshot: with the latest
// delivery manifest issued for it, if any, and never a revoked one.
func (s *Store) Candidate(ctx context.Context, id bundle.Identity) (*configserver.Delivery, error) {
	qctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	var snapshotID string
	err := s.pool.QueryRow(qctx, `SELECT snapshot_id::text FROM configpub.candidate_pointer
		WHERE host = $1 AND service_id = $2 AND env_tag = $3
		ORDER BY release_version DESC LIMIT 1`, id.Host, id.ServiceID, id.EnvTag).Scan(&snapshotID)
	cancel()
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			s.dbErrors.Add(1)
		}
		return nil, classify("candidate "+id.String(), err)
	}
	return s.Snapshot(ctx, id, snapshotID)
}
