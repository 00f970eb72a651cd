package replica

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver/client"
)

// Options configure a Store. The zero value is the strict default.
type Options struct {
	// AllowRollback materializes a snapshot whose release version, source
	// event watermark or policy version is lower than the applied one when
	// its delivery manifest is a later pointer move (a higher sequence):
	// a rollback the control plane signed. Off, such a snapshot is
	// ErrRegression.
	AllowRollback bool
	// KeepUnlisted refuses (ErrUnlisted) a snapshot whose complete,
	// verified inventory neither lists nor tombstones a materialized
	// replica, instead of deleting that replica. A snapshot's tombstones
	// name what changed since the release before it, so a service that
	// skipped releases (promote records the releases a catch-up passes
	// over without activating them) or follows a rollback meets such
	// replicas — removed bindings and knowledge bases among them — and,
	// with KeepUnlisted, stays at its applied snapshot until an operator
	// acts.
	KeepUnlisted bool
	// PruneUnlisted is ignored.
	//
	// Deprecated: Apply deletes unlisted replicas unless KeepUnlisted is
	// set.
	PruneUnlisted bool
	// Now is the clock for applied_at. Default time.Now.
	Now func() time.Time
}

// Store materializes Knowledge snapshots into the service's own database:
// the tables Migrate creates, written through a pool of the loader role.
type Store struct {
	pool *pgxpool.Pool
	opts Options
}

// New returns a Store over pool (connected as a member of LoaderRole).
func New(pool *pgxpool.Pool, opts Options) *Store {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{pool: pool, opts: opts}
}

// Outcome says what Apply did.
type Outcome string

// Outcomes.
const (
	OutcomeApplied   Outcome = "APPLIED"   // the replica set and pointer are the snapshot's now
	OutcomeUnchanged Outcome = "UNCHANGED" // the snapshot (same manifest sequence) was already applied; no replica written
)

// Result reports one Apply.
type Result struct {
	Outcome    Outcome
	SnapshotID string
	Previous   *Pointer // the pointer before; nil on the first apply
	Inserted   int      // replicas new in this snapshot
	Updated    int      // replicas whose digest changed
	Kept       int      // replicas unchanged (their rows are not written)
	Deleted    int      // replicas deleted by a tombstone
	// LeaseRenewed: UNCHANGED, and a later lease of the applied snapshot
	// (a renewal: same sequence, later issuedAt) replaced the pointer's
	// lease_expires_at with its own (earlier than before when the lease
	// was shortened), or the applied manifest's lease was recorded for a
	// pointer applied before schema version 2, which had none.
	LeaseRenewed bool
	Pruned       int // replicas neither listed nor tombstoned, deleted (see KeepUnlisted)
}

// Pointer is an identity's applied snapshot.
type Pointer struct {
	Identity bundle.Identity
	Position
	ItemCount int
	AppliedAt time.Time
}

// Apply stages snap (Stage) and materializes it in one transaction: under
// a per-identity lock it reads the applied pointer, refuses a regression,
// inserts new replicas, updates changed ones, deletes the tombstoned ones
// and those the inventory does not list (unless Options.KeepUnlisted),
// leaves unchanged rows untouched and moves the applied pointer with the
// signed lease — all or nothing. Re-applying the applied snapshot writes
// nothing (OutcomeUnchanged); a lease renewal of it (same sequence, later
// issuedAt) moves only the pointer's lease (Result.LeaseRenewed). Apply writes only the replica tables and the
// pointer: it creates no jobs and triggers nothing else, so a repeated or
// replayed apply has no external effect.
func (s *Store) Apply(ctx context.Context, snap *client.Snapshot) (*Result, error) {
	st, err := Stage(snap)
	if err != nil {
		return nil, err
	}
	var res *Result
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{}, func(tx pgx.Tx) error {
		var err error
		res, err = s.apply(ctx, tx, st)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("materialize knowledge snapshot %s for %s: %w", st.SnapshotID, st.Identity, err)
	}
	return res, nil
}

