// Package daemon wires a complete Config Server process: token
// keys (file or JWKS URL refreshed on a schedule), the verifier, the
// PostgreSQL store and its LISTEN loop, the handler and the hardened
// http.Server with optional (m)TLS. `configpub serve` is one call to Run.
package daemon
