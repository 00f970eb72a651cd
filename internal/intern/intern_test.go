package intern_test

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/configpub/configpub/internal/intern"
)

type inner struct {
	Region  string
	Tenants []string
}

type doc struct {
	Host     string
	Tools    []string
	Boundary inner
	Nested   *inner
	Any      any
	Counts   []int64
	Labels   map[string]string
	private  string
}

// fresh returns s as a string with its own bytes, as a decoder makes it.
func fresh(s string) string { return strings.Clone(s) }

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func decoded() *doc {
	return &doc{
		Host: fresh("h0000.example"), Tools: []string{fresh("search"), fresh("fetch")},
		Boundary: inner{Region: fresh("eu"), Tenants: []string{fresh("acme")}},
		Nested:   &inner{Region: fresh("eu")},
		Any:      &inner{Region: fresh("eu")},
		Counts:   []int64{1, 2},
		Labels:   map[string]string{fresh("k"): fresh("v")},
		private:  fresh("eu"),
	}
}

// TestStringsSharesEqualStrings: after interning two documents decoded
// separately, equal strings share one copy wherever Strings can reach them,
// and every value is unchanged.
func TestStringsSharesEqualStrings(t *testing.T) {
	a, b := decoded(), decoded()
	if same(a.Host, b.Host) {
		t.Fatal("test set-up: decoded strings already share storage")
	}
	intern.Strings(a)
	intern.Strings(b)
	pairs := [][2]string{
		{a.Host, b.Host}, {a.Tools[0], b.Tools[0]}, {a.Tools[1], b.Tools[1]},
		{a.Boundary.Region, b.Boundary.Region}, {a.Boundary.Tenants[0], b.Boundary.Tenants[0]},
		{a.Nested.Region, b.Nested.Region}, {a.Any.(*inner).Region, b.Any.(*inner).Region},
		{a.Boundary.Region, a.Nested.Region},
	}
	for i, p := range pairs {
		if p[0] != p[1] || !same(p[0], p[1]) {
			t.Errorf("pair %d: %q and %q are not one string", i, p[0], p[1])
		}
	}
	if a.Host != "h0000.example" || a.Tools[1] != "fetch" || a.Boundary.Tenants[0] != "acme" || a.Counts[1] != 2 || a.Labels["k"] != "v" {
		t.Fatalf("values changed: %+v", a)
	}
	if same(a.private, b.private) {
		t.Error("an unexported field was set")
	}
	intern.Strings(nil)
	intern.Strings(*a) // not a pointer: nothing to set, no panic
}

// TestStringsLeavesLongStrings: a string longer than MaxLen keeps its own
// copy; one of exactly MaxLen bytes is interned.
func TestStringsLeavesLongStrings(t *testing.T) {
	atMax, long := strings.Repeat("n", intern.MaxLen), strings.Repeat("p", intern.MaxLen+1)
	a := &inner{Region: fresh(atMax), Tenants: []string{fresh(long)}}
	b := &inner{Region: fresh(atMax), Tenants: []string{fresh(long)}}
	intern.Strings(a)
	intern.Strings(b)
	if !same(a.Region, b.Region) {
		t.Errorf("a string of %d bytes was not interned", intern.MaxLen)
	}
	if same(a.Tenants[0], b.Tenants[0]) || a.Tenants[0] != long {
		t.Errorf("a string of %d bytes was interned or changed", intern.MaxLen+1)
	}
}
