package schemas

import (
	"bytes"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
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

// TestStandalone checks that a standalone schema has no references left and
// validates like the embedded one.
func TestStandalone(t *testing.T) {
	b, err := Standalone("source/agent")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte(`"$ref"`)) || bytes.Contains(b, []byte(`"$id"`)) {
		t.Fatalf("standalone schema still has $ref or $id")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("file:///agent.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("file:///agent.json")
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]any{"apiVersion": "configpub.dev/v1", "kind": "Agent", "metadata": map[string]any{"name": "Not_A_Name"}, "spec": map[string]any{}}
	if err := sch.Validate(bad); err == nil {
		t.Fatal("standalone schema accepted an invalid name and an empty spec")
	}
	if !bytes.Contains(b, []byte(`"description": "System prompt.`)) {
		t.Error("standalone schema lost the field descriptions")
	}
}
