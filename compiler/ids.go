package compiler

import "github.com/configpub/configpub/bundle"

// Domain-separation prefixes of derived ids.
const (
	idSnapshot       = "configpub/snapshot/v1"
	idPolicySnapshot = "configpub/policy-snapshot/v1"
)

// deriveID returns a lowercase UUIDv8 derived from a SHA-256 of domain and
// parts (bundle.DeriveID).
func deriveID(domain string, parts ...string) string { return bundle.DeriveID(domain, parts...) }
