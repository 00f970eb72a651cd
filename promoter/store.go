package promoter

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/signing"
	"github.com/configpub/configpub/internal/sqlstate"
)

// Options configures a Store. The zero value is valid for reading,
// revoking and reconciling; activation and lease renewal need Signer.
type Options struct {
	// Signer signs delivery manifests (ECDSA P-256, held in memory; it may
	// be a dedicated lease key). nil: pointer moves and renewals fail with
	// ErrNoSigner.
	Signer crypto.Signer
	// Clock returns the current time. nil = time.Now.
	Clock func() time.Time
	// MaxClockSkew is how far Clock may be from the database server's
	// clock before a store refuses to sign (ErrClockSkew): the leases it
	// signs run on its clock, and a host clock minutes behind signs leases
	// that end early, or have ended, while it reports success. 0 = 5 s
	// when Clock is nil, no comparison when Clock is set (a simulated
	// clock); negative = never compared.
	MaxClockSkew time.Duration
	// MaxRetries bounds the retries of a transaction that failed with a
	// serialization failure or deadlock (40001, 40P01). 0 = 5.
	MaxRetries int
	// SignWorkers is the number of goroutines signing manifests. 0 =
	// GOMAXPROCS.
	SignWorkers int
	// MoveBatch is the number of pointers an activation, a staging, a
	// lease renewal or an epoch raise reads, signs and writes at a time
	// inside its one transaction, AttachDeliveryManifests reads and
	// attaches at a time, and ReleaseArtifacts reads at a time (at most),
	// which bounds their memory whatever the size of
	// the environment. 0 = 2,000.
	MoveBatch int
	// Notifier receives release state changes, rollbacks, rejections and
	// unconfirmed outcomes (webhooks). nil: none.
	Notifier Notifier

	// faultInjector, set only by tests (export_test.go), is called at
	// every named step between statements (for example
	// "activate:pointers", "commit") with the open transaction; a non-nil
	// error aborts the transaction there.
	faultInjector func(ctx context.Context, step string, tx pgx.Tx) error
	// schemaBehind opens a database not yet migrated as far as this
	// binary needs (test-only: the tests of what a migration does to data
	// recorded before it).
	schemaBehind bool
	// olderBinary makes activations and lease renewals skip the
	// revocation lock, as a configpub older than it does (test-only: an
	// older configpub beside this one during a rolling upgrade).
	olderBinary bool
	// artifactBatchBytes bounds the artifact bytes one statement records
	// (defaultArtifactBatchBytes; tests set it smaller).
	artifactBatchBytes int
	// snapshotBatch is the number of snapshots one statement records
	// (defaultSnapshotBatch; tests set it smaller).
	snapshotBatch int
}

// Store is the release store on one PostgreSQL database.
type Store struct {
	pool  *pgxpool.Pool
	opts  Options
	keyID string
	// events: the database has configpub.webhook_event (migration 26), in
	// which a state change records its notification (recordEvent).
	events bool
	// keys: the database has configpub.signing_key (migration 29), in
	// which the store records the keys it signs with (RecordSigningKey).
	keys bool
}

