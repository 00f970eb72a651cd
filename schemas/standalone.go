package schemas

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Standalone returns the named schema ("source/agent", "artifact/gateway", …)
// as one self-contained JSON document: every reference to the shared
// definitions is inlined and $id is dropped, so an editor can use a local
// copy without fetching anything.
func Standalone(name string) ([]byte, error) {
	docs := map[string]any{}
	for _, p := range []string{"common.json", name + ".json"} {
		b, err := files.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", name, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("schema %s: %w", p, err)
		}
		docs[BaseURL+p] = doc
	}
	u := BaseURL + name + ".json"
	flat, err := inlineRefs(docs[u], u, docs, 0)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	m, ok := flat.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("schema %s: not an object", name)
	}
	delete(m, "$id")
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(m); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	return buf.Bytes(), nil
}
