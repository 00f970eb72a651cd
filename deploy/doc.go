// Package deploy holds the example Kubernetes manifests for the Config Server
// and, in its tests, their kubectl-free validation: every document parses,
// carries the fields the API server requires, and the Deployment probes
// /readyz on a port the Service targets.
package deploy
