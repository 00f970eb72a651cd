package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
)

var _ configserver.CandidateStore = (*Store)(nil)

// candidateQuery selects the identity's candidate pointer of its newest
// staged release with its snapshot metadata and the candidate delivery
// manifest signed for it when it was staged (or renewed since). A revoked
// snapshot is never a candidate.
const candidateQuery = `SELECT c.snapshot_id::text, s.audience, s.publication_id::text, s.policy_digest,
	s.content_digest, s.artifact_digest, s.release_version, c.manifest, c.manifest_signature, c.manifest_key_id
FROM configpub.candidate_pointer c
JOIN configpub.config_snapshot s ON s.snapshot_id = c.snapshot_id AND s.host = c.host
	AND s.service_id = c.service_id AND s.env_tag = c.env_tag
WHERE c.host = $1 AND c.service_id = $2 AND c.env_tag = $3 AND ` + notRevoked + `
ORDER BY c.release_version DESC LIMIT 1`

// Candidate returns the identity's snapshot in its newest staged release
// (candidate_pointer) with its candidate delivery manifest (phase
// "candidate"); a stored manifest of another phase, or one that disagrees
// with the snapshot, is an integrity error and is not served. A candidate
// staged before candidate manifests existed is served without one (a
// runtime rejects it).
func (s *Store) Candidate(ctx context.Context, id bundle.Identity) (*configserver.Delivery, error) {
	qctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	r := pointerRow{host: id.Host, serviceID: id.ServiceID, envTag: id.EnvTag, phase: bundle.PhaseCandidate}
	var sig, keyID pgtype.Text
	err := s.pool.QueryRow(qctx, candidateQuery, id.Host, id.ServiceID, id.EnvTag).Scan(&r.snapshotID, &r.audience,
		&r.publicationID, &r.policyDigest, &r.contentDigest, &r.artifactDigest, &r.releaseVersion,
		&r.manifest, &sig, &keyID)
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			s.dbErrors.Add(1)
		}
		return nil, classify("candidate "+id.String(), err)
	}
	r.signature, r.keyID = sig.String, keyID.String
	d, err := r.delivery(nil, nil)
	if err != nil {
		return nil, err
	}
	if d.Body, err = s.artifactBytes(ctx, d.ArtifactDigest); err != nil {
		return nil, fmt.Errorf("candidate %s: %w", id, err)
	}
	return d, nil
}