func (s *Store) apply(ctx context.Context, tx pgx.Tx, st *Staged) (*Result, error) {
	id := st.Identity
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('configpub_knowledge' || chr(10) || $1 || chr(10) || $2 || chr(10) || $3, 0))",
		id.Host, id.ServiceID, id.EnvTag); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	prev, err := readPointer(ctx, tx, id)
	if err != nil && !errors.Is(err, ErrNotApplied) {
		return nil, err
	}
	res := &Result{SnapshotID: st.SnapshotID, Previous: prev}
	if prev != nil {
		same, err := s.checkOrder(prev, st)
		if err != nil {
			return nil, err
		}
		if same {
			res.Outcome = OutcomeUnchanged
			res.Kept = prev.ItemCount
			renewal := st.ManifestIssuedAt.After(prev.ManifestIssuedAt)
			// A pointer applied before schema version 2 has no lease:
			// the applied manifest, applied again, records its own.
			unleased := prev.LeaseExpiresAt.IsZero() && st.ManifestIssuedAt.Equal(prev.ManifestIssuedAt)
			if (renewal || unleased) && !st.LeaseExpiresAt.IsZero() {
				// A lease renewal: only the pointer's lease moves — to the
				// renewal's end, earlier than the one before when the lease
				// was shortened, as the runtime client's does.
				if _, err := tx.Exec(ctx, `UPDATE configpub_knowledge.applied_snapshot
					SET manifest_issued_at = $4, lease_expires_at = $5
					WHERE host = $1 AND service_id = $2 AND env_tag = $3`,
					id.Host, id.ServiceID, id.EnvTag, st.ManifestIssuedAt, st.LeaseExpiresAt); err != nil {
					return nil, fmt.Errorf("record the renewed lease: %w", err)
				}
				res.LeaseRenewed = true
			}
			return res, nil
		}
	}
	rows, err := tx.Query(ctx, `SELECT kind, item_id, digest FROM configpub_knowledge.replica
		WHERE host = $1 AND service_id = $2 AND env_tag = $3`, id.Host, id.ServiceID, id.EnvTag)
	if err != nil {
		return nil, fmt.Errorf("read replicas: %w", err)
	}
	have := map[key]string{}
	for rows.Next() {
		var k key
		var d string
		if err := rows.Scan(&k.kind, &k.id, &d); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read replicas: %w", err)
		}
		have[k] = d
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read replicas: %w", err)
	}

	var up upsert
	listed := make(map[key]bool, len(st.Items))
	for _, it := range st.Items {
		k := key{it.Kind, it.ID}
		listed[k] = true
		d, ok := have[k]
		switch {
		case !ok:
			res.Inserted++
		case d != it.Digest:
			res.Updated++
		default:
			res.Kept++
			continue
		}
		up.add(it)
	}
	var del removal
	tombed := make(map[key]bool, len(st.Tombstones))
	for _, t := range st.Tombstones {
		k := key{t.Kind, t.ID}
		tombed[k] = true
		if _, ok := have[k]; ok {
			del.add(k)
			res.Deleted++
		}
	}
	var unlisted []key
	for k := range have {
		if !listed[k] && !tombed[k] {
			unlisted = append(unlisted, k)
		}
	}
	if len(unlisted) > 0 {
		if s.opts.KeepUnlisted {
			k := unlisted[0]
			return nil, fmt.Errorf("%w: %d materialized replica(s), e.g. %s %s, are neither in the inventory of release %d nor tombstoned (KeepUnlisted is set: unset it to delete them)",
				ErrUnlisted, len(unlisted), k.kind, k.id, st.ReleaseVersion)
		}
		for _, k := range unlisted {
			del.add(k)
		}
		res.Pruned = len(unlisted)
	}

	now := s.opts.Now().UTC()
	if _, err := tx.Exec(ctx, `INSERT INTO configpub_knowledge.applied_snapshot (host, service_id, env_tag,
		snapshot_id, publication_id, policy_snapshot_id, release_version, policy_version, source_event_sequence,
		revocation_epoch, compatibility_generation, manifest_sequence, manifest_issued_at, artifact_digest,
		content_digest, policy_digest, inventory_digest, item_count, applied_at, lease_expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
		ON CONFLICT (host, service_id, env_tag) DO UPDATE SET snapshot_id = excluded.snapshot_id,
		publication_id = excluded.publication_id, policy_snapshot_id = excluded.policy_snapshot_id,
		release_version = excluded.release_version, policy_version = excluded.policy_version,
		source_event_sequence = excluded.source_event_sequence, revocation_epoch = excluded.revocation_epoch,
		compatibility_generation = excluded.compatibility_generation, manifest_sequence = excluded.manifest_sequence,
		manifest_issued_at = excluded.manifest_issued_at, artifact_digest = excluded.artifact_digest,
		content_digest = excluded.content_digest, policy_digest = excluded.policy_digest,
		inventory_digest = excluded.inventory_digest, item_count = excluded.item_count, applied_at = excluded.applied_at,
		lease_expires_at = excluded.lease_expires_at`,
		id.Host, id.ServiceID, id.EnvTag, st.SnapshotID, st.PublicationID, st.PolicySnapshotID, st.ReleaseVersion,
		st.PolicyVersion, st.SourceEventSequence, st.RevocationEpoch, st.CompatibilityGeneration, st.ManifestSequence,
		st.ManifestIssuedAt, st.ArtifactDigest, st.ContentDigest, st.PolicyDigest, st.InventoryDigest, len(st.Items), now,
		nullTime(st.LeaseExpiresAt)); err != nil {
		return nil, fmt.Errorf("move the applied pointer: %w", err)
	}
	if len(del.kinds) > 0 {
		if _, err := tx.Exec(ctx, `DELETE FROM configpub_knowledge.replica r USING unnest($4::text[], $5::text[]) AS d(kind, item_id)
			WHERE r.host = $1 AND r.service_id = $2 AND r.env_tag = $3 AND r.kind = d.kind AND r.item_id = d.item_id`,
			id.Host, id.ServiceID, id.EnvTag, del.kinds, del.ids); err != nil {
			return nil, fmt.Errorf("delete replicas: %w", err)
		}
	}
	if len(up.kinds) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO configpub_knowledge.replica (host, service_id, env_tag, kind, item_id, digest, content, release_version, snapshot_id)
			SELECT $1, $2, $3, u.kind, u.item_id, u.digest, u.content::jsonb, $7, $8
			FROM unnest($4::text[], $5::text[], $6::text[], $9::text[]) AS u(kind, item_id, digest, content)
			ON CONFLICT (host, service_id, env_tag, kind, item_id) DO UPDATE SET digest = excluded.digest,
			content = excluded.content, release_version = excluded.release_version, snapshot_id = excluded.snapshot_id`,
			id.Host, id.ServiceID, id.EnvTag, up.kinds, up.ids, up.digests, st.ReleaseVersion, st.SnapshotID, up.contents); err != nil {
			return nil, fmt.Errorf("write replicas: %w", err)
		}
	}
	res.Outcome = OutcomeApplied
	return res, nil
}

// checkOrder refuses st when it is older than the applied pointer p. It
// reports true when st is the applied snapshot at the applied manifest
// sequence (a repeat or a lease renewal): nothing to write.
func (s *Store) checkOrder(p *Pointer, st *Staged) (bool, error) {
	switch {
	case st.ManifestSequence < p.ManifestSequence && st.SnapshotID == p.SnapshotID:
		// The applied snapshot itself, under a manifest from before it was
		// re-signed (lease resign, revoke --epoch): a loader whose runtime
		// has not loaded the newer manifest yet, nothing to apply.
		return false, fmt.Errorf("%w: snapshot %s is applied under a later delivery manifest (sequence %d > %d: re-signed since); nothing to apply",
			ErrRegression, p.SnapshotID, p.ManifestSequence, st.ManifestSequence)
	case st.ManifestSequence < p.ManifestSequence:
		return false, fmt.Errorf("%w: delivery manifest sequence %d < applied %d (snapshot %s, release %d): a replayed delivery",
			ErrRegression, st.ManifestSequence, p.ManifestSequence, p.SnapshotID, p.ReleaseVersion)
	case st.ManifestSequence == p.ManifestSequence && st.SnapshotID != p.SnapshotID:
		return false, fmt.Errorf("%w: snapshot %s at the applied delivery manifest sequence %d, which is snapshot %s's",
			ErrRegression, st.SnapshotID, st.ManifestSequence, p.SnapshotID)
	case st.ManifestSequence == p.ManifestSequence:
		if st.InventoryDigest != p.InventoryDigest {
			return false, fmt.Errorf("%w: snapshot %s inventory %s differs from the applied %s", ErrInvalid, st.SnapshotID, st.InventoryDigest, p.InventoryDigest)
		}
		return true, nil
	case st.RevocationEpoch < p.RevocationEpoch:
		return false, fmt.Errorf("%w: revocation epoch %d < applied %d", ErrRegression, st.RevocationEpoch, p.RevocationEpoch)
	}
	if s.opts.AllowRollback {
		return false, nil
	}
	for _, f := range []struct {
		name      string
		got, have int64
	}{
		{"release version", st.ReleaseVersion, p.ReleaseVersion},
		{"source event watermark", st.SourceEventSequence, p.SourceEventSequence},
		{"policy version", st.PolicyVersion, p.PolicyVersion},
	} {
		if f.got < f.have {
			return false, fmt.Errorf("%w: %s %d < applied %d (a rollback; set AllowRollback to follow signed rollbacks)", ErrRegression, f.name, f.got, f.have)
		}
	}
	return false, nil
}

// upsert collects replicas to write, column by column (unnest).
type upsert struct{ kinds, ids, digests, contents []string }

func (u *upsert) add(it Item) {
	u.kinds = append(u.kinds, it.Kind)
	u.ids = append(u.ids, it.ID)
	u.digests = append(u.digests, it.Digest)
	u.contents = append(u.contents, string(it.Content))
}

// removal collects replicas to delete.
type removal struct{ kinds, ids []string }

func (d *removal) add(k key) {
	d.kinds = append(d.kinds, k.kind)
	d.ids = append(d.ids, k.id)
}

// Applied returns the identity's applied pointer, or ErrNotApplied.
func (s *Store) Applied(ctx context.Context, id bundle.Identity) (*Pointer, error) {
	p, err := readPointer(ctx, s.pool, id)
	if err != nil {
		return nil, fmt.Errorf("read applied knowledge snapshot of %s: %w", id, err)
	}
	return p, nil
}

// Replicas returns the identity's materialized replicas, sorted by kind
// and id.
func (s *Store) Replicas(ctx context.Context, id bundle.Identity) ([]Item, error) {
	rows, err := s.pool.Query(ctx, `SELECT kind, item_id, digest, content::text FROM configpub_knowledge.replica
		WHERE host = $1 AND service_id = $2 AND env_tag = $3 ORDER BY kind COLLATE "C", item_id COLLATE "C"`, id.Host, id.ServiceID, id.EnvTag)
	if err != nil {
		return nil, fmt.Errorf("read knowledge replicas of %s: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Item, error) {
		var it Item
		var content string
		err := r.Scan(&it.Kind, &it.ID, &it.Digest, &content)
		it.Content = []byte(content)
		return it, err
	})
	if err != nil {
		return nil, fmt.Errorf("read knowledge replicas of %s: %w", id, err)
	}
	return out, nil
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func readPointer(ctx context.Context, q querier, id bundle.Identity) (*Pointer, error) {
	p := &Pointer{Identity: id}
	var lease *time.Time
	err := q.QueryRow(ctx, `SELECT snapshot_id::text, publication_id::text, policy_snapshot_id::text, release_version,
		policy_version, source_event_sequence, revocation_epoch, compatibility_generation, manifest_sequence,
		manifest_issued_at, artifact_digest, content_digest, policy_digest, inventory_digest, item_count, applied_at,
		lease_expires_at
		FROM configpub_knowledge.applied_snapshot WHERE host = $1 AND service_id = $2 AND env_tag = $3`,
		id.Host, id.ServiceID, id.EnvTag).Scan(&p.SnapshotID, &p.PublicationID, &p.PolicySnapshotID, &p.ReleaseVersion,
		&p.PolicyVersion, &p.SourceEventSequence, &p.RevocationEpoch, &p.CompatibilityGeneration, &p.ManifestSequence,
		&p.ManifestIssuedAt, &p.ArtifactDigest, &p.ContentDigest, &p.PolicyDigest, &p.InventoryDigest, &p.ItemCount, &p.AppliedAt,
		&lease)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotApplied
	}
	if err != nil {
		return nil, fmt.Errorf("read applied pointer: %w", err)
	}
	if lease != nil {
		p.LeaseExpiresAt = lease.UTC()
	}
	return p, nil
}

// nullTime is t, or SQL NULL when t is zero.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
