// Package auth verifies the workload JWTs the Config Server accepts,
// following the JWT best current practices of RFC 8725:
//
//   - keys come only from configuration: a PEM or JWKS file, or a JWKS URL
//     refreshed on a schedule. A token's jku, x5u, x5c, jwk or kid header
//     never causes a lookup outside the configured set; a kid the set lacks
//     makes the configured file or URL be read again sooner, at most once
//     per RemoteOptions.UnknownKeyRefresh (UnknownKeyRefresher);
//   - each configured key fixes its one algorithm (ES256, RS256 or EdDSA);
//     "none" and every HMAC algorithm are refused, so a public key can never
//     be used as an HMAC secret;
//   - iss, aud and exp are required, nbf is honoured, all with a configured
//     leeway; the workload claims host, sid, env and config_audience are
//     required;
//   - tokens are bounded in length before any parsing;
//   - verified tokens are cached (bounded, keyed by the raw token) and a
//     cached entry is never used past the token's exp or after the key set
//     changed.
//
// Mint and GenerateKey are development helpers for `configpub token`.
package auth
