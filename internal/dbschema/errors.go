package dbschema

import (
	"errors"

	"github.com/configpub/configpub/internal/sqlstate"
)

// AppendOnlySQLState is the SQLSTATE the append-only triggers raise.
const AppendOnlySQLState = sqlstate.AppendOnly

// RevisionSQLState is the SQLSTATE raised when a config_release update does
// not advance row_revision by exactly one, changes an immutable column, or a
// journal row's sequence is not the revision it records.
const RevisionSQLState = sqlstate.Revision

// ErrChecksumMismatch is returned when an applied migration's recorded
// checksum differs from the embedded SQL (the migration was edited after it
// ran somewhere).
var ErrChecksumMismatch = errors.New("applied migration differs from the embedded one")

// ErrNewerSchema is returned when the database records a migration this
// binary does not know (a newer configpub migrated it).
var ErrNewerSchema = errors.New("database schema is newer than this binary")
