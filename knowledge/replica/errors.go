package replica

import "errors"

// Refusals. Every one leaves the replica tables and the applied pointer as
// they were.
var (
	// ErrInvalid: the snapshot is not a well-formed Knowledge snapshot (wrong
	// audience, no delivery manifest, a candidate one or one without a
	// signed lease, a digest that does not match, a duplicate or
	// contradictory inventory entry).
	ErrInvalid = errors.New("invalid knowledge snapshot")
	// ErrIncomplete: a partial delivery: the inventory lists a replica the
	// snapshot does not carry, or the snapshot carries one the inventory
	// does not list.
	ErrIncomplete = errors.New("incomplete replica inventory")
	// ErrRegression: the snapshot is older than the applied one (delivery
	// manifest sequence, revocation epoch, release version, source event
	// watermark or policy version), or another snapshot at the applied
	// manifest sequence.
	ErrRegression = errors.New("regressing knowledge snapshot")
	// ErrUnlisted: a materialized replica that the new inventory neither
	// lists nor tombstones (the service skipped releases, or follows a
	// rollback) while Options.KeepUnlisted is set.
	ErrUnlisted = errors.New("materialized replica neither listed nor tombstoned")
	// ErrNotApplied: no snapshot has been materialized for the identity.
	ErrNotApplied = errors.New("no knowledge snapshot applied")
)
