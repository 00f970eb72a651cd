package depcheck

import (
	"slices"
	"testing"
)

func TestViolations(t *testing.T) {
	deps := []string{"example.com/a", "example.com/a/sub", "example.org/b"}
	tests := []struct {
		name   string
		budget Budget
		want   int
	}{
		{"no limits", Budget{}, 0},
		{"count within", Budget{Max: 3}, 0},
		{"count exceeded", Budget{Max: 2}, 1},
		{"modules allowed", Budget{Modules: []string{"example.com/a", "example.org/b"}}, 0},
		{"module missing", Budget{Modules: []string{"example.com/a"}}, 1},
		{"prefix must end at an element", Budget{Modules: []string{"example.com/a", "example.org"}}, 0},
		{"no partial element", Budget{Modules: []string{"example.com/a", "example.org/bb"}}, 1},
		{"empty set allows nothing", Budget{Modules: []string{}}, 3},
		{"both", Budget{Max: 1, Modules: []string{"example.com/a"}}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.budget.Violations(deps); len(got) != tt.want {
				t.Fatalf("got %d violations %q, want %d", len(got), got, tt.want)
			}
		})
	}
}

func TestThirdParty(t *testing.T) {
	got, err := ThirdParty(Module + "/bundle")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, "gopkg.in/yaml.v3") {
		t.Fatalf("got %q, want gopkg.in/yaml.v3 among bundle's dependencies", got)
	}
	for _, d := range got {
		if d == Module || len(d) > len(Module) && d[:len(Module)+1] == Module+"/" {
			t.Fatalf("got own package %s among third-party dependencies", d)
		}
	}
	none, err := ThirdParty(Module + "/internal/signing")
	if err != nil {
		t.Fatal(err)
	}
	if len(none) != 0 {
		t.Fatalf("got %q, want internal/signing to need only the standard library", none)
	}
	if _, err := ThirdParty(Module + "/no/such/package"); err == nil {
		t.Fatal("got no error for a package that does not exist")
	}
}
