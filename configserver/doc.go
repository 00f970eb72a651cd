// Package configserver is the Config Server: a read-only HTTP
// delivery boundary that streams, to a workload authenticated by its JWT,
// the exact stored bytes of the snapshot that is current for its own
// (host, serviceId, envTag), with the headers a runtime needs to verify them:
// ETag (RFC 9110 strong validator = artifactDigest), Repr-Digest (RFC 9530),
// the signed delivery manifest the promoter stored, and its signature.
//
// NewHandler serves GET|HEAD /configs, GET /configs/snapshots/{snapshotId},
// POST /configs/evidence, /healthz, /readyz and /metrics over a small Store
// interface; package configserver/pgstore implements Store over PostgreSQL.
// Serve runs the handler in an http.Server with timeouts, header limits,
// optional (m)TLS and graceful shutdown. Tokens are checked by
// configserver/auth (RFC 7519, RFC 8725); the server holds no signing key.
package configserver
