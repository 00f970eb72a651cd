package promoter

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/bundle"
)

// ReleaseManifest returns the release manifest recorded for release version
// of envTag, byte for byte as it was recorded: the trusted previous release
// a promotion re-derives the committed manifest from. A release that was
// never recorded wraps bundle.ErrReleaseNotRecorded.
func (s *Store) ReleaseManifest(ctx context.Context, envTag string, version int64) ([]byte, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT definition FROM configpub.config_release WHERE env_tag = $1 AND release_version = $2`,
		envTag, version).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("release %d of %s is not recorded in the store (releases are promoted in order: build the change on the "+
			"newest recorded release, e.g. configpub compile --base-ref origin/main): %w", version, envTag, bundle.ErrReleaseNotRecorded)
	}
	if err != nil {
		return nil, dbErr(fmt.Sprintf("read release %s/%d", envTag, version), err)
	}
	return b, nil
}
