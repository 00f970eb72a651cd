package readback

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/internal/pointernote"
)

// Store records receipts in the release store (the promoter's database
// role: the Config Server's role cannot write a receipt) and tells the
// operator console's live pages about them (see notices).
type Store struct {
	pool *pgxpool.Pool
	n    *notices
	// now stamps each receipt's reported_at; nil stamps it with the
	// database's clock.
	now func() time.Time
}

// NewStore returns a Store over pool. Receipts are stamped with the
// database's clock.
func NewStore(pool *pgxpool.Pool) *Store {
	return NewStoreAt(pool, nil)
}

// NewStoreAt is NewStore stamping each receipt with now() instead of the
// database's clock (nil: the database's), for a promoter and readback that
// run on one injected clock.
func NewStoreAt(pool *pgxpool.Pool, now func() time.Time) *Store {
	s := &Store{pool: pool, now: now}
	s.n = newNotices(time.Now, func(ctx context.Context, env string) error {
		_, err := pool.Exec(ctx, pointernote.ConsoleSQL, env)
		return err
	})
	return s
}

// Flush notifies the console of every environment with receipts it has not
// been told about yet.
func (s *Store) Flush(ctx context.Context) error { return s.n.flush(ctx) }

// noticeEvery is how often the console is notified of one environment's
// new receipts at most.
const noticeEvery = time.Second

// notices throttles the console notifications of new receipts: one per
// environment at the first new receipt, then at most one every noticeEvery
// while more arrive, and flush sends what is still due — not one per
// receipt, which at 100,000 targets would be 100,000 a readback round.
type notices struct {
	now  func() time.Time
	send func(ctx context.Context, env string) error

	mu      sync.Mutex
	sent    map[string]time.Time // environment -> last notification sent
	pending map[string]bool      // environments with receipts since then
}

func newNotices(now func() time.Time, send func(ctx context.Context, env string) error) *notices {
	return &notices{now: now, send: send, sent: map[string]time.Time{}, pending: map[string]bool{}}
}

// changed notes a new receipt of env and notifies the console unless it
// was notified of env less than noticeEvery ago (then flush or a later
// receipt does). A notification that fails is left pending: the receipt
// is recorded, the console only learns of it later.
func (n *notices) changed(ctx context.Context, env string) {
	n.mu.Lock()
	now := n.now()
	if last, ok := n.sent[env]; ok && now.Sub(last) < noticeEvery {
		n.pending[env] = true
		n.mu.Unlock()
		return
	}
	n.sent[env] = now
	delete(n.pending, env)
	n.mu.Unlock()
	if err := n.send(ctx, env); err != nil {
		n.mu.Lock()
		n.pending[env] = true
		n.mu.Unlock()
	}
}

// flush sends the notifications still due, in environment order.
func (n *notices) flush(ctx context.Context) error {
	n.mu.Lock()
	envs := slices.Sorted(maps.Keys(n.pending))
	clear(n.pending)
	n.mu.Unlock()
	var errs []error
	for _, env := range envs {
		err := n.send(ctx, env)
		n.mu.Lock()
		if err != nil {
			n.pending[env] = true
			errs = append(errs, fmt.Errorf("notify the console of %s: %w", env, err))
		} else {
			n.sent[env] = n.now()
		}
		n.mu.Unlock()
	}
	return errors.Join(errs...)
}