// Open returns a Store on pool after checking that the database is
// migrated (ErrSchema otherwise) and, when a Signer is set, that its key
// has a key id.
func Open(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("open store: nil pool: %w", ErrInvalid)
	}
	s := &Store{pool: pool, opts: opts}
	if s.opts.Clock == nil {
		s.opts.Clock = time.Now
		if s.opts.MaxClockSkew == 0 {
			s.opts.MaxClockSkew = defaultMaxClockSkew
		}
	}
	if s.opts.MaxRetries <= 0 {
		s.opts.MaxRetries = 5
	}
	if s.opts.MoveBatch <= 0 {
		s.opts.MoveBatch = defaultMoveBatch
	}
	if s.opts.artifactBatchBytes <= 0 {
		s.opts.artifactBatchBytes = defaultArtifactBatchBytes
	}
	if s.opts.snapshotBatch <= 0 {
		s.opts.snapshotBatch = defaultSnapshotBatch
	}
	if s.opts.SignWorkers <= 0 {
		s.opts.SignWorkers = runtime.GOMAXPROCS(0)
	}
	if opts.Signer != nil {
		id, err := signing.KeyID(opts.Signer.Public())
		if err != nil {
			return nil, fmt.Errorf("open store: signer: %w", err)
		}
		s.keyID = id
	}
	var version int
	var workflow bool
	err := pool.QueryRow(ctx, `SELECT coalesce(max(version), 0), to_regnamespace('configpub_workflow') IS NOT NULL,
			to_regclass('configpub.webhook_event') IS NOT NULL, to_regclass('configpub.signing_key') IS NOT NULL
		FROM configpub.schema_migration`).Scan(&version, &workflow, &s.events, &s.keys)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == sqlstate.UndefinedTable || pgErr.Code == sqlstate.InvalidSchemaName) {
			return nil, fmt.Errorf("open store: %w (run `configpub db migrate`)", ErrSchema)
		}
		return nil, fmt.Errorf("open store: %w", err)
	}
	if version == 0 {
		return nil, fmt.Errorf("open store: %w (run `configpub db migrate`)", ErrSchema)
	}
	need, err := dbschema.Latest()
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if version < need && !s.opts.schemaBehind {
		// An upgrade whose migration has not run yet: refuse before
		// anything is written, rather than fail part-way on a column or
		// grant the binary expects.
		return nil, fmt.Errorf("open store: %w: the database is at migration %d and this configpub needs %d "+
			"(run `configpub db migrate` with this binary as the schema owner; nothing was written)", ErrSchema, version, need)
	}
	if version >= workflowSchemaVersion && !workflow {
		// Migrated, and the schema a migration created is gone: a
		// restore of the configpub schema alone.
		return nil, fmt.Errorf("open store: %w: schema configpub_workflow is missing although migration %d created it "+
			"(a backup of schema configpub alone restored? restore configpub_workflow from the same backup: pg_dump --schema=configpub --schema=configpub_workflow)",
			ErrSchema, workflowSchemaVersion)
	}
	return s, nil
}

// workflowSchemaVersion is the migration that creates schema
// configpub_workflow (the Workflow views).
const workflowSchemaVersion = 5

// KeyID returns the key id of the delivery-manifest signer ("" without one).
func (s *Store) KeyID() string { return s.keyID }

// WithSigner returns a Store on the same database whose delivery manifests
// are signed by signer: a long-running renewer that follows a key rotation.
func (s *Store) WithSigner(signer crypto.Signer) (*Store, error) {
	if signer == nil {
		return nil, fmt.Errorf("with signer: %w", ErrNoSigner)
	}
	id, err := signing.KeyID(signer.Public())
	if err != nil {
		return nil, fmt.Errorf("with signer: %w", err)
	}
	c := *s
	c.opts.Signer, c.keyID = signer, id
	return &c, nil
}

// defaultMaxClockSkew is Options.MaxClockSkew for the host's own clock.
const defaultMaxClockSkew = 5 * time.Second

// readyToSign checks what signing delivery manifests needs: a signer, and
// a clock within MaxClockSkew of the database server's (one query); then
// it records the Signer's key (RecordSigningKey), before anything is
// signed with it.
func (s *Store) readyToSign(ctx context.Context) error {
	if s.opts.Signer == nil {
		return ErrNoSigner
	}
	if err := s.checkClock(ctx); err != nil {
		return err
	}
	return s.RecordSigningKey(ctx, s.opts.Signer.Public())
}

// checkClock checks that the store's clock is within MaxClockSkew of the
// database server's (one query; none when MaxClockSkew is not positive).
func (s *Store) checkClock(ctx context.Context) error {
	if s.opts.MaxClockSkew <= 0 {
		return nil
	}
	var db time.Time
	before := s.opts.Clock()
	if err := s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db); err != nil {
		return fmt.Errorf("read the database server's clock: %w", err)
	}
	after := s.opts.Clock()
	// The database read its clock between before and after.
	off := time.Duration(0)
	switch {
	case db.Before(before):
		off = before.Sub(db) // ahead
	case db.After(after):
		off = after.Sub(db) // behind (negative)
	}
	if off.Abs() <= s.opts.MaxClockSkew {
		return nil
	}
	dir := "ahead of"
	if off < 0 {
		dir = "behind"
	}
	return fmt.Errorf("%w: this host's clock is %s %s the database server's (at most %s): the leases it signs would run on the wrong time — set the host's time (NTP)",
		ErrClockSkew, off.Abs().Round(time.Millisecond), dir, s.opts.MaxClockSkew)
}

