package replica

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
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
const advisoryKey = 0x6b6e6f77 // "know"

// ErrChecksumMismatch is returned by Migrate when an applied migration's
// recorded checksum differs from the embedded SQL.
var ErrChecksumMismatch = errors.New("applied knowledge replica migration differs from the embedded one")

type migration struct {
	version  int
	name     string
	sql      string
	checksum string
}

func migrations() ([]migration, error) {
	names, err := fs.Glob(schemaFS, "schema/*.sql")
	if err != nil {
		return nil, fmt.Errorf("list knowledge replica migrations: %w", err)
	}
	var out []migration
	for _, n := range names {
		base := path.Base(n)
		num, rest, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("knowledge replica migration %s: name must be NNN_name.sql", base)
		}
		b, err := schemaFS.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("read knowledge replica migration %s: %w", base, err)
		}
		sum := sha256.Sum256(b)
		out = append(out, migration{version: v, name: strings.TrimSuffix(rest, ".sql"), sql: string(b), checksum: "sha256:" + hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// Migrate creates or upgrades the replica schema (configpub_knowledge) and
// the group roles LoaderRole and ReaderRole in conn's database, each
// migration in its own transaction under an advisory lock, recorded in
// configpub_knowledge.schema_migration. Re-running applies nothing; a
// migration whose text changed after it was applied is ErrChecksumMismatch.
// conn must be the schema owner (the service database's migration role),
// never the loader.
func Migrate(ctx context.Context, conn *pgx.Conn) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	for _, m := range ms {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(advisoryKey)); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
			if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS configpub_knowledge;
CREATE TABLE IF NOT EXISTS configpub_knowledge.schema_migration (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	checksum   text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
				return fmt.Errorf("create ledger: %w", err)
			}
			var sum string
			err := tx.QueryRow(ctx, "SELECT checksum FROM configpub_knowledge.schema_migration WHERE version = $1", m.version).Scan(&sum)
			switch {
			case err == nil:
				if sum != m.checksum {
					return fmt.Errorf("recorded %s, embedded %s: %w", sum, m.checksum, ErrChecksumMismatch)
				}
				return nil
			case !errors.Is(err, pgx.ErrNoRows):
				return fmt.Errorf("read ledger: %w", err)
			}
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, "INSERT INTO configpub_knowledge.schema_migration (version, name, checksum) VALUES ($1, $2, $3)", m.version, m.name, m.checksum)
			return err
		})
		if err != nil {
			return fmt.Errorf("knowledge replica migration %03d_%s: %w", m.version, m.name, err)
		}
	}
	return nil
}
