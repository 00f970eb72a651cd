// Package promote is the Promote pipeline: it takes a reviewed Git commit
// all the way to an active release. The store protocol it ends in (record,
// activate, roll back, journal) is package promoter; this package imports
// promoter, never the reverse. Command identifiers are UUIDv8 (RFC 9562).
//
// Run(ctx, repo, Options) is `configpub promote`:
//
//  1. review.Check: the commit is on the first-parent history of the
//     protected ref and meets the configured requirements (signed by a
//     keyring, review trailers); otherwise a *review.RefusalError.
//  2. Compile the commit's tree and require the committed release manifest
//     to be exactly what its sources compile to; otherwise a
//     *StaleManifestError (matches promoter.ErrStale) and nothing is written
//     anywhere.
//  3. Take the targets host by host and publish and sign every target
//     artifact, then the release artifact (registry.Client.PublishSeq:
//     idempotent; a registry tag r<N> already naming other content is
//     promoter.ErrConflict), handing each target's bytes to the store in
//     batches as they stream (promoter.Store.StoreArtifacts, when the
//     environment's head is the release's base); then verify each artifact
//     by digest against the trusted keys (default: the signer's public key).
//  4. promoter.Store.RecordAndActivate under the command CommandID(commit,
//     envTag), a UUIDv8 derived from the commit and environment, so that
//     re-running the same promotion replays its recorded result instead of
//     acting twice. The input carries the targets without their bytes
//     (ArtifactsStored), so no step holds every artifact of the release.
//
// A lost compare-and-swap whose winner is this very release (same version,
// byte-identical manifest, recorded from another commit) is not an error:
// Result.AlreadyActiveFrom names that commit when the release is
// active, Result.AlreadyRecordedFrom when it was rolled back since;
// nothing is written either way. Re-running the promotion of a rolled-back
// release under its own command replays it (promoter.ActivationResult.StateNow says
// ROLLED_BACK, ActiveRelease names the active one) and never re-activates
// it: promoter.Store.Activate is the explicit way back.
// Run depends on the Recorder and Publisher interfaces
// (*promoter.Store and *registry.Client satisfy them) and logs one record per step to
// Options.Logger, never a configuration body.
//
// Errors are the store's sentinels (promoter.ErrConflict, ErrStale,
// ErrInvalid, ErrIntegrity, ErrUnconfirmed), so one mapping to exit codes
// serves both packages.
package promote
