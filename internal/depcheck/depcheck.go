// Package depcheck lets a package's tests pin its third-party dependencies,
// as go-containerregistry's internal/depcheck does: it asks `go list -deps`
// for the package's transitive imports and fails the test when they grow
// past a budget. A third-party package is an import path whose first element
// contains a dot, other than this module's own packages.
package depcheck

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Module is this module's path; its own packages are never third-party.
const Module = "github.com/configpub/configpub"

// Budget bounds a package's third-party dependencies.
type Budget struct {
	// Max is the largest number of third-party packages allowed; 0 means no
	// limit by count.
	Max int
	// Modules, when not nil, lists the only module paths (or path prefixes
	// ending at a path element) third-party packages may come from.
	Modules []string
}

// ThirdParty returns the sorted third-party packages pkg (an import path)
// depends on transitively, as `go list -deps` reports them for the current
// platform.
func ThirdParty(pkg string) ([]string, error) {
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return nil, fmt.Errorf("go list -deps %s: %w: %s", pkg, err, ee.Stderr)
		}
		return nil, fmt.Errorf("go list -deps %s: %w", pkg, err)
	}
	var deps []string
	for _, p := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(p, "/")
		if !strings.Contains(first, ".") || p == Module || strings.HasPrefix(p, Module+"/") {
			continue
		}
		deps = append(deps, p)
	}
	slices.Sort(deps)
	return deps, nil
}

// Violations returns what in deps breaks b: packages from modules outside
// b.Modules, and, when there are more than b.Max, the count.
func (b Budget) Violations(deps []string) []string {
	var v []string
	if b.Modules != nil {
		for _, d := range deps {
			if !slices.ContainsFunc(b.Modules, func(m string) bool { return d == m || strings.HasPrefix(d, m+"/") }) {
				v = append(v, fmt.Sprintf("%s is not from an allowed module %v", d, b.Modules))
			}
		}
	}
	if b.Max > 0 && len(deps) > b.Max {
		v = append(v, fmt.Sprintf("%d third-party packages, budget %d", len(deps), b.Max))
	}
	return v
}

// Assert fails t when pkg's third-party dependencies break b, listing them
// all so the change that added one is easy to find.
func Assert(t testing.TB, pkg string, b Budget) {
	t.Helper()
	deps, err := ThirdParty(pkg)
	if err != nil {
		t.Fatal(err)
	}
	if v := b.Violations(deps); len(v) > 0 {
		t.Errorf("%s exceeds its dependency budget (see README.md \"Runtime dependency budget\"):\n  %s\nthird-party packages:\n  %s",
			pkg, strings.Join(v, "\n  "), strings.Join(deps, "\n  "))
	}
}
