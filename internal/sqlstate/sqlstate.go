// Package sqlstate names the PostgreSQL error codes (SQLSTATE, PostgreSQL
// manual appendix A "PostgreSQL Error Codes") configpub tells apart, and the
// codes configpub's own schema raises, in the style of
// github.com/jackc/pgerrcode. Compare them with a *pgconn.PgError's Code.
package sqlstate

import "strings"

// PostgreSQL error codes.
const (
	UniqueViolation              = "23505"
	ForeignKeyViolation          = "23503"
	CheckViolation               = "23514"
	SerializationFailure         = "40001"
	DeadlockDetected             = "40P01"
	InsufficientPrivilege        = "42501"
	UndefinedFunction            = "42883"
	WrongObjectType              = "42809"
	UndefinedTable               = "42P01"
	InvalidSchemaName            = "3F000"
	ObjectNotInPrerequisiteState = "55000"
	ObjectInUse                  = "55006"
	ReadOnlySQLTransaction       = "25006" // a write on a hot standby
)

// Codes raised by configpub's schema (class CP).
const (
	// AppendOnly: an append-only table refused an UPDATE, DELETE or
	// TRUNCATE.
	AppendOnly = "CP001"
	// Revision: a config_release update did not advance row_revision by
	// exactly one or changed an immutable column, or a journal row's
	// sequence is not the revision it records.
	Revision = "CP002"
)

// EndsSession reports codes after which the server has closed the session:
// class 08 (connection exception) and the 57P operator-intervention codes
// (admin_shutdown, crash_shutdown, cannot_connect_now, idle_session_timeout).
// The outcome of a COMMIT answered with one is unknown.
func EndsSession(code string) bool {
	return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "57P")
}
