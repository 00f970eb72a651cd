package promoter

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/registry"
)

// StoredArtifact is one target of a recorded release as the store holds
// it: the artifact promote published for its snapshot, rebuilt from the
// snapshot's row and its exact values.yml bytes, and the OCI manifest
// digest recorded when it was published.
type StoredArtifact struct {
	// Artifact carries the snapshot's identity, digests, release version
	// (the release that created the snapshot, its tag), createdAt (the
	// manifest's org.opencontainers.image.created) and values.yml bytes.
	registry.Artifact
	// ManifestDigest is config_snapshot.oci_manifest_digest, "" for a
	// snapshot recorded without a publication.
	ManifestDigest string
	// Revoked: the snapshot or its publication is revoked.
	Revoked bool
}

// ID is the target's "host/serviceId".
func (a *StoredArtifact) ID() string { return a.Host + "/" + a.ServiceID }

// ReleaseArtifacts resolves release of envTag (0: the active release) and
// returns its version and its targets' artifacts as the store holds them,
// in (host, service_id) order. The sequence reads them in batches (at most
// Options.MoveBatch targets or about 16 MB of values each, one short
// statement per batch, keyed on the last target read), so memory holds one
// batch whatever the size of the release. An unknown environment, one with
// no active release, or a release that is not recorded is ErrNotFound.
func (s *Store) ReleaseArtifacts(ctx context.Context, envTag string, release int64) (int64, iter.Seq2[StoredArtifact, error], error) {
	if envTag == "" {
		return 0, nil, invalid("envTag", "empty")
	}
	if release < 0 {
		return 0, nil, invalid("release", "%d is negative", release)
	}
	if release == 0 {
		var cur *int64
		err := s.pool.QueryRow(ctx, `SELECT current_release_version FROM configpub.environment WHERE env_tag = $1`, envTag).Scan(&cur)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && cur == nil) {
			return 0, nil, fmt.Errorf("environment %s has no active release: %w", envTag, ErrNotFound)
		}
		if err != nil {
			return 0, nil, dbErr("read environment "+envTag, err)
		}
		release = *cur
	} else {
		var ok bool
		err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM configpub.config_release WHERE env_tag = $1 AND release_version = $2)`,
			envTag, release).Scan(&ok)
		if err != nil {
			return 0, nil, dbErr(fmt.Sprintf("read release %s/%d", envTag, release), err)
		}
		if !ok {
			return 0, nil, fmt.Errorf("release %d of %s is not recorded: %w", release, envTag, ErrNotFound)
		}
	}
	seq := func(yield func(StoredArtifact, error) bool) {
		var after attachKey
		for {
			batch, full, err := s.releaseArtifactBatch(ctx, envTag, release, after)
			if err != nil {
				yield(StoredArtifact{}, err)
				return
			}
			for i := range batch {
				if !yield(batch[i], nil) {
					return
				}
			}
			if !full || len(batch) == 0 {
				return
			}
			last := &batch[len(batch)-1]
			after = attachKey{host: last.Host, service: last.ServiceID}
		}
	}
	return release, seq, nil
}

// releaseArtifactBatch reads the next targets of release after the key
// after; full reports that the batch ended on its bounds, not at the
// release's last target.
func (s *Store) releaseArtifactBatch(ctx context.Context, envTag string, release int64, after attachKey) ([]StoredArtifact, bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT s.host, s.service_id, s.env_tag, s.audience, s.snapshot_id::text,
			s.publication_id::text, s.policy_digest, s.content_digest, s.artifact_digest, s.release_version,
			s.created_at, s.oci_manifest_digest, `+snapshotRevokedSQL+`, a.bytes
		FROM configpub.config_release_target t
		JOIN configpub.config_snapshot s ON s.snapshot_id = t.snapshot_id
		JOIN configpub.artifact a ON a.artifact_digest = s.artifact_digest
		WHERE t.env_tag = $1 AND t.release_version = $2 AND (t.host, t.service_id) > ($3, $4)
		ORDER BY t.host, t.service_id
		LIMIT $5`, envTag, release, after.host, after.service, s.opts.MoveBatch)
	if err != nil {
		return nil, false, dbErr(fmt.Sprintf("read release %s/%d targets", envTag, release), err)
	}
	defer rows.Close()
	var (
		batch []StoredArtifact
		size  int
	)
	for rows.Next() {
		var a StoredArtifact
		if err := rows.Scan(&a.Host, &a.ServiceID, &a.EnvTag, &a.Audience, &a.SnapshotID, &a.PublicationID,
			&a.PolicyDigest, &a.ContentDigest, &a.ArtifactDigest, &a.ReleaseVersion, &a.CreatedAt,
			&a.ManifestDigest, &a.Revoked, &a.Values); err != nil {
			return nil, false, dbErr(fmt.Sprintf("read release %s/%d targets", envTag, release), err)
		}
		a.CreatedAt = a.CreatedAt.UTC()
		batch = append(batch, a)
		if size += len(a.Values); size >= s.opts.artifactBatchBytes {
			return batch, true, nil // the rest from this key on, by the next statement
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, dbErr(fmt.Sprintf("read release %s/%d targets", envTag, release), err)
	}
	return batch, len(batch) == s.opts.MoveBatch, nil
}
