package client_test

import (
	"testing"

	"github.com/configpub/configpub/internal/depcheck"
)

// TestDependencyBudget keeps the runtime library lean: every runtime that
// embeds it carries its dependencies. Signature verification needs only the
// standard library; key generation and loading (cosign) live in
// internal/cosignkey, which this package must not import.
func TestDependencyBudget(t *testing.T) {
	depcheck.Assert(t, depcheck.Module+"/configserver/client", depcheck.Budget{Max: 30})
}
