package dbschema

import (
	"errors"
	"fmt"

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

// NewerSchemaError is the ErrNewerSchema of a database that records
// migration Database while this binary knows migrations up to Binary.
type NewerSchemaError struct{ Database, Binary int }

func (e *NewerSchemaError) Error() string {
	return fmt.Sprintf("database has migration %d, this binary knows up to %d: %v", e.Database, e.Binary, ErrNewerSchema)
}

// Is makes errors.Is(err, ErrNewerSchema) hold.
func (e *NewerSchemaError) Is(target error) bool { return target == ErrNewerSchema }
