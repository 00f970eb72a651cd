// Package compiler turns a policy repository into one values.yml
// per runtime target and the release manifest of an environment.
// Compile is a pure function of an fs.FS and Options: no network, no
// database, no clock, no map-order leaks. Write is the only function that
// touches the file system.
//
// Digests follow RFC 8785 (JSON Canonicalization Scheme): policyDigest over
// the effective domain policy of a subject, contentDigest over the audience
// namespace only, propertySetDigest over the flattened instance settings,
// artifactDigest over the exact values.yml bytes (renderer configpub-yaml/1).
// Each document is rendered and canonicalized once, from one ordered value
// tree. Projection is a compile-time allowlist kept as data in package
// schemas; every rendered artifact is validated against its audience schema.
//
// Releases: the committed releases/<env>.yaml is checked, never trusted.
// Release N is re-derived from the sources, the previous release N-1 as
// recorded (Options.PreviousTree: the tree of the commit in Git history
// that recorded it, at compile and --check time; Options.Previous: its
// bytes, from the store at promote time) and the release parameters (envTag, N, createdAt);
// Result.UpToDate only when that is byte-identical to the committed file,
// else Result.Stale names the first differing field. A target whose
// policy, content and property-set digests, lease profile and release-wide
// generations are unchanged keeps the previous snapshot (envelope, bytes,
// ids, publication) while that snapshot's activation window
// (validFrom..expiresAt) still contains the release's createdAt; after it,
// it is re-issued as a snapshot of the release (Result.Reissued says why).
// When the sources changed, Compile starts release N+1 on base N with
// Options.CreatedAt. Every snapshot a release creates carries the release's
// publicationId. IDs are UUIDv8 from SHA-256 over domain-separated
// inputs. Sources are parsed and targets compiled on GOMAXPROCS workers;
// every result lands in a slot fixed by sorted position and the first error
// by position wins, so the output does not depend on scheduling.
package compiler
