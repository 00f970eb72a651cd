// Package promoter records releases and moves current pointers in
// PostgreSQL: the only writer of what goes live. Store is the release
// protocol over the schema of internal/dbschema; the pipeline that takes a
// reviewed Git commit to a recorded release (review, compile check,
// publish) is package promote, which calls Store.
//
// # Store
//
//   - StoreArtifacts stores a release's artifact bytes ahead of its
//     recording, content-addressed, in bounded statements, as an OCI client
//     uploads blobs before the manifest; a ReleaseInput with ArtifactsStored
//     then references them instead of carrying the bytes.
//   - RecordAndActivate records a compiled release (artifacts, immutable
//     snapshots, the release row and its targets) under a compare-and-swap on
//     the environment's head, the latest recorded release, then activates
//     it. History is linear: release N+1 is built on the head N whether or
//     not N is active, so a forward fix after a rollback is promoted like
//     any release (*CASError names the head and the active release).
//   - Activate (forward) and Rollback move pointers to the snapshots of an
//     existing release; they never edit a snapshot. A release that does
//     not exist is ErrNotFound.
//   - RaiseEpoch raises the environment's revocation epoch and re-signs
//     every current pointer with it (same snapshot and activatedAt, higher
//     sequence), journaled on the active release; never lowered.
//   - Revoke records a revocation; a revoked snapshot is never activated
//     again. In the same transaction it NOTIFYs 'configpub_pointer' with
//     {"revoked":true,"revocationId":N,...}, a payload naming no identity,
//     on which every Config Server reloads all its pointers, so a revoked
//     current snapshot stops being served at once.
//   - RenewLeases re-signs fresh leases for current pointers (same sequence
//     and activatedAt, later issuedAt) and NOTIFYs per pointer; revoked and
//     retired ones are skipped. A renewal is never refused by an activation
//     window.
//   - Reconcile settles UNCONFIRMED outcomes from the store, exactly once.
//   - Status and History read the publication timeline.
//
// Every command carries a command UUID and a hash of its fields, recorded in
// the command ledger: the same UUID and hash replays (or completes) the
// command, the same UUID with another hash is ErrConflict.
//
// # Release protocol: intent, then activation
//
// Every pointer-moving command (RecordAndActivate, Activate, Rollback) runs
// as two short transactions. The intent transaction claims the environment
// (environment.pending_release_version; for a new release, compare-and-swap
// of its base on the head release), records the command and, for a new
// release, the artifacts, snapshots, release row and targets, and sets the
// release's execution outcome to UNCONFIRMED. The activation transaction
// then, under the environment's row lock, moves every changed target's
// pointer and retires every identity the release does not contain, signs
// and stores a delivery manifest per moved target (bundle.DeliveryManifest,
// per-identity monotonic sequence, rolling lease), writes one pointer_move
// row per moved or retired target and one journal row per release mutation
// (sequence = resulting row_revision), marks the outcome APPLIED and
// NOTIFYs 'configpub_pointer' once per moved or retired pointer, all or
// nothing.
//
// # Complete target mapping, activation window, sequence, epoch
//
// A release is the complete target mapping of its environment. The
// activation transaction moves every identity of the release whose pointer
// is elsewhere, or retired, to the release's snapshot, and retires every
// current identity of the environment the release does not contain: the
// pointer row keeps its last snapshot and sequence and is marked retired
// (retired_at, retired_release_version), a pointer_move row with retired =
// true audits it, and a 'configpub_pointer' notification with
// "retired":true makes Config Servers answer 410 Gone at once. Rollback and
// forward activation therefore restore exactly the target release's
// mapping, retirements included.
//
// A pointer may be moved to a snapshot only inside its activation window,
// the envelope's validFrom <= t < expiresAt (config_snapshot.valid_from,
// expires_at): the intent checks it at intent time (a refusal records
// nothing), the activation at the move time (a refusal settles the intent
// NOT_APPLIED), both as a *WindowError naming the release, the identity and
// the date. Targets whose pointer already is at the snapshot do not move
// and are not checked, so an unchanged runtime keeps running on leases.
//
// Each move signs a delivery manifest whose sequence is
// max(previous + 1, move time in microseconds), so a database restored
// from a backup still issues sequences above any a runtime has seen, and
// whose activatedAt is the move time; renewals and epoch re-signs keep
// activatedAt. Its revocationEpoch is the larger of the snapshot's compiled
// epoch and the environment's (RaiseEpoch).
//
// Why two: the intent makes "this command was attempted" durable before
// anything goes live. Whatever happens next (a crash, a lost COMMIT reply),
// the store alone decides the outcome: either the activation committed and
// the outcome is APPLIED, or it did not and never can (its compare-and-swap
// on the release's row_revision would fail), which Reconcile settles as
// NOT_APPLIED. Meanwhile the pending claim makes any other command on the
// environment a *CASError naming the pending release instead of racing it.
// Keeping the bulky inserts in the intent also keeps the activation, whose
// pointer moves Config Servers observe, short.
//
// RecordAndActivate signs the manifests it will most likely need while its
// intent transaction runs; the activation reuses such a manifest only when
// the pointer is still exactly as it was read and the content is identical,
// and only for 30 seconds (its issuedAt is then a few seconds before the
// move, which only shortens the lease).
//
// # Errors and exit codes
//
// Refusals definitely changed nothing: ErrConflict (a lost compare-and-swap
// as *CASError, a duplicate key, a reused command UUID), ErrStale (*CASError
// when the environment moved past the expected release; promote.StaleManifestError),
// ErrRevoked, ErrOutsideWindow (*WindowError), ErrIdentityMismatch,
// ErrIntegrity, ErrNotFound (a release or environment that does not exist),
// ErrInvalid (naming the field), ErrNoSigner and ErrSchema (database not
// migrated).
// ErrUnconfirmed alone means the COMMIT was sent and its reply lost, so the
// outcome is unknown. Nothing is guessed: re-running the same command (same
// UUID and hash) completes or replays it, and Reconcile settles an intent
// whose activation never committed as NOT_APPLIED. Serialization failures
// and deadlocks (40001, 40P01) are retried; nothing else is.
//
// The configpub CLI maps these to exit codes: 0 on success,
// including a replay and an already-active release; 1 on any refusal above,
// a *review.RefusalError (package promote/review) or a registry error; 2 on bad flags or arguments,
// caught before this package is called; 3 on ErrUnconfirmed from promote,
// activate, rollback, revoke, lease renew or reconcile, with the way out
// (re-run the same command, or `configpub reconcile --env ENV`). A re-run
// of a rolled-back release's promotion exits 0 and says which release is
// active.
package promoter
