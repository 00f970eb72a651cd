package dbschema

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/configpub/configpub/internal/digest"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// advisoryKey serializes migrators of one database (advisory locks are
// scoped to the current database).
const advisoryKey int64 = 0x636f6e66 // "conf"

// Migration is one embedded, versioned SQL migration.
type Migration struct {
	Version  int
	Name     string
	SQL      string
	Checksum string // "sha256:<hex>" of SQL
}

// Migrations returns the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	return ReadMigrations(migrationFS, "migrations")
}

// Latest returns the version of the newest embedded migration: the schema
// this binary's commands need.
func Latest() (int, error) {
	ms, err := Migrations()
	if err != nil {
		return 0, err
	}
	return ms[len(ms)-1].Version, nil
}

// ReadMigrations reads the NNN_name.sql files of dir in fsys, in version
// order. A name without a positive version or a version used twice is an
// error. Another schema with its own embedded migrations (a service's
// store) reads them with it and applies them with Apply.
func ReadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var out []Migration
	for _, n := range names {
		base := path.Base(n)
		num, rest, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNN_name.sql", base)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", base, err)
		}
		out = append(out, Migration{
			Version:  v,
			Name:     strings.TrimSuffix(rest, ".sql"),
			SQL:      string(b),
			Checksum: digest.FromBytes(b).String(),
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migration version %d is used twice", out[i].Version)
		}
	}
	return out, nil
}

// Migrate applies every embedded migration that conn's database has not
// recorded yet, each in its own transaction, and returns the number applied.
// Re-running applies nothing.
func Migrate(ctx context.Context, conn *pgx.Conn) error {
	_, err := MigrateCount(ctx, conn)
	return err
}

// MigrateCount is Migrate that also reports how many migrations it applied.
func MigrateCount(ctx context.Context, conn *pgx.Conn) (int, error) {
	ms, err := Migrations()
	if err != nil {
		return 0, err
	}
	return Apply(ctx, conn, ms, "configpub", advisoryKey)
}

// MigrateTo is MigrateCount for the embedded migrations up to and including
// version only: an upgrade test records data in the schema a release of
// configpub left and then migrates it the rest of the way.
func MigrateTo(ctx context.Context, conn *pgx.Conn, version int) (int, error) {
	ms, err := Migrations()
	if err != nil {
		return 0, err
	}
	n := 0
	for n < len(ms) && ms[n].Version <= version {
		n++
	}
	return Apply(ctx, conn, ms[:n], "configpub", advisoryKey)
}

// Apply applies every migration of ms (in version order) that the ledger
// table <schema>.schema_migration has not recorded, each in its own
// transaction under the transaction-scoped advisory lock lockKey, creating
// the schema and its ledger first, and returns how many it applied. A
// recorded migration whose checksum differs is ErrChecksumMismatch; a
// ledger that records a version newer than ms knows is ErrNewerSchema.
func Apply(ctx context.Context, conn *pgx.Conn, ms []Migration, schema string, lockKey int64) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	applied := 0
	for _, m := range ms {
		done, err := applyOne(ctx, conn, m, ms[len(ms)-1].Version, pgx.Identifier{schema}.Sanitize(), lockKey)
		if err != nil {
			return applied, err
		}
		if done {
			applied++
		}
	}
	return applied, nil
}

// applyOne applies m unless the ledger already has it; it reports whether it
// applied it.
func applyOne(ctx context.Context, conn *pgx.Conn, m Migration, latest int, schema string, lockKey int64) (bool, error) {
	applied := false
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+schema+`;
CREATE TABLE IF NOT EXISTS `+schema+`.schema_migration (
	version    integer PRIMARY KEY,
	name       text NOT NULL,
	checksum   text NOT NULL,
	applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return fmt.Errorf("create ledger: %w", err)
		}
		var newest int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+schema+".schema_migration").Scan(&newest); err != nil {
			return fmt.Errorf("read ledger: %w", err)
		}
		if newest > latest {
			return &NewerSchemaError{Database: newest, Binary: latest}
		}
		var sum string
		err := tx.QueryRow(ctx, "SELECT checksum FROM "+schema+".schema_migration WHERE version = $1", m.Version).Scan(&sum)
		switch {
		case err == nil:
			if sum != m.Checksum {
				return fmt.Errorf("recorded %s, embedded %s: %w", sum, m.Checksum, ErrChecksumMismatch)
			}
			return nil
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("read ledger: %w", err)
		}
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".schema_migration (version, name, checksum) VALUES ($1, $2, $3)",
			m.Version, m.Name, m.Checksum); err != nil {
			return fmt.Errorf("record: %w", err)
		}
		applied = true
		return nil
	})
	var newer *NewerSchemaError
	if errors.As(err, &newer) {
		return false, err // about the database, not about migration m
	}
	if err != nil {
		return false, fmt.Errorf("migration %03d_%s: %w", m.Version, m.Name, err)
	}
	return applied, nil
}
