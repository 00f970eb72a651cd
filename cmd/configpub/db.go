package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/dbschema"
	"github.com/configpub/configpub/internal/pgsession"
	"github.com/configpub/configpub/internal/sqlstate"
	"github.com/configpub/configpub/promoter"
)

// databaseEnv is the default of every --database flag.
const databaseEnv = "CONFIGPUB_DATABASE_URL"

// storeFlags are the flags of the verbs that use the release store.
type storeFlags struct {
	database string
	key      string // cosign.key signing delivery manifests (only verbs that move pointers or renew leases)
}

func (f *storeFlags) add(cmd *cobra.Command, withKey bool) {
	cmd.Flags().StringVar(&f.database, "database", "", "PostgreSQL URL (default $"+databaseEnv+")")
	if withKey {
		cmd.Flags().StringVar(&f.key, "key", "", "cosign.key signing delivery manifests; password from COSIGN_PASSWORD (required)")
		_ = cmd.MarkFlagRequired("key")
	}
}

func (f *storeFlags) url() (string, error) {
	u := f.database
	if u == "" {
		u = os.Getenv(databaseEnv)
	}
	if u == "" {
		return "", usageError{errors.New("--database is required (or set " + databaseEnv + ")")}
	}
	return u, nil
}

// open connects and opens the store; close releases the pool.
func (f *storeFlags) open(ctx context.Context) (store *promoter.Store, closeFn func(), err error) {
	u, err := f.url()
	if err != nil {
		return nil, nil, err
	}
	var opts promoter.Options
	if f.key != "" {
		password, err := cosignPassword()
		if err != nil {
			return nil, nil, usageError{err}
		}
		signer, err := cosignkey.LoadPrivateKeyFile(f.key, password)
		if err != nil {
			return nil, nil, err
		}
		opts.Signer = signer
	}
	pool, err := pgsession.NewPool(ctx, u)
	if err != nil {
		return nil, nil, fmt.Errorf("--database: %w", err)
	}
	notifier, drain, err := notifierFromEnv(pool)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	opts.Notifier = notifier
	store, err = promoter.Open(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return store, func() { drain(); pool.Close() }, nil
}

// storeError maps an unknown outcome, or an activation left pending, to
// exit 3 with the way out.
func storeError(err error, env string) error {
	if errors.Is(err, promoter.ErrUnconfirmed) || errors.Is(err, promoter.ErrPending) {
		return unconfirmedError{fmt.Errorf("%w (re-run with the same --command-id, or run `configpub reconcile --env %s`)", err, env)}
	}
	return err
}

func addDBCmd(root *cobra.Command) {
	db := &cobra.Command{
		Use:   "db",
		Short: "Manage the release store's PostgreSQL schema",
		Args:  cobra.NoArgs,
	}
	var sf storeFlags
	migrate := &cobra.Command{
		Use:   "migrate",
		Short: "Apply the embedded schema migrations (a no-op when up to date)",
		Long: `migrate applies the versioned SQL migrations embedded in configpub to the
database (schema configpub, group roles configpub_promoter, configpub_server,
configpub_workflow_reader, configpub_viewer and configpub_viewer_bytes,
append-only triggers, grants). Each applied migration
is recorded in configpub.schema_migration; re-running applies nothing. Run it as
the schema owner (a role that may create roles).

A database that a newer configpub migrated is left as it is: migrate applies
nothing, warns, and exits 0 (an upgrade in progress, a CI runner not switched
yet). The commands that open the release store (promote, activate, rollback,
status, lease, gc and the others) refuse a database not migrated as far as their
binary needs, before writing anything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := sf.url()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			conn, err := pgx.Connect(ctx, u)
			if err != nil {
				return fmt.Errorf("--database: %w", pgsession.HideConnString(err))
			}
			defer conn.Close(context.WithoutCancel(ctx))
			n, err := dbschema.MigrateCount(ctx, conn)
			var newer *dbschema.NewerSchemaError
			if errors.As(err, &newer) {
				// A newer configpub migrated the database (an upgrade under
				// way, a CI runner not switched yet): nothing to apply, as
				// Flyway treats "future" migrations.
				rep := migrateReport{SchemaVersion: newer.Binary, DatabaseVersion: newer.Database}
				fmt.Fprintf(cmd.ErrOrStderr(), "configpub: warning: the database is at migration %d, newer than this configpub's %d "+
					"(a newer configpub migrated it); nothing applied. Upgrade this binary: the commands of an older "+
					"configpub are not guaranteed against a newer schema\n", newer.Database, newer.Binary)
				return report(cmd, rep, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "applied 0 migration(s); database at migration %d, newer than this binary's %d\n",
						rep.DatabaseVersion, rep.SchemaVersion)
					return err
				})
			}
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == sqlstate.InsufficientPrivilege {
				return fmt.Errorf("%w (db migrate runs as the schema owner, the role that owns schema configpub — configpub_owner in docs/operations.md — not as a promoter, server or viewer login: the migration that failed was rolled back)", err)
			}
			if err != nil {
				return err
			}
			ms, err := dbschema.Migrations()
			if err != nil {
				return err
			}
			latest := ms[len(ms)-1].Version
			rep := migrateReport{Applied: n, SchemaVersion: latest, DatabaseVersion: latest}
			return report(cmd, rep, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "applied %d migration(s); schema version %d\n", rep.Applied, rep.SchemaVersion)
				return err
			})
		},
	}
	sf.add(migrate, false)
	outputFlag(migrate)
	db.AddCommand(migrate, newDBGCCmd(), newDBKeysCmd())
	root.AddCommand(db)
}

// newDBGCCmd is `configpub db gc`: collect the artifacts no snapshot
// references and the lease renewals a later manifest of the same pointer
// move supersedes.
func newDBGCCmd() *cobra.Command {
	var (
		sf                storeFlags
		minAge            time.Duration
		renewalMinAge     time.Duration
		observationMinAge time.Duration
		receiptMinAge     time.Duration
		batch             int
		dryRun            bool
	)
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Delete stored artifacts no release references and lease renewals later ones superseded",
		Long: `gc deletes from the release store the artifacts no snapshot of any release
references and that were stored more than --min-age ago. A promotion of a large
release stores its artifacts before it records the release; one that stops in
between, or loses its compare-and-swap and is not run again, leaves such
artifacts behind. They are never served; gc only returns their space.

An artifact that any release references, the current one or any earlier one a
rollback may return to, is never deleted (the database refuses it), and a
promotion recording while gc runs keeps its artifacts or, at worst, fails and
stores them again when run again. Each artifact deleted is recorded in
configpub.collected_artifact (digest, media type, size, when it was stored and
deleted, and the database user).

gc also deletes the delivery manifests of lease renewals (configpub lease renew)
issued more than --renewal-min-age ago that a later manifest of the same pointer
move supersedes: expired leases kept for the record, one per target per renewal
(about 1.4 KB each), so without gc the store grows by the number of targets at
every renewal. It never deletes a pointer move's own manifest or the newest
manifest of a move, so every snapshot, current or pinned, is served as before.
Each statement summarises what it deleted in configpub.collected_renewals.
--renewal-min-age 0 keeps every renewal.

gc also deletes the APPLIED observations (a runtime's own report of a load,
configpub fetch --report: one per runtime per new snapshot and per renewed lease)
reported more than --observation-min-age ago that a later observation of the
same runtime supersedes. It never deletes a receipt, a REJECTED observation or a
runtime's newest observation, which is what status shows. Each statement
summarises what it deleted in configpub.collected_observations.
--observation-min-age 0 keeps every observation.

gc also deletes the APPLIED receipts (configpub readback) reported more than
--receipt-min-age ago that repeat a state: a receipt of the same snapshots of the
same runtime precedes them with no pointer move in between, and another follows
them (a readback after every lease renewal records one per runtime per renewal).
Status, history, the console and the health gate answer as before: the first
receipt of a state after a move, the latest, rejections and candidate receipts
are never deleted. Summaries go to configpub.collected_receipts.
--receipt-min-age 0 keeps every receipt.

--dry-run counts what would be deleted. Run it as the promoter's database user,
for example daily.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if minAge <= 0 {
				return usageError{fmt.Errorf("--min-age must be positive, got %s", minAge)}
			}
			if renewalMinAge < 0 {
				return usageError{fmt.Errorf("--renewal-min-age must not be negative, got %s", renewalMinAge)}
			}
			if observationMinAge < 0 {
				return usageError{fmt.Errorf("--observation-min-age must not be negative, got %s", observationMinAge)}
			}
			if receiptMinAge < 0 {
				return usageError{fmt.Errorf("--receipt-min-age must not be negative, got %s", receiptMinAge)}
			}
			if batch <= 0 {
				return usageError{fmt.Errorf("--batch must be positive, got %d", batch)}
			}
			ctx := cmd.Context()
			store, closeFn, err := sf.open(ctx)
			if err != nil {
				return err
			}
			defer closeFn()
			c, err := store.CollectArtifacts(ctx, promoter.CollectOptions{MinAge: minAge, Batch: batch, DryRun: dryRun})
			rep := gcReport{DryRun: dryRun, MinAge: minAge.String(), StoredBefore: c.StoredBefore.UTC().Format(time.RFC3339),
				Artifacts: c.Artifacts, Bytes: c.Bytes}
			if c.Artifacts > 0 {
				rep.OldestStoredAt, rep.NewestStoredAt = c.Oldest.Format(time.RFC3339), c.Newest.Format(time.RFC3339)
			}
			if err != nil {
				if c.Artifacts > 0 {
					// What earlier batches deleted stays deleted: say so.
					return fmt.Errorf("%w (deleted %d artifact(s), %d bytes, before the failure)", err, c.Artifacts, c.Bytes)
				}
				return err
			}
			if renewalMinAge > 0 {
				r, err := store.CollectRenewals(ctx, promoter.RenewalCollectOptions{MinAge: renewalMinAge, Batch: batch, DryRun: dryRun})
				rep.addRenewals(renewalMinAge, r)
				if err != nil {
					if r.Manifests > 0 {
						return fmt.Errorf("%w (deleted %d renewal manifest(s), %d bytes, before the failure)", err, r.Manifests, r.Bytes)
					}
					return err
				}
			}
			if observationMinAge > 0 {
				o, err := store.CollectObservations(ctx, promoter.ObservationCollectOptions{MinAge: observationMinAge, Batch: batch, DryRun: dryRun})
				rep.addObservations(observationMinAge, o)
				if err != nil {
					if o.Observations > 0 {
						return fmt.Errorf("%w (deleted %d observation(s), %d bytes, before the failure)", err, o.Observations, o.Bytes)
					}
					return err
				}
			}
			if receiptMinAge > 0 {
				c, err := store.CollectReceipts(ctx, promoter.ObservationCollectOptions{MinAge: receiptMinAge, Batch: batch, DryRun: dryRun})
				rep.addReceipts(receiptMinAge, c)
				if err != nil {
					if c.Receipts > 0 {
						return fmt.Errorf("%w (deleted %d receipt(s), %d bytes, before the failure)", err, c.Receipts, c.Bytes)
					}
					return err
				}
			}
			return report(cmd, rep, rep.text)
		},
	}
	sf.add(cmd, false)
	cmd.Flags().DurationVar(&minAge, "min-age", promoter.DefaultCollectMinAge, "delete only artifacts stored at least this long ago (longer than any promotion runs)")
	cmd.Flags().DurationVar(&renewalMinAge, "renewal-min-age", promoter.DefaultRenewalMinAge, "delete only superseded lease renewals issued at least this long ago (0 keeps them all)")
	cmd.Flags().DurationVar(&observationMinAge, "observation-min-age", promoter.DefaultObservationMinAge, "delete only superseded APPLIED observations reported at least this long ago (0 keeps them all)")
	cmd.Flags().DurationVar(&receiptMinAge, "receipt-min-age", promoter.DefaultReceiptMinAge, "delete only APPLIED receipts that restate the state of receipts before and after them, reported at least this long ago (0 keeps them all)")
	cmd.Flags().IntVar(&batch, "batch", 1000, "artifacts, or identities' renewals, observations and receipts, deleted per statement (each commits on its own)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "count what would be deleted; delete nothing")
	outputFlag(cmd)
	return cmd
}

// gcReport is what db gc prints with --output json.
type gcReport struct {
	DryRun         bool   `json:"dryRun"`                   // counted only, nothing deleted
	MinAge         string `json:"minAge"`                   // --min-age, as a Go duration
	StoredBefore   string `json:"storedBefore"`             // the cutoff: artifacts stored before it were eligible (RFC 3339, UTC)
	Artifacts      int    `json:"artifacts"`                // artifacts deleted (or, with dryRun, that would be)
	Bytes          int64  `json:"bytes"`                    // their total size
	OldestStoredAt string `json:"oldestStoredAt,omitempty"` // when the oldest of them was stored
	NewestStoredAt string `json:"newestStoredAt,omitempty"` // when the newest of them was stored
	// Renewals is present unless --renewal-min-age is 0.
	Renewals *gcRenewals `json:"renewals,omitempty"`
	// Observations is present unless --observation-min-age is 0.
	Observations *gcReports `json:"observations,omitempty"`
	// Receipts is present unless --receipt-min-age is 0.
	Receipts *gcReports `json:"receipts,omitempty"`
}

// gcReports is what db gc reports of the superseded APPLIED
// observations or the repeated receipts.
type gcReports struct {
	MinAge           string `json:"minAge"`                     // --observation-min-age or --receipt-min-age, as a Go duration
	ReportedBefore   string `json:"reportedBefore"`             // the cutoff: rows reported before it were eligible (RFC 3339, UTC)
	Deleted          int64  `json:"deleted"`                    // rows deleted (or, with dryRun, that would be)
	Bytes            int64  `json:"bytes"`                      // their total size
	OldestReportedAt string `json:"oldestReportedAt,omitempty"` // when the oldest of them was reported
	NewestReportedAt string `json:"newestReportedAt,omitempty"` // when the newest of them was reported
}

func newGCReports(minAge time.Duration, before time.Time, n, size int64, oldest, newest time.Time) *gcReports {
	g := &gcReports{MinAge: minAge.String(), ReportedBefore: before.UTC().Format(time.RFC3339), Deleted: n, Bytes: size}
	if n > 0 {
		g.OldestReportedAt, g.NewestReportedAt = oldest.Format(time.RFC3339), newest.Format(time.RFC3339)
	}
	return g
}

func (r *gcReport) addObservations(minAge time.Duration, c promoter.ObservationCollection) {
	r.Observations = newGCReports(minAge, c.ReportedBefore, c.Observations, c.Bytes, c.Oldest, c.Newest)
}

func (r *gcReport) addReceipts(minAge time.Duration, c promoter.ReceiptCollection) {
	r.Receipts = newGCReports(minAge, c.ReportedBefore, c.Receipts, c.Bytes, c.Oldest, c.Newest)
}

// gcRenewals is what db gc reports of the superseded lease renewals.
type gcRenewals struct {
	MinAge         string `json:"minAge"`                   // --renewal-min-age, as a Go duration
	IssuedBefore   string `json:"issuedBefore"`             // the cutoff: superseded renewals issued before it were eligible (RFC 3339, UTC)
	Manifests      int64  `json:"manifests"`                // renewal manifests deleted (or, with dryRun, that would be)
	Bytes          int64  `json:"bytes"`                    // their manifests' and signatures' total size
	OldestIssuedAt string `json:"oldestIssuedAt,omitempty"` // when the oldest of them was issued
	NewestIssuedAt string `json:"newestIssuedAt,omitempty"` // when the newest of them was issued
}

func (r *gcReport) addRenewals(minAge time.Duration, c promoter.RenewalCollection) {
	g := &gcRenewals{MinAge: minAge.String(), IssuedBefore: c.IssuedBefore.UTC().Format(time.RFC3339),
		Manifests: c.Manifests, Bytes: c.Bytes}
	if c.Manifests > 0 {
		g.OldestIssuedAt, g.NewestIssuedAt = c.Oldest.Format(time.RFC3339), c.Newest.Format(time.RFC3339)
	}
	r.Renewals = g
}

func (r gcReport) text(w io.Writer) error {
	verb := "deleted"
	if r.DryRun {
		verb = "would delete"
	}
	var lines []string
	if r.Artifacts == 0 {
		lines = append(lines, fmt.Sprintf("nothing to delete: every artifact stored before %s is referenced by a release", r.StoredBefore))
	} else {
		lines = append(lines, fmt.Sprintf("%s %d unreferenced artifact(s), %d bytes, stored %s to %s (cutoff %s)",
			verb, r.Artifacts, r.Bytes, r.OldestStoredAt, r.NewestStoredAt, r.StoredBefore))
	}
	if g := r.Renewals; g != nil && g.Manifests == 0 {
		lines = append(lines, fmt.Sprintf("no superseded lease renewal issued before %s", g.IssuedBefore))
	} else if g != nil {
		lines = append(lines, fmt.Sprintf("%s %d superseded lease renewal(s), %d bytes, issued %s to %s (cutoff %s)",
			verb, g.Manifests, g.Bytes, g.OldestIssuedAt, g.NewestIssuedAt, g.IssuedBefore))
	}
	for _, x := range []struct {
		g    *gcReports
		what string
	}{{r.Observations, "superseded APPLIED observation"}, {r.Receipts, "repeated APPLIED receipt"}} {
		if g := x.g; g != nil && g.Deleted == 0 {
			lines = append(lines, fmt.Sprintf("no %s reported before %s", x.what, g.ReportedBefore))
		} else if g != nil {
			lines = append(lines, fmt.Sprintf("%s %d %s(s), %d bytes, reported %s to %s (cutoff %s)",
				verb, g.Deleted, x.what, g.Bytes, g.OldestReportedAt, g.NewestReportedAt, g.ReportedBefore))
		}
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// migrateReport is what db migrate prints with --output json.
type migrateReport struct {
	Applied         int `json:"applied"`         // migrations applied by this run (0 when up to date)
	SchemaVersion   int `json:"schemaVersion"`   // the newest embedded migration
	DatabaseVersion int `json:"databaseVersion"` // the database's newest migration afterwards
}
