// Package deploy holds the Kubernetes manifests (a kustomization: namespace,
// Config Server, migration Job, lease-renew and artifact-collection CronJobs,
// ServiceMonitor; a runtime sidecar example) and, in its tests, their
// kubectl-free validation: every YAML document parses, the kustomization's
// resources are files, each workload runs the right verb with its database
// URL from a Secret, the ServiceMonitor scrapes the Service, the shipped JWKS
// loads with the server's loader, and the Deployment probes /readyz on a port
// the Service targets.
package deploy
