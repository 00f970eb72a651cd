package promoter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/registry"
)

// Artifact is the exact bytes of one artifact, content-addressed:
// sha256(Bytes) must equal Digest.
type Artifact struct {
	Digest    string // "sha256:<hex>"
	MediaType string // "" = registry.ValuesArtifactType
	Bytes     []byte
}

func (a *Artifact) mediaType() string { return mediaTypeOr(a.MediaType) }

// mediaTypeOr is an artifact's media type, registry.ValuesArtifactType
// when mt is "".
func mediaTypeOr(mt string) string {
	if mt == "" {
		return registry.ValuesArtifactType
	}
	return mt
}

// defaultArtifactBatchBytes is how many bytes of artifacts one statement
// stores at most (a single artifact larger than that goes alone): a
// release's bytes go to the database in statements of bounded size, never
// as one array of every artifact (which PostgreSQL could not take past
// 1 GB, and which the client would build whole).
const defaultArtifactBatchBytes = 16 << 20

// artifactCheckBatch is how many digests one statement of checkStored
// looks up.
const artifactCheckBatch = 10000

// StoreArtifacts stores artifacts ahead of the release that will reference
// them, the way an OCI client uploads blobs before the manifest that names
// them: each row is content-addressed (a digest already stored is kept as
// it is; the same digest under another media type is ErrIntegrity), and
// the rows go in statements of bounded size, each committed on its own, so
// a caller can hand over a release's bytes batch by batch while it streams
// them and never hold them all. A release recorded with
// ReleaseInput.ArtifactsStored then references the rows instead of carrying
// the bytes. Rows that no release ends up referencing (the recording lost
// its compare-and-swap, the run stopped) change nothing that is served,
// and the next attempt finds them in place; CollectArtifacts removes them
// once they are old.
func (s *Store) StoreArtifacts(ctx context.Context, arts []Artifact) error {
	for i := range arts {
		a := &arts[i]
		if err := checkDigest("artifactDigest", a.Digest); err != nil {
			return fmt.Errorf("store artifacts: artifact %d: %w", i, err)
		}
		if len(a.Bytes) == 0 {
			return fmt.Errorf("store artifacts: artifact %s: %w", a.Digest, invalid("bytes", "empty"))
		}
		if got := digest.FromBytes(a.Bytes).String(); got != a.Digest {
			return fmt.Errorf("store artifacts: bytes digest %s, artifactDigest %s: %w", got, a.Digest, ErrIntegrity)
		}
	}
	if err := insertArtifacts(ctx, s.pool, arts, s.opts.artifactBatchBytes); err != nil {
		return fmt.Errorf("store artifacts: %w", err)
	}
	return nil
}

// recordArtifacts makes the artifacts of in's targets part of the
// recording transaction tx: their bytes are inserted, or, when they were
// stored ahead (in.ArtifactsStored), every one is checked to be there.
func (s *Store) recordArtifacts(ctx context.Context, tx pgx.Tx, in *ReleaseInput) error {
	if in.ArtifactsStored {
		return checkStored(ctx, tx, in.Targets)
	}
	arts := make([]Artifact, len(in.Targets))
	for i := range in.Targets {
		t := &in.Targets[i]
		arts[i] = Artifact{Digest: t.ArtifactDigest, MediaType: t.MediaType, Bytes: t.Values}
	}
	return insertArtifacts(ctx, tx, arts, s.opts.artifactBatchBytes)
}

// insertArtifacts stores arts, content-addressed, in statements of at most
// maxBytes of artifacts each (inside a transaction when q is one).
func insertArtifacts(ctx context.Context, q querier, arts []Artifact, maxBytes int) error {
	for len(arts) > 0 {
		n, size := 1, len(arts[0].Bytes)
		for n < len(arts) && size+len(arts[n].Bytes) <= maxBytes {
			size += len(arts[n].Bytes)
			n++
		}
		if err := insertArtifactBatch(ctx, q, arts[:n]); err != nil {
			return err
		}
		arts = arts[n:]
	}
	return nil
}

