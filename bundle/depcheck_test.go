package bundle_test

import (
	"testing"

	"github.com/configpub/configpub/internal/depcheck"
)

// TestDependencyBudget pins bundle's third-party modules: both the CLI and
// every runtime (through configserver/client) import it.
func TestDependencyBudget(t *testing.T) {
	depcheck.Assert(t, depcheck.Module+"/bundle", depcheck.Budget{
		Max:     16,
		Modules: []string{"github.com/gowebpki/jcs", "gopkg.in/yaml.v3"},
	})
}
