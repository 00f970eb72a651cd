// Package e2e holds the end-to-end test of configpub: it builds the binary,
// runs `configpub demo` (the whole pipeline over the real verbs: PostgreSQL,
// the Distribution registry, cosign-compatible signatures, the Config Server
// and three verifying runtimes), checks its state independently afterwards,
// and checks that an interrupted run leaves no process behind and that a
// second run works. TestConsoleInBrowser drives the operator console of a
// `configpub demo --keep` run in headless Chromium (chromedp): timeline,
// release diff, target history, time travel, a live update, phone width,
// and no token or configuration body in any response; it saves screenshots.
// Run them with `make e2e` (build tag e2e).
package e2e