func insertArtifactBatch(ctx context.Context, q querier, arts []Artifact) error {
	n := len(arts)
	digests, types, bodies := make([]string, n), make([]string, n), make([][]byte, n)
	for i := range arts {
		digests[i], types[i], bodies[i] = arts[i].Digest, arts[i].mediaType(), arts[i].Bytes
	}
	// The table's CHECK ties every digest to its bytes, so an existing row
	// with the same digest has the same bytes; only the media type can
	// disagree.
	var bad, badType string
	err := q.QueryRow(ctx, `WITH input AS (
			SELECT * FROM unnest($1::text[], $2::text[], $3::bytea[]) AS x(d, mt, b)
		), ins AS (
			INSERT INTO configpub.artifact (artifact_digest, media_type, bytes, size)
			SELECT DISTINCT ON (d) d, mt, b, octet_length(b) FROM input
			ON CONFLICT (artifact_digest) DO NOTHING
		)
		SELECT i.d, a.media_type FROM input i JOIN configpub.artifact a ON a.artifact_digest = i.d
		WHERE a.media_type <> i.mt LIMIT 1`, digests, types, bodies).Scan(&bad, &badType)
	if err == nil {
		return fmt.Errorf("artifact %s is stored with media type %q: %w", bad, badType, ErrIntegrity)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return dbErr("insert artifacts", err)
	}
	return nil
}

// checkStored checks, inside the recording transaction, that the artifact
// of every target is stored with the target's media type: a release
// recorded with ArtifactsStored references rows, and one that is missing
// is the caller's error, named.
func checkStored(ctx context.Context, tx pgx.Tx, ts []Target) error {
	for len(ts) > 0 {
		n := min(len(ts), artifactCheckBatch)
		digests, types := make([]string, n), make([]string, n)
		for i := range ts[:n] {
			digests[i], types[i] = ts[i].ArtifactDigest, ts[i].mediaType()
		}
		var k int
		var stored *string
		err := tx.QueryRow(ctx, `SELECT i.k, a.media_type
			FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS i(d, mt, k)
			LEFT JOIN configpub.artifact a ON a.artifact_digest = i.d
			WHERE a.artifact_digest IS NULL OR a.media_type <> i.mt
			ORDER BY i.k LIMIT 1`, digests, types).Scan(&k, &stored)
		if err == nil {
			t := &ts[k-1]
			if stored == nil {
				return notStored(ctx, tx, t)
			}
			return fmt.Errorf("target %s: artifact %s is stored with media type %q, want %q: %w", t.Identity(), t.ArtifactDigest, *stored, t.mediaType(), ErrIntegrity)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return dbErr("check stored artifacts", err)
		}
		ts = ts[n:]
	}
	return nil
}

// notStored is the error of a target whose artifact checkStored did not
// find: ErrConflict when db gc deleted it (it was stored before, by an
// earlier attempt or by this one, long enough ago for --min-age), which a
// run again cures by storing it again; else the caller's ErrInvalid.
func notStored(ctx context.Context, tx pgx.Tx, t *Target) error {
	var collected, stored time.Time
	err := tx.QueryRow(ctx, `SELECT collected_at, stored_at FROM configpub.collected_artifact
		WHERE artifact_digest = $1 ORDER BY collected_at DESC LIMIT 1`, t.ArtifactDigest).Scan(&collected, &stored)
	switch {
	case err == nil:
		return fmt.Errorf("target %s: artifact %s was deleted by configpub db gc at %s (first stored at %s, so older than its --min-age, "+
			"and no release referenced it yet) after this promotion stored it; nothing was recorded: run the promotion again, which stores it again: %w",
			t.Identity(), t.ArtifactDigest, formatTime(collected), formatTime(stored), ErrConflict)
	case !errors.Is(err, pgx.ErrNoRows):
		return dbErr("check collected artifacts", err)
	}
	return fmt.Errorf("target %s: artifact %s is not stored (store it with StoreArtifacts before recording with artifactsStored): %w",
		t.Identity(), t.ArtifactDigest, ErrInvalid)
}

// Head reports an environment's latest recorded release and the release
// whose activation is in flight or unconfirmed (0 when there is none; an
// environment never promoted has neither). It reads without a lock: a
// caller about to store a release's artifacts ahead of the recording uses
// it to skip that work when the recording's compare-and-swap on the head
// cannot succeed (a replay or a lost race, which store nothing); the
// recording checks again under its lock.
func (s *Store) Head(ctx context.Context, envTag string) (head, pending int64, err error) {
	err = s.pool.QueryRow(ctx, `SELECT
			coalesce((SELECT max(release_version) FROM configpub.config_release WHERE env_tag = $1), 0),
			coalesce((SELECT pending_release_version FROM configpub.environment WHERE env_tag = $1), 0)`, envTag).
		Scan(&head, &pending)
	if err != nil {
		return 0, 0, dbErr("read head release of "+envTag, err)
	}
	return head, pending, nil
}
