// Package client is the runtime side of configpub's delivery contract
// (docs/wire-contract.md): the library an Agent, Gateway or Knowledge runtime embeds to
// fetch its values.yml from the Config Server, verify everything before using
// it, keep a last-known-good copy, honour the signed lease and fail closed
// when it runs out.
//
// A Load fetches GET /configs with If-None-Match (RFC 9110). Before reading
// the body it verifies the delivery manifest's cosign-compatible ECDSA P-256
// signature with a trusted key, checks that the manifest names the requested
// identity and audience, refuses a revocation epoch or a (sequence, issuedAt)
// pair lower than one already seen, and checks the signed lease
// (validFrom - skew <= now < expiresAt + skew) against a monotonic clock.
// Then it reads at most MaxBodyBytes, recomputes the artifact digest and
// compares it with ETag, X-Artifact-Digest, Repr-Digest (RFC 9530) and the
// signed one, and only then parses the YAML strictly, checks the
// runtimePolicy envelope against the identity, audience and supported schema
// version, recomputes contentDigest over the RFC 8785 canonical form of the
// audience namespace, requires every manifest field to equal the envelope
// (the manifest's revocation epoch may be higher: it is authoritative) and
// requires the manifest's activatedAt to lie inside the envelope's
// activation window (validFrom <= activatedAt < expiresAt). The runtime's own
// clock never judges the envelope window: a snapshot runs for as long as its
// lease is renewed. Only then is the seen state persisted (SeenPath, per
// signing key), the snapshot swapped in atomically and persisted durably as
// last-known-good (CachePath). Every load yields an Evidence record. The
// client follows no redirect.
//
// The same checks apply to an artifact pulled by digest from an OCI registry
// (see OCIArtifact), and cross-service calls carry the current publication
// identity (RoundTripper) that receivers check against their accepted list
// (Middleware).
package client
