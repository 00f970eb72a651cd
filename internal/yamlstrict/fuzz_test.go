package yamlstrict

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	gojcs "github.com/gowebpki/jcs"
	yaml "gopkg.in/yaml.v3"

	"github.com/configpub/configpub/internal/render"
)

// FuzzParse: the strict loader never panics, refuses with an *Error, and
// whatever it accepts canonicalizes, renders as configpub-yaml/1, and reads
// back (with an independent YAML library) as the same JSON value.
func FuzzParse(f *testing.F) {
	f.Add([]byte("a: 1\nb: [x, \"y\"]\nc: {d: null}\n"))
	f.Add([]byte("a: &x 1\nb: *x\n"))
	f.Add([]byte("a: 010\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := Parse("fuzz.yaml", data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("refusal is %T, want *Error: %v", err, err)
			}
			return
		}
		canon, err := render.Canonical(doc.Value)
		if err != nil {
			t.Fatalf("accepted value does not canonicalize: %v", err)
		}
		if doc.Value.Kind != render.KindMap {
			return
		}
		y, err := render.YAML(doc.Value)
		if err != nil {
			t.Fatalf("accepted value does not render: %v", err)
		}
		var back any
		if err := yaml.Unmarshal(y, &back); err != nil {
			t.Fatalf("rendering is not YAML: %v\n%s", err, y)
		}
		jb, err := json.Marshal(back)
		if err != nil {
			t.Fatalf("rendering reads back as non-JSON: %v", err)
		}
		again, err := gojcs.Transform(jb)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(canon, again) {
			t.Fatalf("round trip changed the value:\n got %s\nwant %s", again, canon)
		}
	})
}
