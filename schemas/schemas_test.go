package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
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

// TestInvalidKeyIsLocatedAtTheKey checks that a key refused by a
// propertyNames schema is reported at its own path, as a key: the pattern's
// violation is located relative to the key, which put it at the document.
func TestInvalidKeyIsLocatedAtTheKey(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, key string
	}{
		{"space", "a b"},
		{"leading digit", "1"},
		{"empty", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := map[string]any{
				"apiVersion": "configpub.dev/v1", "kind": "Environment",
				"metadata": map[string]any{"name": "dev"},
				"spec":     map[string]any{"settings": map[string]any{"agent": map[string]any{tt.key: json.Number("1"), "ok": "x"}}},
			}
			var ve *ValidationError
			if err := s.Validate("source/environment", doc); !errors.As(err, &ve) {
				t.Fatalf("got %v, want a *ValidationError", err)
			}
			want := Problem{Path: []string{"spec", "settings", "agent", tt.key}, Message: `key does not match pattern "^[A-Za-z_][A-Za-z0-9_-]*$"`}
			if len(ve.Problems) != 1 || !slices.Equal(ve.Problems[0].Path, want.Path) || ve.Problems[0].Message != want.Message {
				t.Errorf("got %+v, want [%+v]", ve.Problems, want)
			}
		})
	}
}
