// Package promoter records releases and moves current pointers in
// PostgreSQL: the only writer of what goes live. It has two
// layers: Promote, which takes a reviewed Git commit all the way to an
// active release, and Store, the release protocol over the schema of
// internal/dbschema.
//
// # Promote
//
// Promote(ctx, repo, PromoteOptions) is `configpub promote`:
//
//  1. review.Check: the commit is on the first-parent history of the
//     protected ref and meets the configured requirements (signed by a
//     keyring, review trailers); otherwise a *review.RefusalError.
//  2. Compile the commit's tree and require the committed release manifest
//     to be exactly what its sources compile to; otherwise a
//     *StaleManifestError (matches ErrStale) and nothing is written
//     anywhere.
//  3. Publish and sign every target artifact and the release artifact
//     (idempotent; a registry tag r<N> already naming other content is
//     ErrConflict), then verify each by digest against the trusted keys
//     (default: the signer's public key).
//  4. Store.RecordAndActivate under the command PromoteCommandID(commit,
//     envTag), a UUIDv8 derived from the commit and environment, so that
//     re-running the same promotion replays its recorded result instead of
//     acting twice.
//
// A lost compare-and-swap whose winner is this very release (same version,
// byte-identical manifest, activated from another commit) is not an error:
// PromoteResult.AlreadyActiveFrom names that commit and nothing is written.
// Promote depends on the ReleaseRecorder and ArtifactPublisher interfaces
// (*Store and *registry.Client satisfy them) and logs one record per step to
// PromoteOptions.Logger, never a configuration body.
//
// # Store
//
//   - RecordAndActivate records a compiled release (artifacts, immutable
//     snapshots, the release row and its targets) under a compare-and-swap on
//     the environment's current release, then activates it.
//   - Activate (forward) and Rollback move pointers to the snapshots of an
//     existing release; they never edit a snapshot.
//   - Revoke records a revocation; a revoked snapshot is never activated
//     again. In the same transaction it NOTIFYs 'configpub_pointer' with
//     {"revoked":true,"revocationId":N,...}, a payload naming no identity,
//     on which every Config Server reloads all its pointers, so a revoked
//     current snapshot stops being served at once.
//   - RenewLeases re-signs fresh leases for current pointers (same sequence,
//     later issuedAt) and NOTIFYs per pointer; revoked ones are skipped.
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
// (environment.pending_release_version, compare-and-swap on the expected
// prior release), records the command and, for a new release, the
// artifacts, snapshots, release row and targets, and sets the release's
// execution outcome to UNCONFIRMED. The activation transaction then, under
// the environment's row lock, moves every changed target's pointer, signs
// and stores a delivery manifest per moved target (bundle.DeliveryManifest,
// per-identity monotonic sequence, rolling lease), writes one pointer_move
// row per moved target and one journal row per release mutation (sequence =
// resulting row_revision), marks the outcome APPLIED and NOTIFYs
// 'configpub_pointer' once per moved pointer, all or nothing.
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
// when the environment moved past the expected release, *StaleManifestError),
// ErrRevoked, ErrIdentityMismatch, ErrIntegrity, ErrNotFound, ErrInvalid
// (naming the field), ErrNoSigner and ErrSchema (database not migrated).
// ErrUnconfirmed alone means the COMMIT was sent and its reply lost, so the
// outcome is unknown. Nothing is guessed: re-running the same command (same
// UUID and hash) completes or replays it, and Reconcile settles an intent
// whose activation never committed as NOT_APPLIED. Serialization failures
// and deadlocks (40001, 40P01) are retried; nothing else is.
//
// The configpub CLI maps these to exit codes: 0 on success,
// including a replay and an already-active release; 1 on any refusal above,
// a *review.RefusalError or a registry error; 2 on bad flags or arguments,
// caught before this package is called; 3 on ErrUnconfirmed from promote,
// activate, rollback, revoke, lease renew or reconcile, with the way out
// (re-run the same command, or `configpub reconcile --env ENV`).
package promoter
