package promoter

import (
	"errors"
	"fmt"
)

// Sentinel errors. Callers test them with errors.Is.
var (
	// ErrConflict: a compare-and-swap was lost (another release or command
	// got there first), a unique key already exists (SQLSTATE 23505), or a
	// command UUID was reused with a different command hash. Nothing was
	// written.
	ErrConflict = errors.New("conflict")
	// ErrStale: the expected prior release is older than the environment's
	// current release (the release must be recompiled on top of it).
	ErrStale = errors.New("stale release")
	// ErrRevoked: a snapshot of the release is revoked; it is never
	// activated again.
	ErrRevoked = errors.New("snapshot is revoked")
	// ErrIdentityMismatch: a snapshot belongs to another host/serviceId/envTag.
	ErrIdentityMismatch = errors.New("snapshot identity mismatch")
	// ErrIntegrity: a content-addressed row already exists with different
	// content, or stored state contradicts itself.
	ErrIntegrity = errors.New("integrity error")
	// ErrUnconfirmed: the COMMIT was sent but its reply was lost; the outcome
	// is unknown. Re-run the same command or run Reconcile; never retry with
	// a new command.
	ErrUnconfirmed = errors.New("outcome unconfirmed")
	// ErrNotFound: the release, snapshot or environment does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the input is malformed (the message names the field).
	ErrInvalid = errors.New("invalid input")
	// ErrNoSigner: the operation signs delivery manifests and Options.Signer
	// is nil.
	ErrNoSigner = errors.New("no delivery-manifest signer configured")
	// ErrSchema: the database is not migrated (run `configpub db migrate`).
	ErrSchema = errors.New("database schema missing")
)

// CASError reports a lost compare-and-swap on an environment's current
// release. It matches ErrConflict, and also ErrStale when the environment
// has moved past the expected release.
type CASError struct {
	EnvTag   string
	Expected int64 // expected current release (0 = none)
	Actual   int64 // actual current release (0 = none)
	Pending  int64 // release whose activation is in flight or unconfirmed (0 = none)
}

func (e *CASError) Error() string {
	if e.Pending != 0 {
		return fmt.Sprintf("environment %s: activation of release %d is in flight or unconfirmed (reconcile or re-run it)", e.EnvTag, e.Pending)
	}
	return fmt.Sprintf("environment %s: expected current release %d, found %d", e.EnvTag, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrConflict) true, and ErrStale when the
// environment moved past the expected release.
func (e *CASError) Is(target error) bool {
	switch target {
	case ErrConflict:
		return true
	case ErrStale:
		return e.Pending == 0 && e.Actual > e.Expected
	}
	return false
}

// invalid builds an ErrInvalid naming the field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalid)
}
