// Package readback is the control plane's side of runtime receipts: it reads
// each configured runtime's status endpoint (configserver/client
// StatusHandler) with a control token signed by the control-plane key
// (internal/controltoken: ES256 compact JWS, RFC 7515/7518, checked per
// RFC 8725), checks that the answer is about the identity asked for, and
// records what the runtime runs, keeps as last-known-good and last rejected
// as receipts (runtime_evidence rows of kind 'receipt') in the release
// store. A runtime's own report with its workload token is never a receipt.
package readback
