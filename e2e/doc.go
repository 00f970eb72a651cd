// Package e2e holds the end-to-end test of configpub: it builds the binary,
// runs `configpub demo` (the whole pipeline over the real verbs: PostgreSQL,
// the Distribution registry, cosign-compatible signatures, the Config Server
// and three verifying runtimes), checks its state independently afterwards,
// and checks that an interrupted run leaves no process behind and that a
// second run works. Run it with `make e2e` (build tag e2e).
package e2e
