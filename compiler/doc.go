// Package compiler turns a policy repository (DESIGN §2) into one values.yml
// per runtime target and the release manifest of an environment (DESIGN §3,
// §4). Compile is a pure function of an fs.FS and Options: no network, no
// database, no clock, no map-order leaks. Write is the only function that
// touches the file system.
//
// Digests follow RFC 8785 (JSON Canonicalization Scheme): policyDigest over
// the effective domain policy of a subject, contentDigest over the audience
// namespace only, propertySetDigest over the flattened instance settings,
// artifactDigest over the exact values.yml bytes (renderer configpub-yaml/1).
// Projection is a compile-time allowlist kept as data in package schemas.
package compiler