// Record inserts r as a receipt unless the same receipt (identity, phase,
// snapshot, result and runtime load time) is already recorded since the
// identity's pointer last moved; it reports whether a row was added. (A
// receipt read before the move, for instance before the identity was
// retired and brought back at the same snapshot, confirms nothing about
// the move: status counts only receipts since it, so the same state read
// again after it is recorded again.) Every snapshot r names must be a snapshot of
// r's identity and audience and its publication the snapshot's; otherwise
// nothing is stored and the error matches ErrInvalidReceipt.
func (s *Store) Record(ctx context.Context, r bundle.Receipt, observedAt time.Time) (bool, error) {
	if r.Phase != bundle.PhaseCurrent && r.Phase != bundle.PhaseCandidate {
		return false, fmt.Errorf("record receipt for %s: phase %q: %w", r.Identity(), r.Phase, ErrInvalidReceipt)
	}
	if r.Result == bundle.ResultReady && r.Phase != bundle.PhaseCandidate {
		return false, fmt.Errorf("record receipt for %s: READY outside the candidate phase: %w", r.Identity(), ErrInvalidReceipt)
	}
	orNil := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	var loaded, observed, release, seq any
	if t, err := time.Parse(time.RFC3339Nano, r.LoadedAt); err == nil {
		loaded = t
	}
	if !observedAt.IsZero() {
		observed = observedAt
	}
	if r.ReleaseVersion > 0 {
		release = r.ReleaseVersion
	}
	if r.Sequence > 0 {
		seq = r.Sequence
	}
	var reported any
	if s.now != nil {
		reported = s.now()
	}
	// The snapshot and what the runtime runs and keeps must be snapshots of
	// the identity and audience; the same receipt read twice since the
	// pointer's last move is kept once.
	var exists, valid bool
	err := s.pool.QueryRow(ctx, `WITH ok AS (
			SELECT EXISTS (SELECT 1 FROM configpub.config_snapshot s WHERE s.snapshot_id = $4::uuid
				AND s.host = $1 AND s.service_id = $2 AND s.env_tag = $3 AND s.audience = $5
				AND ($7::uuid IS NULL OR s.publication_id = $7::uuid))
			AND ($8::uuid IS NULL OR EXISTS (SELECT 1 FROM configpub.config_snapshot s WHERE s.snapshot_id = $8::uuid
				AND s.host = $1 AND s.service_id = $2 AND s.env_tag = $3 AND s.audience = $5))
			AND ($9::uuid IS NULL OR EXISTS (SELECT 1 FROM configpub.config_snapshot s WHERE s.snapshot_id = $9::uuid
				AND s.host = $1 AND s.service_id = $2 AND s.env_tag = $3 AND s.audience = $5)) AS valid),
		dup AS (SELECT EXISTS (SELECT 1 FROM configpub.runtime_evidence e
			WHERE e.env_tag = $3 AND e.host = $1 AND e.service_id = $2 AND e.kind = 'receipt' AND e.phase = $6
				AND e.snapshot_id = $4::uuid AND e.outcome = $10 AND e.reason = $11
				AND e.loaded_at IS NOT DISTINCT FROM $12::timestamptz
				AND e.running_snapshot_id IS NOT DISTINCT FROM $8::uuid
				AND e.lkg_snapshot_id IS NOT DISTINCT FROM $9::uuid
				AND e.reported_at >= coalesce((SELECT p.moved_at FROM configpub.current_pointer p
					WHERE p.env_tag = $3 AND p.host = $1 AND p.service_id = $2), '-infinity')) AS found),
		ins AS (INSERT INTO configpub.runtime_evidence
			(host, service_id, env_tag, snapshot_id, outcome, reason, artifact_digest, content_digest, policy_digest,
			 publication_id, release_version, sequence, running_snapshot_id, lkg_snapshot_id, observed_at, loaded_at,
			 kind, phase, endpoint, reported_at)
			SELECT $1, $2, $3, $4::uuid, $10, $11, $13, $14, $15, $7::uuid, $16, $17, $8::uuid, $9::uuid, $18, $12,
				'receipt', $6, $19, coalesce($20::timestamptz, now())
			WHERE (SELECT valid FROM ok) AND NOT (SELECT found FROM dup))
		SELECT (SELECT found FROM dup), (SELECT valid FROM ok)`,
		r.Host, r.ServiceID, r.EnvTag, r.SnapshotID, r.Audience, r.Phase, orNil(r.PublicationID),
		orNil(r.RunningSnapshotID), orNil(r.LastKnownGoodSnapshotID), r.Result, r.Reason, loaded,
		r.ArtifactDigest, r.ContentDigest, r.PolicyDigest, release, seq, observed, r.Endpoint, reported).Scan(&exists, &valid)
	if err != nil {
		return false, fmt.Errorf("record receipt for %s: %w", r.Identity(), err)
	}
	if !valid {
		return false, fmt.Errorf("record receipt for %s: snapshot %s (or what the runtime runs or keeps) is not one of its identity and audience %s: %w",
			r.Identity(), r.SnapshotID, r.Audience, ErrInvalidReceipt)
	}
	if !exists {
		s.n.changed(ctx, r.EnvTag)
	}
	return !exists, nil
}
