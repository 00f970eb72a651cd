package compiler_test

import (
	"testing"

	"github.com/configpub/configpub/internal/depcheck"
)

// TestDependencyBudget pins the compiler's third-party modules: it is pure
// (no network, no database, no signing), so it needs only YAML, RFC 8785,
// JSON Schema, message formatting, Unicode normalization and, on Linux,
// the system calls the policy tree reader opens files with (openat2).
func TestDependencyBudget(t *testing.T) {
	depcheck.Assert(t, depcheck.Module+"/compiler", depcheck.Budget{
		Max: 19,
		Modules: []string{
			"github.com/gowebpki/jcs",
			"github.com/santhosh-tekuri/jsonschema/v6",
			"golang.org/x/sys",
			"golang.org/x/text",
			"gopkg.in/yaml.v3",
		},
	})
}
