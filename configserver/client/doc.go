// Package client is the runtime side of configpub's delivery contract
// (docs/wire-contract.md): the library an Agent, Gateway or Knowledge runtime embeds to
// fetch its values.yml from the Config Server, verify everything before using
// it, keep a last-known-good copy, honour the signed lease and fail closed
// when it runs out.
//
// A Load fetches GET /configs with If-None-Match (RFC 9110), recomputes the
// artifact digest from the body and compares it with ETag, X-Artifact-Digest
// and Repr-Digest (RFC 9530), parses the YAML strictly, checks the
// runtimePolicy envelope against the requested identity, audience and
// supported schema version, recomputes contentDigest over the RFC 8785
// canonical form of the audience namespace, verifies the delivery manifest's
// cosign-compatible ECDSA P-256 signature with a trusted key, requires every
// manifest field to equal the envelope and the response headers, checks the
// validity windows with a configured skew against a monotonic clock, and
// refuses a revocation epoch or a (sequence, issuedAt) pair lower than one
// already seen. Only then is the snapshot swapped in atomically and persisted
// durably as last-known-good. Every load yields an Evidence record.
//
// The same checks apply to an artifact pulled by digest from an OCI registry
// (see OCIArtifact), and cross-service calls carry the current publication
// identity (RoundTripper) that receivers check against their accepted list
// (Middleware).
package client
