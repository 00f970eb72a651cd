// Package promoter records releases and moves current pointers in
// PostgreSQL (DESIGN §6, §9): the only writer of what goes live.
//
// Store is the release protocol over the schema of internal/dbschema:
//
//   - RecordAndActivate records a compiled release (artifacts, immutable
//     snapshots, the release row and its targets) under a compare-and-swap on
//     the environment's current release, then activates it.
//   - Activate (forward) and Rollback move pointers to the snapshots of an
//     existing release; they never edit a snapshot.
//   - Revoke records a revocation; a revoked snapshot is never activated.
//   - RenewLeases re-signs fresh leases for current pointers (same sequence,
//     later issuedAt).
//   - Reconcile settles UNCONFIRMED outcomes from the store, exactly once.
//   - Status and History read the publication timeline.
//
// Every pointer-moving command runs as two short transactions. The intent
// transaction claims the environment (environment.pending_release_version,
// compare-and-swap on the expected prior release), records the command
// (command UUID + command hash) and sets the release's execution outcome to
// UNCONFIRMED. The activation transaction then, under the environment's row
// lock, moves every changed target's pointer, signs and stores a delivery
// manifest per moved target (bundle.DeliveryManifest, per-identity monotonic
// sequence, rolling lease), writes one pointer_move row per moved target and
// one journal row per release mutation (sequence = resulting row_revision),
// marks the outcome APPLIED and NOTIFYs 'configpub_pointer', all or nothing.
//
// RecordAndActivate signs the manifests it will most likely need while its
// intent transaction runs; the activation reuses such a manifest only when
// the pointer is still exactly as it was read and the content is identical,
// and only for 30 seconds (its issuedAt is then a few seconds before the
// move, which only shortens the lease).
//
// Outcomes are kept apart: a refusal (ErrConflict, ErrStale, ErrRevoked,
// ErrIdentityMismatch, ErrIntegrity, ErrInvalid) definitely changed nothing;
// ErrUnconfirmed means the COMMIT was sent and its reply lost, so the outcome
// is unknown. Nothing is guessed: re-running the same command (same UUID and
// hash) completes or replays it, and Reconcile settles an intent whose
// activation never committed as NOT_APPLIED. Serialization failures and
// deadlocks (40001, 40P01) are retried; nothing else is.
package promoter
