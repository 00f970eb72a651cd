package compiler

import "github.com/configpub/configpub/bundle"

// Domain-separation prefixes of derived ids (defined in bundle, which
// derives them again when it reads a release manifest).
const (
	idSnapshot       = bundle.SnapshotIDDomain
	idPolicySnapshot = bundle.PolicySnapshotIDDomain
)

// deriveID returns a lowercase UUIDv8 derived from a SHA-256 of domain and
// parts (bundle.DeriveID).
func deriveID(domain string, parts ...string) string { return bundle.DeriveID(domain, parts...) }
