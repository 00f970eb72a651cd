package compiler

import (
	"testing"

	"github.com/configpub/configpub/internal/render"
)

// TestForbiddenNamesThePath: the first member the audience's allowlist
// forbids is named by its full path, list items by index, keys that look
// like indexes or are empty as keys; a namespace without one yields "".
func TestForbiddenNamesThePath(t *testing.T) {
	p, err := newProjector("gateway")
	if err != nil {
		t.Fatal(err)
	}
	s := render.String
	ok := render.Map().
		Add("routes", render.List(render.Map().Add("name", s("a")), render.Map().Add("name", s("b")))).
		Add("", render.Map().Add("0", s("x")))
	if got := p.forbidden(ok); got != "" {
		t.Fatalf("forbidden(no forbidden member) = %q, want \"\"", got)
	}
	for _, tc := range []struct {
		ns   *render.Value
		want string
	}{
		{render.Map().Add("prompt", s("p")), "/prompt"},
		{render.Map().Add("routes", render.List(
			render.Map().Add("name", s("a")),
			render.Map().Add("name", s("b")).Add("upstream", render.Map().Add("credentialRef", s("c"))),
		)), "/routes/1/upstream/credentialRef"},
		{render.Map().Add("", render.Map().Add("0", render.List(s("x"), render.Map().Add("memory", s("m"))))), "//0/1/memory"},
		{render.Map().Add("a", render.Map().Add("b", s("x"))).Add("index", s("i")).Add("prompt", s("p")), "/index"},
	} {
		if got := p.forbidden(tc.ns); got != tc.want {
			t.Errorf("forbidden = %q, want %q", got, tc.want)
		}
	}
}
