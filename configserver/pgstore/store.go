package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/bundle"
	"github.com/configpub/configpub/configserver"
	"github.com/configpub/configpub/internal/digest"
	"github.com/configpub/configpub/internal/pgsession"
	"github.com/configpub/configpub/internal/sqlstate"
)

// Options configures a Store. The zero value is valid.
type Options struct {
	// StaleAfter: when the pointers were not confirmed current for this long
	// (no successful reconcile or heartbeat on the LISTEN connection),
	// Current answers ErrUnavailable. Default 2 s.
	StaleAfter time.Duration
	// Heartbeat is how often the idle LISTEN connection is probed.
	// Default 250 ms.
	Heartbeat time.Duration
	// ReconcileInterval is the period of the reconcile that reads the
	// pointers written since the last one (by the commit-ordered watermark),
	// behind the notifications. Default 30 s.
	ReconcileInterval time.Duration
	// FollowInterval, when set, replaces LISTEN/NOTIFY by reading what
	// changed since the watermark every FollowInterval. A store connected to
	// a hot standby (where LISTEN is refused and notifications do not
	// arrive) does so anyway, every DefaultFollowInterval unless this is
	// set. Each round also confirms the pointers: keep it well under
	// StaleAfter (which defaults to at least four intervals).
	FollowInterval time.Duration
	// MaxReplicaLag: when the store reads a hot standby that has lagged
	// its primary for longer than this — WAL received and not replayed
	// for that long, or no WAL receiver for that long on a standby that
	// streams —, Current answers ErrUnavailable and Ready fails until it
	// catches up: its pointers are the primary's of that long ago. Default
	// DefaultMaxReplicaLag; negative: never.
	MaxReplicaLag time.Duration
	// EvidencePool, when set, is where RecordEvidence inserts: a pool on
	// the primary for a store reading a hot standby, which refuses every
	// write. Default: the query pool. The caller owns it.
	EvidencePool *pgxpool.Pool
	// ArtifactCacheBytes bounds the artifact byte cache. Default 64 MiB.
	ArtifactCacheBytes int64
	// QueryTimeout bounds each database round trip. Default 2 s.
	QueryTimeout time.Duration
	// ConnectTimeout bounds each connection attempt. Default 2 s.
	ConnectTimeout time.Duration
	// MaxReconnectDelay caps the back-off between LISTEN reconnects.
	// Default 1 s.
	MaxReconnectDelay time.Duration
	// MaxConns sizes the query pool PoolConfig configures. Default 8.
	MaxConns int32
	// Logger receives connection losses and recoveries. Default: discard.
	Logger *slog.Logger
	// Visible, when set, is called on the listener's goroutine each time
	// the pointers a burst of notifications names have been reloaded, made
	// current and their waiters woken, with the time the burst's first
	// notification arrived and the number of notifications (server-side
	// visibility measurements). It must be quick.
	Visible func(burst time.Time, n int)
}

