package replica

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/dbschema"
)

//go:embed schema/*.sql
var schemaFS embed.FS

// Schema is the PostgreSQL schema that holds the replicas.
const Schema = "configpub_knowledge"

// Group roles Migrate creates (cluster-wide, NOLOGIN, never superuser).
// Grant LoaderRole to the login role of the snapshot loader and ReaderRole
// to the service's API and job roles.
const (
	LoaderRole = "configpub_knowledge_loader"
	ReaderRole = "configpub_knowledge_reader"
)

// advisoryKey serializes migrators of one database.
const advisoryKey int64 = 0x6b6e6f77 // "know"

// Migrate creates or upgrades the replica schema (configpub_knowledge) and
// the group roles LoaderRole and ReaderRole in conn's database, each
// migration in its own transaction under an advisory lock, recorded in
// configpub_knowledge.schema_migration. Re-running applies nothing; a
// migration whose text changed after it was applied is
// dbschema.ErrChecksumMismatch. conn must be the schema owner (the service
// database's migration role), never the loader.
func Migrate(ctx context.Context, conn *pgx.Conn) error {
	ms, err := dbschema.ReadMigrations(schemaFS, "schema")
	if err != nil {
		return fmt.Errorf("knowledge replica schema: %w", err)
	}
	if _, err := dbschema.Apply(ctx, conn, ms, Schema, advisoryKey); err != nil {
		return fmt.Errorf("knowledge replica schema: %w", err)
	}
	return nil
}
