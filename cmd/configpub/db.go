package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/configpub/configpub/internal/cosignkey"
	"github.com/configpub/configpub/internal/dbschema"
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
	pool, err := pgxpool.New(ctx, u)
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

// storeError maps an unknown outcome to exit 3 with the way out.
func storeError(err error, env string) error {
	if errors.Is(err, promoter.ErrUnconfirmed) {
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
the schema owner (a role that may create roles).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := sf.url()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			conn, err := pgx.Connect(ctx, u)
			if err != nil {
				return fmt.Errorf("--database: %w", err)
			}
			defer conn.Close(context.WithoutCancel(ctx))
			n, err := dbschema.MigrateCount(ctx, conn)
			if err != nil {
				return err
			}
			ms, err := dbschema.Migrations()
			if err != nil {
				return err
			}
			rep := migrateReport{Applied: n, SchemaVersion: ms[len(ms)-1].Version}
			return report(cmd, rep, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "applied %d migration(s); schema version %d\n", rep.Applied, rep.SchemaVersion)
				return err
			})
		},
	}
	sf.add(migrate, false)
	outputFlag(migrate)
	db.AddCommand(migrate)
	root.AddCommand(db)
}

// migrateReport is what db migrate prints with --output json.
type migrateReport struct {
	Applied       int `json:"applied"`       // migrations applied by this run (0 when up to date)
	SchemaVersion int `json:"schemaVersion"` // the newest embedded migration
}
