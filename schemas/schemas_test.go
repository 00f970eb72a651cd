package schemas

import (
	"testing"
)

func TestDefaultCompiles(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"artifact/agent", "artifact/envelope", "artifact/gateway", "artifact/knowledge", "source/agent"}
	names := map[string]bool{}
	for _, n := range s.Names() {
		names[n] = true
	}
	for _, w := range want {
		if !names[w] {
			t.Errorf("schema %s missing; got %v", w, s.Names())
		}
	}
}
