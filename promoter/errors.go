package promoter

import (
	"errors"
	"fmt"
	"time"
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
	// ErrPending: the command recorded its intent, and its activation
	// transaction failed before its COMMIT for want of the database (the
	// connection lost, the server gone, the context ended): nothing moved,
	// and the environment stays pending on the command, refusing other
	// moves, until the same command is re-run (it continues) or Reconcile
	// settles it NOT_APPLIED.
	ErrPending = errors.New("activation not completed; its intent is pending")
	// ErrNotFound: the release, snapshot or environment does not exist.
	ErrNotFound = errors.New("not found")
	// ErrInvalid: the input is malformed (the message names the field).
	ErrInvalid = errors.New("invalid input")
	// ErrNoSigner: the operation signs delivery manifests and Options.Signer
	// is nil.
	ErrNoSigner = errors.New("no delivery-manifest signer configured")
	// ErrClockSkew: the store's clock is further from the database
	// server's than Options.MaxClockSkew; nothing was signed.
	ErrClockSkew = errors.New("clock skew")
	// ErrOutsideWindow: a pointer move to a snapshot outside its activation
	// window was refused (*WindowError); nothing moved.
	ErrOutsideWindow = errors.New("snapshot outside its activation window")
	// ErrSchema: the database is not migrated, or not to the migration this
	// binary needs (run `configpub db migrate`).
	ErrSchema = errors.New("database schema missing or not migrated")
	// ErrAttachFailed: AttachDeliveryManifests could not attach some
	// pointers' manifests (AttachResult.Failed); it attached the others.
	ErrAttachFailed = errors.New("delivery manifests not attached")
)

// CASError reports a lost compare-and-swap on an environment's head, the
// latest recorded release: a new release must be built on it, whether or
// not it is the active one. It matches ErrConflict, and also ErrStale when
// a newer release than the expected base has been recorded.
type CASError struct {
	EnvTag   string
	Expected int64 // the base the release was built on (0 = none)
	Actual   int64 // the actual head release (0 = none)
	Active   int64 // the active release (0 = none)
	Pending  int64 // release whose activation is in flight or unconfirmed (0 = none)
	// PendingCommand is the command of that activation ("" when unknown).
	PendingCommand string
}

func (e *CASError) Error() string {
	if e.Pending != 0 && e.PendingCommand != "" {
		// Most often another process's move between its two
		// transactions: reconcile would cancel it.
		return fmt.Sprintf("environment %s: activation of release %d by command %s is in flight or unconfirmed "+
			"(wait for the process running it, then run this again; if it stopped, re-run that command or reconcile)",
			e.EnvTag, e.Pending, e.PendingCommand)
	}
	if e.Pending != 0 {
		return fmt.Sprintf("environment %s: activation of release %d is in flight or unconfirmed (reconcile or re-run it)", e.EnvTag, e.Pending)
	}
	active := "no release is active"
	if e.Active != 0 {
		active = fmt.Sprintf("release %d is active", e.Active)
	}
	return fmt.Sprintf("environment %s: release built on base %d, but the latest recorded release is %d (%s); recompile on release %d",
		e.EnvTag, e.Expected, e.Actual, active, e.Actual)
}

// Is makes errors.Is(err, ErrConflict) true, and ErrStale when the
// environment's head moved past the expected base.
func (e *CASError) Is(target error) bool {
	switch target {
	case ErrConflict:
		return true
	case ErrStale:
		return e.Pending == 0 && e.Actual > e.Expected
	}
	return false
}

// WindowError refuses a pointer move to a snapshot whose activation window
// (the envelope's validFrom <= t < expiresAt) does not contain the move time.
// It matches ErrOutsideWindow. Nothing was moved; a window that ended is
// renewed by the next release (configpub compile --renew re-issues the
// snapshot with the same policy).
type WindowError struct {
	EnvTag     string
	Release    int64 // the release being activated
	Identity   string
	SnapshotID string
	ValidFrom  time.Time
	ExpiresAt  time.Time
	At         time.Time // the move time
}

func (e *WindowError) Error() string {
	why := "its activation window ended at " + formatTime(e.ExpiresAt)
	fix := "configpub compile --renew writes the next release with fresh snapshots of the same policy"
	if e.At.Before(e.ValidFrom) {
		why = "its activation window starts at " + formatTime(e.ValidFrom)
		fix = "move it once the window opens"
	}
	return fmt.Sprintf("environment %s: release %d cannot be activated on %s: snapshot %s of %s is outside its activation window (%s); nothing moved; %s",
		e.EnvTag, e.Release, formatTime(e.At), e.SnapshotID, e.Identity, why, fix)
}

// Is makes errors.Is(err, ErrOutsideWindow) true.
func (e *WindowError) Is(target error) bool { return target == ErrOutsideWindow }

// invalid builds an ErrInvalid naming the field.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%s: %s: %w", field, fmt.Sprintf(format, args...), ErrInvalid)
}