// Now returns the store's clock, as it times pointer moves: what a
// caller checks activation windows against before it records a release.
func (s *Store) Now() time.Time { return s.now() }

// now returns the clock's time truncated to milliseconds, the precision of
// every timestamp configpub signs.
func (s *Store) now() time.Time { return s.opts.Clock().UTC().Truncate(time.Millisecond) }

func (s *Store) fault(ctx context.Context, step string, tx pgx.Tx) error {
	if s.opts.faultInjector == nil {
		return nil
	}
	if err := s.opts.faultInjector(ctx, step, tx); err != nil {
		return fmt.Errorf("fault injected at %s: %w", step, err)
	}
	return nil
}

// runTx runs fn in one READ COMMITTED transaction through pgx.BeginTxFunc,
// retrying serialization failures and deadlocks. An error of the COMMIT
// itself that is not a server response is ErrUnconfirmed.
func (s *Store) runTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	for attempt := 0; ; attempt++ {
		err := s.txOnce(ctx, fn)
		if err == nil || !retryable(err) || attempt >= s.opts.MaxRetries {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		}
	}
}

func (s *Store) txOnce(ctx context.Context, fn func(tx pgx.Tx) error) error {
	ran := false
	var fnErr error
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		ran = true
		if fnErr = fn(tx); fnErr != nil {
			return fnErr
		}
		fnErr = s.fault(ctx, "commit", tx)
		return fnErr
	})
	switch {
	case err == nil:
		return nil
	case fnErr != nil:
		return fnErr
	case !ran && pgconn.SafeToRetry(err):
		return fmt.Errorf("begin: %w: %w", errNotSent, err)
	case !ran:
		return fmt.Errorf("begin: %w", classify(err))
	case pgconn.SafeToRetry(err):
		// The COMMIT was never written to the connection: the server
		// rolls the transaction back; it definitely did not happen.
		return fmt.Errorf("commit: %w: %w", errNotSent, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !connectionLost(pgErr) {
		// The server answered the COMMIT with an ERROR: not applied.
		return fmt.Errorf("commit: %w", classify(err))
	}
	// No answer, or the session ended while the COMMIT was processed.
	return fmt.Errorf("commit: %w: %w", ErrUnconfirmed, err)
}

// connectionLost reports a server error that ends the session (FATAL,
// PANIC, connection exceptions, operator intervention): the fate of a COMMIT
// answered this way is unknown.
func connectionLost(e *pgconn.PgError) bool {
	if e.Severity == "FATAL" || e.Severity == "PANIC" {
		return true
	}
	return sqlstate.EndsSession(e.Code)
}

// lostDatabase reports an error that says the database went away, not that
// it refused: the connection lost or refused, the server shutting down,
// the context ended.
func lostDatabase(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return connectionLost(pgErr)
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, errNotSent) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.As(err, &netErr) || errors.As(err, &connErr) || pgconn.Timeout(err)
}

// errNotSent marks a BEGIN or COMMIT that pgconn guarantees never reached
// the server (pgconn.SafeToRetry): the transaction did not happen.
var errNotSent = errors.New("not sent to the server")

// retryable reports serialization failures, deadlocks and transactions that
// never reached the server.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.Is(err, errNotSent) ||
		errors.As(err, &pgErr) && (pgErr.Code == sqlstate.SerializationFailure || pgErr.Code == sqlstate.DeadlockDetected)
}

// classify adds the sentinel a database error stands for.
func classify(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case sqlstate.UniqueViolation:
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case sqlstate.AppendOnly, sqlstate.Revision:
		return fmt.Errorf("%w: %w", ErrIntegrity, err)
	case sqlstate.ForeignKeyViolation:
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case sqlstate.UndefinedTable, sqlstate.InvalidSchemaName:
		return fmt.Errorf("%w: %w", ErrSchema, err)
	}
	return err
}

// dbErr wraps a statement error with the operation and its sentinel.
func dbErr(op string, err error) error {
	return fmt.Errorf("%s: %w", op, classify(err))
}