func (o *Options) defaults() {
	if o.StaleAfter <= 0 {
		o.StaleAfter = max(2*time.Second, 4*o.FollowInterval)
	}
	if o.MaxReplicaLag == 0 {
		o.MaxReplicaLag = DefaultMaxReplicaLag
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 250 * time.Millisecond
	}
	if o.ReconcileInterval <= 0 {
		o.ReconcileInterval = 30 * time.Second
	}
	if o.ArtifactCacheBytes <= 0 {
		o.ArtifactCacheBytes = 64 << 20
	}
	if o.QueryTimeout <= 0 {
		o.QueryTimeout = 2 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 2 * time.Second
	}
	if o.MaxReconnectDelay <= 0 {
		o.MaxReconnectDelay = time.Second
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 8
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Store serves current pointers from memory and artifact bytes from a cache
// backed by PostgreSQL. Call Run to keep it current.
type Store struct {
	opts    Options
	connCfg *pgx.ConnConfig
	// beforeConnect is the pool's hook (a password read from its passfile
	// again), applied to the LISTEN session's dials too; nil without one.
	beforeConnect func(context.Context, *pgx.ConnConfig) error
	pool          *pgxpool.Pool
	artifact      *byteCache

	mu       sync.RWMutex
	pointers map[bundle.Identity]*entry
	leases   leaseIndex // the pointers' earliest lease end per environment
	wm       *watermark // what the pointers reflect; nil before the first load
	strings  interner   // strings the pointers share

	// manifests recycles the *servedManifest a reload decodes each stored
	// manifest into.
	manifests sync.Pool

	// changes wakes GET /configs?wait= requests of the identities whose
	// entry a reload replaced or removed (configserver.Notifier).
	changes configserver.Changes

	live atomic.Bool // LISTEN connection up and first reconcile done
	// down says why the store is not live once a session failed (notLive);
	// nil before the first failure and while live.
	down        atomic.Pointer[string]
	confirmedAt atomic.Int64 // unix nanoseconds of the last confirmation

	// replicaLag is how far behind its primary the hot standby read
	// last was (nil on a primary); lagTracker measures it on Run's
	// goroutine, across reconnects.
	replicaLag atomic.Pointer[lag]
	lagTracker lagTracker

	hits, misses, dbErrors, refreshes, reconciles, catchUps atomic.Uint64
}

var _ configserver.Store = (*Store)(nil)
var _ configserver.StatsReporter = (*Store)(nil)
var _ configserver.Notifier = (*Store)(nil)

// Subscribe implements configserver.Notifier: fn runs when a NOTIFY or a
// reconcile replaces or removes id's in-memory pointer.
func (s *Store) Subscribe(id bundle.Identity, fn func()) (cancel func() bool) {
	return s.changes.Subscribe(id, fn)
}

// entry is one current pointer: the prepared delivery without its body,
// or the integrity error that keeps it from being served. d is always set:
// for a retired or unservable pointer it holds only the identity, snapshot
// id and manifest of the row it was built from (to skip an unchanged row).
type entry struct {
	d       *configserver.Delivery
	err     error
	retired bool // the identity is retired: configserver.ErrGone
	// slot is e's position + 1 in its environment's lease heap (0: not
	// indexed); read and written only on the listener goroutine.
	slot int32
}

// servable reports whether e.d is a delivery to serve.
func (e *entry) servable() bool { return e.err == nil && !e.retired }

// PoolConfig is the configuration of the query pool the Config Server
// opens for connString (a configpub_server member): at most opts.MaxConns
// connections (default 8), each connection attempt bounded by
// opts.ConnectTimeout (default 2 s). Open the pool with
// pgxpool.NewWithConfig and pass it to New.
func PoolConfig(connString string, opts Options) (*pgxpool.Config, error) {
	opts.defaults()
	cfg, err := pgsession.ParsePool(connString)
	if err != nil {
		return nil, fmt.Errorf("pgstore: parse database url: %w", err)
	}
	cfg.MaxConns = opts.MaxConns
	cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	return cfg, nil
}

// New prepares a Store that runs its queries on pool, whose connections log
// in as a member of configpub_server (see PoolConfig). The caller owns pool
// and closes it once Run has returned. The LISTEN session holds a
// connection for as long as it lives and is re-dialled after every loss, so
// the Store dials that one itself, with a copy of pool's connection config
// and opts.ConnectTimeout, instead of taking it from the pool. New does no
// I/O: Run connects, and keeps reconnecting, so a server starts while the
// database is down.
func New(pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: nil pool")
	}
	opts.defaults()
	cfg := pool.Config()
	connCfg := cfg.ConnConfig.Copy()
	connCfg.ConnectTimeout = opts.ConnectTimeout
	return &Store{
		opts:          opts,
		connCfg:       connCfg,
		beforeConnect: cfg.BeforeConnect,
		pool:          pool,
		artifact:      newByteCache(opts.ArtifactCacheBytes),
		pointers:      make(map[bundle.Identity]*entry),
	}, nil
}

// fresh reports whether the in-memory pointers are confirmed current.
func (s *Store) fresh() error {
	if !s.live.Load() {
		why := "no live database connection"
		if d := s.down.Load(); d != nil {
			why = *d
		}
		return fmt.Errorf("pointers not confirmed: %w: %s", configserver.ErrUnavailable, why)
	}
	age := time.Since(time.Unix(0, s.confirmedAt.Load()))
	if age > s.opts.StaleAfter {
		return fmt.Errorf("pointers not confirmed for %s: %w", age.Round(time.Millisecond), configserver.ErrUnavailable)
	}
	if l := s.replicaLag.Load(); l != nil && s.tooFarBehind(*l) {
		return fmt.Errorf("pointers not confirmed: the hot standby lags its primary (%s, more than %s): %w",
			l, s.opts.MaxReplicaLag, configserver.ErrUnavailable)
	}
	return nil
}

// Current returns the current delivery for id from memory.
func (s *Store) Current(ctx context.Context, id bundle.Identity) (*configserver.Delivery, error) {
	if err := s.fresh(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	e := s.pointers[id]
	s.mu.RUnlock()
	if e == nil {
		return nil, fmt.Errorf("current %s: %w", id, configserver.ErrNotFound)
	}
	if e.retired {
		return nil, fmt.Errorf("current %s: %w", id, configserver.ErrGone)
	}
	if e.err != nil {
		return nil, fmt.Errorf("current %s: %w", id, e.err)
	}
	body, err := s.artifactBytes(ctx, e.d.ArtifactDigest)
	if err != nil {
		return nil, fmt.Errorf("current %s: %w", id, err)
	}
	d := *e.d
	d.Body = body
	return &d, nil
}

// artifactBytes returns the bytes of digest from the cache or the database,
// checking them against the digest.
func (s *Store) artifactBytes(ctx context.Context, want string) ([]byte, error) {
	if b, ok := s.artifact.get(want); ok {
		s.hits.Add(1)
		return b, nil
	}
	s.misses.Add(1)
	ctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT bytes FROM configpub.artifact WHERE artifact_digest = $1`, want).Scan(&b)
	if err != nil {
		s.dbErrors.Add(1)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, integrityError("artifact %s referenced but not stored", want)
		}
		return nil, classify("read artifact "+want, err)
	}
	if got := digest.FromBytes(b).String(); got != want {
		return nil, integrityError("artifact %s: stored bytes hash to %s", want, got)
	}
	s.artifact.put(want, b)
	return b, nil
}

// Snapshot returns a historical, unrevoked snapshot of id with the latest
// delivery manifest issued for it (if it was ever delivered).
func (s *Store) Snapshot(ctx context.Context, id bundle.Identity, snapshotID string) (*configserver.Delivery, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	row := s.pool.QueryRow(ctx, snapshotQuery, snapshotID, id.Host, id.ServiceID, id.EnvTag)
	var r pointerRow
	var sig, keyID pgtype.Text
	r.host, r.serviceID, r.envTag, r.snapshotID = id.Host, id.ServiceID, id.EnvTag, snapshotID
	err := row.Scan(&r.audience, &r.publicationID, &r.policyDigest, &r.contentDigest, &r.artifactDigest,
		&r.releaseVersion, &r.manifest, &sig, &keyID)
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			s.dbErrors.Add(1)
		}
		return nil, classify("snapshot "+snapshotID, err)
	}
	r.signature, r.keyID = sig.String, keyID.String
	d, err := r.delivery(nil, nil)
	if err != nil {
		return nil, err
	}
	if d.Body, err = s.artifactBytes(ctx, d.ArtifactDigest); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", snapshotID, err)
	}
	return d, nil
}

// RecordEvidence inserts a runtime_evidence row: an observation (the kind
// is the column's default; the server role cannot write it, so a workload's
// report never becomes a receipt). Every
// snapshot id it names must be a snapshot of the evidence's identity and
// audience, and its publication the snapshot's; otherwise nothing is stored
// and the error is configserver.ErrInvalidEvidence.
func (s *Store) RecordEvidence(ctx context.Context, ev *configserver.Evidence) error {
	detail := map[string]string{}
	if !ev.ObservedAt.IsZero() {
		detail["observedAt"] = ev.ObservedAt.UTC().Format(time.RFC3339Nano)
	}
	detailJSON, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("record evidence: %w", err)
	}
	orNil := func(v string) any {
		if v == "" {
			return nil
		}
		return v
	}
	var observed, reported, release, seq any
	if !ev.ObservedAt.IsZero() {
		observed = ev.ObservedAt
	}
	if !ev.ReportedAt.IsZero() {
		reported = ev.ReportedAt
	}
	if ev.ReleaseVersion > 0 {
		release = ev.ReleaseVersion
	}
	if ev.Sequence > 0 {
		seq = ev.Sequence
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	pool := s.pool
	if s.opts.EvidencePool != nil {
		pool = s.opts.EvidencePool
	}
	tag, err := pool.Exec(ctx, `INSERT INTO configpub.runtime_evidence
		(host, service_id, env_tag, snapshot_id, outcome, reason, artifact_digest, content_digest, policy_digest, detail,
		 publication_id, release_version, sequence, running_snapshot_id, lkg_snapshot_id, observed_at, reported_at)
		SELECT $1, $2, $3, $4::uuid, $5, $6, $7, $8, $9, $10::jsonb, $11::uuid, $12, $13, $14::uuid, $15::uuid, $16,
			coalesce($18::timestamptz, now())
		WHERE ($4::uuid IS NULL OR EXISTS (SELECT 1 FROM configpub.config_snapshot s WHERE s.snapshot_id = $4::uuid
				AND s.host = $1 AND s.service_id = $2 AND s.env_tag = $3 AND s.audience = $17
				AND ($11::uuid IS NULL OR s.publication_id = $11::uuid)))
			AND ($11::uuid IS NULL OR $4::uuid IS NOT NULL)
			AND ($14::uuid IS NULL OR EXISTS (SELECT 1 FROM configpub.config_snapshot s WHERE s.snapshot_id = $14::uuid
				AND s.host = $1 AND s.service_id = $2 AND s.env_tag = $3 AND s.audience = $17))
			AND ($15::uuid IS NULL OR EXISTS (SELECT 1 FROM configpub.config_snapshot s WHERE s.snapshot_id = $15::uuid
				AND s.host = $1 AND s.service_id = $2 AND s.env_tag = $3 AND s.audience = $17))`,
		ev.Identity.Host, ev.Identity.ServiceID, ev.Identity.EnvTag, orNil(ev.SnapshotID), ev.Outcome, ev.Reason,
		ev.ArtifactDigest, ev.ContentDigest, ev.PolicyDigest, string(detailJSON),
		orNil(ev.PublicationID), release, seq, orNil(ev.RunningSnapshotID), orNil(ev.LastKnownGoodSnapshotID), observed,
		ev.Audience, reported)
	if err != nil {
		s.dbErrors.Add(1)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == sqlstate.ReadOnlySQLTransaction {
			return fmt.Errorf("record evidence for %s: %w: the database is a hot standby, which takes no writes (evidence needs a pool on the primary)",
				ev.Identity, configserver.ErrUnavailable)
		}
		return classify("record evidence for "+ev.Identity.String(), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("record evidence for %s: %w", ev.Identity, configserver.ErrInvalidEvidence)
	}
	return nil
}

// Ready reports nil when the pointers are confirmed current.
func (s *Store) Ready(context.Context) error { return s.fresh() }

// Stats reports counters for /metrics. LeaseEnds is read from the lease
// index the loads keep current: O(environments) under the read lock, not
// a walk of every pointer (BenchmarkStatsLeaseEnds).
func (s *Store) Stats() configserver.StoreStats {
	s.mu.RLock()
	n := len(s.pointers)
	ends := s.leases.earliest()
	s.mu.RUnlock()
	var last time.Time
	if ns := s.confirmedAt.Load(); ns != 0 {
		last = time.Unix(0, ns)
	}
	return configserver.StoreStats{
		ArtifactCacheHits:   s.hits.Load(),
		ArtifactCacheMisses: s.misses.Load(),
		ArtifactCacheBytes:  s.artifact.bytes(),
		DatabaseErrors:      s.dbErrors.Load(),
		PointerRefreshes:    s.refreshes.Load(),
		Reconciles:          s.reconciles.Load(),
		Pointers:            n,
		LastConfirmed:       last,
		ReplicaLag:          lagOf(s.replicaLag.Load()),
		LeaseEnds:           ends,
	}
}
